#include "fuzz/worker.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "core/budget.h"
#include "core/config_json.h"
#include "core/watchdog.h"
#include "kernels/engine.h"
#include "oracles/check.h"
#include "oracles/report.h"
#include "targets/system_under_test.h"

namespace paradiff {

namespace {

// Collective watchdog inside a worker; the campaign's per-task timeout is the outer one.
constexpr std::chrono::milliseconds kCollectiveTimeout = kDefaultCollectiveTimeout;

nlohmann::json Rejected(const std::string& why) {
  Verdict v;
  v.kind = VerdictKind::kRejectedValid;
  v.oracle = "worker";
  v.message = why;
  return VerdictJson(v);
}

}  // namespace

int RunWorker(std::istream& in, std::ostream& out) {
  ReferenceCache cache;
  std::map<std::string, StatusOr<SystemUnderTest>> systems;
  std::string line;
  while (std::getline(in, line)) {
    const auto t0 = std::chrono::steady_clock::now();
    nlohmann::json task = nlohmann::json::parse(line, nullptr, false);
    if (task.is_discarded() || !task.contains("index") || !task.contains("config")) {
      out << nlohmann::json{{"index", -1}, {"error", "malformed task"}}.dump() << std::endl;
      continue;
    }
    const std::string debug = task.value("debug", "");
    if (debug == "crash") std::abort();
    if (debug == "hang")
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    nlohmann::json result = {{"index", task["index"]}};
    StatusOr<Config> cfg = ConfigFromJson(task["config"]);
    Status ok = cfg.ok() ? CheckConfig(cfg.value(), ResourceBudget{}) : cfg.status();
    // One system per target file for the worker's life: a protocol-2 target's warm workers serve
    // every task (and the file is read once, as the campaign read it).
    const std::string target = task.value("target", "");
    auto known = systems.find(target);
    if (known == systems.end()) known = systems.emplace(target, LoadSystemUnderTest(target)).first;
    const StatusOr<SystemUnderTest>& sut = known->second;
    if (ok.ok()) ok = sut.ok() ? sut.value().Supports(cfg.value()) : sut.status();
    if (!ok.ok()) {
      // The campaign only sends valid, supported configs: refusing one is a finding.
      result["verdict"] = Rejected(ok.ToString());
    } else {
      CheckOptions opts;
      opts.timeout = kCollectiveTimeout;
      opts.cache = &cache;
      opts.oracles = task.value("oracles", std::vector<std::string>{});
      opts.run_engine = sut.value().Runner();
      CheckResult res = CheckRun(cfg.value(), opts);
      result["verdict"] = VerdictJson(res.verdict);
      if (IsFinding(res.verdict.kind)) result["report"] = ReportJson(cfg.value(), res);
      result["behaviour"] = {{"features", res.behaviour.features},
                             {"margin", res.behaviour.margin}};
    }
    result["ms"] =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    out << result.dump() << std::endl;
  }
  return 0;
}

}  // namespace paradiff
