// RankEngine::SaveShard / LoadShard: a rank's part of a sharded checkpoint (kernels/checkpoint.h).
// Saved: parameters (stage 0: the first data-parallel rank's full copy; stages 1-3: each rank's
// ZeRO shard), master weights and optimizer state of the owned region, all addressed by logical
// tensor offsets. Loaded: every element this rank holds in its (possibly different) layout, read
// from whichever saved pieces cover it; loss scaler state and the update count come with it.
#include <ATen/ATen.h>

#include "comm/views.h"
#include "kernels/optim.h"
#include "kernels/rank_engine.h"

namespace paradiff {

CheckpointShard RankEngine::SaveShard() const {
  CheckpointShard shard;
  shard.rank = world_.rank();
  shard.data_end = layout_.data_end();
  const bool saves_owned = stage_ > 0 || dp_rank_ == 0;
  if (!saves_owned) return shard;
  auto add = [&](const std::string& kind, const at::Tensor& buf, int64_t buf_begin) {
    for (const auto& p : layout_.Pieces(shard_begin_, shard_begin_ + shard_size_)) {
      // One copy of the piece, each logical run (a column slice's row) a view of it.
      const at::Tensor copy = Slice(buf, p.flat_offset - buf_begin, p.count).clone();
      shards_[p.entry].ForEachLogicalRun(
          p.param_offset, p.count, [&](int64_t local, int64_t logical, int64_t n) {
            shard.pieces.push_back({kind, layout_.entries()[p.entry].name, logical,
                                    p.flat_offset + (local - p.param_offset),
                                    Slice(copy, local - p.param_offset, n)});
          });
    }
  };
  add("param", params_, stage_ == 3 ? shard_begin_ : 0);
  if (master_.defined()) add("master", master_, shard_begin_);
  const auto names = OptimizerSlotNames(cfg_.optimizer.kind);
  for (size_t i = 0; i < names.size(); ++i) add(names[i], slots_[i], shard_begin_);
  return shard;
}

void RankEngine::LoadShard(const CheckpointReader& reader) {
  reader.CheckModel(cfg_.model);
  const int64_t old_dp = reader.manifest()["layout"].value("dp", int64_t{1});
  auto load = [&](const std::string& kind, at::Tensor& buf, int64_t buf_begin, int64_t begin,
                  int64_t end, bool drop_tail) {
    for (const auto& p : layout_.Pieces(begin, end)) {
      shards_[p.entry].ForEachLogicalRun(
          p.param_offset, p.count, [&](int64_t local, int64_t logical, int64_t n) {
            const int64_t flat = p.flat_offset + (local - p.param_offset);
            reader.Read(kind, layout_.entries()[p.entry].name, logical,
                        Slice(buf, flat - buf_begin, n), drop_tail);
          });
    }
  };
  const int64_t held_begin = stage_ == 3 ? shard_begin_ : 0;
  load("param", params_, held_begin, held_begin, held_begin + params_.numel(), false);
  if (master_.defined()) {
    if (!reader.Has("master")) throw CheckpointError("checkpoint has no master weights to load");
    load("master", master_, shard_begin_, shard_begin_, shard_begin_ + shard_size_, false);
  }
  // The zoo's ckpt.reshard_drops_tail bug lives in the optimizer-state loader of a resharding
  // load: only there, and only when the data-parallel size changed.
  const bool drop_tail = faults_.ckpt_reshard_drops_tail && old_dp != cfg_.parallel.dp;
  const auto names = OptimizerSlotNames(cfg_.optimizer.kind);
  for (size_t i = 0; i < names.size(); ++i)
    load(names[i], slots_[i], shard_begin_, shard_begin_, shard_begin_ + shard_size_, drop_tail);
  const auto& sc = reader.manifest()["scaler"];
  scaler_.Restore({sc.at("scale").get<double>(), sc.at("good_steps").get<int64_t>(),
                   sc.at("hysteresis_left").get<int64_t>()});
  updates_ = reader.manifest().at("updates").get<int64_t>();
}

}  // namespace paradiff
