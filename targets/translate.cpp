#include "targets/translate.h"

#include <cmath>
#include <set>

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

}  // namespace

json ExportDeepSpeed(const Config& c) {
  json ds = {
      {"train_micro_batch_size_per_gpu", c.batch.micro_batch},
      {"gradient_accumulation_steps", c.batch.accumulation_steps},
      {"train_batch_size", GlobalBatch(c)},
      {"zero_optimization", {{"stage", c.zero.stage}, {"reduce_bucket_size", c.zero.bucket_elems}}},
      {"gradient_clipping", c.clip_grad_norm},
      {"communication_data_type", Name(c.precision.reduce)},
      {"data_types", {{"grad_accum_dtype", Name(c.precision.accumulate)}}}};
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
