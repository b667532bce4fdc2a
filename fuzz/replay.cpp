#include "fuzz/replay.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "core/budget.h"
#include "core/config_json.h"
#include "fuzz/json_file.h"
#include "kernels/engine.h"
#include "oracles/report.h"

namespace paradiff {

namespace fs = std::filesystem;

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::vector<fs::path> SortedEntries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

Status AddFindingDir(const fs::path& dir, std::vector<ReplayItem>& out) {
  StatusOr<nlohmann::json> meta = ReadJsonFile((dir / "meta.json").string());
  if (!meta.ok()) return meta.status();
  const nlohmann::json& m = meta.value();
  if (!m.is_object() || !m.contains("signature") || !m["signature"].is_string())
    return Status::Error(dir.string(), (dir / "meta.json").string() + ": no \"signature\" string");
  const std::string sig = m["signature"].get<std::string>();
  const std::string name = dir.filename().string();
  out.push_back({(dir / "config.json").string(), name + "/config.json", sig});
  if (fs::exists(dir / "minimized.json"))
    out.push_back({(dir / "minimized.json").string(), name + "/minimized.json", sig});
  return Status();
}

Status AddConfigFile(const fs::path& file, std::vector<ReplayItem>& out) {
  StatusOr<std::string> expected = ReadExpectation(file.string());
  if (!expected.ok()) return expected.status();
  out.push_back({file.string(), file.filename().string(), expected.value()});
  return Status();
}

Status AddPath(const fs::path& p, std::vector<ReplayItem>& out) {
  std::error_code ec;
  if (!fs::exists(p, ec))
    return Status::Error(p.string(), p.string() + ": no such file or directory");
  if (!fs::is_directory(p, ec)) return AddConfigFile(p, out);
  if (fs::exists(p / "meta.json")) return AddFindingDir(p, out);
  if (fs::is_directory(p / "findings")) return AddPath(p / "findings", out);
  Status s;
  for (const fs::path& e : SortedEntries(p)) {
    const std::string name = e.filename().string();
    if (fs::is_directory(e, ec)) {
      if (fs::exists(e / "meta.json")) s.Merge(AddFindingDir(e, out));
    } else if (EndsWith(name, ".json") && !EndsWith(name, kExpectSuffix)) {
      s.Merge(AddConfigFile(e, out));
    }
  }
  return s;
}

}  // namespace

const char* Name(ReplayOutcome o) {
  switch (o) {
    case ReplayOutcome::kSame:
      return "same";
    case ReplayOutcome::kDifferent:
      return "different";
    case ReplayOutcome::kFails:
      return "fails";
    case ReplayOutcome::kPass:
      return "pass";
    case ReplayOutcome::kInvalid:
      return "invalid";
  }
  return "?";
}

StatusOr<std::string> ReadExpectation(const std::string& config_path) {
  std::string base = config_path;
  if (EndsWith(base, ".json")) base.resize(base.size() - 5);
  const std::string path = base + kExpectSuffix;
  if (!fs::exists(path)) return std::string();
  StatusOr<nlohmann::json> j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  if (!j.value().is_object() || !j.value().contains("signature") ||
      !j.value()["signature"].is_string() || j.value()["signature"].get<std::string>().empty())
    return Status::Error(path,
                         path + ": expected {\"signature\": \"<signature> | pass | invalid\"}");
  return j.value()["signature"].get<std::string>();
}

StatusOr<std::vector<ReplayItem>> CollectReplayItems(const std::vector<std::string>& paths) {
  std::vector<ReplayItem> out;
  Status s;
  for (const auto& p : paths) s.Merge(AddPath(fs::path(p), out));
  if (!s.ok()) return s;
  return out;
}

ReplayResult Replay(const ReplayItem& item, const CheckOptions& opts,
                    const SystemUnderTest& system) {
  const auto t0 = std::chrono::steady_clock::now();
  ReplayResult r;
  r.item = item;
  StatusOr<Config> cfg = LoadConfigFile(item.path);
  Status ok = cfg.ok() ? CheckConfig(cfg.value(), ResourceBudget{}) : cfg.status();
  if (ok.ok()) {
    ok = system.Supports(cfg.value());
    r.unsupported = !ok.ok();
  }
  if (!ok.ok()) {
    r.outcome = ReplayOutcome::kInvalid;
    r.got = "invalid";
    r.message = ok.ToString();
  } else {
    const CheckResult res = CheckRun(cfg.value(), opts);
    r.verdict = res.verdict;
    r.message = res.verdict.message;
    r.report = ReportJson(cfg.value(), res);
    const bool finding = IsFinding(res.verdict.kind);
    r.inconclusive = res.verdict.kind == VerdictKind::kInconclusive;
    // An inconclusive check passes (it fails nothing); replayed from a campaign's stored reason
    // (DIR/inconclusive/<signature>/) it shows that signature, and matches when it is the same.
    const bool same_reason =
        res.verdict.kind == VerdictKind::kInconclusive && item.expected == res.verdict.Signature();
    r.got = finding || same_reason ? res.verdict.Signature() : "pass";
    r.outcome = !finding                 ? ReplayOutcome::kPass
                : item.expected.empty()  ? ReplayOutcome::kFails
                : item.expected == r.got ? ReplayOutcome::kSame
                                         : ReplayOutcome::kDifferent;
  }
  r.matches = !item.expected.empty() && item.expected == r.got;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace paradiff
