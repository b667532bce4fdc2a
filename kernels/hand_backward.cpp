#include "kernels/hand_backward.h"

#include <ATen/ATen.h>
#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "comm/fresh.h"
#include "comm/views.h"
#include "kernels/tensor_parallel.h"

namespace paradiff {

// Note [Hand-written backward]: on tensors of a few hundred elements LibTorch's autograd costs
// about as much as the arithmetic it records: every operator passes the autograd layer, makes a
// node and saves its inputs, and backward runs each node's formula through the engine. The units
// of a model without tensor parallelism (the reference's passes, the engine's ranks at tp 1:
// RankEngine::ByHand) skip it: HandForward runs GptForward's unit (kernels/model.cpp) below
// autograd and keeps what backward reads; HandBackward makes the calls autograd's formulas make
// (tools/autograd/derivatives.yaml and FunctionsManual.cpp of LibTorch 1.13), on tensors of the
// same layouts, in the same order wherever the order decides a bit:
// - at::linear: with a bias on a contiguous 3-D input, addmm on the input viewed as 2-D; without
//   one, matmul's fold: mm on the reshaped input, then _unsafe_view, or where matmul does not fold
//   (a last dim that is not contiguous) bmm on both operands expanded. The attention's 4-D
//   products expand and reshape their operands to 3-D and call bmm.
// - mm's backward (mm_mat1_backward / mm_mat2_backward) picks its product by the saved
//   operand's strides; a broadcast operand gets sum_to (a sum over the broadcast dims, keepdim,
//   then a view), as the engine's validate_outputs and expand's backward do.
// - softmax, log_softmax, nll_loss, masked_fill, gelu, silu, layer norm and the scale: their
//   backward kernels as the formulas call them (silu_backward: backward runs with grad mode off);
//   the loss's gradient is loss_mult in the loss's dtype (ones times the multiplier).
// - narrow (slice_backward: zeros with the slice copied in), the grouped kv heads'
//   repeat_interleave and the embedding's lookup (index_select's backward: zeros, then index_add_
//   in index order); two gradients meeting at a tensor are added once (InputBuffer: old + new;
//   addition commutes bit for bit).
// - a parameter converted to the execution dtype gets its gradient converted back (_to_copy's
//   backward), then accumulated into the leaf's grad as AccumulateGrad does (a tied embedding's
//   two gradients added there).
// - fp16 emulated (Numerics::Round is to(half).to(float) after each op the model rounds): the
//   forward rounds where GptForward does, and the gradient flowing into each rounded value is
//   rounded the same way (the two _to_copy backwards), after the gradients meeting there are
//   added; softmax's backward reads its unrounded output, as autograd saves it.
// - under tensor parallelism (the engine's ranks at tp > 1), the units' collectives run below
//   autograd as their autograd functions run them (TensorParallel's *Forward / *Backward): the
//   gradient entering a row-parallel product's output goes through ExitRowParallel's backward,
//   the gradient of a column-parallel region's input through EnterColumnParallel's, before the
//   rounding and the layer norm it flows into; the vocabulary-parallel lookup's and
//   cross-entropy's formulas are those of masked_fill, index_select, gather (zeros, then
//   scatter_add_), exp, sum, log, neg and mean (the gradient divided by the count), with the
//   gradients of the two sums over tp passed through and none for the global max.
// Randomly rounded twins (their rounding hooks draw from a generator) and the exact_linear model
// stay on autograd.
// tests/unit/hand_backward_test.cpp holds the loss and every gradient bitwise to autograd's over
// random models (fp32, fp64, bf16, fp16 emulated; gelu and swiglu; grouped kv heads; tied and
// untied tables; 16-bit parameters) and the engine's ranks bitwise to their autograd runs;
// `bench_digest` is unchanged; `bench_check_throughput`'s hand_backward argument sets both side
// by side (docs/PERFORMANCE.md).
//
namespace {

// mm_mat1_backward / mm_mat2_backward (alpha 1, real dtypes).
at::Tensor MmMat1Backward(const at::Tensor& grad, const at::Tensor& mat2, const at::Tensor& mat1) {
  if (mat1.stride(0) == 1 && mat1.stride(1) == mat1.size(0)) return T(mat2.mm(T(grad)));
  return grad.mm(T(mat2));
}

at::Tensor MmMat2Backward(const at::Tensor& grad, const at::Tensor& mat1, const at::Tensor& mat2) {
  if (mat2.stride(0) == 1 && mat2.stride(1) == mat2.size(0)) return T(T(grad).mm(mat1));
  return T(mat1).mm(grad);
}

// at::sum_to(grad, {grad.size(-1)}): a bias broadcast over every leading dim.
at::Tensor SumToBias(const at::Tensor& grad) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d + 1 < grad.dim(); ++d) dims.push_back(d);
  return View(grad.sum(dims, /*keepdim=*/true), {grad.size(-1)});
}

// A linear with a bias on a contiguous 3-D input (at::linear's addmm path).
at::Tensor AddmmLinear(const at::Tensor& x2d, const at::Tensor& w_t, const at::Tensor& bias,
                       int64_t bs, int64_t s) {
  return View(at::addmm(bias, x2d, w_t), {bs, s, w_t.size(1)});
}

// A linear without a bias on a 3-D input: matmul(x, w_t), folded where matmul's should_fold
// folds it.
at::Tensor Matmul(const at::Tensor& x, const at::Tensor& w_t, MatmulLinear& l) {
  const int64_t bs = x.size(0), s = x.size(1), in = x.size(2), out = w_t.size(1);
  l.in_sizes = x.sizes().vec();
  l.batched = x.stride(2) != 1 && x.stride(0) == s * in;
  if (!l.batched) {
    l.x = Reshape(x, {bs * s, in});
    l.w_t = w_t;
    return View(l.x.mm(w_t), {bs, s, out});
  }
  l.x = Reshape(Expand(x, {bs, s, in}), {bs, s, in});
  l.w_t = Reshape(Expand(w_t, {bs, in, out}), {bs, in, out});
  return View(at::bmm(l.x, l.w_t), {bs, s, out});
}

// Backward of x2d.mm(w_t) from its gradient g2: the weight's gradient (w_t's, transposed back) and
// the input's, reshaped to `in_sizes`.
at::Tensor MmBackward(const at::Tensor& g2, const at::Tensor& x2d, const at::Tensor& w_t,
                      at::IntArrayRef in_sizes, at::Tensor* grad_w) {
  *grad_w = T(MmMat2Backward(g2, x2d, w_t));
  return Reshape(MmMat1Backward(g2, w_t, x2d), in_sizes);
}

// Backward of a linear with a bias (addmm) from its 3-D output gradient: the input's gradient (of
// `in_sizes`), the weight's and the bias's.
at::Tensor AddmmBackward(const at::Tensor& grad3, const at::Tensor& x2d, const at::Tensor& w_t,
                         at::IntArrayRef in_sizes, at::Tensor* grad_w, at::Tensor* grad_b) {
  const at::Tensor g2 = Reshape(grad3, {x2d.size(0), w_t.size(1)});
  *grad_b = SumToBias(g2);
  return MmBackward(g2, x2d, w_t, in_sizes, grad_w);
}

// Backward of Matmul: the input's gradient and the weight's.
at::Tensor MatmulBackward(const at::Tensor& grad3, const MatmulLinear& l, at::Tensor* grad_w) {
  if (!l.batched)
    return MmBackward(Reshape(grad3, {l.x.size(0), l.w_t.size(1)}), l.x, l.w_t, l.in_sizes, grad_w);
  const at::Tensor g3 = Reshape(grad3, {l.x.size(0), l.x.size(1), l.w_t.size(2)});
  const at::Tensor gw = Reshape(Transpose(l.x, 1, 2).bmm(g3), l.w_t.sizes());
  *grad_w =
      T(View(gw.sum(0, /*keepdim=*/true), {l.w_t.size(1), l.w_t.size(2)}));  // expand's sum_to
  return Reshape(g3.bmm(Transpose(l.w_t, 1, 2)), l.in_sizes);
}

// narrow(-1, start, length)'s backward on a tensor of `sizes`.
at::Tensor NarrowBackward(const at::Tensor& grad, at::IntArrayRef sizes, int64_t start,
                          int64_t length) {
  at::Tensor full = Zeros(sizes, grad.options());
  Narrow(full, -1, start, length).copy_(grad);
  return full;
}

void Accumulate(const at::Tensor& leaf, at::Tensor grad) {
  grad = AsDType(grad, leaf.scalar_type());
  if (grad.strides() != leaf.strides()) grad = grad.contiguous();
  at::Tensor& cur = leaf.mutable_grad();
  if (cur.defined()) {
    cur.add_(grad);
  } else {
    cur = grad;
  }
}

std::atomic<bool> g_hand_backward{true};

// The gradient through a Numerics::Round: with fp16 emulated, Round is to(half).to(float), whose
// backward rounds the gradient the same way; the identity otherwise.
at::Tensor RoundGrad(const HandTape& t, const at::Tensor& g) {
  return t.fp16 ? RoundThrough(g, at::kHalf) : g;
}

// A parameter in the execution dtype, its leaf kept for the gradient.
at::Tensor In(const Numerics& n, const ParamMap& p, const std::string& name, HandTape& t) {
  const at::Tensor& leaf = Param(p, name);
  t.leaves.emplace_back(name, leaf);
  return n.In(leaf);
}

// The tensor-parallel boundaries of a block and of the head (GptForwardParallel's), or none
// without tp.
at::Tensor Enter(const HandTape& t, const at::Tensor& x) {
  return t.tp ? t.tp->EnterColumnParallelForward(x) : x;
}
at::Tensor EnterBackward(const HandTape& t, const at::Tensor& g) {
  return t.tp ? t.tp->EnterColumnParallelBackward(g) : g;
}
at::Tensor Exit(const HandTape& t, const at::Tensor& x) {
  return t.tp ? t.tp->ExitRowParallelForward(x) : x;
}
at::Tensor ExitBackward(const HandTape& t, const at::Tensor& g) {
  return t.tp ? t.tp->ExitRowParallelBackward(g) : g;
}

// GptForward's block, or with t.tp GptForwardParallel's: ln1 and ln2 on this rank's part of the
// sequence, the attention and the MLP on the whole sequence (under sp) with this rank's heads and
// ffn columns, each entered and left through the tensor-parallel boundaries.
at::Tensor BlockForward(const ModelConfig& m, const Numerics& n, const ParamMap& p, int64_t block,
                        const at::Tensor& x, HandTape& t) {
  t.prefix = "blocks." + std::to_string(block);
  auto in = [&](const char* name) { return In(n, p, t.prefix + name, t); };
  const int64_t bs = x.size(0), H = x.size(2), hd = HeadDim(m);
  t.bs = bs;
  t.head_dim = hd;
  t.swiglu = m.activation == Activation::kSwiglu;
  t.x = x;

  // Attention on ln1(x).
  t.w_ln1 = in(".ln1.weight");
  t.b_ln1 = in(".ln1.bias");
  auto ln1 = at::native_layer_norm(x, {H}, t.w_ln1, t.b_ln1, kLayerNormEps);
  t.mean1 = std::get<1>(ln1);
  t.rstd1 = std::get<2>(ln1);
  const at::Tensor y1 = Enter(t, n.Round(std::get<0>(ln1)));
  const int64_t s = y1.size(1);
  t.seq = s;
  t.y1_2d = View(y1, {bs * s, H});
  const at::Tensor wq = in(".attn.q.weight"), wkv = in(".attn.kv.weight");
  const at::Tensor bq = in(".attn.q.bias"), bkv = in(".attn.kv.bias");
  const int64_t heads = wq.size(0) / hd, K = wkv.size(0) / (2 * hd);
  t.heads = heads;
  t.kv_heads = K;
  t.wq_t = T(wq);
  t.wkv_t = T(wkv);
  const at::Tensor q =
      Transpose(View(n.Round(AddmmLinear(t.y1_2d, t.wq_t, bq, bs, s)), {bs, s, heads, hd}), 1, 2);
  const at::Tensor kv = n.Round(AddmmLinear(t.y1_2d, t.wkv_t, bkv, bs, s));
  at::Tensor k = Transpose(View(Narrow(kv, -1, 0, K * hd), {bs, s, K, hd}), 1, 2);
  at::Tensor v = Transpose(View(Narrow(kv, -1, K * hd, K * hd), {bs, s, K, hd}), 1, 2);
  if (K < heads) {  // repeat_interleave(heads / K, 1): an index_select
    t.repeat_index = at::repeat_interleave(at::full({K}, heads / K, at::kLong));
    k = k.index_select(1, t.repeat_index);
    v = v.index_select(1, t.repeat_index);
  }
  const int64_t B = bs * heads;
  t.q3 = Reshape(Expand(q, {bs, heads, s, hd}), {B, s, hd});
  t.kt3 = Reshape(Expand(Transpose(k, -2, -1), {bs, heads, hd, s}), {B, hd, s});
  const at::Tensor raw = at::_unsafe_view(at::bmm(t.q3, t.kt3), {bs, heads, s, s});
  t.mask = at::ones({s, s}, at::TensorOptions().dtype(at::kBool)).triu(1);
  const at::Tensor masked = n.Round(raw * (1.0 / std::sqrt(double(hd))))
                                .masked_fill(t.mask, -std::numeric_limits<double>::infinity());
  t.probs = at::_softmax(masked, -1, false);  // its backward reads the unrounded output
  t.probs3 = Reshape(Expand(n.Round(t.probs), {bs, heads, s, s}), {B, s, s});
  t.v3 = Reshape(Expand(v, {bs, heads, s, hd}), {B, s, hd});
  const at::Tensor o4 = n.Round(at::_unsafe_view(at::bmm(t.probs3, t.v3), {bs, heads, s, hd}));
  const at::Tensor o = Reshape(Transpose(o4, 1, 2), {bs, s, heads * hd});
  const at::Tensor a = Exit(t, n.Round(Matmul(o, T(in(".attn.proj.weight")), t.proj)));
  t.h = n.Round(x + n.Round(a + in(".attn.proj.bias")));

  // MLP on ln2(h).
  t.w_ln2 = in(".ln2.weight");
  t.b_ln2 = in(".ln2.bias");
  auto ln2 = at::native_layer_norm(t.h, {H}, t.w_ln2, t.b_ln2, kLayerNormEps);
  t.mean2 = std::get<1>(ln2);
  t.rstd2 = std::get<2>(ln2);
  const at::Tensor y2 = Enter(t, n.Round(std::get<0>(ln2)));
  t.y2_2d = View(y2, {bs * s, H});
  at::Tensor act;
  if (t.swiglu) {
    t.gate = n.Round(Matmul(y2, T(in(".mlp.gate.weight")), t.gate_linear));
    t.up = n.Round(Matmul(y2, T(in(".mlp.up.weight")), t.up_linear));
    t.silu_gate = n.Round(at::silu(t.gate));
    act = n.Round(t.silu_gate * t.up);
  } else {
    const at::Tensor b1 = in(".mlp.fc1.bias");
    t.w1_t = T(in(".mlp.fc1.weight"));
    t.fc1_out = n.Round(AddmmLinear(t.y2_2d, t.w1_t, b1, bs, s));
    act = n.Round(at::gelu(t.fc1_out));
  }
  const at::Tensor f = Exit(t, n.Round(Matmul(act, T(in(".mlp.fc2.weight")), t.fc2)));
  return n.Round(t.h + n.Round(f + in(".mlp.fc2.bias")));
}

at::Tensor BlockBackward(const HandTape& t, const at::Tensor& grad_out,
                         std::unordered_map<std::string, at::Tensor>& grads) {
  const int64_t bs = t.bs, s = t.seq, hd = t.head_dim, heads = t.heads, K = t.kv_heads;
  const int64_t H = t.x.size(2), B = bs * heads;
  const std::string& b = t.prefix;
  auto rg = [&](const at::Tensor& g) { return RoundGrad(t, g); };  // through each Round
  at::Tensor gw, gb;

  // out = h + (f + fc2.bias), f = fc2(act)
  const at::Tensor g_out = rg(grad_out), g_f = rg(g_out);
  grads[b + ".mlp.fc2.bias"] = SumToBias(g_f);
  const at::Tensor g_act = rg(MatmulBackward(rg(ExitBackward(t, g_f)), t.fc2, &gw));
  grads[b + ".mlp.fc2.weight"] = gw;
  at::Tensor g_y2;
  if (t.swiglu) {  // act = silu(gate(y2)) * up(y2)
    const at::Tensor g_silu = g_act * t.up, g_up = g_act * t.silu_gate;
    const at::Tensor from_gate =
        MatmulBackward(rg(at::silu_backward(rg(g_silu), t.gate)), t.gate_linear, &gw);
    grads[b + ".mlp.gate.weight"] = gw;
    const at::Tensor from_up = MatmulBackward(rg(g_up), t.up_linear, &gw);
    grads[b + ".mlp.up.weight"] = gw;
    g_y2 = from_gate + from_up;
  } else {  // act = gelu(fc1(y2))
    g_y2 = AddmmBackward(rg(at::gelu_backward(g_act, t.fc1_out)), t.y2_2d, t.w1_t, {bs, s, H}, &gw,
                         &gb);
    grads[b + ".mlp.fc1.weight"] = gw;
    grads[b + ".mlp.fc1.bias"] = gb;
  }
  auto ln2 = at::native_layer_norm_backward(rg(EnterBackward(t, g_y2)), t.h, {H}, t.mean2, t.rstd2,
                                            t.w_ln2, t.b_ln2, {true, true, true});
  grads[b + ".ln2.weight"] = std::get<1>(ln2);
  grads[b + ".ln2.bias"] = std::get<2>(ln2);
  const at::Tensor g_h = rg(g_out + std::get<0>(ln2)), g_a = rg(g_h);

  // h = x + (a + proj.bias), a = proj(o), o = (probs @ v) with its heads side by side
  grads[b + ".attn.proj.bias"] = SumToBias(g_a);
  const at::Tensor g_o = MatmulBackward(rg(ExitBackward(t, g_a)), t.proj, &gw);
  grads[b + ".attn.proj.weight"] = gw;
  const at::Tensor g_o3 =
      Reshape(rg(Transpose(Reshape(g_o, {bs, s, heads, hd}), 1, 2)), {B, s, hd});
  const at::Tensor g_probs = rg(Reshape(g_o3.bmm(Transpose(t.v3, 1, 2)), {bs, heads, s, s}));
  const at::Tensor g_v = Reshape(Transpose(t.probs3, 1, 2).bmm(g_o3), {bs, heads, s, hd});
  // probs = softmax(masked_fill(q @ k^T * scale))
  const at::Tensor g_masked =
      at::_softmax_backward_data(g_probs, t.probs, -1, t.probs.scalar_type());
  const at::Tensor g_raw3 =
      Reshape(rg(g_masked.masked_fill(t.mask, 0)) * (1.0 / std::sqrt(double(hd))), {B, s, s});
  const at::Tensor g_q = Reshape(g_raw3.bmm(Transpose(t.kt3, 1, 2)), {bs, heads, s, hd});
  at::Tensor g_k =
      Transpose(Reshape(Transpose(t.q3, 1, 2).bmm(g_raw3), {bs, heads, hd, s}), -2, -1);
  at::Tensor g_vk = g_v;
  if (t.repeat_index.defined()) {
    g_k = g_k.new_zeros({bs, K, s, hd}).index_add_(1, t.repeat_index, g_k);
    g_vk = g_vk.new_zeros({bs, K, s, hd}).index_add_(1, t.repeat_index, g_vk);
  }
  // k and v: narrows of kv = kv_linear(y1); q = q_linear(y1)
  const std::vector<int64_t> kv_sizes{bs, s, 2 * K * hd};
  const at::Tensor g_kv =
      rg(NarrowBackward(Reshape(Transpose(g_k, 1, 2), {bs, s, K * hd}), kv_sizes, 0, K * hd) +
         NarrowBackward(Reshape(Transpose(g_vk, 1, 2), {bs, s, K * hd}), kv_sizes, K * hd, K * hd));
  const at::Tensor from_q = AddmmBackward(rg(Reshape(Transpose(g_q, 1, 2), {bs, s, heads * hd})),
                                          t.y1_2d, t.wq_t, {bs, s, H}, &gw, &gb);
  grads[b + ".attn.q.weight"] = gw;
  grads[b + ".attn.q.bias"] = gb;
  const at::Tensor from_kv = AddmmBackward(g_kv, t.y1_2d, t.wkv_t, {bs, s, H}, &gw, &gb);
  grads[b + ".attn.kv.weight"] = gw;
  grads[b + ".attn.kv.bias"] = gb;
  auto ln1 = at::native_layer_norm_backward(rg(EnterBackward(t, from_q + from_kv)), t.x, {H},
                                            t.mean1, t.rstd1, t.w_ln1, t.b_ln1, {true, true, true});
  grads[b + ".ln1.weight"] = std::get<1>(ln1);
  grads[b + ".ln1.bias"] = std::get<2>(ln1);
  return g_h + std::get<0>(ln1);
}

// h plus the position rows of this rank's part of the sequence, from seq_begin (the whole table
// without sequence parallelism).
at::Tensor AddPositions(const Numerics& n, const ParamMap& p, const at::Tensor& h,
                        int64_t seq_begin, HandTape& t) {
  const at::Tensor wpe = In(n, p, "embed.wpe", t);
  t.position_rows = wpe.size(0);
  t.seq_begin = seq_begin;
  const at::Tensor rows = h.size(1) == wpe.size(0) ? wpe : Narrow(wpe, 0, seq_begin, h.size(1));
  return n.Round(h + Unsqueeze(rows, 0));
}

// AddPositions's backward: the table's gradient from the gradient of h + rows (sum_to the
// broadcast [1, rows, hidden], unsqueeze's backward, then narrow's).
at::Tensor PositionsBackward(const HandTape& t, const at::Tensor& g_out) {
  const at::Tensor g = (t.bs != 1 ? g_out.sum(0, /*keepdim=*/true) : g_out).squeeze(0);
  if (g.size(0) == t.position_rows) return g;
  at::Tensor full = Zeros({t.position_rows, g.size(1)}, g.options());
  Narrow(full, 0, t.seq_begin, g.size(0)).copy_(g);
  return full;
}

// GptForward's kEmbed: token rows, plus the position rows.
at::Tensor EmbedForward(const ModelConfig& m, const Numerics& n, const ParamMap& p,
                        const MicroBatch& mb, HandTape& t) {
  const at::Tensor wte = In(n, p, "embed.wte", t);
  t.bs = mb.inputs.size(0);
  t.seq = mb.inputs.size(1);
  t.vocab = wte.size(0);
  t.tokens = Reshape(mb.inputs, {-1});
  at::Tensor h = View(wte.index_select(0, t.tokens), {t.bs, t.seq, m.hidden});
  t.positions = m.position_embeddings;
  if (t.positions) h = AddPositions(n, p, h, 0, t);
  return h;
}

void EmbedBackward(const HandTape& t, const at::Tensor& grad_out,
                   std::unordered_map<std::string, at::Tensor>& grads) {
  const at::Tensor g_out = t.positions ? RoundGrad(t, grad_out) : grad_out;
  if (t.positions) grads["embed.wpe"] = PositionsBackward(t, g_out);
  const at::Tensor g = Reshape(g_out, {t.bs * t.seq, g_out.size(2)});
  // index_select_backward: zeros, then index_add_ in token order.
  grads["embed.wte"] = g.new_zeros({t.vocab, g.size(1)}).index_add_(0, t.tokens, g);
}

// The head up to its loss, GptForward's and (with t.tp) GptForwardParallel's: ln_f (entered
// into the column-parallel region under tp) and the logits through the tied table or lm_head,
// rounded, in the execution dtype.
at::Tensor HeadLogits(const ModelConfig& m, const Numerics& n, const ParamMap& p,
                      const at::Tensor& x, HandTape& t) {
  t.x = x;
  t.w_ln1 = In(n, p, "head.ln_f.weight", t);
  t.b_ln1 = In(n, p, "head.ln_f.bias", t);
  auto ln = at::native_layer_norm(x, {x.size(2)}, t.w_ln1, t.b_ln1, kLayerNormEps);
  t.mean1 = std::get<1>(ln);
  t.rstd1 = std::get<2>(ln);
  const at::Tensor y = Enter(t, n.Round(std::get<0>(ln)));
  t.bs = y.size(0);
  t.seq = y.size(1);
  t.prefix = m.tied_embeddings ? "embed.wte" : "head.lm_head.weight";  // the logits' weight
  const at::Tensor logits = n.Round(Matmul(y, T(In(n, p, t.prefix, t)), t.logits));
  t.logits_dtype = logits.scalar_type();
  return logits;
}

// HeadLogits's backward from the gradient of the logits [bs, seq, columns] in their dtype: the
// weight's and ln_f's gradients; returns the gradient of the head's input.
at::Tensor HeadLogitsBackward(const HandTape& t, const at::Tensor& g_logits,
                              std::unordered_map<std::string, at::Tensor>& grads) {
  at::Tensor gw;
  const at::Tensor g_y = MatmulBackward(RoundGrad(t, g_logits), t.logits, &gw);
  grads[t.prefix] = gw;
  auto ln = at::native_layer_norm_backward(RoundGrad(t, EnterBackward(t, g_y)), t.x, {t.x.size(2)},
                                           t.mean1, t.rstd1, t.w_ln1, t.b_ln1, {true, true, true});
  grads["head.ln_f.weight"] = std::get<1>(ln);
  grads["head.ln_f.bias"] = std::get<2>(ln);
  return std::get<0>(ln);
}

// GptForwardParallel's kEmbed: this rank's rows of the padded vocabulary (zeros for tokens
// outside them), summed over tp (or reduce-scattered along the sequence), plus this rank's
// positions.
at::Tensor EmbedForwardTp(const ModelConfig& m, const Numerics& n, const ParamMap& p,
                          const MicroBatch& mb, HandTape& t) {
  TensorParallel& tp = *t.tp;
  const at::Tensor wte = In(n, p, "embed.wte", t);
  t.bs = mb.inputs.size(0);
  t.seq = mb.inputs.size(1);
  t.vocab = wte.size(0);
  const at::Tensor local = mb.inputs.reshape({-1}) - tp.vocab_begin();
  t.vocab_inside = local.ge(0).logical_and(local.lt(t.vocab));
  t.tokens = at::where(t.vocab_inside, local, at::zeros_like(local));
  const at::Tensor rows =
      wte.index_select(0, t.tokens).masked_fill(Unsqueeze(t.vocab_inside.logical_not(), 1), 0);
  at::Tensor h = tp.ExitRowParallelForward(View(rows, {t.bs, t.seq, m.hidden}));
  t.positions = m.position_embeddings;
  if (t.positions) h = AddPositions(n, p, h, tp.seq_begin(m.seq_len), t);
  return h;
}

void EmbedBackwardTp(const HandTape& t, const at::Tensor& grad_out,
                     std::unordered_map<std::string, at::Tensor>& grads) {
  const at::Tensor g_out = t.positions ? RoundGrad(t, grad_out) : grad_out;
  const int64_t H = g_out.size(2);
  if (t.positions) grads["embed.wpe"] = PositionsBackward(t, g_out);
  const at::Tensor g_rows = Reshape(t.tp->ExitRowParallelBackward(g_out), {t.bs * t.seq, H})
                                .masked_fill(Unsqueeze(t.vocab_inside.logical_not(), 1), 0);
  // index_select_backward: zeros, then index_add_ in token order.
  grads["embed.wte"] = g_rows.new_zeros({t.vocab, H}).index_add_(0, t.tokens, g_rows);
}

// GptForwardParallel's kHead: ln_f entered into the column-parallel region, this rank's logit
// columns (float32), and Megatron's vocabulary-parallel cross-entropy (VocabParallelLoss in
// kernels/model.cpp): the global max (no gradient), the sum of exponentials and the target's
// logit each summed over tp.
at::Tensor HeadForwardTp(const ModelConfig& m, const Numerics& n, const ParamMap& p,
                         const at::Tensor& x, const MicroBatch& mb, HandTape& t) {
  TensorParallel& tp = *t.tp;
  const at::Tensor raw = HeadLogits(m, n, p, x, t);
  const int64_t per = raw.size(2), begin = tp.vocab_begin();
  at::Tensor logits = Reshape(AsDType(raw, at::kFloat), {-1, per});
  const at::Tensor targets = mb.targets.reshape({-1});
  if (tp.mask_vocab_padding()) {
    t.vocab_padded = Unsqueeze(at::arange(per, targets.options()).add(begin).ge(tp.vocab()), 0);
    logits = logits.masked_fill(t.vocab_padded, -std::numeric_limits<double>::infinity());
  }
  const at::Tensor max = tp.AllReduceMax(std::get<0>(logits.max(-1)));
  t.exp_shifted = (logits - Unsqueeze(max, 1)).exp();
  t.sum_exp = tp.AllReduceSumForward(t.exp_shifted.sum(-1));
  const at::Tensor local = targets - begin;
  t.vocab_inside = local.ge(0).logical_and(local.lt(per));
  t.tokens = Unsqueeze(at::where(t.vocab_inside, local, at::zeros_like(local)), 1);
  const at::Tensor picked =
      logits.gather(1, t.tokens).squeeze(1).masked_fill(t.vocab_inside.logical_not(), 0);
  const at::Tensor target_logit = tp.AllReduceSumForward(picked);
  return (t.sum_exp.log() + max - target_logit).mean();
}

at::Tensor HeadBackwardTp(const HandTape& t, double loss_mult,
                          std::unordered_map<std::string, at::Tensor>& grads) {
  // backward() of loss * loss_mult; mean's backward: the gradient expanded, divided by the count.
  const int64_t rows = t.sum_exp.size(0);
  const at::Tensor g_z = at::scalar_tensor(loss_mult, t.sum_exp.options()).expand({rows}) / rows;
  // z = (log(sum_exp) + max) - target_logit; the sums over tp pass their gradient through.
  const at::Tensor g_shifted = Expand(Unsqueeze(g_z.div(t.sum_exp), -1), t.exp_shifted.sizes()) *
                               t.exp_shifted;  // log's, sum's, exp's, then the subtraction's
  const at::Tensor g_picked = Unsqueeze((-g_z).masked_fill(t.vocab_inside.logical_not(), 0), 1);
  at::Tensor g_logits =  // the two gradients meeting at the logits
      g_shifted +
      Zeros(t.exp_shifted.sizes(), g_picked.options()).scatter_add_(1, t.tokens, g_picked);
  if (t.vocab_padded.defined()) g_logits = g_logits.masked_fill(t.vocab_padded, 0);
  return HeadLogitsBackward(
      t, AsDType(Reshape(g_logits, {t.bs, t.seq, t.logits.w_t.size(-1)}), t.logits_dtype), grads);
}

// GptForward's kHead: ln_f, the logits (the tied table or lm_head), cross-entropy in at least
// float32.
at::Tensor HeadForward(const ModelConfig& m, const Numerics& n, const ParamMap& p,
                       const at::Tensor& x, const MicroBatch& mb, HandTape& t) {
  const at::Tensor logits = HeadLogits(m, n, p, x, t);
  const auto loss_dtype = n.exec == at::kDouble ? at::kDouble : at::kFloat;
  t.log_probs = at::_log_softmax(Reshape(AsDType(logits, loss_dtype), {-1, m.vocab}), -1, false);
  t.targets = Reshape(mb.targets, {-1});
  auto loss = at::nll_loss_forward(t.log_probs, t.targets, {}, at::Reduction::Mean, -100);
  t.total_weight = std::get<1>(loss);
  return std::get<0>(loss);
}

at::Tensor HeadBackward(const HandTape& t, double loss_mult,
                        std::unordered_map<std::string, at::Tensor>& grads) {
  // backward() of loss * loss_mult: ones times the multiplier, in the loss's dtype.
  const at::Tensor g_loss = at::scalar_tensor(loss_mult, t.log_probs.options());
  const at::Tensor g_log_probs = at::nll_loss_backward(g_loss, t.log_probs, t.targets, {},
                                                       at::Reduction::Mean, -100, t.total_weight);
  const at::Tensor g_logits = AsDType(
      Reshape(
          at::_log_softmax_backward_data(g_log_probs, t.log_probs, -1, t.log_probs.scalar_type()),
          {t.bs, t.seq, t.logits.w_t.size(-1)}),
      t.logits_dtype);
  return HeadLogitsBackward(t, g_logits, grads);
}

}  // namespace

void SetHandBackward(bool on) { g_hand_backward.store(on); }

bool HandBackwardApplies(const ModelConfig& model, const Numerics& num) {
  return g_hand_backward.load(std::memory_order_relaxed) && model.kind == ModelKind::kGpt &&
         !num.random;
}

at::Tensor HandForward(const Unit& unit, const ModelConfig& m, const Numerics& n,
                       const ParamMap& params, const at::Tensor& x, const MicroBatch& mb,
                       HandTape& t, TensorParallel* tp) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  t = HandTape();
  t.kind = unit.kind;
  t.fp16 = n.emulate_fp16;
  t.tp = tp;
  switch (unit.kind) {
    case UnitKind::kEmbed:
      return tp ? EmbedForwardTp(m, n, params, mb, t) : EmbedForward(m, n, params, mb, t);
    case UnitKind::kBlock:
      return BlockForward(m, n, params, unit.block, x, t);
    case UnitKind::kHead:
      return tp ? HeadForwardTp(m, n, params, x, mb, t) : HeadForward(m, n, params, x, mb, t);
  }
  throw std::logic_error("hand backward: unknown unit");
}

at::Tensor HandBackward(const HandTape& t, const at::Tensor& grad_out, double loss_mult) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  std::unordered_map<std::string, at::Tensor> grads;
  at::Tensor grad_in;
  switch (t.kind) {
    case UnitKind::kEmbed:
      if (t.tp) {
        EmbedBackwardTp(t, grad_out, grads);
      } else {
        EmbedBackward(t, grad_out, grads);
      }
      break;
    case UnitKind::kBlock:
      grad_in = BlockBackward(t, grad_out, grads);
      break;
    case UnitKind::kHead:
      grad_in = t.tp ? HeadBackwardTp(t, loss_mult, grads) : HeadBackward(t, loss_mult, grads);
      break;
  }
  for (const auto& [name, leaf] : t.leaves) Accumulate(leaf, RoundGrad(t, grads.at(name)));
  return grad_in;
}

double OneDevicePass(const std::vector<Unit>& units, const ModelConfig& m, const Numerics& n,
                     const ParamMap& leaves, const MicroBatch& mb, double loss_mult) {
  if (!HandBackwardApplies(m, n)) {
    at::Tensor x;
    for (const auto& u : units) x = UnitForward(u, m, n, leaves, x, mb);
    const double loss = ReadScalar(x);
    (x * loss_mult).backward();
    return loss;
  }
  std::vector<HandTape> tapes(units.size());
  at::Tensor x;
  for (size_t i = 0; i < units.size(); ++i)
    x = HandForward(units[i], m, n, leaves, x, mb, tapes[i]);
  const double loss = ReadScalar(x);
  at::Tensor grad;
  for (size_t i = units.size(); i-- > 0;) grad = HandBackward(tapes[i], grad, loss_mult);
  return loss;
}

}  // namespace paradiff
