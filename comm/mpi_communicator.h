// The `mpi` backend: the Communicator over Open MPI, one process per rank, CPU tensors. This header
// and mpi_communicator.cpp are the only files that see <mpi.h>; callers use MpiRuntime (MPI's
// initialization for this process) and the communicators it hands out.
//
// MpiRuntime owns MPI_Init / MPI_Finalize and the user-defined reduction ops (bf16 / fp16). At most
// one per process, created before and destroyed after every communicator it hands out. Errors of
// MPI calls return (MPI_ERRORS_RETURN) and are thrown as std::runtime_error naming the world rank,
// file:line, the call and MPI's error string (PARADIFF_MPI_CHECK in the .cpp).
//
// The communicator keeps the contract of comm/communicator.h and the semantics of the local backend
// (comm/local_communicator.h), so the same engine gives the same observations on both:
// - Note [MPI reduction order]: with MpiReduction::kRankOrder (the default) a reduction is computed
//   exactly as the local backend computes it: every rank receives the pieces it owns from every
//   rank (MPI_Alltoallv; an AllReduce owns an even split of the tensor) and reduces them in rank
//   order in the tensor's dtype (acc = in0; acc += in1; ...; avg divides by n; max as
//   at::maximum), then AllReduce gathers the pieces back (MPI_Allgatherv). Results are bitwise
//   equal to the local backend, on every rank, for every world size. Traffic is 2x numel per rank,
//   like a ring; the price is one extra staging buffer of size x piece.
//   MpiReduction::kNative uses MPI's reductions (MPI_Reduce + MPI_Bcast for AllReduce, so every
//   rank still gets identical bits; MPI_Reduce_scatter for ReduceScatter); bf16 and fp16 reduce
//   with user-defined commutative ops that combine two values in float and round to the dtype.
//   Open MPI picks the combination order by algorithm and size, so results agree with the local
//   backend only within the numeric oracle's tolerance, and ReduceScatter + AllGather need not
//   equal AllReduce bitwise. Max on float/double uses MPI_MAX (NaN handling is MPI's).
// - Note [MPI fingerprint check]: with check_fingerprints (the default) every collective first
//   exchanges a 64-bit hash of its fingerprint (the fields Fingerprint::SameCall compares) with
//   MPI_Allgather; when hashes differ, the ranks exchange their full fingerprints and every rank
//   of the group throws CollectiveMismatch naming rank 0's call and the first disagreeing rank's.
//   Send carries a header (seq, numel, dtype) that Recv checks, throwing CollectiveMismatch on the
//   receiver. Ranks calling collectives on different groups cannot be detected this way: they
//   hang, and the executor's watchdog (kernels/engine_mpi.h) reports it.
// - Note [MPI buffered send]: Send posts MPI_Isend of a private copy and returns; finished sends
//   are reaped on every later call. The destructor waits for outstanding sends (the interface says
//   every Send has its Recv); while an exception unwinds it frees their requests instead
//   (MPI_Request_free) and leaks the copies on purpose, since MPI may still read them.
// - Split: ranks exchange (color, key); MPI_Comm_split orders by (key, parent rank) like the local
//   backend; any int color works (colors are renumbered densely); groups are named as in the local
//   backend ("world/c<color>", then ".<k>" for a parent's k-th later split).
// - Bad arguments throw std::invalid_argument before any communication. Tensors are contiguous CPU
//   tensors; data moves as bytes, so gathers, broadcast and send/recv take any dtype; reductions
//   take float, double, BFloat16, Half and integer dtypes (avg: floating only). Per-rank byte
//   counts must fit an int (MPI's count type).
// - Not thread-safe: one thread per rank (MPI_Init, MPI_THREAD_SINGLE).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace paradiff {

enum class MpiReduction { kRankOrder, kNative };

struct MpiOptions {
  MpiReduction reduction = MpiReduction::kRankOrder;
  bool check_fingerprints = true;  // see Note [MPI fingerprint check]
  // Called on this rank before ("enter <fingerprint>") and after ("done <fingerprint>") every call,
  // for the executor's progress log and hang reports. May be empty.
  std::function<void(const std::string& line)> progress;
};

namespace mpi {
struct Context;
}  // namespace mpi

class MpiRuntime {
 public:
  // MPI_Init (argc / argv may be null). Throws std::runtime_error if MPI was initialized before.
  MpiRuntime(int* argc, char*** argv);
  // Frees the reduction ops and calls MPI_Finalize (collective: every rank must get here).
  ~MpiRuntime();
  MpiRuntime(const MpiRuntime&) = delete;
  MpiRuntime& operator=(const MpiRuntime&) = delete;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }

  // A communicator named "world" on a duplicate of MPI_COMM_WORLD. Collective over the world.
  std::unique_ptr<Communicator> World(const MpiOptions& options);
  // A communicator named "world" over world ranks [0, size) only (MPI_Comm_create_group):
  // collective over those ranks, the others take no part. A persistent job's ranks run a config
  // of `size` ranks this way (kernels/mpi_job.h). Throws std::invalid_argument unless
  // 0 < size <= world_size() and this rank is below `size`.
  std::unique_ptr<Communicator> World(const MpiOptions& options, int size);

  // MPI_Abort on MPI_COMM_WORLD: every rank of the job ends with `code`. For errors after which the
  // other ranks cannot be expected to reach MPI_Finalize.
  [[noreturn]] void Abort(int code);

 private:
  std::shared_ptr<mpi::Context> context_;
  int world_rank_ = -1;
  int world_size_ = 0;
};

}  // namespace paradiff
