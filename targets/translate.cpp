#include "targets/translate.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "core/budget.h"

namespace paradiff {

namespace {

using nlohmann::json;

const char* DsOptimizer(OptimizerKind k) {
  return k == OptimizerKind::kSgd ? "SGD" : k == OptimizerKind::kAdam ? "Adam" : "AdamW";
}

std::string Num(double v) {
  json j = v;
  return j.dump();
}

// optimizer.schedule as DeepSpeed's own scheduler (deepspeed/runtime/lr_schedules.py), each
// warming up linearly from 0: core/lr_schedule.h computes the same rates.
json DsScheduler(const Config& c) {
  const LrScheduleConfig& s = c.optimizer.schedule;
  json params = {{"warmup_num_steps", s.warmup_steps}, {"warmup_type", "linear"}};
  if (s.kind == LrScheduleKind::kWarmupCosine) {
    params["total_num_steps"] = s.total_steps;
    params["warmup_min_ratio"] = 0.0;
    params["cos_min_ratio"] = s.min_ratio;
  } else {
    params["warmup_min_lr"] = 0.0;
    params["warmup_max_lr"] = c.optimizer.lr;
    if (s.kind == LrScheduleKind::kWarmupLinear) params["total_num_steps"] = s.total_steps;
  }
  return {{"type", NameIn(kDeepSpeedSchedulerNames, s.kind)}, {"params", params}};
}

}  // namespace

void ScaleLayout(Config& c, std::vector<ImportMessage>& messages) {
  const auto info = [&](const std::string& t) { messages.push_back({ImportMessage::kInfo, t}); };
  // tp x pp over kMaxImportWorld: the larger of the two (pp on a tie) drops to its largest divisor
  // <= half of it, until they fit.
  const auto halve = [&](int64_t& v, const char* what) {
    const int64_t before = v;
    int64_t d = v / 2;
    while (d > 1 && v % d != 0) --d;
    v = std::max<int64_t>(d, 1);
    info(std::string(what) + " " + std::to_string(before) + " scaled to " + std::to_string(v) +
         " (tp x pp over the " + std::to_string(kMaxImportWorld) + " ranks a check here runs)");
  };
  while (c.parallel.tp * c.parallel.pp > kMaxImportWorld) {
    if (c.parallel.pp >= c.parallel.tp)
      halve(c.parallel.pp, "pp");
    else
      halve(c.parallel.tp, "tp");
  }
  if (c.parallel.tp == 1) c.parallel.sp = false;
  if (c.parallel.pp == 1) c.parallel.virtual_stages = 1;
  const int64_t model_ranks = c.parallel.tp * c.parallel.pp;
  const int64_t max_dp = std::max<int64_t>(1, kMaxImportWorld / model_ranks);
  if (c.parallel.dp > max_dp) {
    const int64_t dp = c.parallel.dp;
    int64_t d = max_dp;
    while (dp % d != 0) --d;
    if (d == 1 && max_dp >= 7) d = 7;
    c.parallel.dp = d;
    info("dp " + std::to_string(dp) + " scaled to " + std::to_string(d) +
         (dp % d == 0 ? " (its largest divisor" : " (a prime, as no divisor > 1 is") +
         " <= " + std::to_string(max_dp) + ", the ranks a check here runs)");
  }
  c.parallel.world = c.parallel.dp * model_ranks;
  const ResourceBudget budget;
  while (c.batch.micro_batch > 1 &&
         c.batch.micro_batch * c.batch.accumulation_steps * c.parallel.dp * c.model.seq_len >
             budget.max_tokens_per_step) {
    const int64_t before = c.batch.micro_batch;
    c.batch.micro_batch = (before + 1) / 2;
    info("micro batch " + std::to_string(before) + " halved to " +
         std::to_string(c.batch.micro_batch) + " (tokens per step over the budget of " +
         std::to_string(budget.max_tokens_per_step) + ")");
  }
  // Accumulation over kMaxImportAccumulation micro-batches per pipeline stage: the largest
  // multiple of pp that fits (a pipeline's micro-batches come in groups of pp).
  const int64_t pp = c.parallel.pp, max_accum = kMaxImportAccumulation * pp;
  if (c.batch.accumulation_steps > max_accum) {
    const int64_t before = c.batch.accumulation_steps;
    c.batch.accumulation_steps = before % pp == 0 ? max_accum : max_accum - 1;
    info("accumulation " + std::to_string(before) + " scaled to " +
         std::to_string(c.batch.accumulation_steps) + " (at most " +
         std::to_string(kMaxImportAccumulation) + " micro-batches per pipeline stage)");
  }
}

void ScaleSchedule(Config& c, LrScheduleKind kind, int64_t warmup, int64_t total, double min_ratio,
                   const std::string& what, std::vector<ImportMessage>& messages) {
  const auto info = [&](const std::string& t) { messages.push_back({ImportMessage::kInfo, t}); };
  LrScheduleConfig& s = c.optimizer.schedule;
  s = LrScheduleConfig{};
  s.kind = kind;
  s.min_ratio = min_ratio;
  const bool decay = kind != LrScheduleKind::kWarmup;
  const int64_t steps = std::max<int64_t>(c.steps, kImportScheduleSteps);
  const int64_t span = steps - 1;  // the updates after the first, where a schedule shows
  if (warmup >= 2 && (decay ? total > warmup && total <= span : warmup <= span)) {
    s.warmup_steps = warmup;  // test-sized already: kept as written
    s.total_steps = decay ? total : 0;
  } else if (decay) {
    s.total_steps = span;
    const double share = total <= 0 ? 0.0 : static_cast<double>(warmup) / total;
    s.warmup_steps =
        std::clamp<int64_t>(std::llround(share * static_cast<double>(span)), 2, span - 1);
    info(what + " over " + (total < 0 ? std::string("the run") : std::to_string(total) + " steps") +
         " with a warmup of " + std::to_string(warmup) + " scaled onto " + std::to_string(steps) +
         " steps: warmup " + std::to_string(s.warmup_steps) + ", decay ending at update " +
         std::to_string(s.total_steps));
  } else {
    s.warmup_steps = std::clamp<int64_t>(warmup, 2, span);
    info(what + ": a warmup of " + std::to_string(warmup) + " steps on a run of " +
         std::to_string(steps) + " steps: warmup " + std::to_string(s.warmup_steps) +
         (warmup > s.warmup_steps ? " (the run warms up throughout)" : ""));
  }
  if (steps != c.steps)
    info("steps=" + std::to_string(steps) + ": the schedule shows within the run");
  c.steps = steps;
}

json ExportDeepSpeed(const Config& c) {
  json ds = {
      {"train_micro_batch_size_per_gpu", c.batch.micro_batch},
      {"gradient_accumulation_steps", c.batch.accumulation_steps},
      {"train_batch_size", GlobalBatch(c)},
      {"zero_optimization", {{"stage", c.zero.stage}, {"reduce_bucket_size", c.zero.bucket_elems}}},
      {"gradient_clipping", c.clip_grad_norm},
      {"communication_data_type", Name(c.precision.reduce)},
      {"data_types", {{"grad_accum_dtype", Name(c.precision.accumulate)}}}};
  // MiCS: ZeRO 3 within groups of that many consecutive dp ranks (DeepSpeed's only shard groups).
  if (c.zero.shard_group > 0) ds["zero_optimization"]["mics_shard_size"] = c.zero.shard_group;
  json params = {{"lr", c.optimizer.lr}, {"weight_decay", c.optimizer.weight_decay}};
  if (c.optimizer.kind == OptimizerKind::kSgd) {
    params["momentum"] = c.optimizer.momentum;
  } else {
    params["betas"] = {c.optimizer.beta1, c.optimizer.beta2};
    params["eps"] = c.optimizer.eps;
  }
  // DeepSpeed runs "Adam" as AdamW unless told otherwise (see Note [Importing a production
  // config] in import_deepspeed.cpp).
  if (c.optimizer.kind == OptimizerKind::kAdam) params["adam_w_mode"] = false;
  ds["optimizer"] = {{"type", DsOptimizer(c.optimizer.kind)}, {"params", params}};
  if (c.optimizer.schedule.kind != LrScheduleKind::kConstant) ds["scheduler"] = DsScheduler(c);
  ds["bf16"] = {{"enabled", c.precision.param == DType::kBf16}};
  json fp16 = {{"enabled", c.precision.param == DType::kFp16}};
  const LossScaleConfig& s = c.precision.loss_scale;
  if (c.precision.param == DType::kFp16) {
    fp16["loss_scale"] = s.mode == LossScaleMode::kStatic ? s.init : 0.0;
    fp16["initial_scale_power"] = static_cast<int>(std::lround(std::log2(s.init)));
    fp16["loss_scale_window"] = s.growth_interval;
    fp16["hysteresis"] = s.hysteresis;
    fp16["min_loss_scale"] = s.min;
  }
  ds["fp16"] = fp16;
  if (c.precision.param != DType::kFp32 && !c.precision.master_weights) {
    // ZeRO 1-3 keep the master weights and gradients in the parameters' dtype; with fp32
    // optimizer state DeepSpeed needs it on the host (ZeRO-Offload's CPU Adam).
    const std::string dtype = Name(c.precision.param);
    ds[dtype][dtype + "_master_weights_and_grads"] = true;
    ds["zero_optimization"]["offload_optimizer"] = {{"device", "cpu"}};
  }
  return ds;
}

std::vector<std::string> ExportMegatron(const Config& c) {
  const ModelConfig& m = c.model;
  std::vector<std::string> a = {"--num-layers",
                                std::to_string(m.layers),
                                "--hidden-size",
                                std::to_string(m.hidden),
                                "--num-attention-heads",
                                std::to_string(m.heads),
                                "--ffn-hidden-size",
                                std::to_string(m.ffn),
                                "--seq-length",
                                std::to_string(m.seq_len),
                                "--max-position-embeddings",
                                std::to_string(m.seq_len),
                                "--vocab-size",
                                std::to_string(m.vocab),
                                "--micro-batch-size",
                                std::to_string(c.batch.micro_batch),
                                "--global-batch-size",
                                std::to_string(GlobalBatch(c)),
                                "--tensor-model-parallel-size",
                                std::to_string(c.parallel.tp),
                                "--pipeline-model-parallel-size",
                                std::to_string(c.parallel.pp),
                                "--train-iters",
                                std::to_string(c.steps),
                                "--seed",
                                std::to_string(c.seed),
                                "--lr",
                                Num(c.optimizer.lr),
                                "--weight-decay",
                                Num(c.optimizer.weight_decay),
                                "--clip-grad",
                                Num(c.clip_grad_norm),
                                "--attention-dropout",
                                "0",
                                "--hidden-dropout",
                                "0"};
  auto add = [&](std::initializer_list<std::string> xs) { a.insert(a.end(), xs); };
  if (m.kv_heads != m.heads)
    add({"--group-query-attention", "--num-query-groups", std::to_string(m.kv_heads)});
  if (c.parallel.sp) add({"--sequence-parallel"});
  if (c.parallel.virtual_stages > 1)
    add({"--num-layers-per-virtual-pipeline-stage",
         std::to_string(m.layers / (c.parallel.pp * c.parallel.virtual_stages))});
  if (!m.tied_embeddings) add({"--untie-embeddings-and-output-weights"});
  if (!m.position_embeddings) add({"--position-embedding-type", "none"});
  if (m.activation == Activation::kSwiglu) add({"--swiglu"});
  if (c.zero.stage >= 1) add({"--use-distributed-optimizer"});
  if (c.optimizer.kind == OptimizerKind::kSgd) {
    add({"--optimizer", "sgd", "--sgd-momentum", Num(c.optimizer.momentum)});
  } else {
    add({"--optimizer", "adam", "--adam-beta1", Num(c.optimizer.beta1), "--adam-beta2",
         Num(c.optimizer.beta2), "--adam-eps", Num(c.optimizer.eps)});
  }
  // Megatron decays linearly by default; its schedules run one update ahead of paradiff's (see
  // Note [Megatron's schedule] in import_megatron.cpp).
  const LrScheduleConfig& sched = c.optimizer.schedule;
  const char* style = sched.kind == LrScheduleKind::kWarmupLinear   ? "linear"
                      : sched.kind == LrScheduleKind::kWarmupCosine ? "cosine"
                                                                    : "constant";
  add({"--lr-decay-style", style});
  if (sched.kind != LrScheduleKind::kConstant)
    add({"--lr-warmup-iters", std::to_string(sched.warmup_steps)});
  if (sched.total_steps > 0) add({"--lr-decay-iters", std::to_string(sched.total_steps)});
  if (sched.kind == LrScheduleKind::kWarmupCosine)
    add({"--min-lr", Num(sched.min_ratio * c.optimizer.lr)});
  if (c.precision.param == DType::kBf16) add({"--bf16"});
  if (c.precision.param == DType::kFp16) {
    add({"--fp16"});
    const LossScaleConfig& s = c.precision.loss_scale;
    if (s.mode == LossScaleMode::kStatic) add({"--loss-scale", Num(s.init)});
    if (s.mode == LossScaleMode::kDynamic)
      add({"--initial-loss-scale", Num(s.init), "--loss-scale-window",
           std::to_string(s.growth_interval), "--hysteresis", std::to_string(s.hysteresis),
           "--min-loss-scale", Num(s.min)});
  }
  if (c.precision.accumulate == DType::kFp32 && c.precision.param != DType::kFp32)
    add({"--accumulate-allreduce-grads-in-fp32"});
  if (c.precision.param == DType::kBf16 && c.precision.accumulate == DType::kBf16)
    add({"--grad-reduce-in-bf16"});  // Megatron's bf16 default is fp32 gradients
  return a;
}

}  // namespace paradiff
