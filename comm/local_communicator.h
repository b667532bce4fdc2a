// The `local` backend: every rank is a thread of this process; collectives meet in shared memory.
//
// LocalWorld owns the state one run shares between its ranks: the world size, the watchdog timeout,
// the per-rank status table used in hang reports, the abort flag, and every group created by Split.
// Rank(r) hands out rank r's communicator on the group "world" (once per rank). Communicators keep
// the shared state alive, so they may outlive the LocalWorld object.
//
// Contract (see Note [Local rendezvous] in local_group.h):
// - Reductions run in rank order (in0 + in1 + ... left to right, in the tensor's dtype; avg divides
//   that sum by the group size in the same dtype), so results are bitwise identical on every rank
//   and from run to run; ReduceScatter reduces exactly like AllReduce and keeps a piece.
// - Ranks of a group that disagree on a call (Fingerprint::SameCall, plus equal counts vectors for
//   AllGather / ReduceScatter) all throw CollectiveMismatch naming both fingerprints and ranks, as
//   soon as the second disagreeing rank arrives; the group stays broken afterwards.
// - Every wait has a deadline (the world's timeout). The first rank to miss it throws
//   CollectiveHang listing the state of every world rank, and aborts the world: ranks waiting
//   anywhere, or calling later, throw CollectiveAborted. Abort() (used when a rank's function
//   throws) does the same. A wait that can never complete, because a member of the group (or the
//   sender of a Recv) has finished without the call, is that hang at once, not after the timeout
//   ("... which can never complete: world rank R finished without it").
// - Bad arguments throw std::invalid_argument, naming the op and the rule, before any rendezvous.
// - Tensors are contiguous CPU tensors. Reductions take floating dtypes (float, double, BFloat16,
//   Half) and integers (avg: floating only); gathers, broadcast and send/recv take any dtype.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace paradiff {

namespace local {
struct WorldState;
}  // namespace local

class LocalWorld {
 public:
  LocalWorld(int size, std::chrono::milliseconds timeout);
  ~LocalWorld();
  LocalWorld(const LocalWorld&) = delete;
  LocalWorld& operator=(const LocalWorld&) = delete;

  int size() const;
  std::chrono::milliseconds timeout() const;

  // Rank r's communicator on "world". Throws std::invalid_argument if r is out of range or was
  // already handed out (two communicators for one rank would break the call numbering).
  std::unique_ptr<Communicator> Rank(int r);

  // Status table for hang reports: the rank's function returned / threw.
  void MarkFinished(int r);
  void MarkFailed(int r, const std::string& error);
  // Wakes every waiting rank with CollectiveAborted; later calls throw it too. First reason wins.
  void Abort(const std::string& reason);
  bool aborted() const;

 private:
  std::shared_ptr<local::WorldState> state_;
  std::vector<bool> handed_out_;
};

// What happened on one rank of RunLocalRanks. error_kind is "" when ok, else one of "mismatch",
// "hang", "aborted" (a victim of another rank's failure) or "exception".
struct RankResult {
  bool ok = false;
  std::string error;
  std::string error_kind;
};

// Runs fn(communicator) on `world` threads, one per rank, and joins them. A rank whose fn throws is
// recorded (never rethrown) and aborts the world, so the others stop promptly. Does not touch
// global ATen settings (intra-op threads are the caller's business). fn must return eventually;
// every wait inside the communicator is bounded by `timeout`.
std::vector<RankResult> RunLocalRanks(int world, std::chrono::milliseconds timeout,
                                      const std::function<void(Communicator&)>& fn);

// The rank whose error explains the run: the first failure that is not "aborted", else the first
// failure; -1 when every rank succeeded.
int PrimaryErrorRank(const std::vector<RankResult>& results);

}  // namespace paradiff
