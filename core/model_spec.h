// ModelSpec: the logical (unsharded) parameter list of a model config: names, shapes, layer type,
// and how each is initialized. A pure function of ModelConfig, shared by the reference and the
// engine so both agree on what "the model" is; it knows nothing of layouts.
//
// GPT parameter order (also the flat-buffer order of the engine):
//   embed.wte [vocab, hidden], embed.wpe [seq_len, hidden] (if position_embeddings),
//   per block i: blocks.i.ln1.weight/bias [hidden], blocks.i.attn.q.weight [heads*head_dim,
//   hidden] / .bias, blocks.i.attn.kv.weight [2*kv_heads*head_dim, hidden] / .bias (all key rows,
//   then all value rows), blocks.i.attn.proj.weight [hidden, heads*head_dim],
//   blocks.i.attn.proj.bias, blocks.i.ln2.weight/bias, then for gelu blocks.i.mlp.fc1.weight [ffn,
//   hidden] / .bias [ffn]; for swiglu blocks.i.mlp.gate.weight and blocks.i.mlp.up.weight [ffn,
//   hidden] (no bias); blocks.i.mlp.fc2.weight [hidden, ffn] / .bias, head.ln_f.weight/bias
//   [hidden], head.lm_head.weight [vocab, hidden] (if not tied).
// exact_linear: embed.in.weight [hidden, hidden], blocks.i.linear.weight [hidden, hidden],
//   head.out.weight [hidden, hidden]; squared-error loss against generated targets. Under tensor
//   parallelism embed.in and the blocks are row-parallel, head.out column-parallel
//   (kernels/tp_layout.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace paradiff {

enum class LayerType { kEmbedding, kAttention, kMlp, kNorm, kHead, kLinear };
const char* Name(LayerType);

enum class InitKind {
  kNormal,  // N(0, std^2)
  kOnes,    // norm weights
  kZeros,   // biases
  kDyadic,  // exact_linear: values in {-1, 0, 1} * 2^-k (exact in any reduction order)
};

struct ParamSpec {
  std::string name;
  std::vector<int64_t> shape;
  LayerType layer = LayerType::kLinear;
  int64_t block = -1;  // transformer block index, -1 for embedding / head
  InitKind init = InitKind::kNormal;
  double scale = 0.02;  // std for kNormal, 2^-k for kDyadic
  int64_t numel() const;
};

struct ModelSpec {
  std::vector<ParamSpec> params;
  int64_t TotalParams() const;
  const ParamSpec* Find(const std::string& name) const;
};

ModelSpec BuildModelSpec(const ModelConfig& model);
int64_t ModelParameterCount(const ModelConfig& model);

}  // namespace paradiff
