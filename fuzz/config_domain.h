// The config domain of the fuzzer: generate, mutate and shrink configs. Valid by construction
// (unless asked for invalid ones), weighted toward where distributed-training bugs live: sizes that
// do not divide (parameters vs dp, vocab vs tp, layers vs pp), odd and prime world sizes, buckets
// smaller than one tensor or larger than all, accumulation > 1, low precision, tied embeddings,
// every ZeRO stage. Every decision comes from the SeqRng passed in: same seed, same configs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/reload_support.h"
#include "core/rng.h"
#include "core/status.h"
#include "core/target_option.h"

namespace paradiff {

struct DomainOptions {
  int64_t max_world = 8;    // largest world size generated
  int64_t max_layers = 4;   // largest model.layers (interleaved: see Note [Interleaved layers])
  int64_t max_hidden = 64;  // largest model.hidden
  int64_t max_steps = 3;    // largest steps
  // Largest model.vocab: the embedding-heavy draws (see Note [Embedding-heavy models] in
  // config_generate.cpp) reach it; the rest stay at 17..97.
  int64_t max_vocab = 512;
  // Largest steps of a config with dynamic loss scaling, in place of max_steps: the scaler's state
  // machine (hysteresis, backoff, growth) needs several steps to show (see Note [Climbing loss
  // scale] in config_generate.cpp).
  int64_t max_scaler_steps = 8;
  // Largest steps of a config with a learning-rate schedule (see Note [Learning-rate schedules] in
  // config_generate.cpp): long enough to pass a short decay's end.
  int64_t max_schedule_steps = 6;
  double invalid_share = 0.0;       // share of deliberately invalid configs (Generate / Mutate)
  std::vector<std::string> faults;  // copied into every generated config
  // An external target's own settings (TargetSpec::options): each generated config leaves an
  // option at the target's default or sets one of its values that fit it, half and half.
  std::map<std::string, TargetOption> target_options;
  // The system takes zero.shard_group (a target's supports.shard_groups): see Note [Shard groups]
  // in config_generate.cpp.
  bool shard_groups = false;
  // The reload layouts the system takes its checkpoints into (a target's supports.checkpoint).
  ReloadSupport reload;
  // Configs this predicate rejects are re-drawn (e.g. what the engine build supports); null = all.
  std::function<bool(const Config&)> accept;
  // The precisions the system takes (a target's supports.precision; empty: any), for a system
  // whose precisions the main draw does not make (see Note [Declared precisions] in
  // config_generate.cpp). Only the dtypes and master_weights of each are used.
  std::vector<PrecisionConfig> precisions;
  // The parallel dimensions the system runs ("dp", "tp", "pp", "sp": a target's supports.parallel;
  // empty: all). The generator draws a degree above 1 only in these (see Note [Declared
  // parallelism] in config_generate.cpp).
  std::set<std::string> parallel;
  bool Runs(const char* dimension) const { return parallel.empty() || parallel.count(dimension); }
};

// A fresh config. Valid (Validate + CheckBudget pass) and accepted unless it drew "invalid".
Config GenerateConfig(SeqRng& rng, const DomainOptions& opts);

// One field-aware mutation of `base` (change one degree, swap a schedule, flip a precision, nudge a
// size to a non-divisible value, ...). Keeps the result valid and accepted unless it drew
// "invalid".
Config MutateConfig(const Config& base, SeqRng& rng, const DomainOptions& opts);

// Candidates one step smaller / simpler than `c` (fewer ranks, steps, layers, smaller sizes,
// fp32 instead of low precision, ZeRO 0, no accumulation, no clipping, ...), most aggressive
// first. Each candidate is valid if `c` is (the minimizer re-checks).
std::vector<Config> ShrinkCandidates(const Config& c);

// Feature values of a config for coverage ("zero=3", "tp=2", "dp=odd", "param=bf16",
// "accum>1", "uneven.dp", "tied", ...); the campaign counts pairs of these.
std::vector<std::string> ConfigFeatures(const Config& c);

}  // namespace paradiff
