// Argument checks of the Communicator collectives (arg_checks.h).
#include "comm/arg_checks.h"

#include <numeric>
#include <stdexcept>

namespace paradiff {
namespace comm_args {
namespace {

void RequireTensor(const ArgRules& rules, CollOp op, const char* what, const at::Tensor& t) {
  if (!t.defined()) Invalid(op, std::string(what) + " must be a defined tensor");
  if (rules.cuda_device >= 0 && t.is_cuda()) {
    if (t.device().index() != rules.cuda_device)
      Invalid(op, std::string(what) + " is on cuda:" + std::to_string(t.device().index()) +
                      " but this rank's device is cuda:" + std::to_string(rules.cuda_device));
  } else if (!t.device().is_cpu()) {
    Invalid(op, std::string(what) + " must be a " +
                    (rules.cuda_device >= 0 ? "CPU or CUDA" : "CPU") + " tensor (" + rules.backend +
                    " backend)");
  }
  if (!t.is_contiguous()) Invalid(op, std::string(what) + " must be contiguous");
}

void RequireFlat(const ArgRules& rules, CollOp op, const char* what, const at::Tensor& t) {
  RequireTensor(rules, op, what, t);
  if (t.dim() != 1)
    Invalid(op, std::string(what) + " must be 1-D (flat), got " + std::to_string(t.dim()) + "-D");
}

void RequireReducible(const ArgRules& rules, CollOp op, const at::Tensor& t, ReduceOp r) {
  const at::ScalarType st = t.scalar_type();
  if (rules.reduces != nullptr && !rules.reduces(st))
    Invalid(op, std::string("the ") + rules.backend + " backend reduces " + rules.reduces_what +
                    ", got " + DtypeName(t));
  const bool floating = at::isFloatingType(st);
  if (!floating && !at::isIntegralType(st, /*includeBool=*/false))
    Invalid(op, "reductions need a floating or integer dtype, got " + DtypeName(t));
  if (r == ReduceOp::kAvg && !floating)
    Invalid(op, "avg needs a floating dtype, got " + DtypeName(t));
}

void RequireSameDtype(CollOp op, const at::Tensor& in, const at::Tensor& out) {
  if (in.scalar_type() != out.scalar_type())
    Invalid(op, "out dtype " + DtypeName(out) + " must equal in dtype " + DtypeName(in));
}

// Checks counts against the group and returns their sum.
int64_t CheckCounts(CollOp op, const std::vector<int64_t>& counts, int size) {
  if (static_cast<int>(counts.size()) != size)
    Invalid(op, "counts.size()=" + std::to_string(counts.size()) + " must equal the group size " +
                    std::to_string(size));
  for (size_t r = 0; r < counts.size(); ++r)
    if (counts[r] < 0)
      Invalid(op,
              "counts[" + std::to_string(r) + "]=" + std::to_string(counts[r]) + " must be >= 0");
  return std::accumulate(counts.begin(), counts.end(), int64_t{0});
}

void CheckNumel(CollOp op, const char* what, const at::Tensor& t, int64_t want, const char* rule) {
  if (t.numel() != want)
    Invalid(op, std::string(what) + ".numel()=" + std::to_string(t.numel()) + " must equal " +
                    rule + "=" + std::to_string(want));
}

void CheckRange(CollOp op, const char* what, int value, int size) {
  if (value < 0 || value >= size)
    Invalid(op, std::string(what) + "=" + std::to_string(value) + " out of range [0, " +
                    std::to_string(size) + ")");
}

}  // namespace

void Invalid(CollOp op, const std::string& rule) {
  throw std::invalid_argument(std::string(Name(op)) + ": " + rule);
}

void CheckAllReduce(const ArgRules& rules, const at::Tensor& t, ReduceOp r) {
  RequireTensor(rules, CollOp::kAllReduce, "t", t);
  RequireReducible(rules, CollOp::kAllReduce, t, r);
}

int64_t CheckAllGather(const ArgRules& rules, const at::Tensor& in, const at::Tensor& out,
                       const std::vector<int64_t>& counts, int rank, int size) {
  const CollOp kOp = CollOp::kAllGather;
  RequireFlat(rules, kOp, "in", in);
  RequireFlat(rules, kOp, "out", out);
  RequireSameDtype(kOp, in, out);
  const int64_t total = CheckCounts(kOp, counts, size);
  CheckNumel(kOp, "in", in, counts[rank], "counts[rank]");
  CheckNumel(kOp, "out", out, total, "sum(counts)");
  return total;
}

int64_t CheckReduceScatter(const ArgRules& rules, const at::Tensor& in, const at::Tensor& out,
                           const std::vector<int64_t>& counts, ReduceOp r, int rank, int size) {
  const CollOp kOp = CollOp::kReduceScatter;
  RequireFlat(rules, kOp, "in", in);
  RequireFlat(rules, kOp, "out", out);
  RequireSameDtype(kOp, in, out);
  RequireReducible(rules, kOp, in, r);
  const int64_t total = CheckCounts(kOp, counts, size);
  CheckNumel(kOp, "in", in, total, "sum(counts)");
  CheckNumel(kOp, "out", out, counts[rank], "counts[rank]");
  return total;
}

void CheckBroadcast(const ArgRules& rules, const at::Tensor& t, int root, int size) {
  RequireTensor(rules, CollOp::kBroadcast, "t", t);
  CheckRange(CollOp::kBroadcast, "root", root, size);
}

void CheckPointToPoint(const ArgRules& rules, CollOp op, const at::Tensor& t, int peer, int rank,
                       int size) {
  if (op != CollOp::kSend && op != CollOp::kRecv)
    throw std::logic_error(std::string("CheckPointToPoint: ") + Name(op) + " is not send or recv");
  const char* what = op == CollOp::kSend ? "dst" : "src";
  RequireTensor(rules, op, "t", t);
  CheckRange(op, what, peer, size);
  if (peer == rank) Invalid(op, std::string(what) + "=" + std::to_string(peer) + " is this rank");
}

}  // namespace comm_args
}  // namespace paradiff
