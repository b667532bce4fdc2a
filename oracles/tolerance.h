// The tolerance model: when is a difference rounding and when is it a bug. A distributed value d
// is compared with the float64 truth t and with the same-precision reference r (one device, same
// micro-batch order, same dtypes; Note [Micro-batch order]):
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

// `quantity`: loss, grad_norm, grad, param, master, momentum, exp_avg, exp_avg_sq.
// `dtype`: the dtype the quantity is stored / accumulated in for this config.
// `step` is 0-based; `low_precision_params_without_master` as the config says.
Tolerance LookupTolerance(const std::string& quantity, DType dtype, int64_t step = 0,
                          bool low_precision_params_without_master = false);

// The dtype whose rounding bounds a quantity of `cfg`: the coarsest of its precision settings.
DType ToleranceDType(const Config& cfg);

}  // namespace paradiff
