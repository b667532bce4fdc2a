// Names of the collective vocabulary, fingerprint comparison and printing, and the fingerprint
// sequencer shared by every backend and decorator (see Note [Fingerprint numbering]).
#include "comm/communicator.h"

#include <cstdio>
#include <sstream>
#include <utility>

namespace paradiff {

const char* Name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kAvg:
      return "avg";
    case ReduceOp::kMax:
      return "max";
  }
  return "unknown_reduce_op";
}

const char* Name(CollOp op) {
  switch (op) {
    case CollOp::kAllReduce:
      return "all_reduce";
    case CollOp::kAllGather:
      return "all_gather";
    case CollOp::kReduceScatter:
      return "reduce_scatter";
    case CollOp::kBroadcast:
      return "broadcast";
    case CollOp::kSend:
      return "send";
    case CollOp::kRecv:
      return "recv";
    case CollOp::kBarrier:
      return "barrier";
    case CollOp::kSplit:
      return "split";
  }
  return "unknown_coll_op";
}

namespace {

// AllGather and ReduceScatter let each rank pass its own numel; the counts vector (shape_hash) must
// agree instead.
bool IsGatherV(CollOp op) { return op == CollOp::kAllGather || op == CollOp::kReduceScatter; }

bool IsReduction(CollOp op) { return op == CollOp::kAllReduce || op == CollOp::kReduceScatter; }

}  // namespace

bool Fingerprint::SameCall(const Fingerprint& o) const {
  if (group != o.group || seq != o.seq || op != o.op || dtype != o.dtype || root != o.root ||
      shape_hash != o.shape_hash) {
    return false;
  }
  return IsGatherV(op) || numel == o.numel;
}

std::string Fingerprint::ToString() const {
  std::ostringstream os;
  os << group << "#" << seq << " " << Name(op) << " numel=" << numel << " dtype=" << dtype;
  if (IsReduction(op) && root >= 0 && root <= static_cast<int64_t>(ReduceOp::kMax)) {
    os << " op=" << Name(static_cast<ReduceOp>(root));
  } else if (op == CollOp::kSend) {
    os << " dst=" << root;
  } else if (op == CollOp::kRecv) {
    os << " src=" << root;
  } else {
    os << " root=" << root;
  }
  if (IsGatherV(op)) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(shape_hash));
    os << " counts#" << buf;
  }
  os << " rank=" << rank;
  return os.str();
}

uint64_t Fnv1a(const void* data, size_t n, uint64_t h) {
  constexpr uint64_t kFnvPrime = 1099511628211ULL;
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

uint64_t StringHash(const std::string& s) { return Fnv1a(s.data(), s.size()); }

uint64_t CountsHash(const std::vector<int64_t>& counts) {
  uint64_t h = kFnvOffset;
  auto mix = [&h](uint64_t v) {  // little-endian bytes whatever the platform's order
    unsigned char bytes[8];
    for (int byte = 0; byte < 8; ++byte) bytes[byte] = (v >> (8 * byte)) & 0xffU;
    h = Fnv1a(bytes, sizeof bytes, h);
  };
  mix(counts.size());
  for (int64_t c : counts) mix(static_cast<uint64_t>(c));
  return h;
}

std::string DtypeName(const at::Tensor& t) {
  if (!t.defined()) return "undefined";
  auto name = t.dtype().name();
  return std::string(name.data(), name.size());
}

FingerprintSequencer::FingerprintSequencer(std::string group, int rank, int size)
    : group_(std::move(group)), rank_(rank), send_seq_(size, 0), recv_seq_(size, 0) {}

Fingerprint FingerprintSequencer::Collective(CollOp op, int64_t numel, std::string dtype,
                                             int64_t root, uint64_t shape_hash) {
  Fingerprint fp;
  fp.group = group_;
  fp.seq = seq_++;
  fp.op = op;
  fp.numel = numel;
  fp.dtype = std::move(dtype);
  fp.root = root;
  fp.rank = rank_;
  fp.shape_hash = shape_hash;
  return fp;
}

Fingerprint FingerprintSequencer::PointToPoint(CollOp op, int64_t numel, std::string dtype,
                                               int peer) {
  std::vector<int64_t>& counters = op == CollOp::kSend ? send_seq_ : recv_seq_;
  Fingerprint fp;
  fp.group = group_;
  fp.seq = (peer >= 0 && peer < static_cast<int>(counters.size())) ? counters[peer]++ : -1;
  fp.op = op;
  fp.numel = numel;
  fp.dtype = std::move(dtype);
  fp.root = peer;
  fp.rank = rank_;
  return fp;
}

}  // namespace paradiff
