// Internals of the local backend (local_communicator.h): the state ranks share through one mutex.
//
// WorldState owns the world mutex, the abort flag, the per-rank status table and every group.
// LocalGroup owns one group's rendezvous state and its point-to-point mailboxes; all of it is
// guarded by the world mutex, and each group has its own condition variable.
//
// Note [Local rendezvous]: a collective is one generation of its group. Each rank posts a Slot
// (fingerprint, pointers to its tensors) and compares its fingerprint with the first arrival's; a
// difference breaks the group for good and wakes everybody with CollectiveMismatch. The last
// arrival marks the generation executing, drops the lock, performs the whole operation for every
// rank (reading inputs in rank order), then completes the generation and wakes the others. While a
// generation executes, its waiters ignore aborts and timeouts: their tensors are being written and
// must stay alive; execution never waits, so this is bounded. An aborted world never starts a new
// execution, so slots of ranks that left by an exception are never read.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"

namespace paradiff {
namespace local {

class LocalGroup;

// One rank's part in one collective; lives on the calling rank's stack during the call.
struct Slot {
  Fingerprint fp;
  const at::Tensor* in = nullptr;  // AllReduce / Broadcast: in == out
  at::Tensor* out = nullptr;
  const std::vector<int64_t>* counts = nullptr;  // AllGather / ReduceScatter
  ReduceOp reduce = ReduceOp::kSum;
  int color = 0, key = 0;  // Split
  // Split results, written by the executing rank.
  std::shared_ptr<LocalGroup> new_group;
  int new_rank = -1;
};

enum class RankState { kRunning, kWaiting, kFinished, kFailed };

struct RankStatus {
  RankState state = RankState::kRunning;
  Fingerprint waiting_in;                // valid while kWaiting
  std::optional<Fingerprint> last_done;  // the last call that completed
  std::string error;                     // kFailed
};

struct WorldState {
  WorldState(int size, std::chrono::milliseconds timeout);

  const int size;
  const std::chrono::milliseconds timeout;
  std::mutex mu;
  // Guarded by mu.
  bool aborted = false;
  std::string abort_reason;
  std::vector<RankStatus> status;
  std::vector<std::shared_ptr<LocalGroup>> groups;  // "world" first, then every Split result

  // Needs mu held. Sets the flag (the first reason wins) and wakes every group.
  void AbortLocked(const std::string& reason);
  // Needs mu held. One line per world rank: what it waits in, or that it finished / runs.
  std::string StatusReportLocked() const;
  void SetWaitingLocked(int world_rank, const Fingerprint& fp);
  void SetDoneLocked(int world_rank, const Fingerprint& fp);  // the call completed
  void SetRunningLocked(int world_rank);                      // the call failed
};

// A sticky failure of a group: a mismatch (both fingerprints) or an error while executing.
struct GroupFailure {
  bool mismatch = false;
  std::string message;
  Fingerprint a, b;
};

struct Message {
  Fingerprint fp;
  at::Tensor data;  // a private contiguous copy
};

class LocalGroup {
 public:
  LocalGroup(WorldState* world, std::string name, std::vector<int> members);

  const std::string& name() const { return name_; }
  int size() const { return static_cast<int>(members_.size()); }
  int world_rank(int group_rank) const { return members_[group_rank]; }

  // Runs one collective for group rank `rank` (see Note [Local rendezvous]). Throws
  // CollectiveMismatch, CollectiveHang, CollectiveAborted, or std::runtime_error if the operation
  // itself failed.
  void Collective(int rank, Slot& slot);
  // Buffered: queues a copy of `t` for `dst` and returns.
  void Send(int rank, int dst, const Fingerprint& fp, const at::Tensor& t);
  // Waits for the oldest message from `src`, checks numel and dtype, copies it into `t`.
  void Recv(int rank, int src, const Fingerprint& fp, at::Tensor& t);

  // Needs the world mutex held.
  void NotifyAllLocked() { cv_.notify_all(); }

 private:
  void ThrowIfFailedLocked(int rank, const Fingerprint& fp) const;
  // `finished_peer` < 0: the wait timed out; else that world rank finished without arriving, so
  // the call can never complete (reported at once, not after the timeout).
  [[noreturn]] void ThrowHangLocked(int rank, const Fingerprint& fp, int finished_peer = -1);
  // A member that finished without posting to the current generation (-1: none).
  int FinishedAbsentMemberLocked() const;
  // Performs the posted generation for every rank; returns groups created by a Split.
  std::vector<std::shared_ptr<LocalGroup>> Execute();
  std::vector<std::shared_ptr<LocalGroup>> ExecuteSplit();

  WorldState* const world_;  // outlives the group (it owns it)
  const std::string name_;
  const std::vector<int> members_;  // world rank of each group rank
  std::condition_variable cv_;
  // Guarded by the world mutex.
  int64_t generation_ = 0;  // the generation now gathering
  int64_t completed_ = -1;  // the last completed generation
  int arrived_ = 0;
  int first_ = -1;  // group rank of the first arrival of this generation
  bool executing_ = false;
  std::vector<Slot*> slots_;
  std::optional<GroupFailure> failure_;
  std::map<std::pair<int, int>, std::deque<Message>> mailboxes_;  // (src, dst) -> FIFO
  // Touched only by the executing rank (one generation executes at a time).
  int splits_done_ = 0;
};

}  // namespace local
}  // namespace paradiff
