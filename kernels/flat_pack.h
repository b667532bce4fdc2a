// Packs: the contiguous communication buffers the engine reduces and gathers. A pack holds the
// elements of a set of parameters (ascending flat order, alignment padding dropped). Because shards
// are contiguous and increasing, the elements of a pack that rank r owns form one contiguous run,
// and the runs of ranks 0..dp-1 follow each other: a pack is reduce-scattered / all-gathered with
// per-rank counts (uneven, possibly zero).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "kernels/flat_layout.h"

namespace paradiff {

struct PackPlan {
  std::vector<int> entries;     // ascending entry indices
  int64_t numel = 0;            // elements in the pack
  std::vector<int64_t> counts;  // per dp rank: pack elements inside its shard
  int64_t owned = 0;            // sum(counts): elements owned by some rank (a prefix of the pack)
  int64_t RankBegin(int r) const;  // first pack element of rank r's run
};

PackPlan MakePackPlan(const FlatLayout& layout, std::vector<int> entries);

// full flat buffer -> pack (dtype of `pack`)
void PackFull(const FlatLayout& layout, const PackPlan& plan, const at::Tensor& full,
              at::Tensor& pack);
// pack -> full flat buffer
void UnpackFull(const FlatLayout& layout, const PackPlan& plan, const at::Tensor& pack,
                at::Tensor& full);
// rank r's run of the pack <-> rank r's shard buffer (size ShardSize(r)).
void PackShard(const FlatLayout& layout, const PackPlan& plan, int r, const at::Tensor& shard,
               at::Tensor& run);
// dst[dst_at, dst_at + n) += src[src_at, src_at + n) (dst flat; src flat, or contiguous when
// src_at is 0). Into float32 from float32, bf16 or fp16 it is a loop: each element widened
// exactly, then one float32 addition, as to() and add_() compute it; any other pair goes through
// add_.
void AddRange(const at::Tensor& dst, int64_t dst_at, const at::Tensor& src, int64_t src_at,
              int64_t n);
// Adds (or copies, when `copy`) rank r's run into its shard buffer.
void UnpackShard(const FlatLayout& layout, const PackPlan& plan, int r, const at::Tensor& run,
                 at::Tensor& shard, bool copy);

}  // namespace paradiff
