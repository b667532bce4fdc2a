#include "fuzz/minimizer.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/budget.h"
#include "core/config_json.h"
#include "fuzz/config_domain.h"
#include "kernels/engine.h"
#include "oracles/check.h"

namespace paradiff {

namespace {

using Clock = std::chrono::steady_clock;

// Leaves of a config document by dotted path; arrays are leaves.
void Flatten(const nlohmann::json& j, const std::string& prefix,
             std::map<std::string, std::string>& out) {
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it)
      Flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    return;
  }
  out[prefix] = j.dump();
}

// Whether the system under test can check `c` at all (the minimizer treats "cannot" like
// "invalid").
bool Checkable(const Config& c, const MinimizeOptions& o) {
  return CheckConfig(c, ResourceBudget{}).ok() &&
         (o.supports ? o.supports(c) : EngineSupports(c)).ok();
}

}  // namespace

std::string DescribeChange(const Config& from, const Config& to) {
  std::map<std::string, std::string> a, b;
  Flatten(ConfigToJson(from), "", a);
  Flatten(ConfigToJson(to), "", b);
  std::string out;
  for (const auto& [field, old_value] : a) {
    auto it = b.find(field);
    const std::string new_value = it == b.end() ? "absent" : it->second;
    if (new_value == old_value) continue;
    if (!out.empty()) out += ", ";
    out += field + " " + old_value + "->" + new_value;
  }
  return out.empty() ? "no change" : out;
}

MinimizeResult Minimize(const Config& cfg, const MinimizeOptions& opts) {
  const auto start = Clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  ReferenceCache local_cache;
  CheckOptions check;
  check.timeout = opts.timeout;
  check.cache = opts.cache ? opts.cache : &local_cache;
  check.oracles = opts.oracles;
  check.run_engine = opts.run_engine;

  MinimizeResult res;
  res.minimized = cfg;
  res.original = CheckRun(cfg, check).verdict;
  res.checks = 1;
  res.signature = res.original.Signature();
  res.finding = IsFinding(res.original.kind);
  if (opts.on_original) opts.on_original(res.original);
  if (!res.finding) {
    res.complete = true;
    res.seconds = elapsed();
    return res;
  }
  std::set<std::string> lost;  // candidates (stable JSON) known not to keep the signature
  bool out_of_time = false;
  for (bool progress = true; progress && !out_of_time;) {
    progress = false;
    for (const Config& cand : ShrinkCandidates(res.minimized)) {
      if (!Checkable(cand, opts)) {
        ++res.skipped;
        continue;
      }
      const std::string key = WriteConfig(cand);
      if (lost.count(key)) continue;
      if (opts.budget_s > 0 && elapsed() >= opts.budget_s) {
        out_of_time = true;
        break;
      }
      ++res.checks;
      if (CheckRun(cand, check).verdict.Signature() != res.signature) {
        lost.insert(key);
        continue;
      }
      MinimizeStep step{DescribeChange(res.minimized, cand), res.checks};
      res.minimized = cand;
      if (opts.on_step) opts.on_step(step);
      res.steps.push_back(std::move(step));
      progress = true;
      break;
    }
  }
  res.complete = !out_of_time;
  res.seconds = elapsed();
  return res;
}

}  // namespace paradiff
