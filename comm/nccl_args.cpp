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

}  // namespace

void Invalid(CollOp op, const std::string& rule) {
  throw std::invalid_argument(std::string(Name(op)) + ": " + rule);
}

void RequireTensor(CollOp op, const char* what, const at::Tensor& t, int device) {
  if (!t.defined()) Invalid(op, std::string(what) + " must be a defined tensor");
  if (t.is_cuda()) {
    if (t.device().index() != device)
      Invalid(op, std::string(what) + " is on cuda:" + std::to_string(t.device().index()) +
                      " but this rank's device is cuda:" + std::to_string(device));
  } else if (!t.device().is_cpu()) {
    Invalid(op, std::string(what) + " must be a CPU or CUDA tensor (nccl backend)");
  }
  if (!t.is_contiguous()) Invalid(op, std::string(what) + " must be contiguous");
}

void RequireFlat(CollOp op, const char* what, const at::Tensor& t, int device) {
  RequireTensor(op, what, t, device);
  if (t.dim() != 1)
    Invalid(op, std::string(what) + " must be 1-D (flat), got " + std::to_string(t.dim()) + "-D");
}

void RequireReducible(CollOp op, const at::Tensor& t, ReduceOp r) {
  switch (t.scalar_type()) {
    case at::kFloat:
    case at::kDouble:
    case at::kBFloat16:
    case at::kHalf:
      return;
    case at::kLong:
    case at::kInt:
    case at::kChar:
    case at::kByte:
      if (r == ReduceOp::kAvg) Invalid(op, "avg needs a floating dtype, got " + DtypeName(t));
      return;
    default:
      Invalid(op,
              "the nccl backend reduces float, double, BFloat16, Half, int64, int32, int8 and "
              "uint8, got " +
                  DtypeName(t));
  }
}

void RequireSameDtype(CollOp op, const at::Tensor& in, const at::Tensor& out) {
  if (in.scalar_type() != out.scalar_type())
    Invalid(op, "out dtype " + DtypeName(out) + " must equal in dtype " + DtypeName(in));
}

int64_t CheckCounts(CollOp op, const std::vector<int64_t>& counts, int size) {
  if (static_cast<int>(counts.size()) != size)
    Invalid(op, "counts.size()=" + std::to_string(counts.size()) + " must equal the group size " +
                    std::to_string(size));
  int64_t total = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] < 0)
      Invalid(op,
              "counts[" + std::to_string(r) + "]=" + std::to_string(counts[r]) + " must be >= 0");
    total += counts[r];
  }
  return total;
}

void CheckNumel(CollOp op, const char* what, const at::Tensor& t, int64_t want, const char* rule) {
  if (t.numel() != want)
    Invalid(op, std::string(what) + ".numel()=" + std::to_string(t.numel()) + " must equal " +
                    rule + "=" + std::to_string(want));
}

void CheckPeer(CollOp op, const char* what, int peer, int rank, int size) {
  if (peer < 0 || peer >= size)
    Invalid(op, std::string(what) + "=" + std::to_string(peer) + " out of range [0, " +
                    std::to_string(size) + ")");
  if (peer == rank) Invalid(op, std::string(what) + "=" + std::to_string(peer) + " is this rank");
}

void CheckRoot(CollOp op, int root, int size) {
  if (root < 0 || root >= size)
    Invalid(op, "root=" + std::to_string(root) + " out of range [0, " + std::to_string(size) + ")");
}

uint64_t StringHash(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
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
