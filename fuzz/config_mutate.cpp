// MutateConfig: one field-aware mutation of a config. Owns the list of mutation kinds (change one
// parallel degree, swap a schedule, flip a precision, nudge a size to a non-divisible value, move a
// bucket edge onto a tensor boundary, add or move a checkpoint, redraw fp16 loss scaling, ...).
// Each kind edits one concern, Repair restores the rules that concern touches (world = tp*pp*dp,
// kv heads vs tp, ...), and the result must pass CheckConfig and DomainOptions::accept; otherwise
// another kind is tried (bounded), and as a last resort the base comes back with a new seed.
#include <algorithm>
#include <vector>

#include "core/model_spec.h"
#include "fuzz/config_domain.h"
#include "fuzz/config_domain_internal.h"

namespace paradiff {
namespace domain_internal {
namespace {

constexpr int kMaxMutationAttempts = 64;

enum class Mutation {
  kDp,
  kTp,
  kPp,
  kSchedule,
  kPrecision,
  kMaster,
  kNudgeSize,
  kZeroStage,
  kBucket,
  kAccumulation,
  kTied,
  kOptimizer,
  kClip,
  kSeed,
  kSteps,
  kAlign,
  kModelShape,
  kMicroBatch,
  kModelKind,
  kCheckpoint,
  kLossScale,
  kCount
};

int64_t MaxWorld(const DomainOptions& opts) {
  return std::clamp<int64_t>(opts.max_world, 1, DomainBudget().max_world);
}

// Sets one degree and shrinks dp if the world would pass max_world.
void SetDegrees(Config& c, int64_t tp, int64_t pp, const DomainOptions& opts) {
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.dp = std::max<int64_t>(1, std::min(c.parallel.dp, MaxWorld(opts) / (tp * pp)));
  FixWorld(c);
}

// A value in [lo, hi] other than `current`; false when there is none.
bool OtherInRange(SeqRng& rng, int64_t lo, int64_t hi, int64_t current, int64_t* out) {
  if (hi < lo || (hi == lo && lo == current)) return false;
  do {
    *out = rng.Range(lo, hi);
  } while (*out == current);
  return true;
}

// The most steps the generator gives a config like `c` (config_generate.cpp): a dynamic loss
// scaler's and a learning-rate schedule's longer runs, else max_steps. A steps mutation draws from
// the same range, so it can lengthen a run whose scaler or schedule needs the steps, not only cut
// it to the short range.
int64_t StepsRange(const Config& c, const DomainOptions& opts) {
  int64_t hi = opts.max_steps;
  if (c.precision.loss_scale.mode == LossScaleMode::kDynamic)
    hi = std::max(hi, opts.max_scaler_steps);
  if (c.optimizer.schedule.kind != LrScheduleKind::kConstant)
    hi = std::max(hi, opts.max_schedule_steps);
  return std::clamp<int64_t>(hi, 1, DomainBudget().max_steps);
}

bool MutateDp(Config& c, SeqRng& rng, const DomainOptions& opts) {
  const int64_t max_dp = MaxWorld(opts) / (c.parallel.tp * c.parallel.pp);
  const int64_t dp = c.parallel.dp;
  int64_t next = rng.Chance(0.5) ? DrawDp(rng, max_dp) : dp + (rng.Chance(0.5) ? 1 : -1);
  next = std::clamp<int64_t>(next, 1, std::max<int64_t>(1, max_dp));
  if (next == dp) return false;
  c.parallel.dp = next;
  FixWorld(c);
  if (rng.Chance(0.5)) NudgeUnevenDp(c, rng, opts);
  return true;
}

bool MutateTp(Config& c, SeqRng& rng, const DomainOptions& opts) {
  // gpt: tp divides the heads (Repair fits kv_heads and ffn); exact_linear: tp divides hidden.
  const int64_t split = c.model.kind == ModelKind::kGpt ? c.model.heads : c.model.hidden;
  std::vector<int64_t> fits;
  for (int64_t tp = 1; tp <= kMaxTp; ++tp)
    if (tp != c.parallel.tp && split % tp == 0 && tp * c.parallel.pp <= MaxWorld(opts))
      fits.push_back(tp);
  if (fits.empty()) return false;
  SetDegrees(c, fits[rng.Below(fits.size())], c.parallel.pp, opts);
  return true;
}

bool MutatePp(Config& c, SeqRng& rng, const DomainOptions& opts) {
  const int64_t max_pp = std::min(kMaxPp, MaxWorld(opts) / c.parallel.tp);
  int64_t pp = 1;
  if (!OtherInRange(rng, 1, max_pp, c.parallel.pp, &pp)) return false;
  SetDegrees(c, c.parallel.tp, pp, opts);
  c.parallel.virtual_stages = 1;
  if (c.parallel.schedule == Schedule::kInterleaved) c.parallel.schedule = Schedule::k1F1B;
  return true;
}

bool MutateSchedule(Config& c, SeqRng& rng) {
  ParallelConfig& p = c.parallel;
  if (p.pp == 1) return false;
  const Schedule all[] = {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved};
  Schedule next = p.schedule;
  while (next == p.schedule) next = all[rng.Below(3)];
  p.schedule = next;
  p.virtual_stages = next == Schedule::kInterleaved ? 2 : 1;
  return true;
}

// Another storage / math type: low precision goes back to fp32 mostly; fp16 stays rare.
DType OtherDType(SeqRng& rng, DType d) {
  if (d == DType::kFp32) return rng.Chance(0.85) ? DType::kBf16 : DType::kFp16;
  if (rng.Chance(0.7)) return DType::kFp32;
  return d == DType::kBf16 ? DType::kFp16 : DType::kBf16;
}

bool MutatePrecision(Config& c, SeqRng& rng) {
  if (c.model.kind != ModelKind::kGpt) return false;  // exact_linear stays fp32
  PrecisionConfig& p = c.precision;
  switch (rng.Below(4)) {
    case 0:
      DrawPrecision(c, rng, 1.0);
      break;
    case 1:
      p.param = p.compute = OtherDType(rng, p.param);
      break;
    case 2:
      p.reduce = OtherDType(rng, p.reduce);
      break;
    default:
      p.accumulate = OtherDType(rng, p.accumulate);
      break;
  }
  return true;
}

// Moves one size by a little, toward values that do not divide (params vs dp, vocab vs 4*tp, ...).
bool MutateSize(Config& c, SeqRng& rng, const DomainOptions& opts) {
  ModelConfig& m = c.model;
  const int64_t tp = c.parallel.tp, step = rng.Chance(0.5) ? 1 : -1;
  const int64_t chunks = c.parallel.pp * c.parallel.virtual_stages;
  if (m.kind == ModelKind::kExactLinear) {
    if (rng.Chance(0.5)) {
      m.layers = std::max(chunks, m.layers + step);
      c.parallel.partition = PartitionMethod::kUniform;
    } else {  // stays a power of two
      const bool grow = step > 0 && m.hidden * 2 <= opts.max_hidden;
      m.hidden = grow ? m.hidden * 2 : std::max<int64_t>(1, m.hidden / 2);
    }
    return true;
  }
  switch (rng.Below(6)) {
    case 0:
      m.vocab = std::clamp<int64_t>(m.vocab + step * rng.Range(1, 3), 2,
                                    std::max(kMaxVocab, opts.max_vocab));
      break;
    case 1:
      m.ffn = std::max(tp, m.ffn + step * tp);
      break;
    case 2:
      m.seq_len = std::max<int64_t>(1, m.seq_len + step * (c.parallel.sp ? tp : 1));
      break;
    case 3:
      m.hidden = std::max(m.heads, m.hidden + step * m.heads);
      break;
    case 4:
      m.layers = std::max(chunks, m.layers + step);
      c.parallel.partition = PartitionMethod::kUniform;
      break;
    default:
      NudgeUnevenDp(c, rng, opts);
      break;
  }
  return true;
}

bool MutateBucket(Config& c, SeqRng& rng) {
  if (rng.Chance(0.4) || !SaneModel(c.model)) {
    DrawBucket(c, rng);
    return true;
  }
  // Buckets fill in backward order: an edge at (or one off) the end of the last k tensors.
  const ModelSpec spec = BuildModelSpec(c.model);
  const size_t k = 1 + rng.Below(spec.params.size());
  int64_t edge = 0;
  for (size_t i = 0; i < k; ++i) edge += spec.params[spec.params.size() - 1 - i].numel();
  c.zero.bucket_elems = std::max<int64_t>(1, edge + rng.Range(-1, 1));
  return true;
}

bool MutateOptimizer(Config& c, SeqRng& rng) {
  if (c.model.kind == ModelKind::kGpt && rng.Chance(0.3)) {
    OptimizerConfig& o = c.optimizer;
    o.weight_decay = o.weight_decay > 0 ? 0.0 : 0.01 * static_cast<double>(rng.Range(1, 10));
    return true;
  }
  const LrScheduleConfig schedule = c.optimizer.schedule;  // drawn with the steps, kept here
  DrawOptimizer(c, rng);
  c.optimizer.schedule = schedule;
  return true;
}

bool MutateModelShape(Config& c, SeqRng& rng) {
  ModelConfig& m = c.model;
  if (m.kind != ModelKind::kGpt) return false;
  switch (rng.Below(3)) {
    case 0:
      m.activation = m.activation == Activation::kGelu ? Activation::kSwiglu : Activation::kGelu;
      break;
    case 1:
      m.position_embeddings = !m.position_embeddings;
      break;
    default:
      DrawKvHeads(c, rng);
      break;
  }
  return true;
}

// gpt <-> exact_linear, with the sizes and optimizer the new kind needs.
bool MutateModelKind(Config& c, SeqRng& rng, const DomainOptions& opts) {
  ModelConfig& m = c.model;
  if (m.kind == ModelKind::kGpt) {
    m.kind = ModelKind::kExactLinear;
    SetDegrees(c, 1, c.parallel.pp, opts);
    int64_t hidden = 1;
    while (hidden * 2 <= std::min(m.hidden, opts.max_hidden)) hidden *= 2;
    m.hidden = hidden;
    m.seq_len = m.seq_len >= 16 ? 16 : m.seq_len >= 8 ? 8 : 4;
    c.batch.micro_batch = std::min<int64_t>(c.batch.micro_batch, 2);
    c.precision = PrecisionConfig{};
    c.clip_grad_norm = 0.0;
  } else {
    m.kind = ModelKind::kGpt;
    std::vector<int64_t> heads;
    for (int64_t h : {1, 2, 4, 8})
      if (m.hidden % h == 0) heads.push_back(h);
    m.heads = m.kv_heads = heads[rng.Below(heads.size())];
    m.ffn = 2 * m.hidden;
  }
  const LrScheduleConfig schedule = c.optimizer.schedule;  // drawn with the steps, kept here
  DrawOptimizer(c, rng);
  c.optimizer.schedule = schedule;
  return true;
}

// Adds a checkpoint (save and reload into a drawn layout), redraws its layout, or removes it.
bool MutateCheckpoint(Config& c, SeqRng& rng, const DomainOptions& opts) {
  if (c.steps < 2) return false;
  if (c.checkpoint.save_at > 0 && rng.Chance(0.3)) {
    c.checkpoint = CheckpointConfig{};
  } else {
    DrawCheckpointLayout(c, rng, opts);
  }
  return true;
}

// Redraws fp16 loss scaling (static / dynamic, the partial-overflow band, overflow-then-recover).
bool MutateLossScale(Config& c, SeqRng& rng) {
  if (c.precision.param != DType::kFp16 && c.precision.compute != DType::kFp16) return false;
  DrawLossScale(c, rng);
  return true;
}

bool Apply(Mutation kind, Config& c, SeqRng& rng, const DomainOptions& opts) {
  int64_t v = 0;
  switch (kind) {
    case Mutation::kDp:
      return MutateDp(c, rng, opts);
    case Mutation::kTp:
      return MutateTp(c, rng, opts);
    case Mutation::kPp:
      return MutatePp(c, rng, opts);
    case Mutation::kSchedule:
      return MutateSchedule(c, rng);
    case Mutation::kPrecision:
      return MutatePrecision(c, rng);
    case Mutation::kMaster:
      c.precision.master_weights = !c.precision.master_weights;
      return true;
    case Mutation::kNudgeSize:
      return MutateSize(c, rng, opts);
    case Mutation::kZeroStage:
      if (!OtherInRange(rng, 0, c.parallel.pp > 1 ? 2 : 3, c.zero.stage, &v)) return false;
      c.zero.stage = v;
      return true;
    case Mutation::kBucket:
      return MutateBucket(c, rng);
    case Mutation::kAccumulation:
      if (c.parallel.schedule == Schedule::kInterleaved) return false;
      if (!OtherInRange(rng, 1, kMaxAccumulation, c.batch.accumulation_steps, &v)) return false;
      c.batch.accumulation_steps = v;
      return true;
    case Mutation::kTied:
      if (c.model.kind != ModelKind::kGpt) return false;
      c.model.tied_embeddings = !c.model.tied_embeddings;
      return true;
    case Mutation::kOptimizer:
      return MutateOptimizer(c, rng);
    case Mutation::kClip:
      if (c.model.kind != ModelKind::kGpt) return false;
      c.clip_grad_norm = c.clip_grad_norm > 0 ? 0.0 : 0.05 * static_cast<double>(rng.Range(1, 20));
      return true;
    case Mutation::kSeed:
      c.seed = rng.Next() >> 16;
      return true;
    case Mutation::kSteps:
      if (!OtherInRange(rng, 1, StepsRange(c, opts), c.steps, &v)) return false;
      c.steps = v;
      return true;
    case Mutation::kAlign:
      c.zero.align_elems = DrawAlign(rng);
      return true;
    case Mutation::kModelShape:
      return MutateModelShape(c, rng);
    case Mutation::kMicroBatch:
      if (!OtherInRange(rng, 1, kMaxMicroBatch, c.batch.micro_batch, &v)) return false;
      c.batch.micro_batch = v;
      return true;
    case Mutation::kModelKind:
      return MutateModelKind(c, rng, opts);
    case Mutation::kCheckpoint:
      return MutateCheckpoint(c, rng, opts);
    case Mutation::kLossScale:
      return MutateLossScale(c, rng);
    case Mutation::kCount:
      return false;
  }
  return false;
}

}  // namespace
}  // namespace domain_internal

Config MutateConfig(const Config& base, SeqRng& rng, const DomainOptions& opts) {
  using namespace domain_internal;  // NOLINT(build/namespaces): this file implements it
  if (opts.invalid_share > 0 && rng.Chance(opts.invalid_share)) return BreakOneRule(base, rng);
  for (int attempt = 0; attempt < kMaxMutationAttempts; ++attempt) {
    Config c = base;
    const auto kind = static_cast<Mutation>(rng.Below(static_cast<uint64_t>(Mutation::kCount)));
    if (!Apply(kind, c, rng, opts)) continue;
    Repair(c);
    if (!(c == base) && Passes(c, opts)) return c;
  }
  Config c = base;
  const uint64_t seed = c.seed;
  while (c.seed == seed) c.seed = rng.Next() >> 16;
  return c;
}

}  // namespace paradiff
