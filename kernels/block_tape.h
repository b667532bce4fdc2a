// A GPT block's backward written out by hand, for one device (see Note [Hand-written block
// backward] in block_tape.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "core/config.h"
#include "kernels/model.h"
#include "kernels/numerics.h"

namespace paradiff {

// A linear without a bias as at::linear runs it (a matmul): its input folded to 2-D for mm, or,
// where matmul does not fold it (a last dim that is not contiguous), both operands expanded to 3-D
// for bmm; the operands as the product saw them.
struct MatmulLinear {
  bool batched = false;
  std::vector<int64_t> in_sizes;
  at::Tensor x, w_t;
};

// What a block's backward reads, kept by its forward.
struct BlockTape {
  std::string prefix;  // "blocks.<i>"
  int64_t bs = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  bool swiglu = false;
  std::vector<std::pair<std::string, at::Tensor>> leaves;  // parameter name -> leaf (its dtype)
  // Layer norms: input, mean, rstd, weight and bias in the execution dtype.
  at::Tensor x, mean1, rstd1, w_ln1, b_ln1, h, mean2, rstd2, w_ln2, b_ln2;
  // Linears with a bias (addmm): their 2-D inputs and transposed weights; those without.
  at::Tensor y1_2d, wq_t, wkv_t, y2_2d, w1_t;
  MatmulLinear proj, fc2, gate_linear, up_linear;
  // Attention: the batched products' operands, the causal mask, the probabilities, the repeat
  // index of grouped kv heads (undefined without).
  at::Tensor q3, kt3, probs, probs3, v3, mask, repeat_index;
  // MLP: gelu's input, or swiglu's gate, silu(gate) and up.
  at::Tensor fc1_out, gate, silu_gate, up;
};

// True where BlockForward / BlockBackward give autograd's bits and the hand-written backward is
// on: a gpt model with no per-op rounding (Numerics::Round the identity).
bool HandBackwardApplies(const ModelConfig& model, const Numerics& num);

// Turns the hand-written backward on (the default) or off for the whole process, so that tests
// and benchmarks can set it beside autograd's.
void SetHandBackward(bool on);

// Block `block`'s forward on one device (GptForward's kBlock unit, bit for bit), keeping what
// BlockBackward needs in `tape`. Runs below autograd: nothing is recorded.
at::Tensor BlockForward(const ModelConfig& model, const Numerics& num, const ParamMap& params,
                        int64_t block, const at::Tensor& x, BlockTape& tape);

// The gradient of the block's input from the gradient of its output; each parameter's gradient
// (in the parameter's dtype and layout) is added to its leaf's grad, as autograd's AccumulateGrad
// does.
at::Tensor BlockBackward(const BlockTape& tape, const at::Tensor& grad_out);

// One device's forward and backward of every unit on one micro-batch (the reference's pass):
// returns the loss and leaves each leaf's gradient of loss * loss_mult in its grad, the blocks'
// by hand where HandBackwardApplies, everything else through autograd.
double OneDevicePass(const std::vector<Unit>& units, const ModelConfig& model, const Numerics& num,
                     const ParamMap& leaves, const MicroBatch& mb, double loss_mult);

}  // namespace paradiff
