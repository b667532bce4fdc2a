// Parameter initialization as a pure function of (seed, parameter name, global element index)
// (see Note [Sharded generation] in core/rng.h). Shared by the engine (each rank generates its own
// slice) and the reference (generates whole tensors).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "core/model_spec.h"

namespace paradiff {

// Writes elements [begin, begin + count) of the flattened parameter, as float64, to out[0 ..
// count): no tensor, so that a rank filling a column slice row by row calls no operator per row.
void GenerateParamValues(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t count,
                         double* out);
// Elements [begin, begin + count) of the flattened parameter, as float64.
at::Tensor GenerateParamSlice(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t count);
// The whole parameter with its shape, as float64: a tensor the caller owns (each thread keeps
// the values it generated last, see param_init.cpp).
at::Tensor GenerateParam(const ParamSpec& spec, uint64_t seed);

}  // namespace paradiff
