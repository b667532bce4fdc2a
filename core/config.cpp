// Config value semantics: member-wise equality of every config struct.
#include "core/config.h"

namespace paradiff {

bool ModelConfig::operator==(const ModelConfig& o) const {
  return kind == o.kind && layers == o.layers && hidden == o.hidden && heads == o.heads &&
         kv_heads == o.kv_heads && ffn == o.ffn && vocab == o.vocab && seq_len == o.seq_len &&
         tied_embeddings == o.tied_embeddings && position_embeddings == o.position_embeddings &&
         activation == o.activation;
}

bool BatchConfig::operator==(const BatchConfig& o) const {
  return micro_batch == o.micro_batch && accumulation_steps == o.accumulation_steps;
}

bool ParallelConfig::operator==(const ParallelConfig& o) const {
  return world == o.world && tp == o.tp && pp == o.pp && dp == o.dp && sp == o.sp &&
         virtual_stages == o.virtual_stages && schedule == o.schedule && partition == o.partition &&
         partition_layers == o.partition_layers;
}

bool ZeroConfig::operator==(const ZeroConfig& o) const {
  return stage == o.stage && bucket_elems == o.bucket_elems && align_elems == o.align_elems &&
         shard_group == o.shard_group;
}

bool LossScaleConfig::operator==(const LossScaleConfig& o) const {
  return mode == o.mode && init == o.init && growth_factor == o.growth_factor &&
         backoff == o.backoff && growth_interval == o.growth_interval &&
         hysteresis == o.hysteresis && min == o.min;
}

bool PrecisionConfig::operator==(const PrecisionConfig& o) const {
  return param == o.param && compute == o.compute && reduce == o.reduce &&
         accumulate == o.accumulate && master_weights == o.master_weights &&
         loss_scale == o.loss_scale;
}

bool LrScheduleConfig::operator==(const LrScheduleConfig& o) const {
  return kind == o.kind && warmup_steps == o.warmup_steps && total_steps == o.total_steps &&
         min_ratio == o.min_ratio;
}

bool OptimizerConfig::operator==(const OptimizerConfig& o) const {
  return kind == o.kind && lr == o.lr && schedule == o.schedule && momentum == o.momentum &&
         beta1 == o.beta1 && beta2 == o.beta2 && eps == o.eps && weight_decay == o.weight_decay;
}

bool ReloadConfig::operator==(const ReloadConfig& o) const {
  return tp == o.tp && pp == o.pp && dp == o.dp && zero_stage == o.zero_stage;
}

bool CheckpointConfig::operator==(const CheckpointConfig& o) const {
  return save_at == o.save_at && reload == o.reload;
}

bool Config::operator==(const Config& o) const {
  return schema == o.schema && seed == o.seed && steps == o.steps && model == o.model &&
         batch == o.batch && parallel == o.parallel && zero == o.zero && precision == o.precision &&
         optimizer == o.optimizer && clip_grad_norm == o.clip_grad_norm &&
         checkpoint == o.checkpoint && backend == o.backend && faults == o.faults &&
         target_options == o.target_options;
}

}  // namespace paradiff
