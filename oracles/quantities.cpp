#include "oracles/quantities.h"

#include <ATen/ATen.h>

#include "core/model_spec.h"

namespace paradiff {

std::vector<Quantity> QuantitiesInOrder(const Config& cfg, const Reporting& r) {
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const auto kinds = ExpectedKinds(cfg, r);
  std::vector<Quantity> out;
  for (int64_t s = 0; s < cfg.steps; ++s) {
    out.push_back(Quantity{{s, Phase::kForward, "loss", "", ""}});
    if (r.grad)
      for (const auto& ps : spec.params)
        out.push_back(Quantity{{s, Phase::kGradient, "grad", ps.name, Name(ps.layer)}});
    out.push_back(Quantity{{s, Phase::kReduction, "grad_norm", "", ""}});
    for (const auto& kind : kinds) {
      if (kind == "grad") continue;
      for (const auto& ps : spec.params)
        out.push_back(Quantity{{s, Phase::kOptimizer, kind, ps.name, Name(ps.layer)}});
    }
  }
  return out;
}

DType HeldDType(const Config& cfg, const std::string& kind) {
  if (kind == "grad_norm") return DType::kFp64;
  if (kind == "grad") return cfg.precision.accumulate;
  if (kind == "param") return cfg.precision.param;
  return DType::kFp32;  // loss (micro-batch losses), master weights, optimizer slots
}

namespace {

at::Tensor Scalar(double v) { return at::full({1}, v, at::kDouble); }

template <class Step>
at::Tensor Value(const std::vector<Step>& steps, const Quantity& q) {
  const Step& s = steps.at(q.step);
  if (q.tensor_kind == "loss") return Scalar(s.loss);
  if (q.tensor_kind == "grad_norm") return Scalar(s.grad_norm);
  return s.tensors.at(q.key());
}

}  // namespace

at::Tensor ValueOf(const Assembly& a, const Quantity& q) { return Value(a.steps, q); }
at::Tensor ValueOf(const RefRun& r, const Quantity& q) { return Value(r.steps, q); }

void Localize(Verdict& v, const Location& at) { static_cast<Location&>(v.where) = at; }

}  // namespace paradiff
