#include "core/model_spec.h"

#include <cmath>

namespace paradiff {

const char* Name(LayerType t) {
  switch (t) {
    case LayerType::kEmbedding:
      return "embedding";
    case LayerType::kAttention:
      return "attention";
    case LayerType::kMlp:
      return "mlp";
    case LayerType::kNorm:
      return "norm";
    case LayerType::kHead:
      return "head";
    case LayerType::kLinear:
      return "linear";
  }
  return "?";
}

int64_t ParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ModelSpec::TotalParams() const {
  int64_t n = 0;
  for (const auto& p : params) n += p.numel();
  return n;
}

const ParamSpec* ModelSpec::Find(const std::string& name) const {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

namespace {

// Init std of the normal-initialized weights (GPT-2 style); output projections are scaled down by
// sqrt(2 * layers) so the residual stream stays O(1).
constexpr double kInitStd = 0.02;
// exact_linear weights are in {-1, 0, 1} * kDyadicScale.
constexpr double kDyadicScale = 0.125;

void AddNorm(ModelSpec& s, const std::string& prefix, int64_t hidden, int64_t block) {
  s.params.push_back({prefix + ".weight", {hidden}, LayerType::kNorm, block, InitKind::kOnes, 0});
  s.params.push_back({prefix + ".bias", {hidden}, LayerType::kNorm, block, InitKind::kZeros, 0});
}

ModelSpec BuildGpt(const ModelConfig& m) {
  ModelSpec s;
  const int64_t h = m.hidden, hd = HeadDim(m);
  const double out_std = kInitStd / std::sqrt(2.0 * static_cast<double>(m.layers));
  s.params.push_back(
      {"embed.wte", {m.vocab, h}, LayerType::kEmbedding, -1, InitKind::kNormal, kInitStd});
  if (m.position_embeddings)
    s.params.push_back(
        {"embed.wpe", {m.seq_len, h}, LayerType::kEmbedding, -1, InitKind::kNormal, kInitStd});
  for (int64_t i = 0; i < m.layers; ++i) {
    const std::string b = "blocks." + std::to_string(i);
    AddNorm(s, b + ".ln1", h, i);
    const int64_t q = m.heads * hd, kv = 2 * m.kv_heads * hd;
    s.params.push_back(
        {b + ".attn.q.weight", {q, h}, LayerType::kAttention, i, InitKind::kNormal, kInitStd});
    s.params.push_back({b + ".attn.q.bias", {q}, LayerType::kAttention, i, InitKind::kZeros, 0});
    s.params.push_back(
        {b + ".attn.kv.weight", {kv, h}, LayerType::kAttention, i, InitKind::kNormal, kInitStd});
    s.params.push_back({b + ".attn.kv.bias", {kv}, LayerType::kAttention, i, InitKind::kZeros, 0});
    s.params.push_back(
        {b + ".attn.proj.weight", {h, q}, LayerType::kAttention, i, InitKind::kNormal, out_std});
    s.params.push_back({b + ".attn.proj.bias", {h}, LayerType::kAttention, i, InitKind::kZeros, 0});
    AddNorm(s, b + ".ln2", h, i);
    if (m.activation == Activation::kSwiglu) {
      s.params.push_back(
          {b + ".mlp.gate.weight", {m.ffn, h}, LayerType::kMlp, i, InitKind::kNormal, kInitStd});
      s.params.push_back(
          {b + ".mlp.up.weight", {m.ffn, h}, LayerType::kMlp, i, InitKind::kNormal, kInitStd});
    } else {
      s.params.push_back(
          {b + ".mlp.fc1.weight", {m.ffn, h}, LayerType::kMlp, i, InitKind::kNormal, kInitStd});
      s.params.push_back({b + ".mlp.fc1.bias", {m.ffn}, LayerType::kMlp, i, InitKind::kZeros, 0});
    }
    s.params.push_back(
        {b + ".mlp.fc2.weight", {h, m.ffn}, LayerType::kMlp, i, InitKind::kNormal, out_std});
    s.params.push_back({b + ".mlp.fc2.bias", {h}, LayerType::kMlp, i, InitKind::kZeros, 0});
  }
  AddNorm(s, "head.ln_f", h, -1);
  if (!m.tied_embeddings)
    s.params.push_back(
        {"head.lm_head.weight", {m.vocab, h}, LayerType::kHead, -1, InitKind::kNormal, kInitStd});
  return s;
}

ModelSpec BuildExactLinear(const ModelConfig& m) {
  ModelSpec s;
  const int64_t h = m.hidden;
  s.params.push_back(
      {"embed.in.weight", {h, h}, LayerType::kLinear, -1, InitKind::kDyadic, kDyadicScale});
  for (int64_t i = 0; i < m.layers; ++i)
    s.params.push_back({"blocks." + std::to_string(i) + ".linear.weight",
                        {h, h},
                        LayerType::kLinear,
                        i,
                        InitKind::kDyadic,
                        kDyadicScale});
  s.params.push_back(
      {"head.out.weight", {h, h}, LayerType::kLinear, -1, InitKind::kDyadic, kDyadicScale});
  return s;
}

}  // namespace

ModelSpec BuildModelSpec(const ModelConfig& model) {
  return model.kind == ModelKind::kExactLinear ? BuildExactLinear(model) : BuildGpt(model);
}

int64_t ModelParameterCount(const ModelConfig& model) {
  return BuildModelSpec(model).TotalParams();
}

}  // namespace paradiff
