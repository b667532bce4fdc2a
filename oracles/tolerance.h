// The tolerance model: when is a difference rounding and when is it a bug. A distributed value d
// is compared with the float64 truth t and with the same-precision reference r (one device, same
// micro-batch order, same dtypes; see Note [Micro-batch order]):
//   error = |d - t| / |t|,   bound = factor * |r - t| / |t| + floor
// (norms are L2 over the tensor; |t| = 0 switches to absolute errors). The only legitimate source
// of extra error in d is the order of cross-rank reductions, which the factor covers; the floor
// covers tensors where r happens to be (nearly) exact. One table, one comment per entry.
#pragma once

#include <string>

#include "core/config.h"

namespace paradiff {

struct Tolerance {
  double factor = 0;
  double floor = 0;
};

// Note [Discrete bounds]: the oracles that require equality (bitwise values, shard coverage, memory
// bytes, collective calls) report the size of the violation as the error (ulps, elements, bytes,
// calls) against this bound, so ratio() is twice the violation and every report reads alike: a
// ratio of 2 or more is a finding. (Equality has no rounding slack: half a unit is "none".)
inline constexpr double kDiscreteBound = 0.5;

// `quantity`: loss, grad_norm, grad, param, master, momentum, exp_avg, exp_avg_sq, and
// grad_norm_consistency (the engine's reported norm vs the norm of its own reported gradients).
// `dtype`: the dtype the quantity is stored / accumulated in for this config; for
// grad_norm_consistency, the dtype the reported norm was computed in (see Note [Reported norm
// precision] in tolerance.cpp).
// What of the config, beyond the dtype, widens a bound.
struct ToleranceContext {
  bool low_precision_params_without_master = false;  // param bf16 / fp16, master_weights off
  bool low_precision_tensor_parallel = false;        // tp > 1 with a bf16 / fp16 compute dtype
  // The reported gradient norm: the dtype it was computed in (docs/TARGETS.md grad_norm_dtype) and
  // how many squares it sums (the model's gradient elements). See Note [Reported norm precision].
  DType grad_norm_dtype = DType::kFp64;
  int64_t grad_norm_terms = 0;
  // The reported gradients were unscaled by a loss scale that is not a power of two (or by one
  // the run does not report), so each carries float32 roundings the norm, taken before
  // unscaling, does not (see Note [Inexact unscaling] in tolerance.cpp).
  bool inexact_unscale = false;
};
Tolerance LookupTolerance(const std::string& quantity, DType dtype,
                          const ToleranceContext& ctx = ToleranceContext{});
ToleranceContext MakeToleranceContext(const Config& cfg);

// The largest relative rounding error of a gradient norm computed in `dtype` over `terms` squares
// (see Note [Reported norm precision]); the grad_norm_consistency bound.
double NormRoundingBound(DType dtype, int64_t terms);

// The dtype whose rounding bounds a quantity of `cfg`: the coarsest of its precision settings.
DType ToleranceDType(const Config& cfg);

}  // namespace paradiff
