// The Config value type: one training configuration (model, data, layout, sharding, precision,
// optimizer). It is a plain value: copyable, comparable, with documented defaults (docs/CONFIG.md).
// JSON I/O lives in config_json.h, the rules in validate.h.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/spelling.h"

namespace paradiff {

enum class ModelKind { kGpt, kExactLinear };
enum class Activation { kGelu, kSwiglu };
enum class Schedule { kGpipe, k1F1B, kInterleaved };
enum class PartitionMethod { kUniform, kParameters, kExplicit };
enum class DType {
  kFp32,
  kBf16,
  kFp16,
  kFp64
};  // kFp64 is internal (reference truth), never in JSON
enum class LossScaleMode { kNone, kStatic, kDynamic };
enum class OptimizerKind { kSgd, kAdam, kAdamW };
enum class LrScheduleKind { kConstant, kWarmup, kWarmupLinear, kWarmupCosine };
enum class Backend { kLocal, kMpi, kNccl };

struct ModelConfig {
  ModelKind kind = ModelKind::kGpt;
  int64_t layers = 2;
  int64_t hidden = 32;
  int64_t heads = 4;
  int64_t kv_heads = 4;
  int64_t ffn = 64;
  int64_t vocab = 61;
  int64_t seq_len = 8;
  bool tied_embeddings = true;
  bool position_embeddings = true;
  Activation activation = Activation::kGelu;
  bool operator==(const ModelConfig&) const;
};

struct BatchConfig {
  int64_t micro_batch = 2;
  int64_t accumulation_steps = 1;
  bool operator==(const BatchConfig&) const;
};

struct ParallelConfig {
  int64_t world = 1;  // = tp * pp * dp
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t dp = 1;
  bool sp = false;
  int64_t virtual_stages = 1;
  Schedule schedule = Schedule::k1F1B;
  PartitionMethod partition = PartitionMethod::kUniform;
  std::vector<int64_t> partition_layers;  // layers per stage chunk, only for kExplicit
  bool operator==(const ParallelConfig&) const;
};

struct ZeroConfig {
  int64_t stage = 0;
  int64_t bucket_elems = 4096;
  int64_t align_elems = 1;
  // The dp ranks a ZeRO stage shards over, in groups of this many consecutive dp ranks, each group
  // a replica of the sharded state (torch's HSDP, DeepSpeed's MiCS); 0: all dp ranks, one group.
  int64_t shard_group = 0;
  bool operator==(const ZeroConfig&) const;
};

struct LossScaleConfig {
  LossScaleMode mode = LossScaleMode::kNone;
  double init = 65536.0;
  double growth_factor = 2.0;
  double backoff = 0.5;
  int64_t growth_interval = 1000;
  int64_t hysteresis = 2;
  double min = 1.0;
  bool operator==(const LossScaleConfig&) const;
};

struct PrecisionConfig {
  DType param = DType::kFp32;
  DType compute = DType::kFp32;
  DType reduce = DType::kFp32;
  DType accumulate = DType::kFp32;
  bool master_weights = true;
  LossScaleConfig loss_scale;
  // A separate float32 copy of the parameters exists: master_weights asked for, and the parameters
  // themselves are not float32 (with fp32 parameters they are their own master).
  bool keeps_master() const { return master_weights && param != DType::kFp32; }
  bool operator==(const PrecisionConfig&) const;
};

// The learning rate per optimizer step (core/lr_schedule.h, docs/CONFIG.md): `lr` times a ratio
// of the count of updates applied before the step. Steps an overflow skipped do not count.
struct LrScheduleConfig {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  int64_t warmup_steps = 0;  // warmup kinds: >= 2 (the ratio rises linearly from 0)
  int64_t total_steps = 0;   // decay kinds: where the decay ends, > warmup_steps
  double min_ratio = 0.0;    // warmup_cosine: the ratio the decay ends at, in [0, 1)
  bool operator==(const LrScheduleConfig&) const;
};

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::kAdamW;
  double lr = 0.01;  // the peak rate: the schedule's ratios are <= 1
  LrScheduleConfig schedule;
  double momentum = 0.9;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0.0;
  bool operator==(const OptimizerConfig&) const;
};

struct ReloadConfig {
  int64_t tp = 1;
  int64_t pp = 1;
  int64_t dp = 1;
  int64_t zero_stage = 0;
  bool operator==(const ReloadConfig&) const;
};

struct CheckpointConfig {
  int64_t save_at = 0;  // 0 = no checkpoint
  ReloadConfig reload;
  bool operator==(const CheckpointConfig&) const;
};

struct Config {
  int64_t schema = 1;
  uint64_t seed = 1234;
  int64_t steps = 2;
  ModelConfig model;
  BatchConfig batch;
  ParallelConfig parallel;
  ZeroConfig zero;
  PrecisionConfig precision;
  OptimizerConfig optimizer;
  double clip_grad_norm = 0.0;
  CheckpointConfig checkpoint;
  Backend backend = Backend::kLocal;
  std::vector<std::string> faults;  // bug-zoo switch names (kernels/faults.h)
  // A target's own settings (an external target's "options", docs/TARGETS.md): name -> the JSON
  // text of a scalar value. The built-in engine has none.
  std::map<std::string, std::string> target_options;
  bool operator==(const Config&) const;
};

// Derived quantities every layer of the harness agrees on.
inline int64_t HeadDim(const ModelConfig& m) { return m.hidden / m.heads; }
inline int64_t GlobalBatch(const Config& c) {
  return c.batch.micro_batch * c.batch.accumulation_steps * c.parallel.dp;
}

// The names used in JSON, on the command line and in messages: one table per enum
// (core/spelling.h). JSON accepts neither fp64 (the reference's internal truth precision) nor the
// partition "explicit" (an explicit partition is written as an array).
inline constexpr Spelling<ModelKind> kModelKindNames[] = {
    {"gpt", ModelKind::kGpt}, {"exact_linear", ModelKind::kExactLinear}};
inline constexpr Spelling<Activation> kActivationNames[] = {{"gelu", Activation::kGelu},
                                                            {"swiglu", Activation::kSwiglu}};
inline constexpr Spelling<Schedule> kScheduleNames[] = {{"gpipe", Schedule::kGpipe},
                                                        {"1f1b", Schedule::k1F1B},
                                                        {"interleaved", Schedule::kInterleaved}};
inline constexpr Spelling<PartitionMethod> kPartitionNames[] = {
    {"uniform", PartitionMethod::kUniform},
    {"parameters", PartitionMethod::kParameters},
    {"explicit", PartitionMethod::kExplicit}};
inline constexpr Spelling<DType> kDTypeNames[] = {
    {"fp32", DType::kFp32}, {"bf16", DType::kBf16}, {"fp16", DType::kFp16}, {"fp64", DType::kFp64}};
inline constexpr Spelling<LossScaleMode> kLossScaleModeNames[] = {
    {"none", LossScaleMode::kNone},
    {"static", LossScaleMode::kStatic},
    {"dynamic", LossScaleMode::kDynamic}};
inline constexpr Spelling<OptimizerKind> kOptimizerNames[] = {
    {"sgd", OptimizerKind::kSgd}, {"adam", OptimizerKind::kAdam}, {"adamw", OptimizerKind::kAdamW}};
inline constexpr Spelling<LrScheduleKind> kLrScheduleNames[] = {
    {"constant", LrScheduleKind::kConstant},
    {"warmup", LrScheduleKind::kWarmup},
    {"warmup_linear", LrScheduleKind::kWarmupLinear},
    {"warmup_cosine", LrScheduleKind::kWarmupCosine}};
inline constexpr Spelling<Backend> kBackendNames[] = {
    {"local", Backend::kLocal}, {"mpi", Backend::kMpi}, {"nccl", Backend::kNccl}};

inline const char* Name(ModelKind v) { return NameIn(kModelKindNames, v); }
inline const char* Name(Activation v) { return NameIn(kActivationNames, v); }
inline const char* Name(Schedule v) { return NameIn(kScheduleNames, v); }
inline const char* Name(PartitionMethod v) { return NameIn(kPartitionNames, v); }
inline const char* Name(DType v) { return NameIn(kDTypeNames, v); }
inline const char* Name(LossScaleMode v) { return NameIn(kLossScaleModeNames, v); }
inline const char* Name(OptimizerKind v) { return NameIn(kOptimizerNames, v); }
inline const char* Name(LrScheduleKind v) { return NameIn(kLrScheduleNames, v); }
inline const char* Name(Backend v) { return NameIn(kBackendNames, v); }

}  // namespace paradiff
