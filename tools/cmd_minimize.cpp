// `paradiff minimize CONFIG [--inject NAME]... --out MIN.json`: shrinks a failing config to a
// 1-minimal one with the same signature (fuzz/minimizer.h), prints every accepted step and the
// command that reproduces the result. Exit 3 when the original shows a finding (and the minimized
// config was written), 0 when it passes (nothing to minimize), 2 on bad input.
#include <cstdio>
#include <iostream>

#include "core/atomic_file.h"
#include "core/config_json.h"
#include "core/exit_codes.h"
#include "fuzz/minimizer.h"
#include "kernels/engine.h"
#include "targets/system_under_test.h"
#include "tools/cli.h"
#include "tools/load_config.h"

namespace paradiff {

int CmdMinimize(const Args& args) {
  if (args.positional.size() != 1) {
    std::cerr << "ERROR: minimize takes exactly one CONFIG (see paradiff minimize --help)\n";
    return kExitBadInput;
  }
  if (args.out.empty()) {
    std::cerr << "ERROR: minimize needs --out MIN.json\n";
    return kExitBadInput;
  }
  MinimizeOptions opts;
  if (!args.budget.empty()) {
    opts.budget_s = ParseDuration(args.budget);
    if (opts.budget_s <= 0) {
      std::cerr << "ERROR: --budget=" << args.budget << ": expected a duration like 90s or 10m\n";
      return kExitBadInput;
    }
  }
  const std::string& path = args.positional[0];
  StatusOr<Config> loaded = LoadCheckedConfig(path, args.inject);
  StatusOr<SystemUnderTest> sut = LoadSystemUnderTest(args.target);
  if (!sut.ok()) {
    for (const auto& e : sut.status().errors())
      std::cerr << "ERROR: --target " << args.target << ": " << e.message << "\n";
    return kExitBadInput;
  }
  const SystemUnderTest system = sut.value();
  opts.run_engine = system.Runner();
  opts.supports = [system](const Config& c) { return system.Supports(c); };
  Status ok = loaded.ok() ? system.Supports(loaded.value()) : loaded.status();
  if (!ok.ok()) {
    for (const auto& e : ok.errors()) std::cerr << "ERROR: " << path << ": " << e.message << "\n";
    return kExitBadInput;
  }
  const Config& cfg = loaded.value();
  opts.timeout = std::chrono::milliseconds(args.timeout_ms);
  opts.oracles = args.oracles;
  const bool quiet = args.quiet;
  opts.on_step = [quiet](const MinimizeStep& s) {
    if (!quiet)
      std::printf("STEP: check %lld: %s\n", static_cast<long long>(s.check), s.change.c_str());
    std::fflush(stdout);
  };
  opts.on_original = [quiet](const Verdict& v) {
    if (!quiet && IsFinding(v.kind))
      std::printf("INFO: original: %s: %s\n", v.Signature().c_str(), v.message.c_str());
  };
  if (!quiet)
    std::printf("INFO: paradiff minimize %s seed=%llu faults=%zu\n", path.c_str(),
                static_cast<unsigned long long>(cfg.seed), cfg.faults.size());
  std::fflush(stdout);
  const MinimizeResult r = Minimize(cfg, opts);
  if (!r.finding) {
    std::printf(
        "SUMMARY: paradiff: minimize PASS config=%s seed=%llu verdict=%s checks=%lld: nothing to "
        "minimize\n",
        path.c_str(), static_cast<unsigned long long>(cfg.seed), Name(r.original.kind),
        static_cast<long long>(r.checks));
    return kExitPass;
  }
  const Status w = WriteFileAtomic(args.out, WriteConfig(r.minimized));
  if (!w.ok()) {
    std::cerr << "ERROR: " << w.ToString() << "\n";
    return kExitInternal;
  }
  if (!quiet) {
    std::printf(
        "INFO: %zu step(s), %lld check(s), %lld candidate(s) skipped (invalid or unsupported), "
        "%.1fs: %s\n",
        r.steps.size(), static_cast<long long>(r.checks), static_cast<long long>(r.skipped),
        r.seconds,
        r.complete ? "1-minimal (no single shrink keeps the signature)"
                   : "budget exhausted: smaller, but maybe not 1-minimal");
    std::printf("INFO: removed: %s\n", DescribeChange(cfg, r.minimized).c_str());
    std::printf("INFO: reproduce: paradiff run %s%s\n", args.out.c_str(),
                args.target.empty() ? "" : (" --target " + args.target).c_str());
  }
  std::printf(
      "SUMMARY: paradiff: minimize FINDING sig=%s config=%s seed=%llu steps=%zu checks=%lld "
      "complete=%s out=%s\n",
      r.signature.c_str(), path.c_str(), static_cast<unsigned long long>(cfg.seed), r.steps.size(),
      static_cast<long long>(r.checks), r.complete ? "yes" : "no", args.out.c_str());
  return kExitFinding;
}

}  // namespace paradiff
