// Assembles each rank's reported pieces (kernels/observations.h) into whole logical tensors,
// independently of the engine's collectives (Note [Independent observation]). It is also the
// partition-coverage and replica-consistency check: every element of every expected tensor must be
// held by at least one rank, pieces must lie inside their tensor, and ranks holding the same
// element must agree bitwise. A violation is an `invariant` verdict naming ranks, tensor and index.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/verdict.h"
#include "kernels/observations.h"

namespace paradiff {

struct AssembledStep {
  double loss = 0;       // mean over all micro-batches of all ranks
  double grad_norm = 0;  // rank 0's report (all ranks must agree)
  std::map<std::string, at::Tensor> tensors;  // "kind:tensor" -> flat float64
};

struct Assembly {
  std::vector<AssembledStep> steps;
  Verdict verdict;  // kPass, or the first kInvariant found
};

// The tensor kinds a run must report for `cfg` (grad, param, [master], optimizer slots).
std::vector<std::string> ExpectedKinds(const Config& cfg);

Assembly Assemble(const Config& cfg, const Observations& obs);

}  // namespace paradiff
