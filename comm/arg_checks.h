// Argument checks of the Communicator collectives, shared by every backend (local, mpi, nccl):
// pure functions, run before any fingerprint or communication, so that every backend rejects the
// same calls with the same words. Each throws std::invalid_argument "<op>: <rule>", the rule naming
// the argument, its value and the bound (e.g. "broadcast: root=2 out of range [0, 2)").
//
// What differs between backends (where tensors may live, which dtypes reduce) is an ArgRules
// value; everything else (defined, contiguous, flat, same dtype in and out, counts of the group's
// size and >= 0, numels matching the counts, root and peer in range, no send to oneself) is common.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace paradiff {
namespace comm_args {

// One backend's rules.
struct ArgRules {
  const char* backend = "";  // named in errors: "local", "mpi", "nccl"
  // >= 0: tensors may be on the CPU or on cuda:<cuda_device>; -1: on the CPU only.
  int cuda_device = -1;
  // The dtypes the backend reduces, described by `reduces_what` in errors; nullptr: every floating
  // and integer dtype. Avg needs a floating dtype either way.
  bool (*reduces)(at::ScalarType) = nullptr;
  const char* reduces_what = "";
};

[[noreturn]] void Invalid(CollOp op, const std::string& rule);

// t (in place).
void CheckAllReduce(const ArgRules& rules, const at::Tensor& t, ReduceOp r);
// Flat in and out of one dtype, counts of the group; in: counts[rank], out: their sum (returned).
int64_t CheckAllGather(const ArgRules& rules, const at::Tensor& in, const at::Tensor& out,
                       const std::vector<int64_t>& counts, int rank, int size);
// Flat in and out of one reducible dtype, counts of the group; in: their sum (returned), out:
// counts[rank].
int64_t CheckReduceScatter(const ArgRules& rules, const at::Tensor& in, const at::Tensor& out,
                           const std::vector<int64_t>& counts, ReduceOp r, int rank, int size);
// t (in place), root in [0, size).
void CheckBroadcast(const ArgRules& rules, const at::Tensor& t, int root, int size);
// op: kSend (peer named "dst") or kRecv ("src"); peer in [0, size) and not `rank`.
void CheckPointToPoint(const ArgRules& rules, CollOp op, const at::Tensor& t, int peer, int rank,
                       int size);

}  // namespace comm_args
}  // namespace paradiff
