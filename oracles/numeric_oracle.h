// The numeric oracle: compares the assembled distributed run with the reference pair under the
// tolerance model (oracles/tolerance.h), step by step and phase by phase, and localizes the first
// divergence: step, then phase (forward: loss; gradient: reduced gradients; reduction: the
// gradient norm, first against the run's own gradients, then against the truth; optimizer:
// parameters, master weights, optimizer state), then tensor in model order. A gradient that is
// off by a constant factor and otherwise within the bound is attributed to the reduction
// (see Note [Scaled gradients] in numeric_oracle.cpp).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/verdict.h"
#include "oracles/assemble.h"
#include "oracles/oracle.h"
#include "oracles/reference.h"

namespace paradiff {

// One compared quantity: its Location (phase forward | gradient | reduction | optimizer) and
// the numbers.
struct Comparison : Location {
  std::string detail;  // "" or "consistency" (grad_norm against the run's own gradients)
  double error = 0, bound = 0, ref_error = 0;
  int64_t index = -1;  // worst element
  double expected = 0, actual = 0;
  bool ok() const { return error <= bound; }
  double ratio() const { return bound > 0 ? error / bound : (error > 0 ? 1e300 : 0); }
};

// Copies c's localization (step, phase, kind, tensor, layer, detail) and numbers (index, expected,
// actual, error, bound) into v.where.
void LocalizeComparison(Verdict& v, const Comparison& c);

struct NumericResult {
  std::vector<Comparison> comparisons;  // every quantity compared, in localization order
  Verdict verdict;                      // kPass or the first kMismatch
  // The steps at which the comparison restarted from the run's own state (see Note [Restarted
  // comparison] in numeric_oracle.cpp), and the last restarted pair (null when none).
  std::vector<int64_t> restarts;
  std::shared_ptr<const RefPair> restarted;
};

NumericResult CheckNumerics(const Config& cfg, const Assembly& dist, const RefPair& ref);

// The oracle "numeric": the verdict of CheckRun's CheckNumerics (OracleInput::numeric).
class NumericOracle : public Oracle {
 public:
  const char* name() const override { return "numeric"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
