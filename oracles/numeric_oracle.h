// The numeric oracle: compares the assembled distributed run with the reference pair under the
// tolerance model (oracles/tolerance.h), step by step and phase by phase, and localizes the first
// divergence: step, then phase (forward: loss; gradient: reduced gradients and their norm;
// optimizer: parameters, master weights, optimizer state), then tensor in model order.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "core/verdict.h"
#include "oracles/assemble.h"
#include "oracles/reference.h"

namespace paradiff {

struct Comparison {
  int64_t step = 0;
  std::string phase;   // forward | gradient | optimizer
  std::string kind;    // loss | grad_norm | grad | param | master | momentum | exp_avg | exp_avg_sq
  std::string tensor;  // logical tensor ("" for scalars)
  std::string layer;   // layer type
  double error = 0, bound = 0, ref_error = 0;
  int64_t index = -1;  // worst element
  double expected = 0, actual = 0;
  bool ok() const { return error <= bound; }
  double ratio() const { return bound > 0 ? error / bound : (error > 0 ? 1e300 : 0); }
};

struct NumericResult {
  std::vector<Comparison> comparisons;  // every quantity compared, in localization order
  Verdict verdict;                      // kPass or the first kMismatch
};

NumericResult CheckNumerics(const Config& cfg, const Assembly& dist, const RefPair& ref);

}  // namespace paradiff
