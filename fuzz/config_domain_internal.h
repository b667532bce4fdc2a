// Internal to fuzz/config_*.cpp: the pieces generate, mutate and shrink share. Owns the domain's
// size ranges, the "passes" check (CheckConfig + DomainOptions::accept), the per-field draws that
// aim at bug territory (dp, buckets, precision, optimizer, clipping, alignment, kv heads), the
// nudge toward parameter counts that dp does not divide, the repair of cross-field rules after a
// one-field change, and the rule breaker behind invalid_share. Not part of the public API; include
// fuzz/config_domain.h instead.
#pragma once

#include <cstdint>
#include <vector>

#include "core/budget.h"
#include "core/config.h"
#include "core/rng.h"
#include "fuzz/config_domain.h"

namespace paradiff::domain_internal {

// Size ranges of generated models (DomainOptions bounds world, layers, hidden and steps).
inline constexpr int64_t kMinVocab = 17;
inline constexpr int64_t kMaxVocab = 97;
inline constexpr int64_t kMinSeqLen = 4;
inline constexpr int64_t kMaxSeqLen = 16;
inline constexpr int64_t kMaxMicroBatch = 3;
inline constexpr int64_t kMaxAccumulation = 4;
inline constexpr int64_t kMaxTp = 4;
inline constexpr int64_t kMaxPp = 3;
inline constexpr int64_t kMaxVirtualStages = 3;
inline constexpr int64_t kMaxHeadDim = 16;
inline constexpr int64_t kMaxAlignLog2 = 6;     // align_elems up to 64
inline constexpr int64_t kSmallBucketMin = 16;  // "smaller than one tensor" buckets
inline constexpr int64_t kSmallBucketMax = 300;

// The budget generated configs must fit (the default ResourceBudget).
ResourceBudget DomainBudget();

// CheckConfig passes and opts.accept (if set) accepts.
bool Passes(const Config& c, const DomainOptions& opts);

// A tiny known-good config (1 layer, dp=1, fp32, 1 step) with opts.faults; the last resort.
Config FallbackConfig(SeqRng& rng, const DomainOptions& opts);

bool IsPrime(int64_t n);
bool IsPowerOfTwo(int64_t n);
int64_t RoundUpTo(int64_t x, int64_t m);

// world = tp * pp * dp.
void FixWorld(Config& c);

// End of the engine's flat parameter buffer: each tensor starts at a multiple of align.
int64_t FlatNumel(const ModelConfig& m, int64_t align);
// Numel of the model's largest single tensor.
int64_t LargestTensor(const ModelConfig& m);
// Whether every size is >= 1 and, for gpt, heads divides hidden: the model spec is meaningful.
bool SaneModel(const ModelConfig& m);
// kv heads that divide heads and that tp splits (kv >= tp) or replicates (kv < tp).
bool KvFits(int64_t kv, int64_t heads, int64_t tp);
// Whether tp ranks can split m (heads, kv heads and ffn; exact_linear: hidden).
bool TpFits(const ModelConfig& m, int64_t tp);

// A data-parallel degree in 1..max_dp; odd and prime degrees are favored.
int64_t DrawDp(SeqRng& rng, int64_t max_dp);
// kv_heads for the model's heads and tp: often heads (MHA), sometimes 1 (MQA) or a divisor (GQA).
void DrawKvHeads(Config& c, SeqRng& rng);
// zero.bucket_elems: smaller than one tensor, between tensor sizes, or larger than all parameters.
void DrawBucket(Config& c, SeqRng& rng);
int64_t DrawAlign(SeqRng& rng);
// precision.*: fp32, bf16 (with / without master weights), fp16 rarely. Loss scaling is drawn with
// probability scaled by `exotic` (exact_linear stays fp32).
void DrawPrecision(Config& c, SeqRng& rng, double exotic);
// precision.loss_scale for fp16: static or dynamic, initial scales around the partial-overflow band
// of generated models, sometimes overflow-then-recover (every gradient overflows at first). On a
// checkpointed config a dynamic scaler grows before the save (growth_interval <= save_at).
void DrawLossScale(Config& c, SeqRng& rng);
// checkpoint.*: save_at in 1..steps-1 (needs steps >= 2) and a reload layout: half keep tp, the
// others reshard into another degree the model fits; another dp preferred. A dynamic loss scaler
// grows before the save (growth_interval <= save_at).
void DrawCheckpointLayout(Config& c, SeqRng& rng, const DomainOptions& opts);
// optimizer.*: sgd / adam / adamw with sane learning rates; exact_linear gets dyadic sgd.
void DrawOptimizer(Config& c, SeqRng& rng);
// clip_grad_norm: 0 or a small value that actually clips (never for exact_linear); more often
// under loss scaling, whose initial scale it then often lowers to where steps apply (see Note
// [Clipping under loss scaling]). Draw it after the precision.
void DrawClip(Config& c, SeqRng& rng);
// Accumulation steps 1..4, favoring > 1; a multiple of pp under the interleaved schedule.
void DrawAccumulation(Config& c, SeqRng& rng);
// Steps 1..max_steps, favoring > 1.
int64_t DrawSteps(SeqRng& rng, const DomainOptions& opts);

// Small edits of a gpt model's sizes (vocab, ffn, seq_len, head_dim) until dp divides neither the
// parameter count nor the aligned flat buffer (FlatNumel with zero.align_elems); bounded, keeps
// every tp / sp rule. Returns whether it got there.
bool NudgeUnevenDp(Config& c, SeqRng& rng, const DomainOptions& opts);

// Restores the cross-field rules after a one-field change where it can (world, heads / kv / ffn vs
// tp, sp, layers vs chunks, schedule vs virtual stages and accumulation, ZeRO-3 vs pp, explicit
// partitions, exact_linear vs tp, checkpoint). Fields already consistent are left alone.
void Repair(Config& c);

// Breaks exactly one validation rule of `c` (a valid config); Validate rejects the result.
Config BreakOneRule(Config c, SeqRng& rng);

}  // namespace paradiff::domain_internal
