#include "kernels/tensor_parallel.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include "comm/fresh.h"
#include "comm/views.h"
#include "kernels/tp_layout.h"

namespace paradiff {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The group rides through autograd as an integer: AutogradContext only stores IValues.
Communicator& GroupOf(AutogradContext* ctx) {
  return *reinterpret_cast<Communicator*>(ctx->saved_data["group"].toInt());
}

at::Tensor AllReduced(Communicator& g, const at::Tensor& x, ReduceOp op) {
  at::Tensor y = x.contiguous().clone();
  g.AllReduce(y, op);
  return y;
}

// [b, s_local, h] -> [b, s_local * n, h], rank-ordered chunks along the sequence.
at::Tensor GatherSeq(Communicator& g, const at::Tensor& x) {
  at::Tensor t = Contiguous(Transpose(x, 0, 1));
  const int64_t n = g.size();
  at::Tensor out = Empty({t.numel() * n}, t.options());
  g.AllGather(View(t, {-1}), out, std::vector<int64_t>(n, t.numel()));
  return Contiguous(Transpose(View(out, {t.size(0) * n, t.size(1), t.size(2)}), 0, 1));
}

// [b, s, h] partial sums -> this rank's [b, s / n, h] chunk of the sum.
at::Tensor ScatterSeq(Communicator& g, const at::Tensor& x) {
  at::Tensor t = Contiguous(Transpose(x, 0, 1));
  const int64_t n = g.size(), chunk = t.numel() / n;
  at::Tensor out = Empty({chunk}, t.options());
  g.ReduceScatter(View(t, {-1}), out, std::vector<int64_t>(n, chunk), ReduceOp::kSum);
  return Contiguous(Transpose(View(out, {t.size(0) / n, t.size(1), t.size(2)}), 0, 1));
}

struct CopyToRegion : torch::autograd::Function<CopyToRegion> {  // f
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, int64_t group) {
    ctx->saved_data["group"] = group;
    return x.view_as(x).clone();
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {AllReduced(GroupOf(ctx), g[0], ReduceOp::kSum), at::Tensor()};
  }
};

struct ReduceFromRegion : torch::autograd::Function<ReduceFromRegion> {  // g
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, int64_t group) {
    ctx->saved_data["group"] = group;
    return AllReduced(*reinterpret_cast<Communicator*>(group), x, ReduceOp::kSum);
  }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0], at::Tensor()}; }
};

struct GatherFromSeq : torch::autograd::Function<GatherFromSeq> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, int64_t group) {
    ctx->saved_data["group"] = group;
    return GatherSeq(*reinterpret_cast<Communicator*>(group), x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {ScatterSeq(GroupOf(ctx), g[0]), at::Tensor()};
  }
};

struct ScatterToSeq : torch::autograd::Function<ScatterToSeq> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, int64_t group) {
    ctx->saved_data["group"] = group;
    return ScatterSeq(*reinterpret_cast<Communicator*>(group), x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {GatherSeq(GroupOf(ctx), g[0]), at::Tensor()};
  }
};

// [..., c] on each rank -> [..., c * n], rank-ordered chunks along the last dimension.
at::Tensor GatherLast(Communicator& g, const at::Tensor& x) {
  at::Tensor t = x.movedim(-1, 0).contiguous();
  const int64_t n = g.size();
  at::Tensor out = Empty({t.numel() * n}, t.options());
  g.AllGather(t.reshape({-1}), out, std::vector<int64_t>(n, t.numel()));
  std::vector<int64_t> shape = t.sizes().vec();
  shape[0] *= n;
  return out.view(shape).movedim(0, -1).contiguous();
}

struct GatherFromFeatures : torch::autograd::Function<GatherFromFeatures> {
  static at::Tensor forward(AutogradContext* ctx, at::Tensor x, int64_t group) {
    Communicator& g = *reinterpret_cast<Communicator*>(group);
    ctx->saved_data["begin"] = g.rank() * x.size(-1);
    ctx->saved_data["cols"] = x.size(-1);
    return GatherLast(g, x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const int64_t begin = ctx->saved_data["begin"].toInt(), cols = ctx->saved_data["cols"].toInt();
    return {g[0].narrow(-1, begin, cols).contiguous(), at::Tensor()};
  }
};

}  // namespace

TensorParallel::TensorParallel(Communicator& group, const ModelConfig& model, bool sp,
                               const FaultSet& faults)
    : group_(group),
      size_(group.size()),
      rank_(group.rank()),
      sp_(sp && group.size() > 1),
      vocab_(model.vocab),
      vocab_per_rank_(PaddedVocab(model, group.size()) / group.size()),
      // BUG (zoo: tp.vocab_padding_in_loss): the padded vocabulary entries are left in the
      // softmax; only visible when tp > 1 pads the vocabulary.
      mask_vocab_padding_(!faults.tp_vocab_padding_in_loss) {}

at::Tensor TensorParallel::EnterColumnParallel(const at::Tensor& x) {
  if (size_ == 1) return x;
  const auto id = reinterpret_cast<int64_t>(&group_);
  return sp_ ? GatherFromSeq::apply(x, id) : CopyToRegion::apply(x, id);
}

at::Tensor TensorParallel::ExitRowParallel(const at::Tensor& x) {
  if (size_ == 1) return x;
  const auto id = reinterpret_cast<int64_t>(&group_);
  return sp_ ? ScatterToSeq::apply(x, id) : ReduceFromRegion::apply(x, id);
}

// CopyToRegion's forward is a clone; below autograd nothing writes to x, so x itself serves.
at::Tensor TensorParallel::EnterColumnParallelForward(const at::Tensor& x) {
  return sp_ ? GatherSeq(group_, x) : x;
}

at::Tensor TensorParallel::EnterColumnParallelBackward(const at::Tensor& grad) {
  return sp_ ? ScatterSeq(group_, grad) : AllReduced(group_, grad, ReduceOp::kSum);
}

at::Tensor TensorParallel::ExitRowParallelForward(const at::Tensor& x) {
  return sp_ ? ScatterSeq(group_, x) : AllReduced(group_, x, ReduceOp::kSum);
}

at::Tensor TensorParallel::ExitRowParallelBackward(const at::Tensor& grad) {
  return sp_ ? GatherSeq(group_, grad) : grad;
}

at::Tensor TensorParallel::AllReduceSumForward(const at::Tensor& x) {
  return AllReduced(group_, x, ReduceOp::kSum);
}

at::Tensor TensorParallel::GatherOutput(const at::Tensor& x) {
  if (size_ == 1) return x;
  return GatherFromFeatures::apply(x, reinterpret_cast<int64_t>(&group_));
}

at::Tensor TensorParallel::AllReduceSum(const at::Tensor& x) {
  if (size_ == 1) return x;
  return ReduceFromRegion::apply(x, reinterpret_cast<int64_t>(&group_));
}

at::Tensor TensorParallel::AllReduceMax(const at::Tensor& x) {
  if (size_ == 1) return x.detach();
  return AllReduced(group_, x.detach(), ReduceOp::kMax);
}

}  // namespace paradiff
