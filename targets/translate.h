// Config translation between paradiff configs and production framework configs, so a team can fuzz
// around its production config and hand a finding back to its framework (docs/TARGETS.md):
// DeepSpeed JSON (import and export) and Megatron-LM arguments (export).
//
// DeepSpeed fields mapped: train_micro_batch_size_per_gpu, gradient_accumulation_steps,
// train_batch_size (sets dp = world), zero_optimization.{stage, reduce_bucket_size}, bf16.enabled,
// fp16.{enabled, loss_scale, initial_scale_power, loss_scale_window, hysteresis, min_loss_scale},
// gradient_clipping, optimizer.{type, params.{lr, betas, eps, weight_decay, momentum}},
// data_types.grad_accum_dtype, communication_data_type. Every other key is reported as ignored;
// a value that cannot be mapped is an error naming the key and the rule.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"

namespace paradiff {

struct DeepSpeedImport {
  Config config;
  std::vector<std::string> ignored;  // DeepSpeed keys without a paradiff counterpart
};

// Translates `ds` onto `base` (model, seed and steps come from base; DeepSpeed does not have them).
StatusOr<DeepSpeedImport> ImportDeepSpeed(const nlohmann::json& ds, const Config& base);
nlohmann::json ExportDeepSpeed(const Config& cfg);

// The Megatron-LM (pretrain_gpt.py) arguments of `cfg`, one element per argv entry.
std::vector<std::string> ExportMegatron(const Config& cfg);

}  // namespace paradiff
