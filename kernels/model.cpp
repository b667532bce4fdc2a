#include "kernels/model.h"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

namespace paradiff {

namespace {

constexpr double kLayerNormEps = 1e-5;

const at::Tensor& Get(const ParamMap& p, const std::string& name) {
  auto it = p.find(name);
  if (it == p.end()) throw std::logic_error("model: parameter " + name + " was not provided");
  return it->second;
}

at::Tensor Linear(const Numerics& n, const at::Tensor& x, const at::Tensor& w, const at::Tensor* b) {
  return n.Round(b ? at::linear(x, n.In(w), n.In(*b)) : at::linear(x, n.In(w)));
}

at::Tensor LayerNorm(const Numerics& n, const ParamMap& p, const std::string& prefix,
                     const at::Tensor& x) {
  const at::Tensor& w = Get(p, prefix + ".weight");
  return n.Round(at::layer_norm(x, {x.size(-1)}, n.In(w), n.In(Get(p, prefix + ".bias")),
                                kLayerNormEps));
}

at::Tensor Attention(const ModelConfig& m, const Numerics& n, const ParamMap& p,
                     const std::string& b, const at::Tensor& x) {
  const int64_t bs = x.size(0), s = x.size(1), hd = HeadDim(m), H = m.heads, K = m.kv_heads;
  const at::Tensor& qkv_b = Get(p, b + ".attn.qkv.bias");
  at::Tensor qkv = Linear(n, x, Get(p, b + ".attn.qkv.weight"), &qkv_b);
  at::Tensor q = qkv.narrow(-1, 0, H * hd).view({bs, s, H, hd}).transpose(1, 2);
  at::Tensor k = qkv.narrow(-1, H * hd, K * hd).view({bs, s, K, hd}).transpose(1, 2);
  at::Tensor v = qkv.narrow(-1, (H + K) * hd, K * hd).view({bs, s, K, hd}).transpose(1, 2);
  if (K < H) {  // grouped / multi-query attention: each kv head serves H / K query heads
    k = k.repeat_interleave(H / K, 1);
    v = v.repeat_interleave(H / K, 1);
  }
  at::Tensor scores = n.Round(at::matmul(q, k.transpose(-2, -1)) * (1.0 / std::sqrt(double(hd))));
  at::Tensor mask = at::ones({s, s}, at::TensorOptions().dtype(at::kBool)).triu(1);
  scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  at::Tensor probs = n.Round(at::softmax(scores, -1));
  at::Tensor o = n.Round(at::matmul(probs, v)).transpose(1, 2).reshape({bs, s, H * hd});
  const at::Tensor& proj_b = Get(p, b + ".attn.proj.bias");
  return Linear(n, o, Get(p, b + ".attn.proj.weight"), &proj_b);
}

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
  const at::Tensor& fc2_b = Get(p, b + ".mlp.fc2.bias");
  return Linear(n, h, Get(p, b + ".mlp.fc2.weight"), &fc2_b);
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
      at::Tensor h = n.Round(x + Attention(m, n, p, b, LayerNorm(n, p, b + ".ln1", x)));
      return n.Round(h + Mlp(m, n, p, b, LayerNorm(n, p, b + ".ln2", h)));
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

at::Tensor ExactForward(const Unit& u, const Numerics& n, const ParamMap& p, const at::Tensor& x,
                        const MicroBatch& mb) {
  switch (u.kind) {
    case UnitKind::kEmbed: return Linear(n, n.In(mb.inputs), Get(p, "embed.in.weight"), nullptr);
    case UnitKind::kBlock:
      return Linear(n, x, Get(p, "blocks." + std::to_string(u.block) + ".linear.weight"), nullptr);
    case UnitKind::kHead: {
      at::Tensor diff = Linear(n, x, Get(p, "head.out.weight"), nullptr) - n.In(mb.targets);
      return n.Round((diff * diff).mean());
    }
  }
  throw std::logic_error("model: unknown unit");
}

}  // namespace

std::vector<Unit> BuildUnits(const ModelSpec& spec, const ModelConfig& model) {
  std::vector<Unit> units;
  units.push_back({UnitKind::kEmbed, -1, {}});
  for (int64_t i = 0; i < model.layers; ++i) units.push_back({UnitKind::kBlock, i, {}});
  units.push_back({UnitKind::kHead, -1, {}});
  for (const auto& p : spec.params) {
    Unit& u = p.block >= 0 ? units[1 + p.block]
              : p.name.rfind("embed.", 0) == 0 ? units.front() : units.back();
    u.params.push_back(p.name);
  }
  if (model.kind == ModelKind::kGpt && model.tied_embeddings) units.back().params.push_back("embed.wte");
  return units;
}

at::Tensor UnitForward(const Unit& unit, const ModelConfig& model, const Numerics& num,
                       const ParamMap& params, const at::Tensor& x, const MicroBatch& mb) {
  return model.kind == ModelKind::kExactLinear ? ExactForward(unit, num, params, x, mb)
                                               : GptForward(unit, model, num, params, x, mb);
}

}  // namespace paradiff
