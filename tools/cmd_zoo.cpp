// `paradiff zoo list` and `paradiff zoo run`: the bug zoo and the harness's self-validation.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <iostream>

#include "core/atomic_file.h"
#include "core/exit_codes.h"
#include "core/self_exe.h"
#include "fuzz/zoo.h"
#include "tools/cli.h"

namespace paradiff {

namespace {

int List() {
  for (const auto& s : ZooSwitches())
    std::printf("%-36s %s\n%-36s   triggers: %s\n%-36s   precedent: %s\n", s.name, s.mechanism, "",
                s.triggers, "", s.precedent);
  std::printf("SUMMARY: paradiff: zoo %zu switches\n", ZooSwitches().size());
  return kExitPass;
}

}  // namespace

int CmdZoo(const Args& a) {
  if (a.positional.size() == 1 && a.positional[0] == "list") return List();
  if (a.positional.size() != 1 || a.positional[0] != "run") {
    std::cerr << "ERROR: usage: paradiff zoo list | zoo run [options] (see paradiff zoo --help)\n";
    return kExitBadInput;
  }
  ZooOptions o;
  o.budget_s = a.runs > 0 ? 0 : ParseDuration(a.budget);
  o.runs = a.runs;
  o.minimize_budget_s = a.minimize_budget_s;
  if (o.budget_s <= 0 && o.runs <= 0) {
    std::cerr << "ERROR: --budget=" << a.budget << ": expected a duration like 60s or 2m\n";
    return kExitBadInput;
  }
  o.jobs = a.jobs;
  o.seed = a.seed;
  o.corpus_dir = a.corpus;
  o.workdir = a.workdir;
  o.exe = ParadiffExecutable();
  o.stop_on_first = a.stop_on_first;
  o.only = a.inject;
  o.feedback = !a.no_feedback;
  StatusOr<ZooReport> r = RunZoo(o, std::cout);
  if (!r.ok()) {
    for (const auto& e : r.status().errors()) std::cerr << "ERROR: " << e.message << "\n";
    return kExitBadInput;
  }
  const ZooReport& z = r.value();
  std::printf("\n%-36s %-6s %9s %7s %5s %-17s %s\n", "switch", "found", "time(s)", "execs", "sigs",
              "minimized w/l/s", "first signature");
  for (const auto& row : z.rows) {
    char size[32];
    std::snprintf(size, sizeof size, "%lld/%lld/%lld", static_cast<long long>(row.min_world),
                  static_cast<long long>(row.min_layers), static_cast<long long>(row.min_steps));
    std::printf("%-36s %-6s %9.1f %7lld %5lld %-17s %s\n", row.name.c_str(),
                row.found ? "yes" : "NO", row.time_to_detect_s,
                static_cast<long long>(row.execs_to_detect), static_cast<long long>(row.signatures),
                row.found ? size : "-", row.signature.c_str());
  }
  for (const auto& sig : z.false_positive_signatures)
    std::printf("WARNING: false positive %s\n", sig.c_str());
  if (!a.json.empty()) {
    const Status w = WriteFileAtomic(a.json, z.ToJson().dump(2) + "\n");
    if (!w.ok()) {
      std::cerr << "ERROR: " << w.ToString() << "\n";
      return kExitInternal;
    }
  }
  const bool all = z.detection_rate == 1.0;
  std::printf(
      "SUMMARY: paradiff: zoo detected=%.0f%% median_time_to_detect=%.1fs false_positives=%lld "
      "budget=%.0fs runs=%lld seed=%llu\n",
      100 * z.detection_rate, z.median_time_to_detect_s, static_cast<long long>(z.false_positives),
      o.budget_s, static_cast<long long>(o.runs), static_cast<unsigned long long>(o.seed));
  return all && z.false_positives == 0 ? kExitPass : kExitFinding;
}

}  // namespace paradiff
