// GradReducer: averages gradients over the data-parallel group, the way ZeRO does it: bucketed
// all-reduce of the full gradient buffer (stages 0 and 1, at the accumulation boundary),
// bucketed reduce-scatter into each rank's gradient shard (stage 2, every micro-step), or a
// reduce-scatter per layer as its backward finishes (stage 3). Communication happens in the
// configured reduce dtype; results land in the accumulate dtype, scaled by 1 / dp.
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

#include "comm/communicator.h"
#include "core/config.h"
#include "kernels/faults.h"
#include "kernels/flat_layout.h"
#include "kernels/flat_pack.h"

namespace paradiff {

class GradReducer {
 public:
  GradReducer(const Config& cfg, const FlatLayout& layout, const FaultSet& faults, Communicator& dp,
              int64_t world_size);

  // Stages 0 / 1: `full` (flat, accumulate dtype) becomes the dp average, bucket by bucket.
  void AllReduceBuckets(at::Tensor& full);
  // Stage 2: this micro-step's `full` gradients are reduce-scattered and folded into `shard_acc`.
  void ReduceScatterBuckets(const at::Tensor& full, at::Tensor& shard_acc, int64_t micro_step,
                            bool boundary);
  // Stage 3: one layer's gradients, packed per `plan`, reduce-scattered and added to `shard_acc`.
  void ReduceScatterPack(const PackPlan& plan, const at::Tensor& pack, at::Tensor& shard_acc,
                         bool copy);

  int64_t peak_buffer_bytes() const { return peak_bytes_; }

 private:
  double AverageFactor() const;
  void NoteBuffer(const at::Tensor& t);

  const Config& cfg_;
  const FlatLayout& layout_;
  const FaultSet& faults_;
  Communicator& dp_;
  int64_t world_size_;
  std::vector<PackPlan> buckets_;
  int64_t peak_bytes_ = 0;
};

}  // namespace paradiff
