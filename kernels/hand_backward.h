// The model's units with their backward written out by hand, on one device or on a
// tensor-parallel rank (see Note [Hand-written backward] in hand_backward.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "kernels/data.h"
#include "kernels/model.h"
#include "kernels/numerics.h"

namespace paradiff {

class TensorParallel;

// A linear without a bias as at::linear runs it (a matmul): its input folded to 2-D for mm, or,
// where matmul does not fold it (a last dim that is not contiguous), both operands expanded to 3-D
// for bmm; the operands as the product saw them.
struct MatmulLinear {
  bool batched = false;
  std::vector<int64_t> in_sizes;
  at::Tensor x, w_t;
};

// What a unit's backward reads, kept by its forward.
struct HandTape {
  UnitKind kind = UnitKind::kBlock;
  bool fp16 = false;             // fp16 emulated: every Round's gradient rounded to fp16 too
  std::string prefix;            // "blocks.<i>" for a block; the logits' weight for the head
  TensorParallel* tp = nullptr;  // the unit's tensor-parallel collectives (tp > 1), else none
  std::vector<std::pair<std::string, at::Tensor>> leaves;  // parameter name -> leaf (its dtype)
  // seq: the attention's sequence (whole under sequence parallelism; the block's input holds
  // this rank's part).
  int64_t bs = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool swiglu = false;
  // Layer norms (ln1 and ln2; the head's is ln1): input, mean, rstd, weight and bias in the
  // execution dtype.
  at::Tensor x, mean1, rstd1, w_ln1, b_ln1, h, mean2, rstd2, w_ln2, b_ln2;
  // Linears with a bias (addmm): their 2-D inputs and transposed weights; those without.
  at::Tensor y1_2d, wq_t, wkv_t, y2_2d, w1_t;
  MatmulLinear proj, fc2, gate_linear, up_linear, logits;
  // Attention: the batched products' operands, the causal mask, the probabilities, the repeat
  // index of grouped kv heads (undefined without).
  at::Tensor q3, kt3, probs, probs3, v3, mask, repeat_index;
  // MLP: gelu's input, or swiglu's gate, silu(gate) and up.
  at::Tensor fc1_out, gate, silu_gate, up;
  // Embedding: the token ids, the table's rows; position embeddings added.
  at::Tensor tokens;
  int64_t vocab = 0;
  bool positions = false;
  // Head: the logits' dtype before the loss's, log-probabilities, targets, nll_loss's total weight.
  at::ScalarType logits_dtype = at::kFloat;
  at::Tensor log_probs, targets, total_weight;
  // Under tensor parallelism (the vocabulary-parallel lookup and cross-entropy): whether this
  // rank's vocabulary rows hold each token or target (`tokens` holding its row, 0 where not), the
  // padded logit columns (undefined where not masked), exp(logits - max) and its sum over the
  // ranks.
  at::Tensor vocab_inside, vocab_padded, exp_shifted, sum_exp;
  // The position table's rows and the first one this rank adds (0 without sp).
  int64_t position_rows = 0, seq_begin = 0;
};

// True where HandForward / HandBackward give autograd's bits and the hand-written backward is on:
// a gpt model whose numerics round deterministically (not at random).
bool HandBackwardApplies(const ModelConfig& model, const Numerics& num);

// Turns the hand-written backward on (the default) or off for the whole process, so that tests
// and benchmarks can set it beside autograd's.
void SetHandBackward(bool on);

// `unit`'s forward on one device (GptForward, bit for bit), keeping what HandBackward needs in
// `tape`; with `tp` (tp > 1) the unit as GptForwardParallel runs it, its collectives included.
// Runs below autograd: nothing is recorded.
at::Tensor HandForward(const Unit& unit, const ModelConfig& model, const Numerics& num,
                       const ParamMap& params, const at::Tensor& x, const MicroBatch& mb,
                       HandTape& tape, TensorParallel* tp = nullptr);

// The unit's backward: from the gradient of its output, or for the head from loss_mult (the
// gradient of loss * loss_mult). Adds each parameter's gradient (in the parameter's dtype and
// layout) to its leaf's grad, as autograd's AccumulateGrad does; returns the gradient of the
// unit's input (undefined for the embedding).
at::Tensor HandBackward(const HandTape& tape, const at::Tensor& grad_out, double loss_mult);

// One device's forward and backward of every unit on one micro-batch (the reference's pass):
// returns the loss and leaves each leaf's gradient of loss * loss_mult in its grad, by hand where
// HandBackwardApplies, through autograd otherwise.
double OneDevicePass(const std::vector<Unit>& units, const ModelConfig& model, const Numerics& num,
                     const ParamMap& leaves, const MicroBatch& mb, double loss_mult);

}  // namespace paradiff
