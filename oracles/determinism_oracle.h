// The determinism oracle: the same config run twice gives bitwise-identical assembled
// observations (loss, gradient norm, every gradient, parameter, master weight and optimizer slot
// of every step) and identical collective logs. Non-determinism makes every other finding
// irreproducible (a minimizer chasing a flaky bug) and usually means a race: a reduction whose
// order depends on thread timing, a buffer reused before a collective finished.
// It doubles the cost of a check: off in the campaign default set, on by name ("determinism", or
// the "all" set). Findings: kMismatch, oracle "determinism", localized to the first differing
// quantity (oracles/quantities.h); detail "failure" when only one of the two runs failed,
// "collective_log" when the values agree but the logs do not.
#pragma once

#include "oracles/oracle.h"

namespace paradiff {

// The comparison both the determinism and the cross-backend oracle make: `again` (a second run of
// in.cfg) against the checked run, as findings of `oracle` naming the two runs.
Verdict CompareSecondRun(const OracleInput& in, const EngineOutcome& again,
                         const std::string& oracle, const std::string& first_name,
                         const std::string& second_name);

class DeterminismOracle : public Oracle {
 public:
  const char* name() const override { return "determinism"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
