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
#include <optional>
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

// Note [Twin samples]: the twin's error against the truth is one sample of the rounding noise of
// the config's precision, and the numeric bounds scale with it. A run on the reference's own
// kernels (the built-in engine, a target declaring "model_arithmetic": "paradiff") rounds each
// micro-batch exactly as the twin does: its error is that sample plus what its reduction order
// adds. A target with its own kernels draws an independent sample, and where the model amplifies
// rounding (a layer norm over two nearly equal values turns every gradient upstream into
// cancellation) the ratio of two independent noise norms has a heavy tail: for a 2-element tensor
// whose noise is Gaussian, P(one exceeds 4 times the other) = 1/17. So for such a target with a
// 16-bit compute dtype the reference draws kRandomTwins more samples, twins whose op results round
// at random (see Note [Random rounding] in kernels/numerics.cpp), and the bound scales with the
// largest of the kRandomTwins + 1 errors. For exchangeable samples, a run's error exceeds 4 times
// the largest of k others with probability 1/C(16 + k, k) in that 2-element case (the minimum of
// k Rayleigh tail probabilities is Beta(1, k) distributed, and E[X^16] of Beta(1, k) is
// k! 16! / (16 + k)!): 1/4845 for k = 4, against 1/17 for the twin alone; random rounding's
// samples are larger than round-to-nearest's (kernels/numerics.cpp), which only lowers it. A
// float32 compute dtype gets none: its kernels' error is their accumulation's, which rounding the
// result does not sample. Evidence: docs/EVIDENCE.md.
inline constexpr int64_t kRandomTwins = 3;

// How many random-rounding twins a run needs (see Note [Twin samples]).
int64_t RandomTwinsFor(const Config& cfg, bool same_model_arithmetic);

struct RefPair {
  RefRun truth;             // float64 everywhere
  RefRun same;              // the config's precision
  GradReduction reduction;  // the declared structure both mirror (restarts keep it)
  // Further same-precision twins with random rounding (see Note [Twin samples]), following the
  // twin's overflow decisions; empty for a run on the reference's own kernels.
  std::vector<RefRun> random;
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
// `skips` (the truth and the random twins): the steps to skip as overflowed, taken from the
// same-precision twin.
// `red`: the run's declared reduction structure, mirrored. `random_rounding` (not the truth): the
// seed of a twin whose op results round at random (see Note [Random rounding]).
RefRun RunReference(const Config& cfg, const GradReduction& red, bool truth,
                    const std::vector<bool>* skips = nullptr, const RefOrigin* origin = nullptr,
                    std::optional<uint64_t> random_rounding = std::nullopt);
// The twin, then the truth and `random_twins` random-rounding twins following the twin's overflow
// decisions.
RefPair RunReferencePair(const Config& cfg, const GradReduction& red, int64_t random_twins = 0);
// `base` up to origin.step, whose state there is replaced by the run's (in the twin, the truth and
// each random twin), then the pair restarted from that state (see Note [Local restart]).
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
std::string ReferenceKey(const Config& cfg, const GradReduction& red, int64_t random_twins = 0);

// Thread-safe cache of reference pairs by ReferenceKey, bounded to `capacity` entries (oldest
// evicted first).
class ReferenceCache {
 public:
  explicit ReferenceCache(size_t capacity = 64) : capacity_(capacity) {}
  std::shared_ptr<const RefPair> Get(const Config& cfg, const GradReduction& red,
                                     int64_t random_twins);
  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const RefPair>> map_;
  std::vector<std::string> order_;
  int64_t hits_ = 0, misses_ = 0;
};

// The pair for cfg under the declared reduction `red`, with `random_twins` random-rounding twins:
// from `cache` when there is one, else computed now.
std::shared_ptr<const RefPair> GetReference(const Config& cfg, const GradReduction& red,
                                            ReferenceCache* cache, int64_t random_twins);

}  // namespace paradiff
