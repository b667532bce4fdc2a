// `paradiff domain [--runs N] [--seed S] [--target FILE] [--json FILE]`: the generator's blind
// spots (fuzz/blind_spots.h). Prints each feature value's share, then one BLIND SPOT line per pair
// of values never drawn although a valid config has both (with the mutations that reached it),
// the number of pairs the search did not reach, and a SUMMARY line. Exit 0; 2 on bad options.
#include <iomanip>
#include <iostream>

#include "core/atomic_file.h"
#include "core/exit_codes.h"
#include "fuzz/blind_spots.h"
#include "fuzz/campaign.h"
#include "targets/system_under_test.h"
#include "tools/cli.h"

namespace paradiff {

int CmdDomain(const Args& args) {
  if (args.runs < 1) {
    std::cerr << "ERROR: --runs must be >= 1, got " << args.runs << "\n";
    return kExitBadInput;
  }
  StatusOr<SystemUnderTest> sut = LoadSystemUnderTest(args.target);
  if (!sut.ok()) {
    std::cerr << "ERROR: " << sut.status().ToString() << "\n";
    return kExitBadInput;
  }
  const SystemUnderTest system = sut.value();
  BlindSpotOptions o;
  o.samples = args.runs;
  o.seed = args.seed;
  o.domain = DomainFor(system);
  const BlindSpotReport r = FindBlindSpots(o);
  std::cout << "INFO: domain seed=" << o.seed << " samples=" << r.samples
            << " system=" << system.Describe() << "\n";
  for (const auto& [v, n] : r.values)
    std::cout << "  " << std::left << std::setw(28) << v << std::right << std::setw(7) << n << "  "
              << std::fixed << std::setprecision(1) << 100.0 * n / r.samples << "%\n";
  int64_t reached = 0;
  for (const MissingPair& m : r.missing) {
    if (!m.reached) continue;
    ++reached;
    std::cout << "BLIND SPOT: " << m.a << " + " << m.b << ": never drawn in " << r.samples
              << " configs; valid (reached by " << m.mutations << " mutations)\n";
  }
  const int64_t unreached = static_cast<int64_t>(r.missing.size()) - reached;
  if (!args.json.empty()) {
    const Status w = WriteFileAtomic(args.json, r.ToJson().dump(2) + "\n");
    if (!w.ok()) {
      std::cerr << "ERROR: " << w.ToString() << "\n";
      return kExitInternal;
    }
  }
  std::cout << "SUMMARY: paradiff: domain seed=" << o.seed << " samples=" << r.samples
            << " pairs=" << r.pairs.size() << "/" << r.possible_pairs << " blind_spots=" << reached
            << " unreached=" << unreached << "\n";
  return 0;
}

}  // namespace paradiff
