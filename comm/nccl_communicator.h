// The `nccl` backend: the Communicator (comm/communicator.h) over NCCL, one process (or thread) and
// one GPU per rank. This header and nccl_communicator.cpp are the only files that see <nccl.h>.
// Built where CUDA, NCCL >= 2.18 and MPI are found (target paradiff_nccl, PARADIFF_HAVE_NCCL=1).
//
// NcclWorld() creates rank r's communicator on the group "world": rank 0 calls ncclGetUniqueId
// and the id reaches every rank through `bootstrap`'s Broadcast (in practice the mpi backend's
// world, MpiRuntime::World: that Broadcast is MPI_Bcast), then ncclCommInitRank. The bootstrap
// communicator is used only inside NcclWorld. Communicators of one world (the world and every
// Split descendant) share state; each may outlive the others.
//
// Contract (the local backend's, comm/local_communicator.h, with these differences):
// - Tensors: contiguous CPU tensors (LibTorch here is CPU-only) are staged through device memory:
//   copied in, reduced by NCCL on the rank's GPU, copied back; every call returns when the result
//   is in the caller's tensor. CUDA tensors of the rank's device (a CUDA-enabled LibTorch) work
//   the same way (device-to-device staging) and must be ready on the legacy default stream.
// - Reductions: float, double, BFloat16, Half, int64, int32, int8, uint8 (avg: floating only).
//   Sum and max are NCCL's (ncclSum / ncclMax); avg is NCCL's sum divided by the group size in the
//   tensor's dtype, like the local backend. NCCL's reduction order depends on algorithm, size and
//   topology, so results match the local backend only within the numeric oracle's tolerance (bit
//   for bit when every partial sum is exact, e.g. small integers); every rank of an AllReduce
//   gets identical bits. Max of a NaN follows NCCL (it may drop the NaN).
// - Note [NCCL uneven counts]: AllGather / ReduceScatter with equal counts are ncclAllGather /
//   ncclReduceScatter. Unequal counts (zeros allowed) run as one NCCL group of one ncclBroadcast
//   (AllGather) or ncclReduce (ReduceScatter) per rank whose count is non-zero, rooted at that
//   rank: no padding, no extra traffic. ReduceScatter need not equal AllReduce bit for bit.
// - Gathers, Broadcast and Send / Recv move bytes, so they take any dtype.
// - Note [NCCL buffered send]: Send copies the tensor to device memory, starts the NCCL send and
//   returns; it never waits for the receiver. Point-to-point traffic runs on two extra NCCL
//   communicators (made by ncclCommSplit at creation), each with its own stream: "up" carries
//   messages to higher ranks, "down" to lower ranks. Collectives never queue behind a transfer,
//   and rings (either direction), pairwise exchanges and pipeline schedules progress like buffered
//   MPI sends for any message size. NCCL serializes the transfers of one communicator, so an order
//   that chains a lane back on itself (ranks a < b < c: a sends to b, then to c; b sends to c,
//   then receives from a; c receives from a, then from b) can deadlock once messages exceed
//   NCCL's point-to-point buffers (a few MiB). Every pair of ranks is connected at creation (one
//   byte each way), so no Send waits on its receiver for connection set-up. A Recv waits for this
//   rank's earlier sends on the same lane. Destroying a communicator waits until its sends were
//   received.
// - Note [NCCL fingerprint check]: with check_fingerprints (the default) every collective first
//   all-gathers each rank's fingerprint (the fields Fingerprint::SameCall compares, as integers);
//   on a disagreement every rank throws CollectiveMismatch naming rank 0's call and the first
//   disagreeing rank's. Send carries a header (seq, numel, dtype, group) that Recv checks after
//   the transfer (CollectiveMismatch on the receiver). A Send / Recv pair whose byte counts
//   differ is undefined in NCCL (it may hang: the executor's watchdog reports it).
// - Cost: three NCCL communicators per Communicator (collectives, up, down), O(size) point-to-
//   point connections each; every call synchronizes with the device before it returns.
// - Hangs: with timeout > 0 a call that waits longer throws CollectiveHang naming the call; the
//   rank's communicators are then aborted (ncclCommAbort when destroyed) and later calls throw
//   CollectiveAborted. An asynchronous NCCL error (a peer that died) is thrown as
//   std::runtime_error.
// - Split: colors are any ints (renumbered densely, as in the mpi backend), ordered by (key,
//   rank) (ncclCommSplit); group names as in the local backend ("world/c<color>", ".<k>").
// - Bad arguments throw std::invalid_argument before any communication. CUDA and NCCL failures
//   throw std::runtime_error with the rank, file:line, the call and the library's message
//   (PARADIFF_NCCL_CHECK / PARADIFF_CUDA_CHECK). Not thread-safe: one thread per rank.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "comm/communicator.h"

namespace paradiff {

struct NcclOptions {
  // The rank's CUDA device; -1: bootstrap rank % device count (one node, one GPU per rank). NCCL
  // refuses two ranks of one communicator on one GPU.
  int device = -1;
  bool check_fingerprints = true;  // see Note [NCCL fingerprint check]
  // 0: wait forever (the executor's watchdog decides).
  std::chrono::milliseconds timeout{0};
  // Called on this rank before ("enter <fingerprint>") and after ("done <fingerprint>") every
  // call, like MpiOptions::progress. May be empty.
  std::function<void(const std::string& line)> progress;
};

// Collective over `bootstrap` (every rank calls it; rank i of bootstrap becomes rank i of the NCCL
// world). Throws std::runtime_error when the device or NCCL cannot be initialized (e.g. no GPU).
std::unique_ptr<Communicator> NcclWorld(Communicator& bootstrap, const NcclOptions& options);

}  // namespace paradiff
