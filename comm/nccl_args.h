// Argument checks and wire formats of the nccl backend (comm/nccl_communicator.h), kept apart from
// the NCCL calls: no NCCL or CUDA header here. Part of paradiff_nccl.
//
// - Rules: what the shared argument checks (comm/arg_checks.h) accept on this backend.
// - Wire fingerprints (see Note [NCCL fingerprint check]): a Fingerprint as kWireWords int64 words,
//   all-gathered before every collective. Strings travel as hashes (group) or dtype codes, so a
//   fingerprint read back names the caller's own group when the hash matches and "<another
//   group>" otherwise.
// - Point-to-point header (see Note [NCCL buffered send]): what Send tells Recv about the payload.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/arg_checks.h"
#include "comm/communicator.h"

namespace paradiff {
namespace nccl {

// The nccl backend's argument rules (comm/arg_checks.h): CPU tensors or tensors on cuda:<device>;
// reductions of float, double, BFloat16, Half, int64, int32, int8 and uint8 only.
comm_args::ArgRules Rules(int device);

constexpr int kWireWords = 8;
using WireFingerprint = std::array<int64_t, kWireWords>;
// dtype_code: the tensor's at::ScalarType as an int, or -1 for calls without a tensor.
WireFingerprint ToWire(const Fingerprint& fp, int dtype_code);
Fingerprint FromWire(const int64_t* words, const std::string& own_group);
// The first rank (1..size-1) whose call differs from rank 0's (Fingerprint::SameCall), or -1.
// `all` holds size wire fingerprints back to back.
int FirstDisagreement(const std::vector<int64_t>& all, int size);
// The CollectiveMismatch every rank throws when FirstDisagreement found `odd`.
CollectiveMismatch MismatchError(const std::vector<int64_t>& all, int odd,
                                 const std::string& group);

constexpr int kHeaderWords = 4;
using PointHeader = std::array<int64_t, kHeaderWords>;  // seq, numel, dtype code, group hash
PointHeader MakeHeader(const Fingerprint& send, const at::Tensor& t);
// Throws CollectiveMismatch on the receiver when the header does not match what it receives.
void CheckHeader(const PointHeader& header, const Fingerprint& recv, const at::Tensor& t, int src);

}  // namespace nccl
}  // namespace paradiff
