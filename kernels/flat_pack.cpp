#include "kernels/flat_pack.h"

#include <ATen/ATen.h>

#include <algorithm>

namespace paradiff {

int64_t PackPlan::RankBegin(int r) const {
  int64_t b = 0;
  for (int i = 0; i < r; ++i) b += counts[i];
  return b;
}

PackPlan MakePackPlan(const FlatLayout& layout, std::vector<int> entries) {
  std::sort(entries.begin(), entries.end());
  PackPlan plan;
  plan.entries = std::move(entries);
  for (int e : plan.entries) plan.numel += layout.entries()[e].numel;
  for (int64_t r = 0; r < layout.dp(); ++r) {
    int64_t c = 0;
    const int64_t b = layout.ShardBegin(r);
    for (const auto& p : layout.Pieces(plan.entries, b, b + layout.ShardSize(r))) c += p.count;
    plan.counts.push_back(c);
    plan.owned += c;
  }
  return plan;
}

void PackFull(const FlatLayout& layout, const PackPlan& plan, const at::Tensor& full,
              at::Tensor& pack) {
  int64_t pos = 0;
  for (int e : plan.entries) {
    const FlatEntry& fe = layout.entries()[e];
    pack.narrow(0, pos, fe.numel).copy_(full.narrow(0, fe.offset, fe.numel));
    pos += fe.numel;
  }
}

void UnpackFull(const FlatLayout& layout, const PackPlan& plan, const at::Tensor& pack,
                at::Tensor& full) {
  int64_t pos = 0;
  for (int e : plan.entries) {
    const FlatEntry& fe = layout.entries()[e];
    full.narrow(0, fe.offset, fe.numel).copy_(pack.narrow(0, pos, fe.numel));
    pos += fe.numel;
  }
}

void PackShard(const FlatLayout& layout, const PackPlan& plan, int r, const at::Tensor& shard,
               at::Tensor& run) {
  const int64_t b = layout.ShardBegin(r);
  int64_t pos = 0;
  for (const auto& p : layout.Pieces(plan.entries, b, b + layout.ShardSize(r))) {
    run.narrow(0, pos, p.count).copy_(shard.narrow(0, p.flat_offset - b, p.count));
    pos += p.count;
  }
}

void UnpackShard(const FlatLayout& layout, const PackPlan& plan, int r, const at::Tensor& run,
                 at::Tensor& shard, bool copy) {
  const int64_t b = layout.ShardBegin(r);
  int64_t pos = 0;
  for (const auto& p : layout.Pieces(plan.entries, b, b + layout.ShardSize(r))) {
    at::Tensor dst = shard.narrow(0, p.flat_offset - b, p.count);
    at::Tensor src = run.narrow(0, pos, p.count);
    if (copy) {
      dst.copy_(src);
    } else {
      dst.add_(src.to(dst.scalar_type()));
    }
    pos += p.count;
  }
}

}  // namespace paradiff
