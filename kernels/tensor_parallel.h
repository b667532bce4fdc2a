// TensorParallel: the tensor- and sequence-parallel boundaries the model crosses on one rank, as
// differentiable collectives over the rank's tensor-parallel group (Megatron's f / g operators and
// their sequence-parallel variants). The reference runs the same model with no TensorParallel
// (nullptr): every boundary is then the identity and nothing communicates.
//   EnterColumnParallel: no sp: identity forward, all-reduce backward (f);
//                        sp: all-gather along the sequence forward, reduce-scatter backward.
//   ExitRowParallel:     no sp: all-reduce forward, identity backward (g);
//                        sp: reduce-scatter along the sequence forward, all-gather backward.
//   GatherOutput:        all-gather along the last dimension forward (a column-parallel layer's
//                        output made whole, Megatron's gather_output), own slice backward.
//   AllReduceSum: g.   AllReduceMax: forward only (no gradient).
// Activations are [batch, seq, hidden]; under sp each rank holds seq_len / tp positions.
#pragma once

#include <ATen/core/Tensor.h>

#include "comm/communicator.h"
#include "core/config.h"
#include "kernels/faults.h"

namespace paradiff {

class TensorParallel {
 public:
  TensorParallel(Communicator& group, const ModelConfig& model, bool sp, const FaultSet& faults);

  int64_t size() const { return size_; }
  int64_t rank() const { return rank_; }
  bool sp() const { return sp_; }
  Communicator& group() { return group_; }

  at::Tensor EnterColumnParallel(const at::Tensor& x);
  at::Tensor ExitRowParallel(const at::Tensor& x);
  at::Tensor GatherOutput(const at::Tensor& x);
  at::Tensor AllReduceSum(const at::Tensor& x);
  at::Tensor AllReduceMax(const at::Tensor& x);

  // The two boundaries below autograd, for a unit whose backward is written by hand
  // (kernels/hand_backward.h): each forward, and the backward that EnterColumnParallel's and
  // ExitRowParallel's autograd functions run (tp > 1). Without sp: the identity, and an all-reduce
  // of the input gradient; an all-reduce, and the identity. With sp: a gather along the sequence
  // and a reduce-scatter back; a reduce-scatter, and a gather.
  at::Tensor EnterColumnParallelForward(const at::Tensor& x);
  at::Tensor EnterColumnParallelBackward(const at::Tensor& grad);
  at::Tensor ExitRowParallelForward(const at::Tensor& x);
  at::Tensor ExitRowParallelBackward(const at::Tensor& grad);
  // AllReduceSum below autograd (its backward is the identity).
  at::Tensor AllReduceSumForward(const at::Tensor& x);

  // Vocabulary shard of this rank: rows [vocab_begin, vocab_begin + vocab_per_rank) of the padded
  // vocabulary; rows >= model.vocab are padding.
  int64_t vocab_begin() const { return rank_ * vocab_per_rank_; }
  int64_t vocab_per_rank() const { return vocab_per_rank_; }
  int64_t vocab() const { return vocab_; }
  // Whether padded vocabulary logits are masked out of the softmax (the zoo switch turns it off).
  bool mask_vocab_padding() const { return mask_vocab_padding_; }
  // First sequence position this rank holds (0 without sp).
  int64_t seq_begin(int64_t seq_len) const { return sp_ ? rank_ * (seq_len / size_) : 0; }

 private:
  Communicator& group_;
  int64_t size_, rank_;
  bool sp_;
  int64_t vocab_, vocab_per_rank_;
  bool mask_vocab_padding_;
};

}  // namespace paradiff
