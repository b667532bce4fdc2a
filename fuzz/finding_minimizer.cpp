#include "fuzz/finding_minimizer.h"

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "core/budget.h"
#include "core/config_json.h"
#include "fuzz/json_file.h"
#include "fuzz/minimizer.h"
#include "kernels/engine.h"
#include "targets/system_under_test.h"

namespace paradiff {

namespace fs = std::filesystem;

namespace {

// Minimizes one finding dir; returns its minimize.json document.
nlohmann::json MinimizeOne(const fs::path& dir, const std::string& sig,
                           const FindingMinimizeOptions& o, ReferenceCache& cache,
                           std::ostream& log) {
  nlohmann::json out = {{"signature", sig}, {"budget_s", o.budget_s}};
  const nlohmann::json meta = ReadJsonOrNull((dir / "meta.json").string());
  if (meta.is_object() && meta.value("oracle", "") == "worker") {
    out["status"] = Name(MinimizeStatus::kSkipped);
    out["reason"] =
        "the worker process crashed or timed out; such findings are not reproduced "
        "in-process (reproduce with: paradiff run " +
        (dir / "config.json").string() + ")";
    log << "INFO: not minimizing " << sig << ": worker crash/hang (reproduce with paradiff run "
        << (dir / "config.json").string() << ")" << std::endl;
    return out;
  }
  StatusOr<Config> cfg = LoadConfigFile((dir / "config.json").string());
  Status ok = cfg.ok() ? CheckConfig(cfg.value(), ResourceBudget{}) : cfg.status();
  StatusOr<SystemUnderTest> sut = LoadSystemUnderTest(o.target);
  if (ok.ok()) ok = sut.ok() ? sut.value().Supports(cfg.value()) : sut.status();
  if (!ok.ok()) {
    out["status"] = Name(MinimizeStatus::kSkipped);
    out["reason"] = "config.json cannot be checked in-process: " + ok.ToString();
    log << "WARNING: not minimizing " << sig << ": " << ok.ToString() << std::endl;
    return out;
  }
  log << "INFO: minimizing " << sig << " (budget " << o.budget_s << "s)" << std::endl;
  MinimizeOptions mo;
  mo.budget_s = o.budget_s;
  mo.timeout = std::chrono::milliseconds(o.timeout_ms);
  mo.cache = &cache;
  mo.oracles = o.oracles;
  const SystemUnderTest system = sut.value();
  mo.run_engine = system.Runner();
  mo.supports = [system](const Config& c) { return system.Supports(c); };
  const MinimizeResult r = Minimize(cfg.value(), mo);
  out["checks"] = r.checks;
  out["seconds"] = r.seconds;
  if (r.signature != sig) {
    out["status"] = Name(MinimizeStatus::kNotReproduced);
    out["reason"] = "in-process check shows " + r.signature + ", not " + sig;
    log << "WARNING: not minimizing " << sig << ": in-process the config shows " << r.signature
        << std::endl;
    return out;
  }
  const Status w = WriteFileAtomic((dir / "minimized.json").string(), WriteConfig(r.minimized));
  if (!w.ok()) {
    out["status"] = Name(MinimizeStatus::kSkipped);
    out["reason"] = w.ToString();
    log << "WARNING: " << w.ToString() << std::endl;
    return out;
  }
  out["status"] = Name(MinimizeStatus::kMinimized);
  out["complete"] = r.complete;
  out["steps"] = nlohmann::json::array();
  for (const MinimizeStep& s : r.steps)
    out["steps"].push_back({{"check", s.check}, {"change", s.change}});
  log << "INFO: minimized " << sig << ": " << r.steps.size() << " step(s), " << r.checks
      << " check(s), " << (r.complete ? "1-minimal" : "budget exhausted") << ", "
      << (dir / "minimized.json").string() << std::endl;
  return out;
}

}  // namespace

int MinimizeStoredFindings(const WorkDir& wd, const FindingMinimizeOptions& opts,
                           std::ostream& log) {
  std::vector<fs::path> dirs;
  for (const auto& sig : RecordedSignatures(wd.root(), "findings")) {
    const fs::path dir = fs::path(wd.root()) / "findings" / sig;
    if (!fs::exists(dir / "minimize.json")) dirs.push_back(dir);
  }
  ReferenceCache cache;
  int minimized = 0;
  for (const fs::path& dir : dirs) {
    const std::string sig = dir.filename().string();
    if (opts.known.count(sig)) {  // left unminimized for a later campaign without the baseline
      log << "INFO: not minimizing " << sig << ": known (in the baseline)" << std::endl;
      continue;
    }
    nlohmann::json doc = MinimizeOne(dir, sig, opts, cache, log);
    minimized += doc.value("status", "") == Name(MinimizeStatus::kMinimized);
    const Status w = WriteFileAtomic((dir / "minimize.json").string(), doc.dump(2) + "\n");
    if (!w.ok()) log << "WARNING: " << w.ToString() << std::endl;
  }
  return minimized;
}

}  // namespace paradiff
