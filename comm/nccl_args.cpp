// Argument checks and wire formats of the nccl backend (nccl_args.h).
#include "comm/nccl_args.h"

#include <c10/core/ScalarType.h>

#include <stdexcept>

namespace paradiff {
namespace nccl {
namespace {

// Wire word indices.
enum Word { kSeq, kOp, kNumel, kRoot, kShapeHash, kDtype, kGroupHash, kRank };

bool IsGatherV(int64_t op) {
  return op == static_cast<int64_t>(CollOp::kAllGather) ||
         op == static_cast<int64_t>(CollOp::kReduceScatter);
}

std::string DtypeNameOf(int64_t code) {
  if (code < 0 || code >= static_cast<int64_t>(at::ScalarType::NumOptions))
    return code < 0 ? "" : "unknown";
  const auto name = c10::scalarTypeToTypeMeta(static_cast<at::ScalarType>(code)).name();
  return std::string(name.data(), name.size());
}

std::string GroupOf(int64_t hash, const std::string& own_group) {
  return static_cast<uint64_t>(hash) == StringHash(own_group) ? own_group : "<another group>";
}

// The dtypes ncclDataType_t has (nccl_communicator.cpp, ReduceType).
bool NcclReduces(at::ScalarType st) {
  switch (st) {
    case at::kFloat:
    case at::kDouble:
    case at::kBFloat16:
    case at::kHalf:
    case at::kLong:
    case at::kInt:
    case at::kChar:
    case at::kByte:
      return true;
    default:
      return false;
  }
}

}  // namespace

comm_args::ArgRules Rules(int device) {
  comm_args::ArgRules rules;
  rules.backend = "nccl";
  rules.cuda_device = device;
  rules.reduces = &NcclReduces;
  rules.reduces_what = "float, double, BFloat16, Half, int64, int32, int8 and uint8";
  return rules;
}

WireFingerprint ToWire(const Fingerprint& fp, int dtype_code) {
  WireFingerprint w{};
  w[kSeq] = fp.seq;
  w[kOp] = static_cast<int64_t>(fp.op);
  w[kNumel] = fp.numel;
  w[kRoot] = fp.root;
  w[kShapeHash] = static_cast<int64_t>(fp.shape_hash);
  w[kDtype] = dtype_code;
  w[kGroupHash] = static_cast<int64_t>(StringHash(fp.group));
  w[kRank] = fp.rank;
  return w;
}

Fingerprint FromWire(const int64_t* w, const std::string& own_group) {
  Fingerprint fp;
  fp.group = GroupOf(w[kGroupHash], own_group);
  fp.seq = w[kSeq];
  fp.op = static_cast<CollOp>(w[kOp]);
  fp.numel = w[kNumel];
  fp.dtype = DtypeNameOf(w[kDtype]);
  fp.root = w[kRoot];
  fp.rank = static_cast<int>(w[kRank]);
  fp.shape_hash = static_cast<uint64_t>(w[kShapeHash]);
  return fp;
}

int FirstDisagreement(const std::vector<int64_t>& all, int size) {
  const int64_t* first = all.data();
  for (int r = 1; r < size; ++r) {
    const int64_t* w = all.data() + static_cast<size_t>(r) * kWireWords;
    for (int k = 0; k < kWireWords; ++k) {
      if (k == kRank || (k == kNumel && IsGatherV(first[kOp]) && IsGatherV(w[kOp]))) continue;
      if (w[k] != first[k]) return r;
    }
  }
  return -1;
}

CollectiveMismatch MismatchError(const std::vector<int64_t>& all, int odd,
                                 const std::string& group) {
  Fingerprint a = FromWire(all.data(), group);
  Fingerprint b = FromWire(all.data() + static_cast<size_t>(odd) * kWireWords, group);
  const std::string what = "collective mismatch in group '" + group + "': rank 0 called " +
                           a.ToString() + " but rank " + std::to_string(odd) + " called " +
                           b.ToString();
  return CollectiveMismatch(what, std::move(a), std::move(b));
}

PointHeader MakeHeader(const Fingerprint& send, const at::Tensor& t) {
  return {send.seq, t.numel(), static_cast<int64_t>(t.scalar_type()),
          static_cast<int64_t>(StringHash(send.group))};
}

void CheckHeader(const PointHeader& h, const Fingerprint& recv, const at::Tensor& t, int src) {
  const PointHeader want = {recv.seq, t.numel(), static_cast<int64_t>(t.scalar_type()),
                            static_cast<int64_t>(StringHash(recv.group))};
  if (h == want) return;
  Fingerprint sent;
  sent.group = GroupOf(h[3], recv.group);
  sent.seq = h[0];
  sent.op = CollOp::kSend;
  sent.numel = h[1];
  sent.dtype = DtypeNameOf(h[2]);
  sent.root = recv.rank;
  sent.rank = src;
  throw CollectiveMismatch("point-to-point mismatch in group '" + recv.group + "': rank " +
                               std::to_string(src) + " sent " + sent.ToString() + " but rank " +
                               std::to_string(recv.rank) + " receives " + recv.ToString(),
                           sent, recv);
}

}  // namespace nccl
}  // namespace paradiff
