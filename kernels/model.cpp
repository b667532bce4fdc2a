#include "kernels/model.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

namespace paradiff {

namespace {

const at::Tensor& Get(const ParamMap& p, const std::string& name) { return Param(p, name); }

at::Tensor Linear(const Numerics& n, const at::Tensor& x, const at::Tensor& w,
                  const at::Tensor* b) {
  return n.Round(b ? at::linear(x, n.In(w), n.In(*b)) : at::linear(x, n.In(w)));
}

at::Tensor LayerNorm(const Numerics& n, const ParamMap& p, const std::string& prefix,
                     const at::Tensor& x) {
  const at::Tensor& w = Get(p, prefix + ".weight");
  return n.Round(
      at::layer_norm(x, {x.size(-1)}, n.In(w), n.In(Get(p, prefix + ".bias")), kLayerNormEps));
}

// Causal attention over the heads whose q / kv rows `p` holds (all heads on one device, this
// rank's heads under tensor parallelism). Returns the output projection before its bias and
// before the row-parallel reduction.
at::Tensor Attention(const ModelConfig& m, const Numerics& n, const ParamMap& p,
                     const std::string& b, const at::Tensor& x) {
  const int64_t bs = x.size(0), s = x.size(1), hd = HeadDim(m);
  const at::Tensor& wq = Get(p, b + ".attn.q.weight");
  const at::Tensor& wkv = Get(p, b + ".attn.kv.weight");
  const int64_t H = wq.size(0) / hd, K = wkv.size(0) / (2 * hd);
  const at::Tensor& bq = Get(p, b + ".attn.q.bias");
  const at::Tensor& bkv = Get(p, b + ".attn.kv.bias");
  at::Tensor q = Linear(n, x, wq, &bq).view({bs, s, H, hd}).transpose(1, 2);
  at::Tensor kv = Linear(n, x, wkv, &bkv);
  at::Tensor k = kv.narrow(-1, 0, K * hd).view({bs, s, K, hd}).transpose(1, 2);
  at::Tensor v = kv.narrow(-1, K * hd, K * hd).view({bs, s, K, hd}).transpose(1, 2);
  if (K < H) {  // grouped / multi-query attention: each kv head serves H / K query heads
    k = k.repeat_interleave(H / K, 1);
    v = v.repeat_interleave(H / K, 1);
  }
  at::Tensor scores = n.Round(at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd))));
  at::Tensor mask = at::ones({s, s}, at::TensorOptions().dtype(at::kBool)).triu(1);
  scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  at::Tensor probs = n.Round(at::softmax(scores, -1));
  at::Tensor o = n.Round(at::matmul(probs, v)).transpose(1, 2).reshape({bs, s, H * hd});
  return Linear(n, o, Get(p, b + ".attn.proj.weight"), nullptr);
}

// The MLP up to fc2's output before its bias (and before the row-parallel reduction).
at::Tensor Mlp(const ModelConfig& m, const Numerics& n, const ParamMap& p, const std::string& b,
               const at::Tensor& x) {
  at::Tensor h;
  if (m.activation == Activation::kSwiglu) {
    at::Tensor gate = Linear(n, x, Get(p, b + ".mlp.gate.weight"), nullptr);
    at::Tensor up = Linear(n, x, Get(p, b + ".mlp.up.weight"), nullptr);
    h = n.Round(n.Round(at::silu(gate)) * up);
  } else {
    const at::Tensor& fc1_b = Get(p, b + ".mlp.fc1.bias");
    h = n.Round(at::gelu(Linear(n, x, Get(p, b + ".mlp.fc1.weight"), &fc1_b)));
  }
  return Linear(n, h, Get(p, b + ".mlp.fc2.weight"), nullptr);
}

// Rows of a vocabulary-parallel embedding lookup: tokens outside [begin, begin + rows) give zeros.
at::Tensor VocabParallelLookup(const at::Tensor& table, const at::Tensor& tokens, int64_t begin) {
  at::Tensor local = tokens - begin;
  at::Tensor inside = local.ge(0).logical_and(local.lt(table.size(0)));
  at::Tensor rows = table.index_select(0, at::where(inside, local, at::zeros_like(local)));
  return rows.masked_fill(inside.logical_not().unsqueeze(1), 0);
}

// Megatron's vocabulary-parallel cross-entropy over this rank's logit columns [rows, per].
at::Tensor VocabParallelLoss(TensorParallel& tp, at::Tensor logits, const at::Tensor& targets) {
  const int64_t per = logits.size(1), begin = tp.vocab_begin();
  if (tp.mask_vocab_padding()) {
    at::Tensor padded = at::arange(per, targets.options()).add(begin).ge(tp.vocab());
    logits = logits.masked_fill(padded.unsqueeze(0), -std::numeric_limits<double>::infinity());
  }
  at::Tensor max = tp.AllReduceMax(std::get<0>(logits.max(-1)));
  at::Tensor sum_exp = tp.AllReduceSum((logits - max.unsqueeze(1)).exp().sum(-1));
  at::Tensor local = targets - begin;
  at::Tensor inside = local.ge(0).logical_and(local.lt(per));
  at::Tensor picked = logits.gather(1, at::where(inside, local, at::zeros_like(local)).unsqueeze(1))
                          .squeeze(1)
                          .masked_fill(inside.logical_not(), 0);
  at::Tensor target_logit = tp.AllReduceSum(picked);
  return (sum_exp.log() + max - target_logit).mean();
}

at::Tensor GptForwardParallel(const Unit& u, const ModelConfig& m, const Numerics& n,
                              const ParamMap& p, const at::Tensor& x, const MicroBatch& mb,
                              TensorParallel& tp) {
  switch (u.kind) {
    case UnitKind::kEmbed: {
      at::Tensor h =
          VocabParallelLookup(n.In(Get(p, "embed.wte")), mb.inputs.reshape({-1}), tp.vocab_begin());
      h = tp.ExitRowParallel(h.view({mb.inputs.size(0), mb.inputs.size(1), m.hidden}));
      if (m.position_embeddings)
        h = n.Round(
            h +
            n.In(Get(p, "embed.wpe")).narrow(0, tp.seq_begin(m.seq_len), h.size(1)).unsqueeze(0));
      return h;
    }
    case UnitKind::kBlock: {
      const std::string b = "blocks." + std::to_string(u.block);
      at::Tensor a = tp.ExitRowParallel(
          Attention(m, n, p, b, tp.EnterColumnParallel(LayerNorm(n, p, b + ".ln1", x))));
      at::Tensor h = n.Round(x + n.Round(a + n.In(Get(p, b + ".attn.proj.bias"))));
      at::Tensor f = tp.ExitRowParallel(
          Mlp(m, n, p, b, tp.EnterColumnParallel(LayerNorm(n, p, b + ".ln2", h))));
      return n.Round(h + n.Round(f + n.In(Get(p, b + ".mlp.fc2.bias"))));
    }
    case UnitKind::kHead: {
      at::Tensor h = tp.EnterColumnParallel(LayerNorm(n, p, "head.ln_f", x));
      const at::Tensor& w = Get(p, m.tied_embeddings ? "embed.wte" : "head.lm_head.weight");
      at::Tensor logits = Linear(n, h, w, nullptr).to(at::kFloat).reshape({-1, w.size(0)});
      return VocabParallelLoss(tp, logits, mb.targets.reshape({-1}));
    }
  }
  throw std::logic_error("model: unknown unit");
}

at::Tensor GptForward(const Unit& u, const ModelConfig& m, const Numerics& n, const ParamMap& p,
                      const at::Tensor& x, const MicroBatch& mb) {
  switch (u.kind) {
    case UnitKind::kEmbed: {
      at::Tensor h = n.In(Get(p, "embed.wte")).index_select(0, mb.inputs.reshape({-1}));
      h = h.view({mb.inputs.size(0), mb.inputs.size(1), m.hidden});
      if (m.position_embeddings) h = n.Round(h + n.In(Get(p, "embed.wpe")).unsqueeze(0));
      return h;
    }
    case UnitKind::kBlock: {
      const std::string b = "blocks." + std::to_string(u.block);
      at::Tensor a = Attention(m, n, p, b, LayerNorm(n, p, b + ".ln1", x));
      at::Tensor h = n.Round(x + n.Round(a + n.In(Get(p, b + ".attn.proj.bias"))));
      at::Tensor f = Mlp(m, n, p, b, LayerNorm(n, p, b + ".ln2", h));
      return n.Round(h + n.Round(f + n.In(Get(p, b + ".mlp.fc2.bias"))));
    }
    case UnitKind::kHead: {
      at::Tensor h = LayerNorm(n, p, "head.ln_f", x);
      const at::Tensor& w = Get(p, m.tied_embeddings ? "embed.wte" : "head.lm_head.weight");
      at::Tensor logits = Linear(n, h, w, nullptr);
      // Cross-entropy in at least float32 (as Megatron does), float64 for the truth.
      const auto loss_dtype = n.exec == at::kDouble ? at::kDouble : at::kFloat;
      logits = logits.to(loss_dtype).reshape({-1, m.vocab});
      return at::nll_loss(at::log_softmax(logits, -1), mb.targets.reshape({-1}));
    }
  }
  throw std::logic_error("model: unknown unit");
}

// The exact model's loss: the mean squared error of the whole output against the targets.
at::Tensor SquaredErrorLoss(const Numerics& n, const at::Tensor& out, const MicroBatch& mb) {
  const at::Tensor diff = out - n.In(mb.targets);
  return n.Round((diff * diff).mean());
}

at::Tensor ExactForward(const Unit& u, const Numerics& n, const ParamMap& p, const at::Tensor& x,
                        const MicroBatch& mb) {
  switch (u.kind) {
    case UnitKind::kEmbed:
      return Linear(n, n.In(mb.inputs), Get(p, "embed.in.weight"), nullptr);
    case UnitKind::kBlock:
      return Linear(n, x, Get(p, "blocks." + std::to_string(u.block) + ".linear.weight"), nullptr);
    case UnitKind::kHead:
      return SquaredErrorLoss(n, Linear(n, x, Get(p, "head.out.weight"), nullptr), mb);
  }
  throw std::logic_error("model: unknown unit");
}

// Note [Exact tensor parallelism]: the exact model's layers under tensor parallelism, each unit
// taking and returning the full hidden state (split along the sequence under sp) as a GPT block
// does, so pipelines and every tp boundary are shared with the gpt path:
// - embed.in (its input is data, as a vocabulary-parallel embedding's token ids are): each rank
//   multiplies its hidden / tp input columns by its columns of the weight; the partial products
//   are summed over tp (ExitRowParallel: an all-reduce, or a reduce-scatter along the sequence).
// - blocks.i.linear (row-parallel): the same on the hidden state, entered through
//   EnterColumnParallel, whose backward sums the input gradient over tp.
// - head.out (column-parallel): each rank computes its hidden / tp output features, GatherOutput
//   makes the output whole, and every rank computes the loss of ExactForward on it.
// With dyadic weights and data the products and sums of the layers stay within float32's 24
// significand bits, so they are exact in any order and the tp run equals the float64 truth bit for
// bit wherever the one-device float32 run does. The loss is the exception and is therefore not
// split: a square doubles the bits, and the exact oracle's test of the step loss (the float32
// reference's mean over micro-batches equals the truth's) also passes when two micro-batch losses
// round half an ulp in opposite directions. A loss summed per rank and rounded once rounds those
// ties its own way (4 of 240 tp configs were reported, 0.17-0.5 ulp); computed on the whole
// output like the reference's, it rounds as the reference does.
at::Tensor ExactForwardParallel(const Unit& u, const Numerics& n, const ParamMap& p,
                                const at::Tensor& x, const MicroBatch& mb, TensorParallel& tp) {
  switch (u.kind) {
    case UnitKind::kEmbed: {
      const at::Tensor& w = Get(p, "embed.in.weight");  // [hidden, hidden / tp]
      const int64_t cols = w.size(1);
      const at::Tensor in = n.In(mb.inputs).narrow(-1, tp.rank() * cols, cols);
      return tp.ExitRowParallel(Linear(n, in, w, nullptr));
    }
    case UnitKind::kBlock: {
      const at::Tensor& w = Get(p, "blocks." + std::to_string(u.block) + ".linear.weight");
      const int64_t cols = w.size(1);
      const at::Tensor in = tp.EnterColumnParallel(x).narrow(-1, tp.rank() * cols, cols);
      return tp.ExitRowParallel(Linear(n, in, w, nullptr));
    }
    case UnitKind::kHead: {
      const at::Tensor& w = Get(p, "head.out.weight");  // [hidden / tp, hidden]
      const at::Tensor out = tp.GatherOutput(Linear(n, tp.EnterColumnParallel(x), w, nullptr));
      return SquaredErrorLoss(n, out, mb);
    }
  }
  throw std::logic_error("model: unknown unit");
}

}  // namespace

const at::Tensor& Param(const ParamMap& p, const std::string& name) {
  auto it = p.find(name);
  if (it == p.end()) throw std::logic_error("model: parameter " + name + " was not provided");
  return it->second;
}

std::vector<Unit> BuildUnits(const ModelSpec& spec, const ModelConfig& model) {
  std::vector<Unit> units;
  units.push_back({UnitKind::kEmbed, -1, {}});
  for (int64_t i = 0; i < model.layers; ++i) units.push_back({UnitKind::kBlock, i, {}});
  units.push_back({UnitKind::kHead, -1, {}});
  for (const auto& p : spec.params) {
    Unit& u = p.block >= 0                     ? units[1 + p.block]
              : p.name.rfind("embed.", 0) == 0 ? units.front()
                                               : units.back();
    u.params.push_back(p.name);
  }
  if (model.kind == ModelKind::kGpt && model.tied_embeddings)
    units.back().params.push_back("embed.wte");
  return units;
}

at::Tensor UnitForward(const Unit& unit, const ModelConfig& model, const Numerics& num,
                       const ParamMap& params, const at::Tensor& x, const MicroBatch& mb,
                       TensorParallel* tp) {
  const bool parallel = tp != nullptr && tp->size() > 1;
  if (model.kind == ModelKind::kExactLinear)
    return parallel ? ExactForwardParallel(unit, num, params, x, mb, *tp)
                    : ExactForward(unit, num, params, x, mb);
  if (parallel) return GptForwardParallel(unit, model, num, params, x, mb, *tp);
  return GptForward(unit, model, num, params, x, mb);
}

}  // namespace paradiff
