#include "oracles/tolerance.h"

#include <algorithm>
#include <cmath>

#include "oracles/bitwise.h"

namespace paradiff {

namespace {

// Base entries per storage dtype. The floor is a multiple of the dtype's unit roundoff u
// (fp32 2^-24, bf16 2^-8, fp16 2^-11): a handful of roundings of difference between two
// summation orders, relative to the tensor norm.
constexpr Tolerance kFp32{8.0, 256 * 5.96e-8};  // ~1.5e-5: reduction order over <= 64 ranks
constexpr Tolerance kBf16{4.0, 4 * 3.91e-3};    // ~1.6e-2: one extra bf16 rounding per element
constexpr Tolerance kFp16{4.0, 8 * 4.88e-4};    // ~3.9e-3: one extra fp16 rounding per element
constexpr Tolerance kFp64{8.0, 1e-12};          // float64 quantities (never the run's own dtype)

// Note [Reported norm precision]: a run reports the global gradient norm it computed, in the
// precision it declares (docs/TARGETS.md "grad_norm_dtype"; the built-in engine: float64), and
// the numeric oracle compares it with the float64 norm of the gradients it reports (see Note
// [Gradient norm consistency] in numeric_oracle.cpp). Summing n non-negative squares with unit
// roundoff u in any order (recursive, blocked, pairwise, or a norm of per-tensor norms as torch's
// clip_grad_norm_) has a relative error of at most (n - 1) u + O(u^2) (Higham, Accuracy and
// Stability of Numerical Algorithms, 2nd ed., 4.2: gamma_{n-1}; the terms are non-negative, so the
// error is relative to the sum itself); each square rounds once (u), and the square root halves
// the sum's relative error and rounds once more (u). So the norm is off by at most
//   ((n - 1) u + u) / 2 + u  <=  (n + kNormExtraRoundings) u,
// with kNormExtraRoundings = 2 covering the square and the root (and leaving the O(u^2) terms
// room). The bound is the worst case of any summation order, so no legitimate order exceeds it;
// a norm that counts a tensor twice or misses one is off by about half that tensor's share of the
// squared norm.
constexpr double kNormExtraRoundings = 2;

// Note [Inexact unscaling]: a run under loss scaling computes its norm from the scaled gradients
// and divides the norm by the scale (as DeepSpeed's and Megatron's fp16 optimizers do), while the
// gradients it reports (and steps with) are unscaled element by element on a float32 copy: 1 /
// scale rounded to float32, then each product rounded. With a power-of-two scale both are exact;
// otherwise every reported element is off by at most 2 float32 roundings, so their norm is off by
// at most as much, relative, from the norm of the scaled gradients over the scale. The float64
// bound alone does not cover that rounding, so those kUnscaleRoundings are added to it.
// Evidence: docs/EVIDENCE.md.
constexpr double kUnscaleRoundings = 2;

struct NormPrecision {
  DType dtype;
  double unit_roundoff;
  double min_bound;  // the bound is never below this
};
constexpr NormPrecision kNormPrecisions[] = {
    // The float64 bound stays the constant it has always been: 1e-8 > (2^26 + 2) 2^-53, the worst
    // case for every model of up to 2^26 gradient elements (far more than any config paradiff
    // runs).
    {DType::kFp64, 0x1p-53, 1e-8},
    {DType::kFp32, 0x1p-24, 0},  // e.g. torch's clip_grad_norm_ on float32 gradients
    {DType::kBf16, 0x1p-8, 0},
    {DType::kFp16, 0x1p-11, 0},
};

}  // namespace

double NormRoundingBound(DType dtype, int64_t terms) {
  for (const NormPrecision& p : kNormPrecisions)
    if (p.dtype == dtype)
      return std::max(p.min_bound,
                      p.unit_roundoff * (static_cast<double>(terms) + kNormExtraRoundings));
  return INFINITY;  // not reached: every DType has an entry
}

ToleranceContext MakeToleranceContext(const Config& cfg) {
  ToleranceContext ctx;
  ctx.low_precision_params_without_master =
      cfg.precision.param != DType::kFp32 && !cfg.precision.master_weights;
  ctx.low_precision_tensor_parallel = cfg.parallel.tp > 1 && cfg.precision.compute != DType::kFp32;
  return ctx;
}

Tolerance LookupTolerance(const std::string& quantity, DType dtype, const ToleranceContext& ctx) {
  const bool low_precision_params_without_master = ctx.low_precision_params_without_master;
  if (quantity == "grad_norm_consistency")
    return {0.0, NormRoundingBound(dtype, ctx.grad_norm_terms) +
                     (ctx.inexact_unscale ? kUnscaleRoundings * 0x1p-24 : 0.0)};
  Tolerance t = dtype == DType::kBf16   ? kBf16
                : dtype == DType::kFp16 ? kFp16
                : dtype == DType::kFp64 ? kFp64
                                        : kFp32;
  // Adam's update m / (sqrt(v) + eps) is ~sign(g) where |g| is at rounding level, so an element
  // whose gradient is noise moves by +-lr in either run: the parameters and the first moment
  // inherit the gradient's relative error amplified; widen the factor (the reference twin shows
  // the same amplification, so the bound still scales with it).
  if (quantity == "param" || quantity == "master" || quantity == "exp_avg") t.factor *= 2;
  // The second moment is a sum of squares: relative errors double.
  if (quantity == "exp_avg_sq") t.floor *= 2;
  // A norm computed coarser than float64 carries its own rounding (see Note [Reported norm
  // precision]), which the reference twin (a float64 norm) cannot show: add it to the floor. A
  // float64 norm's
  // (<= 1e-8) is covered by the floor already, which is never below fp32's ~1.5e-5.
  if (quantity == "grad_norm" && ctx.grad_norm_dtype != DType::kFp64)
    t.floor += NormRoundingBound(ctx.grad_norm_dtype, ctx.grad_norm_terms);
  if (low_precision_params_without_master) {
    // Without master weights every update is rounded to the bf16 / fp16 parameter itself: an
    // update near half an ulp rounds either way, so parameters differ by an extra ulp per step.
    if (quantity == "param") t.floor *= 2;
  }
  // Note [No trajectory widening]: the factor does not grow with the step, nor for trajectories
  // the twin's own error does not track (16-bit parameters without master weights, an Adam flip,
  // a run drifting from the truth faster than the twin, dp partial sums added in a coarse reduce
  // dtype, which the twin mirrors). A run that legitimately leaves the twin's trajectory is
  // checked by the restarted comparison (see Note [Restarted comparison] in numeric_oracle.cpp),
  // directly, from the run's own state with a first step's bounds; a widening for it would only
  // loosen every later step of every run. Evidence: docs/EVIDENCE.md.
  if (ctx.low_precision_tensor_parallel) {
    // Row-parallel outputs are partial sums added across the tp group in the 16-bit compute dtype
    // (as Megatron does): one rounding per output more than the single-device twin has, which its
    // own error cannot show (factor x2).
    t.factor *= 2;
  }
  return t;
}

DType ToleranceDType(const Config& cfg) {
  // Every quantity inherits the rounding of the coarsest dtype on its path: gradients come out of
  // compute in `compute` / `param`, are summed across ranks in `reduce` (which the single-device
  // reference cannot mirror: it has no cross-rank sum) and over micro-steps in `accumulate`; the
  // parameters, master weights and optimizer state are driven by those gradients.
  const PrecisionConfig& p = cfg.precision;
  DType coarsest = p.compute;
  for (DType d : {p.param, p.reduce, p.accumulate})
    if (PrecisionBits(d) < PrecisionBits(coarsest)) coarsest = d;
  return coarsest;
}

}  // namespace paradiff
