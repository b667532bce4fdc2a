// Element-wise optimizer updates (SGD with momentum, Adam, AdamW) with PyTorch's semantics, on
// tensors of any shape: a flat ZeRO shard in the engine, a whole parameter in the reference. Pure
// per-tensor math, shared by both.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "core/config.h"

namespace paradiff {

// Names of the state slots an optimizer keeps per parameter element, in slot order:
// sgd -> {"momentum"}, adam / adamw -> {"exp_avg", "exp_avg_sq"}.
std::vector<std::string> OptimizerSlotNames(OptimizerKind kind);

// Gradient clipping's factor (PyTorch's clip_grad_norm_): min(1, max_norm / (norm + 1e-6)); 1 when
// clipping is off (max_norm <= 0). The gradients are multiplied by it when it is below 1.
double ClipCoefficient(double max_norm, double norm);

// One update of `param` (in place) from `grad`, with `slots` (one per slot name, same shape,
// updated in place). `step` is 1-based. param, grad and slots share one floating dtype.
void OptimizerUpdate(const OptimizerConfig& opt, int64_t step, at::Tensor& param,
                     const at::Tensor& grad, std::vector<at::Tensor>& slots);

}  // namespace paradiff
