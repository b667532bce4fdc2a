#include "kernels/grad_reducer.h"

#include <ATen/ATen.h>

#include "comm/fresh.h"
#include "comm/views.h"
#include "kernels/buckets.h"
#include "kernels/numerics.h"

namespace paradiff {

GradReducer::GradReducer(const Config& cfg, const FlatLayout& layout, const FaultSet& faults,
                         Communicator& dp, int64_t world_size)
    : cfg_(cfg), layout_(layout), faults_(faults), dp_(dp), world_size_(world_size) {
  for (auto& entries : PlanBuckets(layout, cfg.zero.bucket_elems, dp.rank(), faults))
    buckets_.push_back(MakePackPlan(layout, std::move(entries)));
}

double GradReducer::AverageFactor() const {
  // BUG (zoo: dp.average_by_world_size): dividing by the world size instead of the data-parallel
  // size; only wrong when tensor or pipeline parallelism makes world > dp.
  if (faults_.dp_average_by_world_size) return 1.0 / static_cast<double>(world_size_);
  return 1.0 / static_cast<double>(dp_.size());
}

void GradReducer::NoteBuffer(const at::Tensor& t) {
  peak_bytes_ = std::max<int64_t>(peak_bytes_, t.numel() * static_cast<int64_t>(t.element_size()));
}

void GradReducer::AllReduceBuckets(at::Tensor& full) {
  const auto reduce = ToScalarType(cfg_.precision.reduce);
  for (const auto& plan : buckets_) {
    at::Tensor pack = Empty({plan.numel}, full.options().dtype(reduce));
    NoteBuffer(pack);
    PackFull(layout_, plan, full, pack);
    dp_.AllReduce(pack, ReduceOp::kSum);
    at::Tensor avg = AsDType(pack, full.scalar_type()).mul_(AverageFactor());
    UnpackFull(layout_, plan, avg, full);
  }
}

void GradReducer::ReduceScatterBuckets(const at::Tensor& full, at::Tensor& shard_acc,
                                       int64_t micro_step, bool boundary) {
  bool copy = micro_step == 0;
  // BUG (zoo: gas.overwrite_grad): the accumulation buffer is overwritten at every non-boundary
  // micro-step instead of only the first, so all but the last two micro-steps are lost.
  if (faults_.gas_overwrite_grad && !boundary) copy = true;
  for (const auto& plan : buckets_) {
    at::Tensor pack = Empty({plan.numel}, full.options());
    NoteBuffer(pack);
    PackFull(layout_, plan, full, pack);
    ReduceScatterPack(plan, pack, shard_acc, copy);
  }
}

void GradReducer::ReduceScatterPack(const PackPlan& plan, const at::Tensor& pack,
                                    at::Tensor& shard_acc, bool copy) {
  const auto reduce = ToScalarType(cfg_.precision.reduce);
  at::Tensor in = AsDType(Slice(pack, 0, plan.owned), reduce);  // contiguous, as the slice
  at::Tensor out = Empty({plan.counts[dp_.rank()]}, in.options());
  dp_.ReduceScatter(in, out, plan.counts, ReduceOp::kSum);
  at::Tensor avg = AsDType(out, shard_acc.scalar_type()).mul_(AverageFactor());
  UnpackShard(layout_, plan, dp_.rank(), avg, shard_acc, copy);
}

}  // namespace paradiff
