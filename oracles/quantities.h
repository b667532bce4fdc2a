// Quantities: everything a checked run reports, in localization order (see Note [Localization] in
// oracles/oracle.h), with the dtype each is held in. Per step: the loss (forward), every gradient
// in model order (gradient), the gradient norm (reduction), then each optimizer kind (param,
// master, optimizer slots; ExpectedKinds order) over the tensors in model order (optimizer). The
// bitwise oracles (determinism, metamorphic, exact) walk this list and report the first quantity
// that differs, so their findings localize exactly like the numeric oracle's.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

#include "core/config.h"
#include "core/verdict.h"
#include "oracles/assemble.h"
#include "oracles/reference.h"

namespace paradiff {

// One reported value: its Location (phase forward | gradient | reduction | optimizer).
struct Quantity : Location {
  std::string key() const { return tensor.empty() ? tensor_kind : tensor_kind + ":" + tensor; }
  // Carried into the next step (gradients feed the update; parameters and slots persist).
  bool state() const { return tensor_kind != "loss" && tensor_kind != "grad_norm"; }
};

// Every quantity of every step of `cfg` that a run reporting `r` reports, in localization order
// (the loss, the gradient norm and the parameters always; gradients and optimizer state per `r`).
std::vector<Quantity> QuantitiesInOrder(const Config& cfg, const Reporting& r = Reporting{});

// The dtype a quantity is held in by the run (its rounding unit): loss fp32, grad_norm fp64, grad
// precision.accumulate, param precision.param, master and optimizer slots fp32.
DType HeldDType(const Config& cfg, const std::string& kind);

// The value of a quantity as a flat float64 tensor (one element for the scalars).
at::Tensor ValueOf(const Assembly& a, const Quantity& q);
at::Tensor ValueOf(const RefRun& r, const Quantity& q);

// Sets the Location part of the verdict's localization.
void Localize(Verdict& v, const Location& at);

}  // namespace paradiff
