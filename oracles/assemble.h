// Assembles each rank's reported pieces (sut/observations.h) into whole logical tensors,
// independently of the engine's collectives (see Note [Independent observation]). Assembly itself
// never judges: AssembleTensors takes the first holder's value of every element and leaves
// elements nobody holds at zero. The judging is done by the tiling oracle (every element held by
// the expected ranks, pieces inside their tensor; oracles/tiling_oracle.h) and the replica oracle
// (holders agree bitwise; oracles/replica_oracle.h); Assemble runs both and returns the first
// violation as its verdict, as it always has.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/verdict.h"
#include "sut/observations.h"
#include "sut/outcome.h"

namespace paradiff {

struct AssembledStep {
  double loss = 0;       // mean over all micro-batches of all ranks
  double grad_norm = 0;  // rank 0's report (all ranks must agree)
  bool skipped = false;  // overflow skip decision (all ranks must agree)
  double loss_scale = 1;
  std::map<std::string, at::Tensor> tensors;  // "kind:tensor" -> flat float64
  // "kind:tensor" -> flat float64, for tensors some of whose elements were summed from a tensor-
  // parallel group's addends: the sum of their magnitudes there, 0 elsewhere (TensorPiece::
  // addend_abs); absent for a tensor no partial piece reached.
  std::map<std::string, at::Tensor> addend_abs;
};

struct Assembly {
  std::vector<AssembledStep> steps;  // cfg.steps entries
  // What the run reported. The tensors of every kind of ExpectedKinds(cfg) exist (zero where
  // nothing was reported), but only the reported kinds are judged (CheckNumerics).
  Reporting reporting;
  Verdict verdict;  // kPass, or the first kInvariant of the tiling and replica checks (Assemble)
};

// The tensor kinds a run must report for `cfg` (grad, param, [master], optimizer slots), less
// those `r` leaves out (grad; master and the slots when r.optimizer is false). "param" always.
std::vector<std::string> ExpectedKinds(const Config& cfg, const Reporting& r = Reporting{});

// Builds the logical tensors of every kind of ExpectedKinds(cfg); pieces outside their tensor or
// of unknown tensors are ignored, a step a rank did not report contributes nothing. verdict is
// always kPass; `r` is recorded as the assembly's reporting.
Assembly AssembleTensors(const Config& cfg, const Observations& obs,
                         const Reporting& r = Reporting{});

// AssembleTensors, with the verdict of CheckTiling, then CheckReplicas (the built-in engine's
// reporting: everything).
Assembly Assemble(const Config& cfg, const Observations& obs);

}  // namespace paradiff
