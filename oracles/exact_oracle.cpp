#include "oracles/exact_oracle.h"

#include <set>

#include "oracles/bitwise.h"
#include "oracles/quantities.h"

namespace paradiff {

std::string ExactPreconditions(const Config& cfg) {
  if (cfg.model.kind != ModelKind::kExactLinear) return "model.kind is not exact_linear";
  if (cfg.optimizer.kind != OptimizerKind::kSgd) return "the optimizer is not sgd";
  if (cfg.clip_grad_norm > 0) return "gradient clipping scales by an inexact factor";
  const PrecisionConfig& p = cfg.precision;
  for (DType d : {p.param, p.compute, p.reduce, p.accumulate})
    if (d != DType::kFp32) return std::string("precision ") + Name(d) + " is not fp32";
  return "";
}

Verdict ExactOracle::Check(const OracleInput& in) const {
  const std::string why = ExactPreconditions(in.cfg);
  if (!why.empty()) return SkipVerdict(name(), why);
  if (in.assembly == nullptr || in.ref == nullptr)
    return SkipVerdict(name(), "the engine failed; nothing to compare");
  const RefRun &truth = in.ref->truth, &same = in.ref->same;
  int64_t compared = 0;
  int64_t step = -1;
  bool state_exact = true;
  std::set<std::string> exact_grads;  // tensors whose gradient is exact at `step`
  for (const Quantity& q : QuantitiesInOrder(in.cfg, in.outcome.reporting)) {
    if (q.step != step) {
      if (!state_exact) break;  // the previous step rounded: later steps legitimately differ
      step = q.step;
      exact_grads.clear();
    }
    if (q.tensor_kind == "grad_norm") continue;
    const at::Tensor t = ValueOf(truth, q);
    const bool exact =
        CompareBitwise(ValueOf(same, q), t, HeldDType(in.cfg, q.tensor_kind)).equal();
    if (!exact) {
      state_exact = state_exact && !q.state();
      continue;
    }
    if (q.tensor_kind == "grad") exact_grads.insert(q.tensor);
    if (q.state() && q.tensor_kind != "grad" && exact_grads.count(q.tensor) == 0) continue;
    ++compared;
    const BitwiseDiff d =
        CompareBitwise(ValueOf(*in.assembly, q), t, HeldDType(in.cfg, q.tensor_kind));
    if (!d.equal())
      return BitwiseFinding(in.cfg, name(), "", q, d, "the distributed run",
                            "the float64 truth (exact: the float32 reference equals it)");
  }
  if (compared == 0)
    return SkipVerdict(name(),
                       "the arithmetic rounds at step 0: no quantity of the float32 "
                       "reference equals the float64 truth");
  return Verdict{};
}

}  // namespace paradiff
