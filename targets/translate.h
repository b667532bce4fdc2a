// Config translation between paradiff configs and production framework configs, so a team can fuzz
// around its production config and hand a finding back to its framework (docs/TARGETS.md,
// "Importing a production config"): DeepSpeed JSON (import and export) and Megatron-LM arguments
// (export).
//
// DeepSpeed fields mapped: train_micro_batch_size_per_gpu, gradient_accumulation_steps,
// train_batch_size (sets dp = world), zero_optimization.{stage, reduce_bucket_size}, bf16.enabled
// (or bfloat16.enabled), fp16.{enabled, loss_scale, initial_scale_power, loss_scale_window,
// hysteresis, min_loss_scale}, gradient_clipping, optimizer.{type, params.{lr, betas, eps,
// weight_decay, momentum, adam_w_mode}}, data_types.grad_accum_dtype, communication_data_type.
// "auto" values and sizes meant for production scale are translated to the test model, each with
// an INFO or WARNING message (see Note [Importing a production config] in import_deepspeed.cpp);
// every other key is warned about once; a value of the wrong type is an error naming the key.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/spelling.h"
#include "core/status.h"

namespace paradiff {

// One line the import has to say about the translation.
struct ImportMessage {
  enum Level { kInfo, kWarning } level;
  std::string text;  // starts with the DeepSpeed key it is about
};

struct ImportResult {
  Config config;
  std::vector<ImportMessage> messages;  // in the order of the translation
};

// The most ranks an imported layout keeps (tp x pp x dp), and the most micro-batches per step and
// pipeline stage.
inline constexpr int64_t kMaxImportWorld = 8;
inline constexpr int64_t kMaxImportAccumulation = 8;

// Shrinks a layout meant for many ranks to one a check runs here: tp and pp, then dp, to fit
// kMaxImportWorld, a micro batch over the token budget, accumulation over
// kMaxImportAccumulation per pipeline stage (see Note
// [Importing a production config] in import_deepspeed.cpp); one INFO message per change.
void ScaleLayout(Config& c, std::vector<ImportMessage>& messages);

// A production learning-rate schedule of `warmup` steps (and, when `kind` decays, a decay ending
// at step `total`; -1: "the run's length"; `min_ratio`, the cosine's floor) as
// c.optimizer.schedule on a run of at least kImportScheduleSteps steps, its shape kept (see Note
// [Importing a production config] in import_deepspeed.cpp); `what` names the source in the INFO
// lines. The one writer of an imported schedule.
inline constexpr int64_t kImportScheduleSteps = 6;
void ScaleSchedule(Config& c, LrScheduleKind kind, int64_t warmup, int64_t total, double min_ratio,
                   const std::string& what, std::vector<ImportMessage>& messages);

// DeepSpeed's scheduler of each schedule kind (deepspeed/runtime/lr_schedules.py, its "type");
// a constant rate has none. Export writes these names, import reads them.
inline constexpr Spelling<LrScheduleKind> kDeepSpeedSchedulerNames[] = {
    {"WarmupLR", LrScheduleKind::kWarmup},
    {"WarmupDecayLR", LrScheduleKind::kWarmupLinear},
    {"WarmupCosineLR", LrScheduleKind::kWarmupCosine}};

// Translates `ds` onto `base` (model, seed and steps come from base; DeepSpeed does not have them).
StatusOr<ImportResult> ImportDeepSpeed(const nlohmann::json& ds, const Config& base);
nlohmann::json ExportDeepSpeed(const Config& cfg);

// Translates pretrain_gpt.py arguments (one element per argv entry) onto `base`; a production
// model shrinks to a test model (see Note [Test model] in import_megatron.cpp). The counterpart of
// ExportMegatron: import(export(c)) == c on the fields both carry.
StatusOr<ImportResult> ImportMegatron(const std::vector<std::string>& args, const Config& base);

// The Megatron-LM (pretrain_gpt.py) arguments of `cfg`, one element per argv entry.
std::vector<std::string> ExportMegatron(const Config& cfg);

}  // namespace paradiff
