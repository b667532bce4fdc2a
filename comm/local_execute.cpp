// The arithmetic of the local backend's collectives, performed by the last rank to arrive for every
// rank of the group (see Note [Local rendezvous]). Inputs are read in rank order and staged in a
// private buffer before any output is written, so outputs may alias inputs (ZeRO's in-place
// gathers).
//
// Note [Reduction order]: a reduction is acc = in0; acc += in1; ...; acc += in(n-1), each step
// rounded to the tensor's dtype (avg then divides by n in that dtype; max is elementwise and
// propagates NaN). ReduceScatter computes exactly the AllReduce result and keeps a piece, so
// ReduceScatter + AllGather equals AllReduce bitwise.
#include <ATen/ops/empty.h>
#include <ATen/ops/maximum.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <tuple>

#include "comm/fresh.h"
#include "comm/local_group.h"
#include "comm/views.h"

namespace paradiff {
namespace local {

namespace {

// dst.copy_(src viewed with dst's sizes) (the same number of elements): a memmove where both are
// contiguous CPU tensors of one dtype, which the argument checks make every collective's (the same
// bytes without a trip through the dispatcher; the version counter bumped as copy_ bumps it), else
// copy_ itself.
void CopyInto(at::Tensor& dst, const at::Tensor& src) {
  if (dst.is_cpu() && src.is_cpu() && dst.scalar_type() == src.scalar_type() &&
      dst.numel() == src.numel() && dst.is_contiguous() && src.is_contiguous()) {
    if (dst.numel() > 0) std::memmove(dst.data_ptr(), src.data_ptr(), dst.nbytes());
    dst.unsafeGetTensorImpl()->bump_version();
    return;
  }
  dst.copy_(src.sizes() == dst.sizes() ? src : View(src, dst.sizes()));
}

// acc += x elementwise, in a loop for contiguous float32 / float64 CPU tensors (one correctly
// rounded addition per element, as add_'s kernel does), else add_ itself.
template <typename T>
void AddLoop(at::Tensor& acc, const at::Tensor& x) {
  T* a = static_cast<T*>(acc.data_ptr());
  const T* b = static_cast<const T*>(x.data_ptr());
  for (int64_t i = 0, n = acc.numel(); i < n; ++i) a[i] += b[i];
}

void AddInto(at::Tensor& acc, const at::Tensor& x) {
  const bool loop = acc.is_cpu() && x.is_cpu() && acc.scalar_type() == x.scalar_type() &&
                    acc.is_contiguous() && x.is_contiguous() && acc.numel() == x.numel();
  if (loop && acc.scalar_type() == at::kFloat) {
    AddLoop<float>(acc, x);
  } else if (loop && acc.scalar_type() == at::kDouble) {
    AddLoop<double>(acc, x);
  } else {
    acc.add_(x);
    return;
  }
  acc.unsafeGetTensorImpl()->bump_version();
}

at::Tensor Reduce(const std::vector<Slot*>& slots, ReduceOp op) {
  at::Tensor acc = Empty({slots[0]->in->numel()}, slots[0]->in->options());
  CopyInto(acc, *slots[0]->in);
  for (size_t r = 1; r < slots.size(); ++r) {
    const at::Tensor x = Reshape(*slots[r]->in, {-1});
    if (op == ReduceOp::kMax) {
      at::maximum_out(acc, acc, x);
    } else {
      AddInto(acc, x);
    }
  }
  if (op == ReduceOp::kAvg) acc.div_(static_cast<int64_t>(slots.size()));
  return acc;
}

std::vector<int64_t> Offsets(const std::vector<int64_t>& counts) {
  std::vector<int64_t> offsets(counts.size() + 1, 0);
  std::partial_sum(counts.begin(), counts.end(), offsets.begin() + 1);
  return offsets;
}

void AllReduce(const std::vector<Slot*>& slots) {
  const at::Tensor acc = Reduce(slots, slots[0]->reduce);
  for (Slot* s : slots) CopyInto(*s->out, acc);
}

void AllGather(const std::vector<Slot*>& slots) {
  const std::vector<int64_t>& counts = *slots[0]->counts;
  const std::vector<int64_t> offsets = Offsets(counts);
  at::Tensor gathered = slots[0]->in->new_empty({offsets.back()});
  for (size_t r = 0; r < slots.size(); ++r) {
    if (counts[r] > 0) {
      at::Tensor piece = Slice(gathered, offsets[r], counts[r]);
      CopyInto(piece, *slots[r]->in);
    }
  }
  for (Slot* s : slots) CopyInto(*s->out, gathered);
}

void ReduceScatter(const std::vector<Slot*>& slots) {
  const std::vector<int64_t>& counts = *slots[0]->counts;
  const std::vector<int64_t> offsets = Offsets(counts);
  const at::Tensor acc = Reduce(slots, slots[0]->reduce);
  for (size_t r = 0; r < slots.size(); ++r) {
    if (counts[r] > 0) CopyInto(*slots[r]->out, Slice(acc, offsets[r], counts[r]));
  }
}

void Broadcast(const std::vector<Slot*>& slots) {
  const auto root = static_cast<size_t>(slots[0]->fp.root);
  const at::Tensor& src = *slots[root]->in;
  for (size_t r = 0; r < slots.size(); ++r) {
    if (r != root) CopyInto(*slots[r]->out, src);
  }
}

}  // namespace

std::vector<std::shared_ptr<LocalGroup>> LocalGroup::Execute() {
  switch (slots_[0]->fp.op) {
    case CollOp::kAllReduce:
      AllReduce(slots_);
      break;
    case CollOp::kAllGather:
      AllGather(slots_);
      break;
    case CollOp::kReduceScatter:
      ReduceScatter(slots_);
      break;
    case CollOp::kBroadcast:
      Broadcast(slots_);
      break;
    case CollOp::kBarrier:
      break;
    case CollOp::kSplit:
      return ExecuteSplit();
    case CollOp::kSend:
    case CollOp::kRecv:
      throw std::logic_error(std::string("local backend: ") + Name(slots_[0]->fp.op) +
                             " is not a collective");
  }
  return {};
}

// Ranks with the same color form a group ordered by (key, parent rank). Names are the parent's name
// plus "/c<color>"; a parent's later splits append ".<k>" (its k-th split) so names stay unique.
std::vector<std::shared_ptr<LocalGroup>> LocalGroup::ExecuteSplit() {
  std::map<int, std::vector<std::tuple<int, int>>> by_color;  // color -> (key, parent rank)
  for (size_t r = 0; r < slots_.size(); ++r) {
    by_color[slots_[r]->color].emplace_back(slots_[r]->key, static_cast<int>(r));
  }
  const std::string suffix = splits_done_ == 0 ? "" : "." + std::to_string(splits_done_);
  ++splits_done_;
  std::vector<std::shared_ptr<LocalGroup>> created;
  for (auto& [color, ranks] : by_color) {
    std::sort(ranks.begin(), ranks.end());
    std::vector<int> members;
    members.reserve(ranks.size());
    for (const auto& kr : ranks) members.push_back(members_[std::get<1>(kr)]);
    auto group = std::make_shared<LocalGroup>(world_, name_ + "/c" + std::to_string(color) + suffix,
                                              std::move(members));
    for (size_t i = 0; i < ranks.size(); ++i) {
      Slot* s = slots_[std::get<1>(ranks[i])];
      s->new_group = group;
      s->new_rank = static_cast<int>(i);
    }
    created.push_back(std::move(group));
  }
  return created;
}

}  // namespace local
}  // namespace paradiff
