#include "kernels/faults.h"

namespace paradiff {

FaultSet MakeFaultSet(const std::vector<std::string>& names) {
  FaultSet f;
  for (const auto& n : names) {
    if (n == "zero.uneven_last_shard") f.zero_uneven_last_shard = true;
    if (n == "pp.floor_layers_per_stage") f.pp_floor_layers_per_stage = true;
    if (n == "tp.vocab_padding_in_loss") f.tp_vocab_padding_in_loss = true;
    if (n == "dp.average_by_world_size") f.dp_average_by_world_size = true;
    if (n == "pp.skip_tied_embedding_sync") f.pp_skip_tied_embedding_sync = true;
    if (n == "fp16.local_overflow_decision") f.fp16_local_overflow_decision = true;
    if (n == "clip.count_replicated_per_tp_rank") f.clip_count_replicated_per_tp_rank = true;
    if (n == "gas.overwrite_grad") f.gas_overwrite_grad = true;
    if (n == "bf16.accumulate_in_bf16") f.bf16_accumulate_in_bf16 = true;
    if (n == "ckpt.reshard_drops_tail") f.ckpt_reshard_drops_tail = true;
    if (n == "comm.rank_dependent_bucket_order") f.comm_rank_dependent_bucket_order = true;
    if (n == "fp16.unscale_with_new_scale") f.fp16_unscale_with_new_scale = true;
    if (n == "sched.counts_skipped_steps") f.sched_counts_skipped_steps = true;
  }
  return f;
}

}  // namespace paradiff
