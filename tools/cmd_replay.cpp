// `paradiff replay PATH...`: re-checks configs, finding dirs, work dirs and corpora in-process
// (fuzz/replay.h) and prints one table row per config, then one SUMMARY line. Exit 3 when any
// config still fails (same signature, another one, or a finding where nothing was expected), 0
// otherwise (pass or invalid), 2 when a PATH is missing or an expectation file is malformed.
#include <cstdio>
#include <iostream>
#include <map>

#include "core/exit_codes.h"
#include "fuzz/replay.h"
#include "targets/system_under_test.h"
#include "tools/cli.h"

namespace paradiff {

int CmdReplay(const Args& args) {
  if (args.positional.empty()) {
    std::cerr << "ERROR: replay takes at least one PATH (see paradiff replay --help)\n";
    return kExitBadInput;
  }
  StatusOr<std::vector<ReplayItem>> items = CollectReplayItems(args.positional);
  if (!items.ok()) {
    for (const auto& e : items.status().errors()) std::cerr << "ERROR: " << e.message << "\n";
    return kExitBadInput;
  }
  ReferenceCache cache;
  CheckOptions opts;
  opts.cache = &cache;
  opts.timeout = std::chrono::milliseconds(args.timeout_ms);
  opts.oracles = args.oracles;
  StatusOr<SystemUnderTest> sut =
      LoadSystemUnderTest(args.target, KeepingRunDirs(args.keep_run_dirs));
  if (!sut.ok()) {
    for (const auto& e : sut.status().errors())
      std::cerr << "ERROR: --target " << args.target << ": " << e.message << "\n";
    return kExitBadInput;
  }
  opts.run_engine = sut.value().Runner();
  std::map<ReplayOutcome, int> counts;
  int unexpected = 0, inconclusive = 0;
  if (!args.quiet)
    std::printf("%-9s %-5s %7s  %-52s %s\n", "RESULT", "MATCH", "TIME", "CONFIG", "GOT (EXPECTED)");
  for (const ReplayItem& item : items.value()) {
    const ReplayResult r = Replay(item, opts, sut.value());
    ++counts[r.outcome];
    const char* match = item.expected.empty() ? "-" : r.matches ? "yes" : "NO";
    if (!item.expected.empty() && !r.matches) ++unexpected;
    if (r.inconclusive) ++inconclusive;
    if (!args.quiet) {
      std::string aside =
          item.expected.empty() || r.matches ? "" : " (expected " + item.expected + ")";
      if (r.inconclusive && r.got == "pass")
        aside += " (inconclusive: " + r.verdict.Signature() + ")";
      std::printf("%-9s %-5s %6.2fs  %-52s %s%s\n", Name(r.outcome), match, r.seconds,
                  item.path.c_str(), r.got.c_str(), aside.c_str());
      if ((r.outcome != ReplayOutcome::kPass || r.inconclusive) && !r.message.empty())
        std::printf("INFO:   %s\n", r.message.c_str());
      std::fflush(stdout);
    }
  }
  const int failing = counts[ReplayOutcome::kSame] + counts[ReplayOutcome::kDifferent] +
                      counts[ReplayOutcome::kFails];
  std::printf(
      "SUMMARY: paradiff: replay %s configs=%zu same=%d different=%d fails=%d pass=%d "
      "invalid=%d unexpected=%d inconclusive=%d\n",
      failing ? "FAILING" : "CLEAN", items.value().size(), counts[ReplayOutcome::kSame],
      counts[ReplayOutcome::kDifferent], counts[ReplayOutcome::kFails],
      counts[ReplayOutcome::kPass], counts[ReplayOutcome::kInvalid], unexpected, inconclusive);
  return failing ? kExitFinding : kExitPass;
}

}  // namespace paradiff
