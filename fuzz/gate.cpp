#include "fuzz/gate.h"

#include <stdlib.h>

#include <filesystem>

#include "fuzz/json_file.h"
#include "fuzz/replay.h"

namespace paradiff {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// Classifies one replayed config (the rules are in gate.h).
GateCase FromReplay(const std::string& group, const ReplayResult& r,
                    const std::set<std::string>& baseline) {
  GateCase c;
  c.group = group;
  c.name = r.item.name;
  c.path = r.item.path;
  c.expected = r.item.expected.empty() ? "pass" : r.item.expected;
  c.got = r.got;
  c.seconds = r.seconds;
  c.report = r.report;
  if (c.got == c.expected) {
    c.status = GateStatus::kPassed;
    c.message = r.outcome == ReplayOutcome::kPass ? "" : r.message;
  } else if (r.unsupported) {
    c.status = GateStatus::kSkipped;
    c.message = "not supported by this engine build: " + r.message;
  } else if (c.got != "pass" && c.got != "invalid" && baseline.count(c.got)) {
    c.status = GateStatus::kKnown;
    c.message = "known (in the baseline): " + c.got + ": " + r.message;
  } else {
    c.status = GateStatus::kFailed;
    c.message =
        "expected " + c.expected + ", got " + c.got + (r.message.empty() ? "" : ": " + r.message);
  }
  return c;
}

Status ReplayDir(const std::string& group, const std::string& dir, const GateOptions& opts,
                 ReferenceCache& cache, std::ostream& log, GateResult& out) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    const std::string flag = group == "suite" ? "--suite" : "--regression";
    return Status::Error(flag, flag + "=" + dir + ": not a directory");
  }
  StatusOr<std::vector<ReplayItem>> items = CollectReplayItems({dir});
  if (!items.ok()) return items.status();
  CheckOptions check;
  check.cache = &cache;
  check.timeout = opts.timeout;
  check.oracles = opts.oracles;
  check.run_engine = opts.system.Runner();
  for (const ReplayItem& item : items.value()) {
    GateCase c = FromReplay(group, Replay(item, check, opts.system), opts.baseline);
    log << (c.status == GateStatus::kFailed ? "ERROR" : "INFO") << ": gate " << group << " "
        << c.name << ": " << Name(c.status) << " (got " << c.got << ")"
        << (c.message.empty() ? "" : ": " + c.message) << std::endl;
    out.cases.push_back(std::move(c));
  }
  return Status();
}

Status FuzzBriefly(const GateOptions& opts, std::ostream& log, GateResult& out) {
  CampaignOptions co = opts.campaign;
  co.budget_s = opts.budget_s;
  co.baseline = opts.baseline;  // known findings are not minimized
  if (co.workdir.empty()) {
    std::string tmpl = (fs::temp_directory_path() / "paradiff-gate-XXXXXX").string();
    if (!::mkdtemp(tmpl.data()))
      return Status::Error("--workdir", "cannot create a temporary work dir");
    co.workdir = tmpl;
  }
  out.campaign_workdir = co.workdir;
  StatusOr<CampaignSummary> sum = RunCampaign(co, log);
  if (!sum.ok()) return sum.status();
  out.campaign_ran = true;
  out.campaign = sum.value();
  for (const std::string& sig : out.campaign.signatures) {
    const fs::path dir = fs::path(co.workdir) / "findings" / sig;
    GateCase c;
    c.group = "campaign";
    c.name = sig;
    c.path = (dir / "config.json").string();
    c.expected = "pass";
    c.got = sig;
    c.report = ReadJsonOrNull((dir / "report.json").string());
    std::string message;
    if (c.report.is_object() && c.report.contains("verdict"))
      message = c.report["verdict"].value("message", "");
    const bool known = opts.baseline.count(sig) > 0;
    c.status = known ? GateStatus::kKnown : GateStatus::kFailed;
    c.message = (known ? "known (in the baseline): " : "new finding: ") + message +
                " (reproduce: paradiff run " + c.path + ")";
    log << (known ? "INFO" : "ERROR") << ": gate campaign " << sig << ": " << Name(c.status)
        << std::endl;
    out.cases.push_back(std::move(c));
  }
  return Status();
}

}  // namespace

const char* Name(GateStatus s) {
  switch (s) {
    case GateStatus::kPassed:
      return "passed";
    case GateStatus::kFailed:
      return "failed";
    case GateStatus::kKnown:
      return "known";
    case GateStatus::kSkipped:
      return "skipped";
  }
  return "?";
}

StatusOr<std::set<std::string>> LoadBaseline(const std::string& path) {
  if (!fs::exists(path))
    return Status::Error("--baseline", "--baseline=" + path + ": no such file");
  nlohmann::json j = ReadJsonOrNull(path);
  if (j.is_object() && j.contains("signatures")) j = j["signatures"];
  std::set<std::string> out;
  const Status bad = Status::Error(
      "--baseline",
      "--baseline=" + path + ": expected a JSON list of signatures (or {\"signatures\": [...]})");
  if (!j.is_array()) return bad;
  for (const auto& s : j) {
    if (!s.is_string()) return bad;
    out.insert(s.get<std::string>());
  }
  return out;
}

StatusOr<GateResult> RunGate(const GateOptions& opts, std::ostream& log) {
  const auto start = Clock::now();
  if (opts.suite_dir.empty()) return Status::Error("--suite", "--suite DIR is required");
  GateResult res;
  ReferenceCache cache;
  Status s = ReplayDir("suite", opts.suite_dir, opts, cache, log, res);
  if (s.ok() && !opts.regression_dir.empty())
    s = ReplayDir("regression", opts.regression_dir, opts, cache, log, res);
  if (s.ok() && opts.budget_s > 0) s = FuzzBriefly(opts, log, res);
  if (!s.ok()) return s;
  for (const GateCase& c : res.cases) {
    res.passed += c.status == GateStatus::kPassed;
    res.failed += c.status == GateStatus::kFailed;
    res.known += c.status == GateStatus::kKnown;
    res.skipped += c.status == GateStatus::kSkipped;
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return res;
}

nlohmann::json GateJson(const GateResult& r, const GateOptions& opts) {
  nlohmann::json j;
  j["paradiff_gate"] = 1;
  j["ok"] = r.ok();
  j["passed"] = r.passed;
  j["failed"] = r.failed;
  j["known"] = r.known;
  j["skipped"] = r.skipped;
  j["seconds"] = r.seconds;
  j["suite"] = opts.suite_dir;
  j["regression"] = opts.regression_dir;
  j["baseline"] = opts.baseline;
  std::set<std::string> sigs, new_sigs;
  j["cases"] = nlohmann::json::array();
  for (const GateCase& c : r.cases) {
    const bool finding = c.got != "pass" && c.got != "invalid";
    if (finding && c.status != GateStatus::kSkipped) sigs.insert(c.got);
    if (finding && c.status == GateStatus::kFailed) new_sigs.insert(c.got);
    j["cases"].push_back({{"group", c.group},
                          {"name", c.name},
                          {"path", c.path},
                          {"expected", c.expected},
                          {"got", c.got},
                          {"status", Name(c.status)},
                          {"message", c.message},
                          {"seconds", c.seconds}});
  }
  j["signatures"] = sigs;
  j["new_signatures"] = new_sigs;
  if (r.campaign_ran)
    j["campaign"] = {{"workdir", r.campaign_workdir},
                     {"seed", opts.campaign.seed},
                     {"budget_s", opts.budget_s},
                     {"execs", r.campaign.execs},
                     {"unique", r.campaign.unique},
                     {"elapsed_s", r.campaign.elapsed_s},
                     {"pairs_covered", r.campaign.pairs_covered},
                     {"pairs_possible", r.campaign.pairs_possible}};
  return j;
}

}  // namespace paradiff
