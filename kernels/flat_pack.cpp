#include "kernels/flat_pack.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>

#include "kernels/numerics.h"

namespace paradiff {

namespace {

// dst[dst_at, dst_at + n) = src[src_at, src_at + n). Within one dtype a copy is bytes (no tensor
// operator per entry); a conversion goes through copy_, which rounds as the engine always has.
void CopyRange(const at::Tensor& dst, int64_t dst_at, const at::Tensor& src, int64_t src_at,
               int64_t n) {
  if (n == 0) return;
  if (dst.scalar_type() == src.scalar_type() && dst.is_contiguous() && src.is_contiguous()) {
    const int64_t size = static_cast<int64_t>(dst.element_size());
    std::memcpy(static_cast<char*>(dst.data_ptr()) + dst_at * size,
                static_cast<const char*>(src.data_ptr()) + src_at * size,
                static_cast<size_t>(n * size));
    return;
  }
  dst.narrow(0, dst_at, n).copy_(src.narrow(0, src_at, n));
}

template <typename T>
void AddAs(float* dst, const at::Tensor& src, int64_t src_at, int64_t n) {
  const T* x = src.data_ptr<T>() + src_at;
  for (int64_t i = 0; i < n; ++i) dst[i] += static_cast<float>(x[i]);
}

}  // namespace

void AddRange(const at::Tensor& dst, int64_t dst_at, const at::Tensor& src, int64_t src_at,
              int64_t n) {
  if (n == 0) return;
  if (dst.scalar_type() == at::kFloat && dst.is_contiguous() && src.is_contiguous()) {
    float* d = dst.data_ptr<float>() + dst_at;
    switch (src.scalar_type()) {
      case at::kFloat:
        return AddAs<float>(d, src, src_at, n);
      case at::kBFloat16:
        return AddAs<at::BFloat16>(d, src, src_at, n);
      case at::kHalf:
        return AddAs<at::Half>(d, src, src_at, n);
      default:
        break;
    }
  }
  const at::Tensor flat = src.dim() == 1 ? src : src.reshape({-1});
  const at::Tensor part = src_at == 0 && flat.numel() == n ? flat : flat.narrow(0, src_at, n);
  dst.narrow(0, dst_at, n).add_(AsDType(part, dst.scalar_type()));
}

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
    CopyRange(pack, pos, full, fe.offset, fe.numel);
    pos += fe.numel;
  }
}

void UnpackFull(const FlatLayout& layout, const PackPlan& plan, const at::Tensor& pack,
                at::Tensor& full) {
  int64_t pos = 0;
  for (int e : plan.entries) {
    const FlatEntry& fe = layout.entries()[e];
    CopyRange(full, fe.offset, pack, pos, fe.numel);
    pos += fe.numel;
  }
}

void PackShard(const FlatLayout& layout, const PackPlan& plan, int r, const at::Tensor& shard,
               at::Tensor& run) {
  const int64_t b = layout.ShardBegin(r);
  int64_t pos = 0;
  for (const auto& p : layout.Pieces(plan.entries, b, b + layout.ShardSize(r))) {
    CopyRange(run, pos, shard, p.flat_offset - b, p.count);
    pos += p.count;
  }
}

void UnpackShard(const FlatLayout& layout, const PackPlan& plan, int r, const at::Tensor& run,
                 at::Tensor& shard, bool copy) {
  const int64_t b = layout.ShardBegin(r);
  int64_t pos = 0;
  for (const auto& p : layout.Pieces(plan.entries, b, b + layout.ShardSize(r))) {
    if (copy) {
      CopyRange(shard, p.flat_offset - b, run, pos, p.count);
    } else {
      AddRange(shard, p.flat_offset - b, run, pos, p.count);
    }
    pos += p.count;
  }
}

}  // namespace paradiff
