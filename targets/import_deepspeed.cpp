// ImportDeepSpeed (targets/translate.h): a DeepSpeed config as users write it, translated onto a
// small paradiff config. See Note [Importing a production config].
//
// Note [Importing a production config]: a production config is written for billions of
// parameters and hundreds of ranks; the import keeps what it means, not its numbers:
// - "auto" (the HF integration's placeholder) takes what the integration would derive from the
//   test model (bucket sizes from its hidden size: reduce_bucket_size hidden^2) with an INFO line,
//   or, for values the integration takes from TrainingArguments, that class's default (lr 5e-5,
//   betas [0.9, 0.999], eps 1e-8, weight decay 0, clipping 1.0, micro batch 8, accumulation 1,
//   fp16 / bf16 off) with a WARNING: the run's real arguments are not in the config.
// - A reduce bucket at least as large as the model is one bucket (zero.bucket_elems = the model's
//   parameter count); a bucket of 0 reduces every tensor on its own (bucket_elems 1). INFO.
// - dp (train_batch_size / (micro batch x accumulation); DeepSpeed derives a missing one of the
//   three from the others and the world size, which a config does not hold: the import takes
//   accumulation 1, then micro batch 1, and says so) over kMaxImportWorld / (tp x pp) ranks
//   becomes its largest divisor that fits, or 7 (a prime) when that divisor is 1 and 7 fits,
//   keeping the global batch's divisibility (or the prime layout). INFO.
// - Without train_batch_size (or with "auto") the world size is unknown: a ZeRO stage >= 1 gets
//   dp 2, so that it partitions something. WARNING.
// - A micro batch whose tokens per step exceed the resource budget is halved until it fits. INFO.
// - DeepSpeed's "Adam" is AdamW unless params.adam_w_mode is false (DeepSpeed's engine: "Optimizer
//   name of Adam forces AdamW logic"); other optimizers (Lamb, Lion, 1-bit Adam, ...) become AdamW
//   with a WARNING. Type names are case-insensitive, as in DeepSpeed.
// - A scheduler (WarmupLR, WarmupDecayLR, WarmupCosineLR) becomes optimizer.schedule on a run of
//   kImportScheduleSteps steps (INFO), its shape kept: a warmup and a decay of W and T production
//   steps become round(W / T x (S - 1)) (at least 2) and S - 1 updates, the decay ending at the
//   run's last update; a warmup with no decay longer than the run warms up throughout (S - 1).
//   Counts that fit the run already (T <= S - 1, or W <= S - 1 without a decay) are kept. The
//   warmup starts from 0 (a nonzero warmup_min_lr / warmup_min_ratio: WARNING), linear ("log":
//   WARNING); warmup_max_lr is the peak rate (optimizer.lr). "auto" takes what the HF integration
//   derives: warmup_num_steps from TrainingArguments' warmup (default 0, which DeepSpeed runs as
//   2), total_num_steps the run's last update, warmup_max_lr the optimizer's rate. Other
//   schedulers (OneCycle, LRRangeTest) keep the rate constant with a WARNING.
// - bf16 / fp16 keep fp32 master weights unless "<dtype>_master_weights_and_grads" is on (ZeRO
//   1-3 then keep weights and gradients in that dtype): precision.master_weights false.
// - Every key without a counterpart (offload, activation checkpointing, logging,
//   stage-3 prefetch and persistence sizes, ...) is warned once and ignored; the deepspeed target
//   can still run DeepSpeed-only options through its target file's "--ds" settings.
// A value of the wrong type is an error naming the key and the rule (exit 2), never an exception.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>
#include <set>
#include <string>

#include "core/model_spec.h"
#include "targets/translate.h"

namespace paradiff {

namespace {

using nlohmann::json;

// HF TrainingArguments defaults, what "auto" takes where the integration reads an argument.
constexpr double kHfLr = 5e-5, kHfBeta1 = 0.9, kHfBeta2 = 0.999, kHfEps = 1e-8, kHfDecay = 0.0;
constexpr double kHfMaxGradNorm = 1.0;
constexpr int64_t kHfMicroBatch = 8, kHfAccumulation = 1;

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string Got(const json& v) { return v.is_number() ? v.dump() : std::string(v.type_name()); }

class Importer {
 public:
  Importer(const Config& base, ImportResult& out) : out_(out), c_(out.config) { c_ = base; }

  void Info(const std::string& text) { out_.messages.push_back({ImportMessage::kInfo, text}); }
  void Warn(const std::string& text) { out_.messages.push_back({ImportMessage::kWarning, text}); }
  void Ignore(const std::string& key) {
    if (warned_.insert(key).second) Warn(key + ": no paradiff counterpart; ignored");
  }
  void Error(const std::string& key, const std::string& rule) { st_.Add(key, key + ": " + rule); }
  static bool Auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

  // A whole number (5e8 included) >= min; "auto" returns false and leaves `dst`.
  bool Int(const json& v, const std::string& key, int64_t min, int64_t& dst) {
    if (Auto(v)) return false;
    const bool whole = v.is_number() && std::isfinite(v.get<double>()) &&
                       v.get<double>() == std::floor(v.get<double>()) && v.get<double>() < 9.2e18;
    if (!whole || v.get<double>() < static_cast<double>(min)) {
      Error(key,
            "must be a whole number >= " + std::to_string(min) + " or \"auto\", got " + Got(v));
      return false;
    }
    dst = v.is_number_integer() ? v.get<int64_t>() : static_cast<int64_t>(v.get<double>());
    return true;
  }
  bool Number(const json& v, const std::string& key, double min, double& dst) {
    if (Auto(v)) return false;
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < min) {
      Error(key, "must be a number >= " + json(min).dump() + " or \"auto\", got " + Got(v));
      return false;
    }
    dst = v.get<double>();
    return true;
  }
  // true / false; "auto" is false with a WARNING (HF turns fp16 / bf16 on from its arguments).
  bool Bool(const json& v, const std::string& key) {
    if (Auto(v)) {
      Warn(key +
           "=\"auto\": the HF integration sets it from --fp16 / --bf16, not in this config; "
           "taken as false");
      return false;
    }
    if (!v.is_boolean()) {
      Error(key, "must be true, false or \"auto\", got " + Got(v));
      return false;
    }
    return v.get<bool>();
  }
  const json* Object(const json& parent, const std::string& name, const std::string& key) {
    if (!parent.contains(name)) return nullptr;
    const json& v = parent[name];
    if (!v.is_object()) {
      Error(key, "must be an object, got " + Got(v));
      return nullptr;
    }
    return &v;
  }
  // Warns once for each member of `obj` that is not in `mapped`.
  void IgnoreOthers(const json& obj, const std::string& prefix,
                    const std::set<std::string>& mapped) {
    for (const auto& [k, v] : obj.items())
      if (!mapped.count(k)) Ignore(prefix + k);
  }

  void Batch(const json& ds);
  void Zero(const json& ds);
  void Precision(const json& ds);
  void Optimizer(const json& ds);
  void Clipping(const json& ds);
  void DataTypes(const json& ds);
  void Scheduler(const json& ds);
  void ScaleToBudget();

  Status status() const { return st_; }

 private:
  ImportResult& out_;
  Config& c_;
  Status st_;
  std::set<std::string> warned_;
  int64_t bucket_ = -1;    // reduce_bucket_size as written (-1: absent)
  bool dp_known_ = false;  // train_batch_size gave dp
  bool bucket_auto_ = false;
};

void Importer::Batch(const json& ds) {
  int64_t micro = 0, accum = 0, global = 0;
  auto read = [&](const char* key, int64_t& dst, int64_t hf_default) {
    if (!ds.contains(key)) return;
    if (Auto(ds[key])) {
      if (hf_default > 0) {
        dst = hf_default;
        Warn(std::string(key) + "=\"auto\": the HF integration takes it from TrainingArguments; " +
             "its default " + std::to_string(hf_default) + " taken");
      }
      return;
    }
    Int(ds[key], key, 1, dst);
  };
  read("train_micro_batch_size_per_gpu", micro, kHfMicroBatch);
  read("gradient_accumulation_steps", accum, kHfAccumulation);
  read("train_batch_size", global, 0);  // "auto": micro x accumulation x dp (derived below)
  if (micro == 0 && accum == 0 && global == 0) return;  // paradiff's batch
  if (global > 0 && micro > 0 && accum > 0 && global % (micro * accum) != 0) {
    Error("train_batch_size", std::to_string(global) + " is not micro batch x accumulation (" +
                                  std::to_string(micro * accum) + ") x dp");
    return;
  }
  if (global > 0 && (micro == 0 || accum == 0)) {
    if (accum == 0) accum = 1;
    if (micro == 0) micro = 1;
    if (global % (micro * accum) != 0) {
      Error("train_batch_size", std::to_string(global) + " is not a multiple of micro batch x " +
                                    "accumulation (" + std::to_string(micro * accum) + ")");
      return;
    }
    Warn("train_batch_size: the world size is not in a DeepSpeed config; taken as micro batch " +
         std::to_string(micro) + " x accumulation " + std::to_string(accum) + " x dp " +
         std::to_string(global / (micro * accum)));
  }
  if (micro > 0) c_.batch.micro_batch = micro;
  if (accum > 0) c_.batch.accumulation_steps = accum;
  if (global > 0) {
    dp_known_ = true;
    c_.parallel.dp = global / (c_.batch.micro_batch * c_.batch.accumulation_steps);
    c_.parallel.world = c_.parallel.dp * c_.parallel.tp * c_.parallel.pp;
  }
}

void Importer::Zero(const json& ds) {
  if (!ds.contains("zero_optimization")) return;
  const json& z = ds["zero_optimization"];
  if (z.is_boolean()) {  // DeepSpeed's legacy form: true is stage 1
    c_.zero.stage = z.get<bool>() ? 1 : 0;
    Info("zero_optimization=" + z.dump() + ": DeepSpeed's legacy form of stage " +
         std::to_string(c_.zero.stage));
    return;
  }
  const json* zp = Object(ds, "zero_optimization", "zero_optimization");
  if (!zp) return;
  if (zp->contains("stage")) {
    const json& s = (*zp)["stage"];
    if (!s.is_number_integer() || s.get<int64_t>() < 0 || s.get<int64_t>() > 3)
      Error("zero_optimization.stage", "must be 0, 1, 2 or 3, got " + Got(s));
    else
      c_.zero.stage = s.get<int64_t>();
  }
  if (zp->contains("reduce_bucket_size")) {
    const json& b = (*zp)["reduce_bucket_size"];
    bucket_auto_ = Auto(b);
    Int(b, "zero_optimization.reduce_bucket_size", 0, bucket_);
  }
  if (zp->contains("mics_shard_size")) {  // DeepSpeed's default -1: no MiCS
    const json& m = (*zp)["mics_shard_size"];
    int64_t shard = 0;
    const bool off = m.is_number_integer() && m.get<int64_t>() <= 0;
    if (!off && Int(m, "zero_optimization.mics_shard_size", 1, shard)) {
      if (c_.zero.stage == 3)
        c_.zero.shard_group = shard;
      else
        Warn("zero_optimization.mics_shard_size=" + std::to_string(shard) +
             ": DeepSpeed shards within groups (MiCS) at stage 3 only; ignored at stage " +
             std::to_string(c_.zero.stage));
    }
  }
  // Sizes and switches with no counterpart: checked for their type, then warned about.
  for (const char* k : {"allgather_bucket_size", "stage3_prefetch_bucket_size",
                        "stage3_param_persistence_threshold", "stage3_max_live_parameters",
                        "stage3_max_reuse_distance", "sub_group_size"}) {
    if (!zp->contains(k)) continue;
    int64_t ignored = 0;
    Int((*zp)[k], std::string("zero_optimization.") + k, 0, ignored);
  }
  for (const char* k : {"offload_optimizer", "offload_param"}) {
    const json* o = Object(*zp, k, std::string("zero_optimization.") + k);
    if (!o) continue;
    const std::string device = o->contains("device") && (*o)["device"].is_string()
                                   ? Lower((*o)["device"].get<std::string>())
                                   : "";
    if (device == "none" || device.empty()) continue;  // no offload: nothing lost
    if (device != "cpu" && device != "nvme") {
      Error(std::string("zero_optimization.") + k + ".device",
            "must be \"cpu\", \"nvme\" or \"none\", got " + (*o)["device"].dump());
      continue;
    }
    Ignore(std::string("zero_optimization.") + k);
  }
  IgnoreOthers(
      *zp, "zero_optimization.",
      {"stage", "reduce_bucket_size", "mics_shard_size", "offload_optimizer", "offload_param"});
}

void Importer::Precision(const json& ds) {
  // "bfloat16" is DeepSpeed's older name of "bf16".
  const char* bf16_key = ds.contains("bf16") ? "bf16" : "bfloat16";
  const json* bf = Object(ds, bf16_key, bf16_key);
  const json* fp = Object(ds, "fp16", "fp16");
  const bool bf16 =
      bf && bf->contains("enabled") && Bool((*bf)["enabled"], std::string(bf16_key) + ".enabled");
  const bool fp16 = fp && fp->contains("enabled") && Bool((*fp)["enabled"], "fp16.enabled");
  if (bf)
    IgnoreOthers(*bf, std::string(bf16_key) + ".", {"enabled", "bf16_master_weights_and_grads"});
  if (bf16 && fp16) return Error("fp16.enabled", "bf16 and fp16 cannot both be enabled");
  if (bf16 || fp16) {
    const DType d = bf16 ? DType::kBf16 : DType::kFp16;
    c_.precision.param = c_.precision.compute = d;
    const json& holder = bf16 ? *bf : *fp;
    const std::string key = std::string(Name(d)) + "_master_weights_and_grads";
    c_.precision.master_weights =
        !(holder.contains(key) &&
          Bool(holder[key], std::string(bf16 ? bf16_key : "fp16") + "." + key));
  }
  if (!fp) return;
  IgnoreOthers(*fp, "fp16.",
               {"enabled", "loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
                "min_loss_scale", "fp16_master_weights_and_grads"});
  if (!fp16) return;
  LossScaleConfig& s = c_.precision.loss_scale;
  double fixed = 0, min_scale = 1;
  int64_t power = 16, window = 1000, hysteresis = 2;
  if (fp->contains("loss_scale")) Number((*fp)["loss_scale"], "fp16.loss_scale", 0, fixed);
  if (fp->contains("initial_scale_power"))
    Int((*fp)["initial_scale_power"], "fp16.initial_scale_power", 0, power);
  if (fp->contains("loss_scale_window"))
    Int((*fp)["loss_scale_window"], "fp16.loss_scale_window", 1, window);
  if (fp->contains("hysteresis")) Int((*fp)["hysteresis"], "fp16.hysteresis", 1, hysteresis);
  if (fp->contains("min_loss_scale"))
    Number((*fp)["min_loss_scale"], "fp16.min_loss_scale", 0, min_scale);
  if (power > 60) return Error("fp16.initial_scale_power", "must be at most 60");
  s.mode = fixed > 0 ? LossScaleMode::kStatic : LossScaleMode::kDynamic;
  s.init = fixed > 0 ? fixed : std::ldexp(1.0, static_cast<int>(power));
  s.growth_interval = window;
  s.hysteresis = hysteresis;
  s.min = min_scale;
}

void Importer::Optimizer(const json& ds) {
  const json* o = Object(ds, "optimizer", "optimizer");
  if (!o) return;
  IgnoreOthers(*o, "optimizer.", {"type", "params"});
  std::string type;
  if (o->contains("type")) {
    if (!(*o)["type"].is_string())
      return Error("optimizer.type", "must be a string, got " + Got((*o)["type"]));
    type = (*o)["type"].get<std::string>();
  }
  const json* p = Object(*o, "params", "optimizer.params");
  const json params = p ? *p : json::object();
  if (params.contains("max_grad_norm"))
    return Error("optimizer.params.max_grad_norm",
                 "not an optimizer parameter in DeepSpeed (use gradient_clipping)");
  bool adam_w_mode = true;  // DeepSpeed's ADAM_W_MODE_DEFAULT
  if (params.contains("adam_w_mode")) {
    if (!params["adam_w_mode"].is_boolean())
      return Error("optimizer.params.adam_w_mode",
                   "must be true or false, got " + Got(params["adam_w_mode"]));
    adam_w_mode = params["adam_w_mode"].get<bool>();
  }
  const std::string t = Lower(type);
  if (t == "sgd") {
    c_.optimizer.kind = OptimizerKind::kSgd;
  } else if (t == "adamw") {
    c_.optimizer.kind = OptimizerKind::kAdamW;
  } else if (t == "adam") {
    c_.optimizer.kind = adam_w_mode ? OptimizerKind::kAdamW : OptimizerKind::kAdam;
    if (adam_w_mode)
      Info("optimizer.type=" + type +
           ": DeepSpeed runs Adam as AdamW unless params.adam_w_mode "
           "is false; adamw taken");
  } else {
    c_.optimizer.kind = OptimizerKind::kAdamW;
    Warn("optimizer.type=" + json(type).dump() +
         ": paradiff has SGD, Adam and AdamW; adamw taken in its place");
  }
  auto number = [&](const char* key, double hf, double min, double& dst) {
    if (!params.contains(key)) return;
    const std::string path = std::string("optimizer.params.") + key;
    if (Auto(params[key])) {
      dst = hf;
      Warn(path + "=\"auto\": the HF integration takes it from TrainingArguments; its default " +
           json(hf).dump() + " taken");
      return;
    }
    Number(params[key], path, min, dst);
  };
  number("lr", kHfLr, 0, c_.optimizer.lr);
  number("eps", kHfEps, 0, c_.optimizer.eps);
  number("weight_decay", kHfDecay, 0, c_.optimizer.weight_decay);
  number("momentum", 0.0, 0, c_.optimizer.momentum);
  if (params.contains("betas")) {
    const json& b = params["betas"];
    if (Auto(b)) {
      c_.optimizer.beta1 = kHfBeta1, c_.optimizer.beta2 = kHfBeta2;
      Warn(
          "optimizer.params.betas=\"auto\": the HF integration takes them from TrainingArguments; "
          "its defaults [0.9, 0.999] taken");
    } else if (!b.is_array() || b.size() != 2 || !b[0].is_number() || !b[1].is_number()) {
      Error("optimizer.params.betas", "must be [beta1, beta2] or \"auto\", got " + b.dump());
    } else {
      c_.optimizer.beta1 = b[0].get<double>(), c_.optimizer.beta2 = b[1].get<double>();
    }
  }
  IgnoreOthers(params, "optimizer.params.",
               {"lr", "eps", "weight_decay", "momentum", "betas", "adam_w_mode", "torch_adam"});
}

void Importer::Clipping(const json& ds) {
  if (!ds.contains("gradient_clipping")) return;
  if (Auto(ds["gradient_clipping"])) {
    c_.clip_grad_norm = kHfMaxGradNorm;
    Warn(
        "gradient_clipping=\"auto\": the HF integration takes max_grad_norm from "
        "TrainingArguments; its default 1.0 taken");
    return;
  }
  Number(ds["gradient_clipping"], "gradient_clipping", 0, c_.clip_grad_norm);
}

void Importer::DataTypes(const json& ds) {
  auto dtype = [&](const json& v, const std::string& key, DType& dst) {
    if (v.is_null()) return;  // DeepSpeed's default: the parameters' dtype
    const std::optional<DType> d =
        v.is_string() ? ParseIn(kDTypeNames, v.get<std::string>()) : std::nullopt;
    if (!d || *d == DType::kFp64) return Error(key, "must be fp32, bf16 or fp16, got " + v.dump());
    dst = *d;
  };
  if (ds.contains("communication_data_type"))
    dtype(ds["communication_data_type"], "communication_data_type", c_.precision.reduce);
  if (const json* d = Object(ds, "data_types", "data_types")) {
    if (d->contains("grad_accum_dtype"))
      dtype((*d)["grad_accum_dtype"], "data_types.grad_accum_dtype", c_.precision.accumulate);
    IgnoreOthers(*d, "data_types.", {"grad_accum_dtype"});
  }
}

void Importer::Scheduler(const json& ds) {
  const json* sc = Object(ds, "scheduler", "scheduler");
  if (!sc) return;
  IgnoreOthers(*sc, "scheduler.", {"type", "params"});
  if (!sc->contains("type") || !(*sc)["type"].is_string())
    return Error("scheduler.type", "must be a string, got " +
                                       (sc->contains("type") ? Got((*sc)["type"]) : "nothing"));
  const std::string type = (*sc)["type"].get<std::string>();
  const json* p = Object(*sc, "params", "scheduler.params");
  const json params = p ? *p : json::object();
  const std::optional<LrScheduleKind> kind = ParseIn(kDeepSpeedSchedulerNames, type);
  if (!kind)
    return Warn("scheduler.type=" + json(type).dump() + ": paradiff has " +
                NamesOf(kDeepSpeedSchedulerNames) + "; the rate stays constant");
  const std::string pre = "scheduler.params.";
  const bool cosine = *kind == LrScheduleKind::kWarmupCosine;
  const bool decay = *kind != LrScheduleKind::kWarmup;
  double min_ratio = 0;
  std::set<std::string> mapped = {"warmup_num_steps", "warmup_type"};
  int64_t warmup = 0, total = 0;
  bool total_auto = false;
  if (params.contains("warmup_num_steps") && !Auto(params["warmup_num_steps"])) {
    Int(params["warmup_num_steps"], pre + "warmup_num_steps", 0, warmup);
  } else {
    Warn(pre + "warmup_num_steps" +
         (params.contains("warmup_num_steps") ? "=\"auto\": the HF integration takes it from "
                                                "TrainingArguments' warmup, by default 0"
                                              : ": absent; DeepSpeed's default is 1000") +
         "; taken as 2 updates");
    warmup = 2;
  }
  if (decay) {
    mapped.insert("total_num_steps");
    if (!params.contains("total_num_steps")) {
      Error(pre + "total_num_steps", "required by " + type);
    } else if (Auto(params["total_num_steps"])) {
      total_auto = true;
      Warn(pre +
           "total_num_steps=\"auto\": the HF integration sets it to the run's length; the decay "
           "ends at the imported run's last update");
    } else {
      Int(params["total_num_steps"], pre + "total_num_steps", 1, total);
    }
  }
  if (params.contains("warmup_type")) {
    const json& t = params["warmup_type"];
    if (!t.is_string()) return Error(pre + "warmup_type", "must be a string, got " + Got(t));
    if (t.get<std::string>() != "linear")
      Warn(pre + "warmup_type=" + t.dump() + ": paradiff's warmups are linear; linear taken");
  }
  // The warmup's start: paradiff's warmups start from 0.
  for (const char* k : {"warmup_min_lr", "warmup_min_ratio"}) {
    if (!params.contains(k)) continue;
    mapped.insert(k);
    double v = 0;
    if (!Auto(params[k]) && Number(params[k], pre + k, 0, v) && v != 0)
      Warn(pre + k + "=" + params[k].dump() + ": paradiff's warmups start from 0; taken as 0");
  }
  if (params.contains("warmup_max_lr")) {
    mapped.insert("warmup_max_lr");
    double peak = 0;
    if (Auto(params["warmup_max_lr"])) {
      Info(pre + "warmup_max_lr=\"auto\": the optimizer's rate, as the HF integration sets it");
    } else if (Number(params["warmup_max_lr"], pre + "warmup_max_lr", 0, peak) && peak > 0 &&
               peak != c_.optimizer.lr) {
      Info(pre + "warmup_max_lr=" + json(peak).dump() + ": the peak rate (optimizer.lr)");
      c_.optimizer.lr = peak;
    }
  }
  if (cosine && params.contains("cos_min_ratio")) {
    mapped.insert("cos_min_ratio");
    double m = 0;
    if (Number(params["cos_min_ratio"], pre + "cos_min_ratio", 0, m)) {
      if (m >= 1) return Error(pre + "cos_min_ratio", "must be < 1, got " + json(m).dump());
      min_ratio = m;
    }
  } else if (cosine) {
    min_ratio = 0.0001;  // DeepSpeed's default
  }
  IgnoreOthers(params, pre, mapped);
  ScaleSchedule(c_, *kind, warmup, total_auto ? -1 : total, min_ratio, "scheduler: " + type,
                out_.messages);
}

void Importer::ScaleToBudget() {
  if (!dp_known_ && c_.zero.stage >= 1 && c_.parallel.dp == 1) {
    c_.parallel.dp = 2;
    c_.parallel.world = 2 * c_.parallel.tp * c_.parallel.pp;
    Warn(
        "train_batch_size: absent or \"auto\", and the world size is not in a DeepSpeed "
        "config; dp 2 taken so that ZeRO stage " +
        std::to_string(c_.zero.stage) + " partitions something");
  }
  ScaleLayout(c_, out_.messages);
  const int64_t params = ModelParameterCount(c_.model);
  if (bucket_auto_) {
    bucket_ = c_.model.hidden * c_.model.hidden;
    Info("zero_optimization.reduce_bucket_size=\"auto\": hidden^2 of the test model, " +
         std::to_string(bucket_) + " elements (the HF integration's rule)");
  }
  if (bucket_ == 0) {
    c_.zero.bucket_elems = 1;
    Info(
        "zero_optimization.reduce_bucket_size=0: every tensor reduced on its own "
        "(zero.bucket_elems=1)");
  } else if (bucket_ > 0 && params > 0 && bucket_ >= params) {
    c_.zero.bucket_elems = params;
    Info("zero_optimization.reduce_bucket_size=" + std::to_string(bucket_) +
         " holds the whole test model (" + std::to_string(params) +
         " parameters): one bucket (zero.bucket_elems=" + std::to_string(params) + ")");
  } else if (bucket_ > 0) {
    c_.zero.bucket_elems = bucket_;
  }
}

}  // namespace

StatusOr<ImportResult> ImportDeepSpeed(const json& ds, const Config& base) {
  if (!ds.is_object()) return Status::Error("", "config: a DeepSpeed config is a JSON object");
  ImportResult out;
  Importer im(base, out);
  const std::set<std::string> mapped = {"train_micro_batch_size_per_gpu",
                                        "gradient_accumulation_steps",
                                        "train_batch_size",
                                        "zero_optimization",
                                        "bf16",
                                        "bfloat16",
                                        "fp16",
                                        "gradient_clipping",
                                        "optimizer",
                                        "data_types",
                                        "communication_data_type",
                                        "scheduler"};
  for (const auto& [k, v] : ds.items())
    if (!mapped.count(k)) im.Ignore(k);
  if (ds.contains("bf16") && ds.contains("bfloat16")) im.Ignore("bfloat16");
  im.Batch(ds);
  im.Zero(ds);
  im.Precision(ds);
  im.Optimizer(ds);
  im.Clipping(ds);
  im.DataTypes(ds);
  im.Scheduler(ds);
  if (!im.status().ok()) return im.status();
  im.ScaleToBudget();
  return out;
}

}  // namespace paradiff
