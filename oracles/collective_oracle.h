// The collective oracle (collective consistency): ranks must issue the same collectives in the
// same order with matching op, dtype, reduce op / root, numel (or counts for gather-v ops).
// - A run the communicator stopped (a fingerprint mismatch, or a hang: a rank waited past the
//   watchdog) is a finding of kind collective / hang naming the ranks and the two calls, parsed
//   from the backend's report (comm/local_group.cpp formats; other backends' messages fall back
//   to the undetailed finding).
// - A run that completed is checked after the fact: each rank's recorded log (RankObservations::
//   collectives) must agree call by call with every other member of each group, so a backend that
//   does not check fingerprints live (or a decorator that reorders) is caught too.
// Signatures: collective.collective.-.-.collective.<detail> where detail is "<op>_vs_<op>" (the
// two ops, sorted) when the ops differ, else "<op>.<field>" (the first field that differs: dtype,
// reduce_op, root, counts, numel); hang.collective.-.-.collective.<op>_vs_<state of the other
// rank> (sorted likewise); a call one rank's log lacks: "<op>_vs_missing". Details use only
// characters safe in a file name (findings directories are named by signature).
// Step: a stopped run names the step the failing rank was in (EngineOutcome::failure_step); the
// log check names the step of the disagreeing call (RankObservations::collective_marks). The
// signature does not include the step (it is not a property of the bug).
#pragma once

#include <string>

#include "core/config.h"
#include "core/verdict.h"
#include "oracles/oracle.h"
#include "sut/outcome.h"

namespace paradiff {

// The verdict for a failed run: collective mismatch or hang (detailed as above), else a crash
// (oracle "engine", phase "run"). Must be called only when !e.ok.
Verdict EngineFailureVerdict(const EngineOutcome& e, const Config& cfg);

// The after-the-fact log check of a completed run: kPass or the first kCollective.
Verdict CheckCollectiveLogs(const Config& cfg, const Observations& obs);

class CollectiveOracle : public Oracle {
 public:
  const char* name() const override { return "collective"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
