// Training data as a pure function of (seed, step, global sample index): every layout slices the
// same global batch. Micro-batch g of a step (0 <= g < dp * accumulation_steps) holds the samples
// [g * micro_batch, (g + 1) * micro_batch) of that step; data-parallel rank r at micro-step m
// processes micro-batch g = r * accumulation_steps + m (see Note [Micro-batch order]).
//
// Note [Micro-batch order]: ranks take contiguous blocks of micro-batches so that the reference,
// which walks g = 0, 1, ... in order and accumulates in the configured dtype, adds the same
// gradients in the same order within each rank's block; only the cross-rank reduction order
// differs.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "core/config.h"

namespace paradiff {

struct MicroBatch {
  at::Tensor inputs;  // gpt: int64 [micro_batch, seq_len] token ids; exact_linear: float64 [mb,
                      // seq, hidden]
  at::Tensor
      targets;  // gpt: int64 [micro_batch, seq_len] next tokens; exact_linear: float64 like inputs
};

// Micro-batches per step over the whole data-parallel group.
inline int64_t MicroBatchesPerStep(const Config& c) {
  return c.batch.accumulation_steps * c.parallel.dp;
}

MicroBatch MakeMicroBatch(const Config& c, int64_t step, int64_t global_micro_index);

}  // namespace paradiff
