// Communicator: the collective interface every engine rank talks through. Each method is a
// collective over the communicator's group unless it says otherwise: all ranks of the group call
// the same operations in the same order with matching op, numel, dtype and root/peer. Tensors are
// CPU (or, for the nccl backend, CUDA) tensors; flat tensors must be contiguous.
//
// Backends: local (threads in one process; local_communicator.h), mpi and nccl (later issues).
// Errors: a disagreement between ranks throws CollectiveMismatch on every rank of the group; a rank
// that never arrives makes the others throw CollectiveHang within the caller's timeout.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace paradiff {

enum class ReduceOp { kSum, kAvg, kMax };
const char* Name(ReduceOp);

enum class CollOp {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kSend,
  kRecv,
  kBarrier,
  kSplit
};
const char* Name(CollOp);

// What one rank says it is doing in one collective call. Ranks of a group must agree on all fields
// except `rank` (and peer for point-to-point, which must be each other's).
struct Fingerprint {
  std::string group;  // group name, e.g. "world", "world/dp0"
  int64_t seq = 0;    // per-group call counter on this rank
  CollOp op = CollOp::kBarrier;
  int64_t numel = 0;  // elements this rank contributes (or receives, for Recv)
  std::string dtype;  // "float", "double", "c10::BFloat16", ...
  int64_t root = -1;  // root for Broadcast, reduce op for reductions, peer for Send/Recv
  int rank = -1;      // the calling rank within the group
  // CountsHash(counts) for AllGather / ReduceScatter (whose numel may differ by rank), else 0.
  uint64_t shape_hash = 0;
  bool SameCall(const Fingerprint& o) const;  // everything but rank (and numel for gather-v ops)
  std::string ToString() const;
};

// Note [Fingerprint numbering]: collectives (everything but Send / Recv) are numbered per group
// from 0 on each rank, so the k-th collective of a group has the same seq on every member. Send and
// Recv do not advance that counter (only two ranks take part); they are numbered per (direction,
// peer) from 0, so the k-th Send from a to b carries the same seq as the k-th Recv at b from a.
// Every backend and decorator numbers calls this way, through FingerprintSequencer.

// FNV-1a over n bytes, continuing from h: stable over runs and processes. The backends hash
// group names and fingerprints with it to compare them across ranks. kFnvOffset is not FNV's
// standard basis (14695981039346656037) but has always been this value: keep it.
constexpr uint64_t kFnvOffset = 1469598103934665603ULL;
uint64_t Fnv1a(const void* data, size_t n, uint64_t h = kFnvOffset);
// Fnv1a of the string's bytes.
uint64_t StringHash(const std::string& s);
// Stable over runs and platforms (FNV-1a over the counts); part of the fingerprint of gather-v ops.
uint64_t CountsHash(const std::vector<int64_t>& counts);
// The dtype's name as Fingerprint::dtype spells it ("float", "c10::BFloat16", ...).
std::string DtypeName(const at::Tensor& t);

// Numbers one rank's calls on one group (see Note [Fingerprint numbering]) and builds fingerprints.
class FingerprintSequencer {
 public:
  FingerprintSequencer(std::string group, int rank, int size);
  // Advances the collective counter.
  Fingerprint Collective(CollOp op, int64_t numel, std::string dtype, int64_t root,
                         uint64_t shape_hash = 0);
  // op is kSend or kRecv; advances the counter of (op, peer).
  Fingerprint PointToPoint(CollOp op, int64_t numel, std::string dtype, int peer);

 private:
  std::string group_;
  int rank_;
  int64_t seq_ = 0;
  std::vector<int64_t> send_seq_, recv_seq_;  // per peer
};

// Thrown on every rank of a group whose ranks disagree on a call.
class CollectiveMismatch : public std::runtime_error {
 public:
  CollectiveMismatch(const std::string& what, Fingerprint a, Fingerprint b)
      : std::runtime_error(what), a_(std::move(a)), b_(std::move(b)) {}
  const Fingerprint& a() const { return a_; }
  const Fingerprint& b() const { return b_; }

 private:
  Fingerprint a_, b_;
};

// Thrown when a rank waited longer than the timeout; what() lists per rank where it waits.
class CollectiveHang : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown in ranks that were waiting when another rank of the world failed (so nobody hangs).
class CollectiveAborted : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual const std::string& name() const = 0;

  // In place; the result is bitwise identical on every rank.
  virtual void AllReduce(at::Tensor& t, ReduceOp op) = 0;
  // `out` (flat, sum(counts) elements) receives every rank's `in` (flat, counts[rank] elements),
  // concatenated in rank order. counts may differ by rank (and be zero).
  virtual void AllGather(const at::Tensor& in, at::Tensor& out,
                         const std::vector<int64_t>& counts) = 0;
  // `in` (flat, sum(counts)) is reduced elementwise across ranks; rank r keeps piece r (counts[r]).
  virtual void ReduceScatter(const at::Tensor& in, at::Tensor& out,
                             const std::vector<int64_t>& counts, ReduceOp op) = 0;
  virtual void Broadcast(at::Tensor& t, int root) = 0;
  // Point to point within the group. Send is buffered (returns before the matching Recv).
  virtual void Send(const at::Tensor& t, int dst) = 0;
  virtual void Recv(at::Tensor& t, int src) = 0;
  virtual void Barrier() = 0;
  // Ranks with the same color form a new group, ordered by (key, rank). Collective over this group.
  virtual std::unique_ptr<Communicator> Split(int color, int key) = 0;
};

}  // namespace paradiff
