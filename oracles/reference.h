// The single-device reference trainer: the same model, data, optimizer and clipping as the
// engine, on one device, with plain autograd over the whole model. It runs twice: in float64 (the
// truth) and in the config's own precision (the same-precision twin, whose own error against the
// truth calibrates the tolerance). It mirrors the run's micro-batch structure (see Note
// [Micro-batch order] in kernels/data.h): micro-batch g = 0 .. dp * accumulation_steps - 1,
// accumulated in the configured accumulate dtype after a round trip through the reduce dtype, in
// the order the run declares (see Note [Mirrored reduction order] in reference.cpp).
//
// The float64 truth takes each step's micro-batches as one batch (see Note [Batched truth] in
// reference.cpp).
//
// It never calls engine code that shards, partitions, buckets or communicates: only the pure
// per-tensor math of kernels/model.h, optim.h, param_init.h, data.h and numerics.h, and
// LayoutAtStep (kernels/engine.h: the layout a checkpointed run has after its reload, config
// arithmetic whose split into accumulation steps the twin mirrors).
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/grad_reduction.h"

namespace paradiff {

struct RefStep {
  double loss = 0;       // mean micro-batch loss of the step
  double grad_norm = 0;  // global gradient norm before clipping (inf on a skipped step)
  bool skipped = false;  // overflow: the step changed nothing
  double loss_scale = 1;
  // "kind:tensor" -> flat float64 values; kinds: grad (averaged, before clipping), param, master
  // (only with master weights), and the optimizer slots (momentum | exp_avg, exp_avg_sq).
  std::map<std::string, at::Tensor> tensors;
};

struct RefRun {
  std::vector<RefStep> steps;
};

struct RefPair {
  RefRun truth;             // float64 everywhere
  RefRun same;              // the config's precision
  GradReduction reduction;  // the declared structure both mirror (restarts keep it)
};

// A run's own state after one of its steps, from which the reference can restart
// (see Note [Local restart] in reference.cpp).
struct RefOrigin {
  int64_t step = 0;  // the state after this step (-1: the initial state); runs step + 1 ..
  // The run's assembled "kind:tensor" -> flat float64: param, master (when the config keeps
  // master weights) and the optimizer slots. Null: the initial parameters (step must be -1).
  const std::map<std::string, at::Tensor>* state = nullptr;
  std::vector<bool> skips;    // the overflow decisions of steps 0 .. step (they set the loss scale)
  int64_t steps = -1;         // how many steps to run (-1: to the last)
  double scale_factor = 1.0;  // the first step runs at its loss scale times this
};

// Runs the reference in float64 (truth = true) or in the config's precision, from the initial
// parameters, or from `origin` (then its steps are origin->step + 1 .. cfg.steps - 1 only).
// `skips` (truth only): the steps to skip as overflowed, taken from the same-precision twin.
// `red`: the run's declared reduction structure, mirrored.
RefRun RunReference(const Config& cfg, const GradReduction& red, bool truth,
                    const std::vector<bool>* skips = nullptr, const RefOrigin* origin = nullptr);
// The twin, then the truth following the twin's overflow decisions.
RefPair RunReferencePair(const Config& cfg, const GradReduction& red);
// `base` up to origin.step, whose state there is replaced by the run's (both twin and truth), then
// the pair restarted from that state (see Note [Local restart]).
RefPair RestartReferencePair(const Config& cfg, const RefPair& base, const RefOrigin& origin);
// Whether the same-precision twin overflows in the one step after `origin` (its loss scale times
// origin.scale_factor); see Note [Overflow margin] in numeric_oracle.cpp.
bool TwinOverflows(const Config& cfg, const GradReduction& red, RefOrigin origin);
// Skipped-step pattern of a run.
std::vector<bool> SkippedSteps(const RefRun& run);

// The fields that determine a reference (model, data, optimizer, precision, steps, seed, the
// number and size of micro-batches, how they split into accumulation steps, with pipelining the
// schedule's backward order, and the reduction structure the twin mirrors) and nothing else of the
// layout; equal keys share one reference.
std::string ReferenceKey(const Config& cfg, const GradReduction& red);

// Thread-safe cache of reference pairs by ReferenceKey, bounded to `capacity` entries (oldest
// evicted first).
class ReferenceCache {
 public:
  explicit ReferenceCache(size_t capacity = 64) : capacity_(capacity) {}
  std::shared_ptr<const RefPair> Get(const Config& cfg, const GradReduction& red);
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const RefPair>> map_;
  std::vector<std::string> order_;
  int64_t hits_ = 0, misses_ = 0;
};

// The pair for cfg under the declared reduction `red`: from `cache` when there is one, else
// computed now.
std::shared_ptr<const RefPair> GetReference(const Config& cfg, const GradReduction& red,
                                            ReferenceCache* cache);

}  // namespace paradiff
