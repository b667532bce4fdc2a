// The model as a sequence of units (embedding, transformer blocks, head + loss), each a pure
// function of its parameters and its input. Both the engine (which runs units layer by layer,
// sharded and communicating around them) and the reference (which runs them all on one device)
// call these functions: they are the "pure per-tensor math" both sides may share. They never shard,
// partition or communicate.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <unordered_map>
#include <vector>

#include "core/config.h"
#include "core/model_spec.h"
#include "kernels/data.h"
#include "kernels/numerics.h"
#include "kernels/tensor_parallel.h"

namespace paradiff {

using ParamMap = std::unordered_map<std::string, at::Tensor>;

inline constexpr double kLayerNormEps = 1e-5;

// The parameter `name` of `p`; a missing one is a logic error naming it.
const at::Tensor& Param(const ParamMap& p, const std::string& name);

// A leaf's gradient, taken off it (undefined when backward left none), so that the leaf's next
// backward starts from no gradient: one set of parameter leaves serves pass after pass.
inline at::Tensor TakeGrad(const at::Tensor& leaf) {
  at::Tensor& grad = leaf.mutable_grad();
  at::Tensor taken = std::move(grad);
  grad = at::Tensor();
  return taken;
}

enum class UnitKind { kEmbed, kBlock, kHead };

struct Unit {
  UnitKind kind = UnitKind::kBlock;
  int64_t block = -1;               // block index for kBlock
  std::vector<std::string> params;  // parameter names this unit reads (tied wte appears twice)
};

// embed, blocks.0 .. blocks.{L-1}, head (in forward order).
std::vector<Unit> BuildUnits(const ModelSpec& spec, const ModelConfig& model);

// Runs one unit. kEmbed ignores `x` and reads mb.inputs; kBlock maps hidden states to hidden
// states; kHead returns the scalar mean loss of the micro-batch (float32, or float64 when the
// numerics execute in float64). `tp` is the rank's tensor-parallel boundary (kernels/
// tensor_parallel.h) with `params` holding that rank's shards (kernels/tp_layout.h); nullptr for
// one device with whole parameters (the reference), where nothing communicates.
at::Tensor UnitForward(const Unit& unit, const ModelConfig& model, const Numerics& num,
                       const ParamMap& params, const at::Tensor& x, const MicroBatch& mb,
                       TensorParallel* tp = nullptr);

}  // namespace paradiff
