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

StatusOr<DeepSpeedImport> ImportDeepSpeed(const json& ds, const Config& base) {
  if (!ds.is_object()) return Status::Error("", "a DeepSpeed config is a JSON object");
  DeepSpeedImport out;
  Config& c = out.config;
  c = base;
  Status st;
  auto err = [&](const std::string& k, const std::string& rule) {
    st.Merge(Status::Error(k, k + ": " + rule));
  };
  auto posint = [&](const json& j, const std::string& k, int64_t& dst) {
    if (!j.is_number_integer() || j.get<int64_t>() < 1) return err(k, "must be an integer >= 1");
    dst = j.get<int64_t>();
  };
  const std::set<std::string> known = {"train_micro_batch_size_per_gpu",
                                       "gradient_accumulation_steps",
                                       "train_batch_size",
                                       "zero_optimization",
                                       "bf16",
                                       "fp16",
                                       "gradient_clipping",
                                       "optimizer",
                                       "data_types",
                                       "communication_data_type"};
  for (const auto& [k, v] : ds.items())
    if (!known.count(k)) out.ignored.push_back(k);
  if (ds.contains("train_micro_batch_size_per_gpu"))
    posint(ds["train_micro_batch_size_per_gpu"], "train_micro_batch_size_per_gpu",
           c.batch.micro_batch);
  if (ds.contains("gradient_accumulation_steps"))
    posint(ds["gradient_accumulation_steps"], "gradient_accumulation_steps",
           c.batch.accumulation_steps);
  if (ds.contains("train_batch_size")) {
    int64_t tb = 0;
    posint(ds["train_batch_size"], "train_batch_size", tb);
    const int64_t per = c.batch.micro_batch * c.batch.accumulation_steps;
    if (tb > 0 && tb % per != 0)
      err("train_batch_size", std::to_string(tb) + " is not micro batch x accumulation (" +
                                  std::to_string(per) + ") x dp");
    else if (tb > 0)
      c.parallel.dp = tb / per, c.parallel.world = c.parallel.dp * c.parallel.tp * c.parallel.pp;
  }
  if (ds.contains("zero_optimization")) {
    const json& z = ds["zero_optimization"];
    if (!z.is_object()) {
      err("zero_optimization", "must be an object");
    } else {
      for (const auto& [k, v] : z.items())
        if (k != "stage" && k != "reduce_bucket_size")
          out.ignored.push_back("zero_optimization." + k);
      if (z.contains("stage")) {
        if (!z["stage"].is_number_integer() || z["stage"].get<int64_t>() < 0 ||
            z["stage"].get<int64_t>() > 3)
          err("zero_optimization.stage", "must be 0, 1, 2 or 3");
        else
          c.zero.stage = z["stage"].get<int64_t>();
      }
      if (z.contains("reduce_bucket_size")) {
        const json& b = z["reduce_bucket_size"];
        if (!b.is_number() || b.get<double>() < 1 || b.get<double>() != std::floor(b.get<double>()))
          err("zero_optimization.reduce_bucket_size", "must be a whole number of elements >= 1");
        else
          c.zero.bucket_elems = static_cast<int64_t>(b.get<double>());
      }
    }
  }
  const bool bf16 = ds.contains("bf16") && ds["bf16"].value("enabled", false);
  const bool fp16 = ds.contains("fp16") && ds["fp16"].value("enabled", false);
  if (bf16 && fp16) err("fp16.enabled", "bf16 and fp16 cannot both be enabled");
  if (bf16 || fp16) {
    const DType d = bf16 ? DType::kBf16 : DType::kFp16;
    c.precision.param = c.precision.compute = d;
    c.precision.master_weights = true;  // DeepSpeed keeps fp32 master weights in both modes
  }
  if (fp16) {
    const json& f = ds["fp16"];
    LossScaleConfig& s = c.precision.loss_scale;
    const double fixed = f.value("loss_scale", 0.0);
    s.mode = fixed > 0 ? LossScaleMode::kStatic : LossScaleMode::kDynamic;
    s.init = fixed > 0 ? fixed : std::ldexp(1.0, f.value("initial_scale_power", 16));
    s.growth_interval = f.value("loss_scale_window", int64_t{1000});
    s.hysteresis = f.value("hysteresis", int64_t{2});
    s.min = f.value("min_loss_scale", 1.0);
  }
  if (ds.contains("gradient_clipping")) {
    if (!ds["gradient_clipping"].is_number() || ds["gradient_clipping"].get<double>() < 0)
      err("gradient_clipping", "must be a number >= 0");
    else
      c.clip_grad_norm = ds["gradient_clipping"].get<double>();
  }
  auto dtype = [&](const std::string& k, const json& v, DType& dst) {
    for (DType d : {DType::kFp32, DType::kBf16, DType::kFp16})
      if (v == Name(d)) return void(dst = d);
    err(k, "must be fp32, bf16 or fp16");
  };
  if (ds.contains("communication_data_type"))
    dtype("communication_data_type", ds["communication_data_type"], c.precision.reduce);
  if (ds.contains("data_types") && ds["data_types"].contains("grad_accum_dtype"))
    dtype("data_types.grad_accum_dtype", ds["data_types"]["grad_accum_dtype"],
          c.precision.accumulate);
  if (ds.contains("optimizer")) {
    const json& o = ds["optimizer"];
    const std::string type = o.value("type", "");
    if (type == "SGD")
      c.optimizer.kind = OptimizerKind::kSgd;
    else if (type == "Adam")
      c.optimizer.kind = OptimizerKind::kAdam;
    else if (type == "AdamW")
      c.optimizer.kind = OptimizerKind::kAdamW;
    else
      err("optimizer.type", "'" + type + "' is not SGD, Adam or AdamW");
    const json p = o.value("params", json::object());
    c.optimizer.lr = p.value("lr", c.optimizer.lr);
    c.optimizer.eps = p.value("eps", c.optimizer.eps);
    c.optimizer.weight_decay = p.value("weight_decay", c.optimizer.weight_decay);
    c.optimizer.momentum = p.value("momentum", c.optimizer.momentum);
    if (p.contains("betas")) {
      if (!p["betas"].is_array() || p["betas"].size() != 2)
        err("optimizer.params.betas", "must be [beta1, beta2]");
      else
        c.optimizer.beta1 = p["betas"][0], c.optimizer.beta2 = p["betas"][1];
    }
  }
  if (!st.ok()) return st;
  return out;
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
  json params = {{"lr", c.optimizer.lr}, {"weight_decay", c.optimizer.weight_decay}};
  if (c.optimizer.kind == OptimizerKind::kSgd) {
    params["momentum"] = c.optimizer.momentum;
  } else {
    params["betas"] = {c.optimizer.beta1, c.optimizer.beta2};
    params["eps"] = c.optimizer.eps;
  }
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
  return a;
}

}  // namespace paradiff
