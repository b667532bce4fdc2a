// The bug-zoo fault switch names (../shared/BUGZOO.md, docs/BUGZOO.md). Validation accepts exactly
// these in `faults` / `--inject`; kernels/faults.h turns them into flags on the code paths.
#pragma once

#include <array>
#include <string_view>

namespace paradiff {

inline constexpr std::array<std::string_view, 13> kFaultNames = {
    "zero.uneven_last_shard",
    "pp.floor_layers_per_stage",
    "tp.vocab_padding_in_loss",
    "dp.average_by_world_size",
    "pp.skip_tied_embedding_sync",
    "fp16.local_overflow_decision",
    "clip.count_replicated_per_tp_rank",
    "gas.overwrite_grad",
    "bf16.accumulate_in_bf16",
    "ckpt.reshard_drops_tail",
    "comm.rank_dependent_bucket_order",
    "fp16.unscale_with_new_scale",
    "sched.counts_skipped_steps",
};

inline bool IsKnownFault(std::string_view name) {
  for (auto n : kFaultNames)
    if (n == name) return true;
  return false;
}

}  // namespace paradiff
