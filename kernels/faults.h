// FaultSet: the bug-zoo switches (../shared/BUGZOO.md) as flags, all off by default. Each flag is
// read in exactly the code path where the real bug lived, and only misbehaves under the configs
// that triggered it there. Built from Config::faults (names in core/fault_names.h).
#pragma once

#include <string>
#include <vector>

namespace paradiff {

struct FaultSet {
  bool zero_uneven_last_shard = false;             // kernels/flat_layout.cpp: partition sizing
  bool pp_floor_layers_per_stage = false;          // pipeline partition (pipeline issue)
  bool tp_vocab_padding_in_loss = false;           // vocab-parallel loss (tensor-parallel issue)
  bool dp_average_by_world_size = false;           // kernels/grad_reducer.cpp: gradient averaging
  bool pp_skip_tied_embedding_sync = false;        // pipeline tied embeddings (pipeline issue)
  bool fp16_local_overflow_decision = false;       // loss scaler (mixed-precision issue)
  bool clip_count_replicated_per_tp_rank = false;  // clipping norm (tensor-parallel issue)
  bool gas_overwrite_grad = false;                 // kernels/grad_reducer.cpp: ZeRO-2 accumulation
  bool bf16_accumulate_in_bf16 = false;            // gradient accumulation (mixed-precision issue)
  bool ckpt_reshard_drops_tail = false;            // checkpoint reload (checkpoint issue)
  bool comm_rank_dependent_bucket_order = false;   // kernels/buckets.cpp: bucket fill order
  bool fp16_unscale_with_new_scale = false;        // loss scaler + clipping (mixed-precision issue)
  bool sched_counts_skipped_steps = false;         // learning-rate schedule under loss scaling
};

// Unknown names are rejected by validation before this is called; here they are ignored.
FaultSet MakeFaultSet(const std::vector<std::string>& names);

}  // namespace paradiff
