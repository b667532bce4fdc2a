// GenerateConfig and the per-field draws it shares with MutateConfig. Owns the generated
// distribution: which layouts, sizes, precisions and optimizers are drawn and how often, weighted
// toward bug territory (BUGZOO.md): odd and prime world sizes, parameter counts dp does not divide,
// vocabularies 4*tp does not divide, layers pp does not divide, buckets smaller than one tensor or
// larger than all, accumulation > 1, bf16 with and without master weights, every ZeRO stage,
// grouped attention with several kv heads per tp rank, clipping under loss scaling.
//
// Note [Declared precisions]: DrawPrecision makes the precisions training stacks use (fp32; bf16
// or fp16 math on fp32 parameters; bf16 / fp16 parameters with or without fp32 masters, reduce and
// accumulate). A target may take only others: torch2_ddp_bf16_reduce.json runs DDP's bf16
// compression hook, fp32 parameters with a bf16 reduction, which no draw makes, so every attempt
// was rejected and its campaigns ran the fallback config (dp 1) or nothing. When every attempt is
// rejected and the system declares its precisions (DomainOptions::precisions), further attempts
// draw the rest of a config and take one of those precisions. Only configs that fell back before
// change, so a target whose precisions the main draw makes keeps its campaigns' configs.
//
// Note [Exotic decay]: DomainOptions::accept filters what this engine build cannot run (today tp,
// pp, sp, loss scaling, checkpoints and non-local backends). A rejected draw is redrawn with the
// probability of those "exotic" features halved, so a strict predicate costs a few cheap redraws
// (Validate + accept are microseconds) while a permissive one still sees them often. The layout
// (tp, pp, sp) is not halved: see Note [Declared parallelism].
#include <algorithm>
#include <cmath>
#include <iterator>
#include <tuple>
#include <utility>
#include <vector>

#include "core/model_spec.h"
#include "fuzz/config_domain.h"
#include "fuzz/config_domain_internal.h"

namespace paradiff {
namespace domain_internal {
namespace {

constexpr int kMaxGenerateAttempts = 1000;
constexpr int kExoticDecayAttempts = 12;  // after that, no exotic feature at all
constexpr double kExactShare = 0.12;      // model.kind=exact_linear
constexpr double kTpShare = 0.35;         // tp > 1 (not faded, see Note [Declared parallelism])
constexpr double kPpShare = 0.35;         // pp > 1 (not faded)
constexpr double kSpShare = 0.4;          // sp, given tp > 1 (not faded)
constexpr double kKvPerRankShare = 0.2;   // gpt, given tp > 1: grouped attention within each rank
constexpr int64_t kMaxKvPerRankHeads = 16;
constexpr double kBf16ScaleShare = 0.1;             // of bf16 parameters (DrawPrecision)
constexpr double kOverflowThenRecoverShare = 0.25;  // of dynamic loss scaling (DrawPrecision)
constexpr int kRecoverMinLog2 = 28;                 // overflow-then-recover starts at 2^28 .. 2^40
constexpr double kClimbShare = 0.35;  // of dynamic loss scaling: See Note [Climbing loss scale]
constexpr double kInexactScaleShare = 0.15;      // see Note [Inexact loss scales]
constexpr double kFineTuningLrShare = 0.15;      // of Adam learning rates: 1e-6..1e-3
constexpr double kLargeVocabShare = 0.2;         // see Note [Embedding-heavy models]
constexpr double kLrScheduleShare = 0.3;         // see Note [Learning-rate schedules]
constexpr double kLrScheduleShareDynamic = 0.6;  // with dynamic loss scaling
constexpr double kShortScheduleShare = 0.1;      // of those: left at fewer than 3 steps
constexpr double kClimbGrowth = 4;  // two octaves a step: never jumps the partial-overflow band
// Clipping (gpt only), more often with loss scaling, where a first applied scale above the
// applied band is lowered into it at this share (see Note [Clipping under loss scaling]).
constexpr double kClipShare = 0.3;
constexpr double kClipShareScaled = 0.6;
constexpr double kClipAppliedScaleShare = 0.5;
constexpr int kAppliedScaleMinLog2 = 10;  // the applied band: loss scales at which the steps
constexpr int kAppliedScaleMaxLog2 = 16;  // of generated models apply (no fp16 overflow)
constexpr double kCheckpointShare = 0.3;
constexpr double kCheckpointShareDynamic = 0.6;  // with dynamic loss scaling
constexpr double kScalerMidStateShare = 0.8;     // of those: See Note [Scaler state at the save]
constexpr double kBackendShare = 0.04;
constexpr double kUnevenDpShare = 0.85;  // nudge the model so dp does not divide its parameters
constexpr int kMaxNudges = 16;

// x rounded to two significant digits, so configs print short numbers.
double Round2(double x) {
  const double scale = std::pow(10.0, 1.0 - std::floor(std::log10(x)));
  return std::round(x * scale) / scale;
}

double LogUniform(SeqRng& rng, double lo, double hi) {
  const double u = static_cast<double>(rng.Next() >> 11) * (1.0 / 9007199254740992.0);
  return lo * std::pow(hi / lo, u);
}

// The loss scale of the first step that can apply: the initial one, or for overflow-then-recover
// (DrawLossScale: a backoff far below the usual 0.5) the one its first overflow backs off to.
double FirstAppliedScale(const LossScaleConfig& s) {
  const bool recovers = s.mode == LossScaleMode::kDynamic && s.backoff < 0.5;
  return recovers ? s.init * s.backoff : s.init;
}

template <class T>
T Pick(SeqRng& rng, const std::vector<T>& v) {
  return v[rng.Below(v.size())];
}

// A vocabulary in range, usually not a multiple of 4*tp (the tp padding case).
int64_t DrawVocab(SeqRng& rng, int64_t tp) {
  int64_t v = rng.Range(kMinVocab, kMaxVocab);
  if (tp > 1 && v % (4 * tp) == 0 && rng.Chance(0.85)) v += v < kMaxVocab ? 1 : -1;
  return v;
}

// Note [Embedding-heavy models]: in a real LLM the embedding is the largest tensor (a third of
// GPT-2 small, 50k x 768), so ZeRO's shard boundaries fall inside it and a pipeline's first and
// last stages are mostly embedding, each partitioned differently over dp. Vocabularies of
// 17..97 on hidden sizes up to 64 do not make it so, and a bug may show only there: a tied
// embedding summed across stages after the dp reduce-scatter (Megatron-LM issue 844) adds a
// partly reduced shard to a local one only where the two stages' owned ranges of it differ. So
// a share of the sharded layouts (ZeRO stage >= 1 or pp > 1) without fp16 compute get a
// vocabulary up to DomainOptions::max_vocab (512; the libFuzzer target's size budget keeps 128).
// The choice comes from a side stream seeded by the config's own seed: the main draw sequence,
// and so every other config a campaign draws, is unchanged. fp16 is left out: its overflow bands
// are tuned on the small vocabularies (see Note [Climbing loss scale]).
// Evidence: docs/EVIDENCE.md.
void MaybeEmbeddingHeavy(Config& c, int64_t max_vocab) {
  if (max_vocab <= kMaxVocab || c.model.kind != ModelKind::kGpt) return;
  if (c.precision.compute == DType::kFp16 || (c.parallel.pp == 1 && c.zero.stage == 0)) return;
  SeqRng side(c.seed ^ 0x766f636162ULL);  // "vocab"
  if (!side.Chance(kLargeVocabShare)) return;
  const int64_t tp = c.parallel.tp;
  int64_t v = side.Range(kMaxVocab + 1, max_vocab);
  if (tp > 1 && v % (4 * tp) == 0) v -= 1;
  c.model.vocab = v;
}

// Note [Learning-rate schedules]: a schedule changes the rate between updates, so a count that
// drifts (a scheduler stepped on an overflow-skipped step, per micro-batch, or restarted by a
// reload) shows as a wrong rate on some later update, and a decay computed wrongly at or past
// its end shows only on a run that reaches it. The first two updates both run at ratio 0
// (core/lr_schedule.h), so most scheduled runs take 3 .. DomainOptions::max_schedule_steps steps
// (lengthened if shorter), with a warmup of 2 .. steps - 1 updates and a decay that ends within
// the run or after it; a few stay short, where every update must run at ratio 0. exact_linear
// gets power-of-two warmups and decays so the linear ratios stay dyadic (the cosine rounds; the
// exact oracle then judges nothing after it). Under dynamic loss scaling, whose skipped steps are
// where a schedule's count can drift from the updates applied, a schedule is drawn twice as often.
// A side stream seeded by the config's own seed draws it: every config without a schedule is
// unchanged. A system that does not take schedules, or
// that many steps, rejects these configs (DomainOptions::accept).
void MaybeLrSchedule(Config& c, const DomainOptions& opts) {
  const int64_t max_steps =
      std::clamp<int64_t>(opts.max_schedule_steps, 1, DomainBudget().max_steps);
  SeqRng side(c.seed ^ 0x7363686564ULL);  // "sched"
  const bool dynamic = c.precision.loss_scale.mode == LossScaleMode::kDynamic;
  if (!side.Chance(dynamic ? kLrScheduleShareDynamic : kLrScheduleShare)) return;
  // Mostly lengthened to show the schedule; a few stay short, where every update must run at
  // ratio 0 (a scheduler one update ahead moves the weights at step 0 or 1).
  if (max_steps >= 3 && !side.Chance(kShortScheduleShare))
    c.steps = std::max(c.steps, side.Range(3, max_steps));
  LrScheduleConfig& s = c.optimizer.schedule;
  const uint64_t r = side.Below(3);
  s.kind = r == 0   ? LrScheduleKind::kWarmup
           : r == 1 ? LrScheduleKind::kWarmupLinear
                    : LrScheduleKind::kWarmupCosine;
  const bool exact = c.model.kind == ModelKind::kExactLinear;
  s.warmup_steps =
      exact || c.steps < 3 ? (c.steps > 4 && side.Chance(0.5) ? 4 : 2) : side.Range(2, c.steps - 1);
  if (s.kind == LrScheduleKind::kWarmup) return;
  const int64_t room = std::max<int64_t>(1, c.steps - s.warmup_steps);
  s.total_steps = s.warmup_steps + (exact ? int64_t{1} << side.Range(0, 2) : side.Range(1, room));
  if (s.kind == LrScheduleKind::kWarmupCosine && side.Chance(0.5)) s.min_ratio = 0.1;
}

// seq_len in range; a multiple of tp under sequence parallelism.
int64_t DrawSeqLen(SeqRng& rng, const Config& c) {
  int64_t s = rng.Range(kMinSeqLen, kMaxSeqLen);
  const int64_t tp = c.parallel.tp;
  if (c.parallel.sp) s = std::max(s / tp * tp, RoundUpTo(kMinSeqLen, tp));
  return s;
}

int64_t DrawHeadDim(SeqRng& rng, int64_t heads, int64_t max_hidden) {
  const int64_t max_hd = std::max<int64_t>(1, std::min(kMaxHeadDim, max_hidden / heads));
  return rng.Range(std::min<int64_t>(2, max_hd), max_hd);
}

// tp > 1 at the share, among `degrees` (repeats weigh) that fit (see Note [Declared parallelism]);
// exact_linear draws powers of two, which divide its power-of-two hidden size.
int64_t DrawTp(SeqRng& rng, const std::vector<int64_t>& degrees, int64_t max_world,
               int64_t max_hidden) {
  if (!rng.Chance(kTpShare)) return 1;
  std::vector<int64_t> fits;
  for (int64_t tp : degrees)
    if (tp <= max_world && tp <= max_hidden) fits.push_back(tp);
  return fits.empty() ? 1 : Pick(rng, fits);
}

int64_t DrawPp(SeqRng& rng, int64_t max_pp) {
  if (max_pp < 2 || !rng.Chance(kPpShare)) return 1;
  return rng.Range(2, std::min(kMaxPp, max_pp));
}

void DrawSchedule(Config& c, SeqRng& rng, int64_t max_layers) {
  ParallelConfig& p = c.parallel;
  if (p.pp == 1) return;  // defaults: 1f1b, one chunk per stage
  if (rng.Chance(0.3)) {  // DrawLayers may exceed max_layers for it (see Note [Interleaved layers])
    p.schedule = Schedule::kInterleaved;
    p.virtual_stages =
        rng.Range(2, std::max<int64_t>(2, std::min(kMaxVirtualStages, max_layers / p.pp)));
  } else {
    p.schedule = rng.Chance(0.5) ? Schedule::kGpipe : Schedule::k1F1B;
  }
}

// layers >= pp * virtual_stages, usually not a multiple of pp when pp > 1.
// Note [Interleaved layers]: an interleaved schedule needs pp x virtual_stages layers at least, and
// with max_layers 4 only pp 2 with 2 chunks fit, always evenly: interleaving under pp 3 and over
// layers that do not divide into the chunks (the layout of a real 1F1B-interleaved run whose layer
// count is not a multiple) were never drawn (`paradiff domain`). So an interleaved draw may take up
// to pp - 1 layers beyond pp x virtual_stages, whatever max_layers says.
int64_t DrawLayers(SeqRng& rng, const ParallelConfig& p, int64_t max_layers) {
  const int64_t lo = p.pp * p.virtual_stages;
  const int64_t hi =
      p.virtual_stages > 1 ? std::max(lo + p.pp - 1, max_layers) : std::max(lo, max_layers);
  int64_t layers = rng.Range(lo, hi);
  if (p.pp > 1 && layers % p.pp == 0 && rng.Chance(0.7)) {
    std::vector<int64_t> uneven;
    for (int64_t l = lo; l <= hi; ++l)
      if (l % p.pp != 0) uneven.push_back(l);
    if (!uneven.empty()) layers = Pick(rng, uneven);
  }
  return layers;
}

void DrawPartition(Config& c, SeqRng& rng) {
  ParallelConfig& p = c.parallel;
  if (p.pp == 1) return;
  const uint64_t r = rng.Below(4);
  if (r < 2) return;  // uniform
  if (r == 2) {
    p.partition = PartitionMethod::kParameters;
    return;
  }
  const int64_t chunks = p.pp * p.virtual_stages;
  p.partition = PartitionMethod::kExplicit;
  p.partition_layers.assign(static_cast<size_t>(chunks), 1);
  for (int64_t extra = c.model.layers - chunks; extra > 0; --extra)
    ++p.partition_layers[rng.Below(static_cast<uint64_t>(chunks))];
}

// Grouped attention within each tp rank: kv heads split over tp with several per rank, each
// serving several query heads (heads = tp * kv_per_rank * group, kv_per_rank and group in {2, 4}).
// Only there does a rank's own map from query heads to its kv heads matter (interleaved, not
// tiled); the plain draw reaches it only with tp=2, heads=8, kv_heads=4. False when no such shape
// fits max_hidden.
bool DrawKvPerRank(Config& c, SeqRng& rng, int64_t max_hidden) {
  const int64_t tp = c.parallel.tp;
  std::vector<std::pair<int64_t, int64_t>> shapes;  // (heads, kv_heads)
  for (int64_t kv_per_rank : {2, 4})
    for (int64_t group : {2, 4})
      if (tp * kv_per_rank * group <= std::min(max_hidden, kMaxKvPerRankHeads))
        shapes.emplace_back(tp * kv_per_rank * group, tp * kv_per_rank);
  if (shapes.empty()) return false;
  std::tie(c.model.heads, c.model.kv_heads) = Pick(rng, shapes);
  return true;
}

void DrawGptModel(Config& c, SeqRng& rng, int64_t max_layers, int64_t max_hidden) {
  ModelConfig& m = c.model;
  const int64_t tp = c.parallel.tp;
  if (tp == 1 || !rng.Chance(kKvPerRankShare) || !DrawKvPerRank(c, rng, max_hidden)) {
    std::vector<int64_t> heads;
    for (int64_t h : {1, 2, 3, 4, 6, 8})
      if (h % tp == 0 && h <= max_hidden && (tp == 3 || h % 3 != 0)) heads.push_back(h);
    m.heads = Pick(rng, heads);
    DrawKvHeads(c, rng);
  }
  m.hidden = m.heads * DrawHeadDim(rng, m.heads, max_hidden);
  m.ffn = std::max(tp, rng.Range(std::max<int64_t>(1, m.hidden / 2), 4 * m.hidden) / tp * tp);
  m.vocab = DrawVocab(rng, tp);
  m.seq_len = DrawSeqLen(rng, c);
  m.layers = DrawLayers(rng, c.parallel, max_layers);
  m.tied_embeddings = rng.Chance(0.5);
  m.position_embeddings = rng.Chance(0.7);
  m.activation = rng.Chance(0.4) ? Activation::kSwiglu : Activation::kGelu;
}

// exact_linear: power-of-two sizes so every intermediate is dyadic (see Note [Sharded generation]).
void DrawExactModel(Config& c, SeqRng& rng, int64_t max_layers, int64_t max_hidden) {
  std::vector<int64_t> hidden;
  const int64_t least = std::max<int64_t>(4, c.parallel.tp);  // tp divides hidden
  for (int64_t h = 1; h <= max_hidden; h *= 2)
    if (h >= least || max_hidden < least) hidden.push_back(h);
  c.model.hidden = Pick(rng, hidden);
  c.model.seq_len = Pick<int64_t>(rng, {4, 8, 16});
  c.model.layers = DrawLayers(rng, c.parallel, max_layers);
}

void DrawCheckpoint(Config& c, SeqRng& rng, double exotic, const DomainOptions& opts) {
  // A dynamic loss scaler is the checkpointed state with the most branches (three numbers, each
  // lost by some real reload; see Note [Scaler state at the save]): checkpoint it twice as often.
  const bool dynamic = c.precision.loss_scale.mode == LossScaleMode::kDynamic;
  if (c.steps < 2 || !rng.Chance((dynamic ? kCheckpointShareDynamic : kCheckpointShare) * exotic))
    return;
  DrawCheckpointLayout(c, rng, opts);
}

// The overflow-then-recover regime of DrawLossScale: a first scale so large that every gradient
// overflows (2^28 and up; the applied band of generated models ends near 2^20).
bool OverflowsFirst(const LossScaleConfig& ls) {
  return ls.mode == LossScaleMode::kDynamic && ls.init >= std::ldexp(1.0, kRecoverMinLog2);
}

// Note [Scaler state at the save]: a checkpoint tests only the state that moved before it, and a
// dynamic loss scaler's state is three numbers: the scale, the clean steps counted toward the next
// growth, and the hysteresis left. A reload that restores the scale but loses one of the others
// shows only where that one differs from its initial value at the save and the steps after the
// reload reach the decision it changes. So, with a checkpoint:
// - the scale grows before the save (growth_interval <= save_at, unless an overflow backs it off
//   first), and mostly (kScalerMidStateShare) the save falls mid-interval (growth_interval does
//   not divide save_at) with steps left after it for the growth that a lost count delays;
// - overflow-then-recover with hysteresis h >= 2 overflows at steps 0 .. h - 1; mostly the save
//   falls inside that streak (save_at < h, hysteresis partly spent), with steps left for the
//   backoff that lost hysteresis delays.
// Climbing scalers (growth_interval 1, see Note [Climbing loss scale]) spend and restore hysteresis
// over their own steps. Whichever of the checkpoint and the scaler is drawn last applies this.
// Evidence: docs/EVIDENCE.md.
void MoveScalerStateBeforeSave(Config& c, SeqRng& rng) {
  LossScaleConfig& ls = c.precision.loss_scale;
  int64_t& save_at = c.checkpoint.save_at;
  if (save_at <= 0 || ls.mode != LossScaleMode::kDynamic) return;
  if (OverflowsFirst(ls) && ls.hysteresis >= 2 && c.steps >= ls.hysteresis + 1 &&
      rng.Chance(kScalerMidStateShare))
    save_at = rng.Range(1, ls.hysteresis - 1);
  ls.growth_interval = rng.Range(1, std::min(save_at, ls.growth_interval));  // never longer
  std::vector<int64_t> mid;  // intervals the save falls inside, with room for the delayed growth
  for (int64_t g = 2; g <= save_at; ++g)
    if (save_at % g != 0 && save_at + (g - save_at % g) < c.steps) mid.push_back(g);
  if (!OverflowsFirst(ls) && ls.growth_factor != kClimbGrowth && !mid.empty() &&
      rng.Chance(kScalerMidStateShare))
    ls.growth_interval = Pick(rng, mid);
}

}  // namespace

void DrawCheckpointLayout(Config& c, SeqRng& rng, const DomainOptions& opts) {
  CheckpointConfig& k = c.checkpoint;
  k.save_at = rng.Range(1, c.steps - 1);
  // Half the reloads keep tp; the others reshard into another degree the model fits (1 included),
  // from tp 1 too: a reload into a tp above 1 re-splits heads, kv heads and the MLP.
  std::vector<int64_t> tps;
  for (int64_t t = 1; t <= std::min<int64_t>(kMaxTp, opts.max_world); ++t)
    if (t != c.parallel.tp && (t == 1 || opts.Runs("tp")) && TpFits(c.model, t)) tps.push_back(t);
  k.reload.tp = tps.empty() || rng.Chance(0.5) ? c.parallel.tp : Pick(rng, tps);
  k.reload.pp = rng.Range(1, std::min(kMaxPp, c.model.layers));
  // The global batch is kept across the reload: reload.dp must divide dp * accumulation_steps.
  // Prefer a different dp (resharding is where the bugs are).
  const int64_t micro_batches = c.parallel.dp * c.batch.accumulation_steps;
  std::vector<int64_t> dps, others;
  for (int64_t d = 1; d <= std::min<int64_t>(micro_batches, 8); ++d)
    if (micro_batches % d == 0) (d == c.parallel.dp ? dps : others).push_back(d);
  k.reload.dp = !others.empty() && rng.Chance(0.8) ? Pick(rng, others) : c.parallel.dp;
  k.reload.zero_stage = rng.Range(0, k.reload.pp > 1 ? 2 : 3);
  // A system that reloads into some layouts only gets those (no draw otherwise: the built-in
  // engine's configs stay what their seeds gave).
  if (!opts.reload.Unrestricted()) RestrictReload(opts.reload, c, rng.Next());
  MoveScalerStateBeforeSave(c, rng);
}

namespace {

// Note [Declared parallelism]: a config is drawn again, with fewer exotic features each time
// (`exotic` halves), until the system accepts it. For a target whose point is tensor or sequence
// parallelism that fading drew its layouts out: with tp at 35% x exotic, the configs a
// tp-only target (torch2_tp.json: no dp, ZeRO 0, two precisions) accepted were 99% tp 1, and
// torch2_tp_sp.json's 30-minute campaign drew no sp config at all (`paradiff domain --runs 300
// --target F`). So the layout does not fade (tp, pp and sp keep their shares in every attempt,
// the fallback to a declared precision included), a degree above 1 is drawn only in a dimension the
// system runs (DomainOptions:: parallel: a target's supports.parallel), and tp picks among the
// degrees that fit its max_world. The built-in engine accepts every first draw, so its configs are
// unchanged.
Config DrawConfig(SeqRng& rng, const DomainOptions& opts, double exotic) {
  const ResourceBudget budget = DomainBudget();
  const int64_t max_world = std::clamp<int64_t>(opts.max_world, 1, budget.max_world);
  const int64_t max_layers = std::clamp<int64_t>(opts.max_layers, 1, budget.max_layers);
  const int64_t max_hidden = std::max<int64_t>(1, opts.max_hidden);
  Config c;
  c.seed = rng.Next() >> 16;
  c.faults = opts.faults;
  const bool exact = rng.Chance(kExactShare);
  c.model.kind = exact ? ModelKind::kExactLinear : ModelKind::kGpt;
  ParallelConfig& p = c.parallel;
  // See Note [Declared parallelism].
  if (opts.Runs("tp"))
    p.tp = DrawTp(rng, exact ? std::vector<int64_t>{2, 2, 4} : std::vector<int64_t>{2, 2, 3, 4},
                  max_world, max_hidden);
  p.pp = DrawPp(rng, opts.Runs("pp") ? std::min(max_world / p.tp, max_layers) : 1);
  p.dp = DrawDp(rng, opts.Runs("dp") ? max_world / (p.tp * p.pp) : 1);
  FixWorld(c);
  DrawSchedule(c, rng, max_layers);
  p.sp = opts.Runs("sp") && p.tp > 1 && rng.Chance(kSpShare);
  if (exact)
    DrawExactModel(c, rng, max_layers, max_hidden);
  else
    DrawGptModel(c, rng, max_layers, max_hidden);
  DrawPartition(c, rng);
  c.batch.micro_batch = rng.Range(1, exact ? 2 : kMaxMicroBatch);
  DrawAccumulation(c, rng);
  c.zero.stage = rng.Range(0, p.pp > 1 ? 2 : 3);
  c.zero.align_elems = DrawAlign(rng);
  if (!exact && p.dp > 1 && rng.Chance(kUnevenDpShare)) NudgeUnevenDp(c, rng, opts);
  DrawBucket(c, rng);
  DrawPrecision(c, rng, exotic);
  DrawOptimizer(c, rng);
  DrawClip(c, rng);
  c.steps = DrawSteps(rng, opts);
  // Dynamic loss scaling needs steps for the scale to move (backoff after an overflow, growth
  // after good steps) into the band where only part of the gradients overflow.
  const LossScaleConfig& ls = c.precision.loss_scale;
  if (ls.mode == LossScaleMode::kDynamic && (ls.growth_factor == kClimbGrowth || rng.Chance(0.6)))
    c.steps = std::clamp<int64_t>(opts.max_scaler_steps, 1, DomainBudget().max_steps);
  DrawCheckpoint(c, rng, exotic, opts);
  MaybeEmbeddingHeavy(c, opts.max_vocab);
  MaybeLrSchedule(c, opts);
  if (rng.Chance(kBackendShare * exotic))
    c.backend = rng.Chance(0.5) ? Backend::kMpi : Backend::kNccl;
  return c;
}

}  // namespace

int64_t DrawDp(SeqRng& rng, int64_t max_dp) {
  if (max_dp <= 1 || rng.Chance(0.12)) return 1;
  // Weights: 1, +2 when odd, +2 when prime (2 -> 3, 3 -> 5, 4 -> 1, 5 -> 5, 9 -> 3).
  std::vector<int64_t> weighted;
  for (int64_t d = 2; d <= max_dp; ++d) {
    const int64_t w = 1 + (d % 2 == 1 ? 2 : 0) + (IsPrime(d) ? 2 : 0);
    weighted.insert(weighted.end(), static_cast<size_t>(w), d);
  }
  return Pick(rng, weighted);
}

void DrawKvHeads(Config& c, SeqRng& rng) {
  ModelConfig& m = c.model;
  const int64_t tp = c.parallel.tp;
  std::vector<int64_t> grouped;  // 1 < kv < heads, fitting heads and tp
  for (int64_t kv = 2; kv < m.heads; ++kv)
    if (KvFits(kv, m.heads, tp)) grouped.push_back(kv);
  const bool mqa_fits = m.heads > 1;  // kv=1 fits every tp (tp % 1 == 0)
  const uint64_t r = rng.Below(100);
  if (r < 50 || (!mqa_fits && grouped.empty())) {
    m.kv_heads = m.heads;  // multi-head attention
  } else if (grouped.empty() || (mqa_fits && r < 70)) {
    m.kv_heads = 1;  // multi-query: replicated across tp ranks when tp > 1
  } else {
    m.kv_heads = Pick(rng, grouped);
  }
}

void DrawBucket(Config& c, SeqRng& rng) {
  const int64_t total = std::max<int64_t>(1, ModelParameterCount(c.model));
  const double r = static_cast<double>(rng.Below(100)) / 100.0;
  if (r < 0.35) {
    c.zero.bucket_elems = rng.Range(kSmallBucketMin, kSmallBucketMax);
  } else if (r < 0.7) {
    const int64_t lo = std::min(kSmallBucketMax + 1, total);
    c.zero.bucket_elems = rng.Range(lo, std::max(lo, total - 1));
  } else {
    c.zero.bucket_elems = rng.Range(total, 2 * total);
  }
}

int64_t DrawAlign(SeqRng& rng) {
  return rng.Chance(0.5) ? 1 : int64_t{1} << rng.Range(1, kMaxAlignLog2);
}

void DrawPrecision(Config& c, SeqRng& rng, double exotic) {
  PrecisionConfig& p = c.precision;
  p = PrecisionConfig{};
  if (c.model.kind == ModelKind::kExactLinear) return;
  const uint64_t r = rng.Below(100);
  if (r < 40) return;  // fp32
  if (r < 46) {        // fp32 parameters, bf16 math
    p.compute = DType::kBf16;
    return;
  }
  if (r < 52) {  // fp32 parameters, fp16 math under a loss scale (torch.amp with a GradScaler)
    p.compute = DType::kFp16;
    if (rng.Chance(0.3)) p.reduce = DType::kFp16;
    if (rng.Chance(0.9 * exotic)) DrawLossScale(c, rng);
    return;
  }
  const DType low = r < 82 ? DType::kBf16 : DType::kFp16;
  p.param = p.compute = low;
  p.master_weights = rng.Chance(0.6);
  if (rng.Chance(0.3)) p.reduce = low;
  if (rng.Chance(0.15)) p.accumulate = low;
  // fp16 trains with loss scaling in practice (Megatron, DeepSpeed): nearly always here too; bf16
  // sometimes does (DeepSpeed's bf16 paths carry the loss scaler), which `paradiff domain` found
  // never drawn.
  if (low == DType::kFp16 && rng.Chance(0.9 * exotic)) DrawLossScale(c, rng);
  if (low == DType::kBf16 && rng.Chance(kBf16ScaleShare * exotic)) DrawLossScale(c, rng);
}

// Note [Inexact loss scales]: most configs scale by powers of two, where scaling and unscaling are
// exact; a scale that is not one (an initial scale of 3000, a growth factor of 1.5, a backoff of
// 0.75) makes unscaling round every gradient, and the oracles must tell that rounding from a bug
// (see Note [Inexact unscaling] in oracles/tolerance.cpp), which only such draws exercise. So a
// share of the draws multiplies the initial scale by a factor in (1, 2) (the octave, and with it
// the overflow-then-recover and climbing regimes above, stays the same) and, in the plain dynamic
// regime, replaces the growth factor or the backoff with one that is not a power of two (a backoff
// stays above 0.5: below it the draw would read as overflow-then-recover, FirstAppliedScale).
// Evidence: docs/EVIDENCE.md.
void DrawInexactScale(LossScaleConfig& s, SeqRng& rng) {
  static constexpr double kFactors[] = {1.5, 1.25, 1.1, 1.875, 1.0 + 1.0 / 3.0};
  s.init *= kFactors[rng.Below(std::size(kFactors))];
  const bool plain = s.mode == LossScaleMode::kDynamic && s.growth_factor == 2 && s.backoff == 0.5;
  if (!plain) return;
  if (rng.Chance(0.5)) s.growth_factor = rng.Chance(0.5) ? 1.5 : 3;
  if (rng.Chance(0.5)) s.backoff = rng.Chance(0.5) ? 0.75 : 0.6;
}

void DrawLossScale(Config& c, SeqRng& rng) {
  LossScaleConfig& s = c.precision.loss_scale;
  s = LossScaleConfig{};
  s.mode = rng.Chance(0.8) ? LossScaleMode::kDynamic : LossScaleMode::kStatic;
  // Initial scales from 2^10 to 2^24, weighted toward 2^17..2^20: there the largest fp16
  // gradients of the generated models overflow while the rest do not (an overflow in some
  // shards or some layers only; measured on generated configs of hidden 2..32, dp 2..7, tp 1..4,
  // pp 1..3), which exercises the skip / backoff path and every rank's agreement on it.
  s.init =
      std::ldexp(1.0, static_cast<int>(rng.Chance(0.6) ? rng.Range(17, 20) : rng.Range(10, 24)));
  s.growth_interval = rng.Range(1, 4);
  s.hysteresis = rng.Range(1, 2);
  if (s.mode == LossScaleMode::kDynamic && rng.Chance(kOverflowThenRecoverShare)) {
    // Overflow, then recover: a scale so large that every gradient overflows (a skip both runs
    // agree on, whatever their rounding), and one backoff down to a scale where steps apply.
    // Exercises what a skipped step must leave alone (optimizer step counts, momenta, the
    // scaler's counters) — state the steps after it read.
    // With hysteresis h the first h - 1 overflows only spend it: steps 0 .. h - 1 are skipped.
    const int high = static_cast<int>(rng.Range(kRecoverMinLog2, 40)),
              low = static_cast<int>(rng.Range(6, 16));
    s.init = std::ldexp(1.0, high);
    s.backoff = std::ldexp(1.0, low - high);
    s.hysteresis = rng.Chance(0.5) ? 1 : rng.Range(2, 3);
  } else if (s.mode == LossScaleMode::kDynamic &&
             rng.Chance(kClimbShare / (1 - kOverflowThenRecoverShare))) {
    // Note [Climbing loss scale]: the band of scales where only some gradients overflow (some
    // shards, layers or pipeline stages: where ranks must agree on the decision) is about two
    // octaves wide and sits at another place for every model (2^16..2^20 for most generated
    // ones). Instead of guessing it, start below it and grow by 4 every step: the walk lands in
    // it whatever the model, then the scaler's state machine runs (hysteresis spent, backoff,
    // growth restoring the hysteresis) over the longer runs a dynamic scaler gets (DomainOptions::
    // max_scaler_steps): at the band's edge it grows into an overflow, spends its hysteresis,
    // backs off, grows again into the next overflow. A scaler that keeps its spent hysteresis
    // after growth shows only over such runs (8 steps, hysteresis up to 3). Starts range over
    // 2^10..2^16, so the walk (ending at 2^24..2^30) also reaches the band of models with small
    // gradients. Climbing is 35% of dynamic scaling and dynamic 80% of loss scaling: a share of
    // the known mechanisms needs a loss scale that moves. Evidence: docs/EVIDENCE.md.
    s.init = std::ldexp(1.0, static_cast<int>(rng.Range(10, 16)));
    s.growth_factor = kClimbGrowth;
    s.growth_interval = 1;
    s.hysteresis = rng.Range(1, 3);
  }
  if (rng.Chance(kInexactScaleShare)) DrawInexactScale(s, rng);
  MoveScalerStateBeforeSave(c, rng);  // a redraw on a checkpointed config (MutateLossScale, ...)
}

void DrawOptimizer(Config& c, SeqRng& rng) {
  OptimizerConfig& o = c.optimizer;
  o = OptimizerConfig{};
  if (c.model.kind == ModelKind::kExactLinear) {  // dyadic: exact in any reduction order
    o.kind = OptimizerKind::kSgd;
    o.lr = std::ldexp(1.0, static_cast<int>(rng.Range(-5, -2)));
    o.momentum = rng.Chance(0.5) ? 0.0 : 0.5;
    return;
  }
  const uint64_t r = rng.Below(10);
  o.kind = r < 3 ? OptimizerKind::kSgd : r < 6 ? OptimizerKind::kAdam : OptimizerKind::kAdamW;
  if (o.kind == OptimizerKind::kSgd) {
    o.lr = Round2(LogUniform(rng, 0.05, 0.5));
    o.momentum = rng.Chance(0.3) ? 0.0 : 0.9;
  } else if (rng.Chance(kFineTuningLrShare)) {
    // Fine-tuning rates: an Adam step below the parameters' rounding, where the run's stored
    // rounding and not the update decides how far a flipped element moves (see Note [Stored
    // rounding of a flipped element] in oracles/numeric_oracle.cpp).
    o.lr = Round2(LogUniform(rng, 1e-6, 1e-3));
  } else {
    o.lr = Round2(LogUniform(rng, 1e-3, 2e-2));
  }
  if (rng.Chance(0.35)) o.weight_decay = Round2(LogUniform(rng, 0.01, 0.1));
}

// Note [Clipping under loss scaling]: with a loss scale, clipping must read the norm of the
// unscaled gradients (unscale, then clip, with the scale the step used), which only a config with
// both shows, and only on steps that apply: a step skipped for an overflow clips nothing, and one
// whose overflow decision is borderline is judged inconclusive. Most initial scales lie in or above
// the band where the gradients of generated models overflow (DrawLossScale), where a clip that
// reads the scaled norm rarely shows. Hence clipping is drawn more often under loss scaling, and
// then a first applied scale above 2^16 is often lowered into the band where steps apply.
// Evidence: docs/EVIDENCE.md.
void DrawClip(Config& c, SeqRng& rng) {
  c.clip_grad_norm = 0.0;
  if (c.model.kind != ModelKind::kGpt) return;
  LossScaleConfig& s = c.precision.loss_scale;
  const bool scaled = s.mode != LossScaleMode::kNone;
  if (!rng.Chance(scaled ? kClipShareScaled : kClipShare)) return;
  c.clip_grad_norm = Round2(LogUniform(rng, 0.05, 1.0));
  const double applies = std::ldexp(1.0, kAppliedScaleMaxLog2);
  if (scaled && FirstAppliedScale(s) > applies && rng.Chance(kClipAppliedScaleShare))
    s.init =
        std::ldexp(1.0, static_cast<int>(rng.Range(kAppliedScaleMinLog2, kAppliedScaleMaxLog2)));
}

void DrawAccumulation(Config& c, SeqRng& rng) {
  const int64_t pp = c.parallel.pp;
  if (c.parallel.schedule == Schedule::kInterleaved) {
    c.batch.accumulation_steps = pp * rng.Range(1, std::max<int64_t>(1, kMaxAccumulation / pp));
    return;
  }
  c.batch.accumulation_steps = rng.Chance(0.3) ? 1 : rng.Range(2, kMaxAccumulation);
}

int64_t DrawSteps(SeqRng& rng, const DomainOptions& opts) {
  const int64_t max_steps = std::clamp<int64_t>(opts.max_steps, 1, DomainBudget().max_steps);
  if (max_steps == 1 || rng.Chance(0.2)) return 1;
  return rng.Range(2, max_steps);
}

bool NudgeUnevenDp(Config& c, SeqRng& rng, const DomainOptions& opts) {
  ModelConfig& m = c.model;
  const int64_t dp = c.parallel.dp, tp = c.parallel.tp;
  if (m.kind != ModelKind::kGpt || dp < 2 || !SaneModel(m)) return false;
  // Both the logical count and the aligned flat buffer (what ZeRO partitions) must not divide.
  const auto uneven = [&] {
    return ModelParameterCount(m) % dp != 0 && FlatNumel(m, c.zero.align_elems) % dp != 0;
  };
  for (int i = 0; i < kMaxNudges && !uneven(); ++i) {
    switch (rng.Below(4)) {
      case 0:
        m.vocab = DrawVocab(rng, tp);
        break;
      case 1:
        m.ffn = std::max(tp, m.ffn + tp * (rng.Chance(0.5) ? 1 : -1));
        break;
      case 2:
        m.seq_len = DrawSeqLen(rng, c);
        break;
      default:
        m.hidden = m.heads * DrawHeadDim(rng, m.heads, opts.max_hidden);
        break;
    }
  }
  return uneven();
}

// Note [Shard groups]: zero.shard_group shards a stage's state within groups of dp ranks and
// replicates it across the groups (torch's HSDP). For a system that takes it, half the configs
// whose stage shards and whose dp is 2 or more get groups of a proper divisor of dp that also
// divides the reload dp (1 included: every rank a whole replica, the sharding machinery with
// nothing to shard); drawn last, so that a system without it keeps its configs.
void DrawShardGroup(Config& c, SeqRng& rng) {
  if (c.zero.stage == 0 || c.parallel.dp < 2 || !rng.Chance(0.5)) return;
  const bool reload = c.checkpoint.save_at > 0;
  if (reload && c.checkpoint.reload.zero_stage == 0) return;
  std::vector<int64_t> groups;
  for (int64_t g = 1; g < c.parallel.dp; ++g)
    if (c.parallel.dp % g == 0 && (!reload || c.checkpoint.reload.dp % g == 0)) groups.push_back(g);
  c.zero.shard_group = Pick(rng, groups);
}

// After the rest of the config, and only for a target that declares options: every other draw, and
// so every config of a campaign against a target without options, is what it was without them. A
// value that does not fit the config (core/target_option.h) is not drawn; with none fitting, the
// option stays at the target's default. Options with a "requires" come after all the others, so
// that what they require is drawn already (and a file without one draws as it did before).
Config DrawTargetOptions(Config c, SeqRng& rng, const DomainOptions& opts) {
  if (opts.shard_groups) DrawShardGroup(c, rng);
  for (const bool requiring : {false, true})
    for (const auto& [name, option] : opts.target_options) {
      if (option.requires.empty() == requiring || !rng.Chance(0.5)) continue;
      std::vector<std::string> fits;
      for (const std::string& v : option.values)
        if (OptionMisfit(option, v, c).empty()) fits.push_back(v);
      if (!fits.empty()) c.target_options[name] = fits[rng.Below(fits.size())];
    }
  return c;
}

}  // namespace domain_internal

Config GenerateConfig(SeqRng& rng, const DomainOptions& opts) {
  using namespace domain_internal;  // NOLINT(build/namespaces): this file implements it
  if (opts.invalid_share > 0 && rng.Chance(opts.invalid_share)) {
    DomainOptions valid = opts;
    valid.invalid_share = 0;
    return BreakOneRule(GenerateConfig(rng, valid), rng);
  }
  for (int attempt = 0; attempt < kMaxGenerateAttempts; ++attempt) {
    const double exotic = attempt < kExoticDecayAttempts ? std::ldexp(1.0, -attempt) : 0.0;
    Config c = DrawConfig(rng, opts, exotic);
    if (Passes(c, opts)) return DrawTargetOptions(std::move(c), rng, opts);
  }
  // See Note [Declared precisions].
  for (int attempt = 0; !opts.precisions.empty() && attempt < kMaxGenerateAttempts; ++attempt) {
    Config c = DrawConfig(rng, opts, 0.0);
    const PrecisionConfig& p = opts.precisions[rng.Below(opts.precisions.size())];
    c.precision.param = p.param;
    c.precision.compute = p.compute;
    c.precision.reduce = p.reduce;
    c.precision.accumulate = p.accumulate;
    c.precision.master_weights = p.master_weights;
    if (Passes(c, opts)) return DrawTargetOptions(std::move(c), rng, opts);
  }
  return DrawTargetOptions(FallbackConfig(rng, opts), rng, opts);
}

}  // namespace paradiff
