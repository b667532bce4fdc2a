// The shared core of the config domain: the "passes" check and the fallback config, size helpers,
// the repair of cross-field rules after a one-field change, the rule breaker behind invalid_share,
// and ConfigFeatures (the coverage categories the campaign counts pairs of). Generation lives in
// config_generate.cpp, mutation in config_mutate.cpp, shrinking in config_shrink.cpp.
#include "fuzz/config_domain.h"

#include <algorithm>
#include <limits>
#include <string>

#include "core/model_spec.h"
#include "fuzz/config_domain_internal.h"

namespace paradiff {
namespace domain_internal {

ResourceBudget DomainBudget() { return ResourceBudget{}; }

bool Passes(const Config& c, const DomainOptions& opts) {
  if (!CheckConfig(c, DomainBudget()).ok()) return false;
  return !opts.accept || opts.accept(c);
}

Config FallbackConfig(SeqRng& rng, const DomainOptions& opts) {
  Config c;
  c.seed = rng.Next() >> 16;
  c.steps = 1;
  c.model.layers = 1;
  c.model.hidden = 8;
  c.model.heads = c.model.kv_heads = 2;
  c.model.ffn = 16;
  c.model.vocab = kMinVocab;
  c.model.seq_len = kMinSeqLen;
  c.batch.micro_batch = 1;
  c.faults = opts.faults;
  return c;
}

bool IsPrime(int64_t n) {
  if (n < 2) return false;
  for (int64_t d = 2; d * d <= n; ++d)
    if (n % d == 0) return false;
  return true;
}

bool IsPowerOfTwo(int64_t n) { return n >= 1 && (n & (n - 1)) == 0; }

int64_t RoundUpTo(int64_t x, int64_t m) { return m < 1 ? x : (x + m - 1) / m * m; }

void FixWorld(Config& c) { c.parallel.world = c.parallel.tp * c.parallel.pp * c.parallel.dp; }

bool SaneModel(const ModelConfig& m) {
  if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.kv_heads < 1 || m.ffn < 1 || m.vocab < 1 ||
      m.seq_len < 1)
    return false;
  return m.kind == ModelKind::kExactLinear || m.hidden % m.heads == 0;
}

int64_t FlatNumel(const ModelConfig& m, int64_t align) {
  if (!SaneModel(m)) return 0;
  int64_t off = 0;
  for (const ParamSpec& p : BuildModelSpec(m).params) off = RoundUpTo(off, align) + p.numel();
  return off;
}

int64_t LargestTensor(const ModelConfig& m) {
  if (!SaneModel(m)) return 0;
  int64_t largest = 0;
  for (const ParamSpec& p : BuildModelSpec(m).params) largest = std::max(largest, p.numel());
  return largest;
}

// kv_heads is valid for heads and a tp degree (docs/CONFIG.md, "kv_heads vs tp").
bool KvFits(int64_t kv, int64_t heads, int64_t tp) {
  if (kv < 1 || heads % kv != 0) return false;
  return kv >= tp ? kv % tp == 0 : tp % kv == 0;
}

bool TpFits(const ModelConfig& m, int64_t tp) {
  if (m.kind == ModelKind::kExactLinear) return m.hidden % tp == 0;
  return m.heads % tp == 0 && KvFits(m.kv_heads, m.heads, tp) && m.ffn % tp == 0;
}

namespace {

int64_t LargestFittingKv(int64_t heads, int64_t tp) {
  for (int64_t kv = heads; kv >= 1; --kv)
    if (KvFits(kv, heads, tp)) return kv;
  return heads;
}

void RepairModel(Config& c) {
  ModelConfig& m = c.model;
  ParallelConfig& p = c.parallel;
  if (m.kind == ModelKind::kExactLinear) {  // hidden stays a power of two
    const bool power_of_two = (p.tp & (p.tp - 1)) == 0;
    if (!power_of_two) p.tp = 1;
    if (m.hidden % p.tp != 0) m.hidden = std::max(m.hidden, p.tp);
    return;
  }
  if (m.hidden % m.heads != 0) m.hidden = RoundUpTo(m.hidden, m.heads);
  if (!KvFits(m.kv_heads, m.heads, p.tp)) m.kv_heads = LargestFittingKv(m.heads, p.tp);
  if (m.ffn % p.tp != 0) m.ffn = RoundUpTo(m.ffn, p.tp);
}

void RepairPipeline(Config& c) {
  ParallelConfig& p = c.parallel;
  if (p.tp == 1) p.sp = false;
  if (p.sp && c.model.seq_len % p.tp != 0) c.model.seq_len = RoundUpTo(c.model.seq_len, p.tp);
  if (p.pp == 1 || p.virtual_stages < 1) p.virtual_stages = 1;
  if (p.virtual_stages > 1 && p.schedule != Schedule::kInterleaved) p.virtual_stages = 1;
  if (p.schedule == Schedule::kInterleaved && p.virtual_stages == 1) p.schedule = Schedule::k1F1B;
  if (p.schedule == Schedule::kInterleaved)
    c.batch.accumulation_steps = RoundUpTo(c.batch.accumulation_steps, p.pp);
  const int64_t chunks = p.pp * p.virtual_stages;
  if (p.partition == PartitionMethod::kExplicit) {
    int64_t sum = 0;
    for (int64_t n : p.partition_layers) sum += n;
    const bool fits = static_cast<int64_t>(p.partition_layers.size()) == chunks &&
                      sum == c.model.layers &&
                      std::all_of(p.partition_layers.begin(), p.partition_layers.end(),
                                  [](int64_t n) { return n >= 1; });
    if (!fits) {
      p.partition = PartitionMethod::kUniform;
      p.partition_layers.clear();
    }
  }
  if (p.partition != PartitionMethod::kExplicit) p.partition_layers.clear();
  c.model.layers = std::max(c.model.layers, chunks);
  if (c.zero.stage == 3 && p.pp > 1) c.zero.stage = 2;
}

void RepairCheckpoint(Config& c) {
  CheckpointConfig& k = c.checkpoint;
  if (k.save_at >= c.steps) k.save_at = 0;
  if (k.save_at == 0) return;
  if (!TpFits(c.model, k.reload.tp)) k.reload.tp = 1;
  if (k.reload.pp > c.model.layers) k.reload.pp = 1;
  if (k.reload.zero_stage == 3 && k.reload.pp > 1) k.reload.zero_stage = 2;
}

}  // namespace

void Repair(Config& c) {
  if (!SaneModel(c.model) || c.parallel.tp < 1 || c.parallel.pp < 1 || c.parallel.dp < 1) return;
  RepairModel(c);
  RepairPipeline(c);
  RepairCheckpoint(c);
  FixWorld(c);
}

namespace {

// The rules BreakOneRule can break; each edit below guarantees a Validate error whatever the
// (valid) input.
enum class Rule {
  kTpDividesHeads,
  kWorldProduct,
  kZeroStage,
  kLr,
  kLayersVsStages,
  kBucket,
  kUnknownFault,
  kSpWithoutTp,
  kAlign,
  kSteps,
  kMicroBatch,
  kAccumulation,
  kMomentum,
  kBeta2,
  kEps,
  kWeightDecay,
  kClip,
  kKvHeads,
  kVocab,
  kVirtualStages,
  kInterleaved,
  kSchema,
  kBackoff,
  kSaveAt,
  kZero3WithPp,
  kDuplicateFault,
  kHiddenVsHeads,
  kExplicitPartition,
  kCount
};

void SetPp(Config& c, int64_t pp) {
  c.parallel.pp = pp;
  FixWorld(c);
}

}  // namespace

Config BreakOneRule(Config c, SeqRng& rng) {
  ParallelConfig& p = c.parallel;
  ModelConfig& m = c.model;
  const bool gpt = m.kind == ModelKind::kGpt;
  switch (static_cast<Rule>(rng.Below(static_cast<uint64_t>(Rule::kCount)))) {
    case Rule::kTpDividesHeads:  // heads % (heads + 1) == heads; likewise hidden for exact_linear
      p.tp = (gpt ? m.heads : m.hidden) + 1;
      FixWorld(c);
      break;
    case Rule::kWorldProduct:
      p.world = p.tp * p.pp * p.dp + 1 + rng.Range(0, 2);
      break;
    case Rule::kZeroStage:
      c.zero.stage = rng.Chance(0.5) ? 4 : -1;
      break;
    case Rule::kLr:
      c.optimizer.lr = rng.Chance(0.5) ? -c.optimizer.lr : std::numeric_limits<double>::infinity();
      break;
    case Rule::kLayersVsStages:
      p.partition = PartitionMethod::kUniform;
      p.partition_layers.clear();
      if (p.pp * p.virtual_stages < 2) {
        SetPp(c, 2);
        if (c.zero.stage == 3) c.zero.stage = 2;
      }
      m.layers = p.pp * p.virtual_stages - 1;
      break;
    case Rule::kBucket:
      c.zero.bucket_elems = rng.Chance(0.5) ? 0 : -16;
      break;
    case Rule::kUnknownFault:
      c.faults.push_back("zero.no_such_fault");
      break;
    case Rule::kSpWithoutTp:
      p.tp = 1;
      p.sp = true;
      FixWorld(c);
      break;
    case Rule::kAlign:
      c.zero.align_elems = 3 * (int64_t{1} << rng.Range(0, 3));
      break;
    case Rule::kSteps:
      c.steps = 0;
      break;
    case Rule::kMicroBatch:
      c.batch.micro_batch = 0;
      break;
    case Rule::kAccumulation:
      c.batch.accumulation_steps = 0;
      break;
    case Rule::kMomentum:
      c.optimizer.momentum = 1.0;
      break;
    case Rule::kBeta2:
      c.optimizer.beta2 = 1.0;
      break;
    case Rule::kEps:
      c.optimizer.eps = 0.0;
      break;
    case Rule::kWeightDecay:
      c.optimizer.weight_decay = -0.01;
      break;
    case Rule::kClip:
      c.clip_grad_norm = -0.5;
      break;
    case Rule::kKvHeads:
      m.kv_heads = gpt ? m.heads + 1 : 0;
      break;
    case Rule::kVocab:
      m.vocab = 1;
      break;
    case Rule::kVirtualStages:  // virtual stages without a pipeline
      SetPp(c, 1);
      p.virtual_stages = 2;
      break;
    case Rule::kInterleaved:
      p.schedule = Schedule::kInterleaved;
      p.virtual_stages = 1;
      break;
    case Rule::kSchema:
      c.schema = 2;
      break;
    case Rule::kBackoff:
      c.precision.loss_scale.backoff = 1.5;
      break;
    case Rule::kSaveAt:
      c.checkpoint.save_at = c.steps;
      break;
    case Rule::kZero3WithPp:
      c.zero.stage = 3;
      if (p.pp == 1) SetPp(c, 2);
      break;
    case Rule::kDuplicateFault:
      if (c.faults.empty()) c.faults.push_back("gas.overwrite_grad");
      c.faults.push_back(c.faults.front());
      break;
    case Rule::kHiddenVsHeads:
      if (!gpt) {
        m.hidden = 0;
        break;
      }
      if (m.heads == 1) m.heads = m.kv_heads = 2;
      m.hidden = m.heads * (m.hidden / m.heads) + 1;
      break;
    case Rule::kExplicitPartition:  // one entry too many
      p.partition = PartitionMethod::kExplicit;
      p.partition_layers.assign(static_cast<size_t>(p.pp * p.virtual_stages + 1), 1);
      break;
    case Rule::kCount:
      break;
  }
  return c;
}

}  // namespace domain_internal

namespace {

using domain_internal::LargestTensor;
using domain_internal::SaneModel;

std::string DpClass(int64_t dp) {
  if (dp <= 2) return std::to_string(dp);
  return dp % 2 == 1 ? "odd" : "even>2";
}

std::string BucketClass(const Config& c) {
  if (!SaneModel(c.model)) return "?";
  if (c.zero.bucket_elems < LargestTensor(c.model)) return "small";
  return c.zero.bucket_elems < ModelParameterCount(c.model) ? "mid" : "large";
}

// "gqa.per_rank": grouped attention within each tp rank (kv heads split over tp, several per rank,
// each serving several query heads), the one place a rank's own query-to-kv-head map matters.
std::string KvClass(const ModelConfig& m, int64_t tp) {
  if (m.kv_heads == m.heads) return "mha";
  if (m.kv_heads == 1) return "mqa";
  return tp > 1 && m.kv_heads % tp == 0 && m.kv_heads / tp >= 2 ? "gqa.per_rank" : "gqa";
}

}  // namespace

std::vector<std::string> ConfigFeatures(const Config& c) {
  const ParallelConfig& p = c.parallel;
  const ModelConfig& m = c.model;
  const bool gpt = m.kind == ModelKind::kGpt;
  std::vector<std::string> f;
  f.push_back(gpt ? "model=gpt" : "model=exact");
  f.push_back("dp=" + DpClass(p.dp));
  f.push_back("tp=" + std::to_string(p.tp));
  f.push_back("pp=" + std::to_string(p.pp));
  if (p.pp > 1) {
    f.push_back(std::string("sched=") + Name(p.schedule));
    f.push_back(m.layers % (p.pp * p.virtual_stages) == 0 ? "even.layers" : "uneven.layers");
  }
  if (p.sp) f.push_back("sp");
  f.push_back("zero=" + std::to_string(c.zero.stage));
  if (c.zero.shard_group > 0)  // absent at 0: a system without shard groups keeps its features
    f.push_back(c.zero.shard_group == 1 ? "shard=1" : "shard>1");
  f.push_back(std::string("param=") + Name(c.precision.param));
  if (c.precision.param != DType::kFp32)
    f.push_back(c.precision.master_weights ? "master" : "nomaster");
  if (c.precision.loss_scale.mode != LossScaleMode::kNone)
    f.push_back(std::string("scale=") + Name(c.precision.loss_scale.mode));
  f.push_back(c.batch.accumulation_steps > 1 ? "accum>1" : "accum=1");
  f.push_back(c.steps > 1 ? "steps>1" : "steps=1");
  f.push_back(std::string("opt=") + Name(c.optimizer.kind));
  f.push_back(std::string("lr=") + Name(c.optimizer.schedule.kind));
  f.push_back(c.clip_grad_norm > 0 ? "clip" : "noclip");
  if (gpt) {
    f.push_back(m.tied_embeddings ? "tied" : "untied");
    f.push_back(std::string("act=") + Name(m.activation));
    f.push_back("kv=" + KvClass(m, p.tp));
  }
  f.push_back("bucket=" + BucketClass(c));
  f.push_back(c.zero.align_elems > 1 ? "align>1" : "align=1");
  if (p.dp > 1 && SaneModel(m))
    f.push_back(ModelParameterCount(m) % p.dp != 0 ? "uneven.dp" : "even.dp");
  if (c.checkpoint.save_at > 0) f.push_back("ckpt");
  for (const std::string& fault : c.faults) f.push_back("fault=" + fault);
  return f;
}

}  // namespace paradiff
