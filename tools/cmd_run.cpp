// `paradiff run CONFIG`: one config, distributed vs reference, a per-step table and a verdict.
#include <cstdio>
#include <iostream>

#include "core/atomic_file.h"
#include "core/exit_codes.h"
#include "kernels/engine.h"
#include "oracles/check.h"
#include "oracles/report.h"
#include "targets/system_under_test.h"
#include "tools/cli.h"
#include "tools/html_report.h"
#include "tools/load_config.h"

namespace paradiff {

namespace {

std::string Describe(const Config& c) {
  char buf[256];
  std::snprintf(
      buf, sizeof buf, "world=%lld (tp=%lld pp=%lld dp=%lld) zero=%lld param=%s compute=%s",
      static_cast<long long>(c.parallel.world), static_cast<long long>(c.parallel.tp),
      static_cast<long long>(c.parallel.pp), static_cast<long long>(c.parallel.dp),
      static_cast<long long>(c.zero.stage), Name(c.precision.param), Name(c.precision.compute));
  return buf;
}

}  // namespace

void PrintSummary(const Config& cfg, const CheckResult& res, const std::string& what) {
  const Verdict& v = res.verdict;
  if (v.kind == VerdictKind::kPass) {
    double worst = 0;
    for (const auto& r : res.rows) worst = std::max(worst, r.worst_ratio);
    std::printf("SUMMARY: paradiff: PASS %s seed=%llu compared=%zu worst_ratio=%.3g\n",
                what.c_str(), static_cast<unsigned long long>(cfg.seed), res.comparisons.size(),
                worst);
    return;
  }
  // An inconclusive check is not a finding (exit 0): its summary must not read as one.
  const bool inconclusive = v.kind == VerdictKind::kInconclusive;
  std::printf("SUMMARY: paradiff: %s kind=%s sig=%s %s seed=%llu step=%lld phase=%s tensor=%s\n",
              inconclusive ? "INCONCLUSIVE" : "FINDING", Name(v.kind), v.Signature().c_str(),
              what.c_str(), static_cast<unsigned long long>(cfg.seed),
              static_cast<long long>(v.where.step), Name(v.where.phase),
              v.where.tensor.empty() ? "-" : v.where.tensor.c_str());
}

int CmdRun(const Args& args) {
  if (args.positional.size() != 1) {
    std::cerr << "ERROR: run takes exactly one CONFIG (see paradiff run --help)\n";
    return kExitBadInput;
  }
  const std::string& path = args.positional[0];
  StatusOr<Config> loaded = LoadCheckedConfig(path, args.inject);
  if (!loaded.ok()) {
    for (const auto& e : loaded.status().errors())
      std::cerr << "ERROR: " << path << ": " << e.message << "\n";
    return kExitBadInput;
  }
  Config cfg = loaded.value();
  if (args.backend) cfg.backend = *args.backend;
  StatusOr<SystemUnderTest> sut =
      LoadSystemUnderTest(args.target, KeepingRunDirs(args.keep_run_dirs));
  if (!sut.ok()) {
    for (const auto& e : sut.status().errors())
      std::cerr << "ERROR: --target " << args.target << ": " << e.message << "\n";
    return kExitBadInput;
  }
  const Status sup = sut.value().Supports(cfg);
  if (!sup.ok()) {
    for (const auto& e : sup.errors()) std::cerr << "ERROR: " << path << ": " << e.message << "\n";
    return kExitBadInput;
  }
  if (!args.quiet)
    std::printf("INFO: paradiff run %s seed=%llu %s faults=%zu on %s\n", path.c_str(),
                static_cast<unsigned long long>(cfg.seed), Describe(cfg).c_str(), cfg.faults.size(),
                sut.value().Describe().c_str());
  CheckOptions opts;
  opts.timeout = std::chrono::milliseconds(args.timeout_ms);
  opts.oracles = args.oracles;
  if (args.cross_backend && !args.target.empty()) {
    std::cerr
        << "ERROR: --cross-backend compares the built-in engine's backends; it does not apply "
           "to --target\n";
    return kExitBadInput;
  }
  if (args.cross_backend) {  // the selection (default when none) plus the cross-backend oracle
    if (opts.oracles.empty()) opts.oracles = {"default"};
    opts.oracles.push_back("cross_backend");
  }
  opts.run_engine = sut.value().Runner();
  const CheckResult res = CheckRun(cfg, opts);
  if (!args.quiet) {
    std::printf("%4s  %14s  %14s  %14s  %11s  %s\n", "step", "loss(dist)", "loss(same)",
                "loss(fp64)", "worst e/b", "where");
    for (const auto& r : res.rows)
      std::printf("%4lld  %14.8f  %14.8f  %14.8f  %11.3g  %s%s\n", static_cast<long long>(r.step),
                  r.loss_dist, r.loss_same, r.loss_truth, r.worst_ratio, r.worst_where.c_str(),
                  r.restarted ? "  (reference restarted from the run's own state)" : "");
    std::printf("INFO: time reference=%.3fs engine=%.3fs compare=%.3fs\n", res.timing.reference_s,
                res.timing.engine_s, res.timing.compare_s);
  }
  if (res.verdict.kind != VerdictKind::kPass)
    std::printf("%s: %s\n", res.verdict.kind == VerdictKind::kInconclusive ? "WARN" : "ERROR",
                res.verdict.message.c_str());
  if (!args.report.empty() || !args.html.empty()) {
    const nlohmann::json report = ReportJson(cfg, res);
    Status w;
    if (!args.report.empty()) w.Merge(WriteFileAtomic(args.report, report.dump(2) + "\n"));
    if (!args.html.empty())
      w.Merge(WriteFileAtomic(
          args.html, html::Page("paradiff run " + path, html::ReportSection(report, "run", path))));
    if (!w.ok()) {
      std::cerr << "ERROR: " << w.ToString() << "\n";
      return kExitInternal;
    }
  }
  PrintSummary(cfg, res, "config=" + path);
  return IsFinding(res.verdict.kind) ? kExitFinding : kExitPass;
}

}  // namespace paradiff
