// ResourceBudget and CheckBudget: limits that keep an untrusted config from exhausting memory or
// time (docs/CONFIG.md, "Resource budget"). Validate (validate.h) says whether a config describes
// a runnable layout; CheckBudget says whether it is small enough to run here. Every exceeded
// limit is reported, each as "field=value exceeds the budget of N (ResourceBudget.max_x)". Derived
// quantities use pseudo-fields that are not JSON keys: batch.tokens_per_step, model.parameters and
// bytes_per_rank.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "core/status.h"

namespace paradiff {

struct ResourceBudget {
  int64_t max_world = 64;                  // parallel.world: ranks (threads or processes)
  int64_t max_steps = 64;                  // steps: optimizer steps per run
  int64_t max_seq_len = 1024;              // model.seq_len: tokens per sequence
  int64_t max_layers = 64;                 // model.layers: transformer blocks / linear layers
  int64_t max_vocab = 1 << 20;             // model.vocab: embedding rows
  int64_t max_params = 20'000'000;         // total logical parameters (ModelParameterCount)
  int64_t max_bytes_per_rank = 1LL << 30;  // estimated memory of one rank (EstimateBytesPerRank)
  int64_t max_tokens_per_step = 1 << 16;   // micro_batch * accumulation_steps * dp * seq_len
  int64_t max_accumulation = 64;           // batch.accumulation_steps
  int64_t max_micro_batch = 1024;          // batch.micro_batch: sequences per micro-batch
  int64_t max_bucket_elems = 1 << 28;      // zero.bucket_elems: elements of one comm bucket
  int64_t max_align_elems = 1 << 16;       // zero.align_elems: shard alignment (padding per tensor)
  // Estimated memory of a whole check: every rank (threads of one process with the local backend)
  // with what it reports, and the reference pair with its per-step records
  // (EstimateBytesPerProcess); below a campaign worker's default address-space limit (8 GiB).
  int64_t max_bytes_per_process = 4LL << 30;
};

// Checks every limit of the budget. Never divides by zero or overflows, whatever the config: the
// parameter and memory estimates are skipped when the model's structure makes them meaningless
// (a size < 1, gpt with hidden % heads != 0, tp or pp < 1).
Status CheckBudget(const Config& config, const ResourceBudget& budget);

// Validate, then CheckBudget, all errors merged (validation errors first).
Status CheckConfig(const Config& config, const ResourceBudget& budget);

// The analytical estimate of one rank's memory in bytes (formula in budget.cpp), or a negative
// value when the structure makes it meaningless. Saturates at a huge value instead of overflowing.
double EstimateBytesPerRank(const Config& config);

// The analytical estimate of a whole check's memory in bytes (formula in budget.cpp, see Note
// [Bytes per process]), or a negative value when the structure makes it meaningless.
double EstimateBytesPerProcess(const Config& config);

}  // namespace paradiff
