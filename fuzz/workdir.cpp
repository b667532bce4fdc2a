#include "fuzz/workdir.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/config_json.h"
#include "core/json_text.h"
#include "core/rng.h"

namespace paradiff {

namespace {

StatusOr<nlohmann::json> ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json::object();
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = ParseJsonText(ss.str());
  if (j.is_discarded())
    return Status::Error(path, path + ": corrupt JSON (delete it to start over)");
  return j;
}

}  // namespace

std::vector<std::string> RecordedSignatures(const std::string& workdir, const std::string& area) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(workdir + "/" + area, ec))
    if (std::filesystem::exists(e.path() / "meta.json"))
      out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string ConfigHash(const Config& cfg) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx",
                static_cast<unsigned long long>(Mix64(HashName(WriteConfig(cfg)))));
  return buf;
}

StatusOr<nlohmann::json> WorkDir::LoadStats() const { return ReadJson(root_ + "/stats.json"); }

Status WorkDir::SaveStats(const nlohmann::json& stats) const {
  return WriteFileAtomic(root_ + "/stats.json", stats.dump(2) + "\n");
}

std::string WorkDir::FindingDir(const std::string& signature) const {
  return root_ + "/findings/" + signature;
}

std::string WorkDir::InconclusiveDir(const std::string& signature) const {
  return root_ + "/inconclusive/" + signature;
}

StatusOr<bool> WorkDir::RecordFinding(const nlohmann::json& v, const Config& cfg,
                                      const nlohmann::json& report, int64_t index,
                                      double elapsed_s) const {
  return Record(FindingDir(v.value("signature", "unknown")), v, cfg, report, index, elapsed_s);
}

StatusOr<bool> WorkDir::RecordInconclusive(const nlohmann::json& v, const Config& cfg,
                                           const nlohmann::json& report, int64_t index,
                                           double elapsed_s) const {
  return Record(InconclusiveDir(v.value("signature", "unknown")), v, cfg, report, index, elapsed_s);
}

StatusOr<bool> WorkDir::Record(const std::string& dir, const nlohmann::json& v, const Config& cfg,
                               const nlohmann::json& report, int64_t index,
                               double elapsed_s) const {
  const std::string sig = v.value("signature", "unknown");
  StatusOr<nlohmann::json> loaded = ReadJson(dir + "/meta.json");
  if (!loaded.ok()) return loaded.status();
  nlohmann::json meta = loaded.value();
  const bool is_new = meta.empty();
  if (is_new) {
    // Reproducer first, meta last: meta.json existing means the finding is complete.
    Status s = WriteFileAtomic(dir + "/config.json", WriteConfig(cfg));
    s.Merge(WriteFileAtomic(dir + "/report.json", report.dump(2) + "\n"));
    s.Merge(WriteFileAtomic(dir + "/log", v.value("message", "") + "\n"));
    if (!s.ok()) return s;
    meta = {{"signature", sig},
            {"kind", v.value("kind", "")},
            {"oracle", v.value("oracle", "")},
            {"first_seen_index", index},
            {"first_seen_s", elapsed_s},
            {"seed", cfg.seed},
            {"indices", nlohmann::json::array()}};
  }
  std::set<int64_t> indices = meta["indices"].get<std::set<int64_t>>();
  if (indices.count(index)) return is_new;
  indices.insert(index);
  meta["indices"] = indices;
  meta["count"] = indices.size();
  meta["last_seen_index"] = index;
  meta["last_seen_s"] = elapsed_s;
  Status s = WriteFileAtomic(dir + "/meta.json", meta.dump(2) + "\n");
  if (!s.ok()) return s;
  return is_new;
}

Status WorkDir::SaveCorpus(const Config& cfg) const {
  return WriteFileAtomic(root_ + "/corpus/" + ConfigHash(cfg) + ".json", WriteConfig(cfg));
}

}  // namespace paradiff
