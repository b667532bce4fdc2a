// The cross-backend oracle: the same config on the `local` backend (ranks as threads) and on `mpi`
// (ranks as processes under mpirun, kernels/engine_mpi.h) gives bitwise-identical assembled
// observations and identical collective logs. Both backends reduce in rank order (see Note [MPI
// reduction order], comm/mpi_communicator.h), so any difference is a backend bug: a reduction in
// another order, a lost or duplicated message, a dtype changed on the wire, a group split
// differently. The comparison is the determinism oracle's (CompareSecondRun); findings are
// kMismatch of oracle "cross_backend", localized to the first differing quantity, with detail
// "failure" when only one backend's run failed and "collective_log" when only the logs differ.
// Opt-in (`--oracles cross_backend`, `paradiff run --cross-backend`): it starts an mpirun job.
// Skipped where this build has no MPI. Checkpointed configs are compared too: each backend saves
// and reloads through its own ranks (one mpirun job per phase). The other backend's runner is
// injectable for the self-test.
#pragma once

#include "oracles/oracle.h"

namespace paradiff {

class CrossBackendOracle : public Oracle {
 public:
  // `other`: runs a config on the other backend; empty = RunEngine with the backend switched.
  explicit CrossBackendOracle(EngineRunner other = {}) : other_(std::move(other)) {}
  const char* name() const override { return "cross_backend"; }
  Verdict Check(const OracleInput& in) const override;

 private:
  EngineRunner other_;
};

}  // namespace paradiff
