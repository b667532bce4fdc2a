#include "oracles/mirror_oracle.h"

#include "kernels/engine.h"
#include "oracles/bitwise.h"
#include "oracles/quantities.h"

namespace paradiff {

std::string MirrorPreconditions(const Config& cfg) {
  for (int64_t step :
       {int64_t{0}, cfg.checkpoint.save_at > 0 ? cfg.checkpoint.save_at : int64_t{0}}) {
    const ParallelConfig& p = LayoutAtStep(cfg, step).parallel;
    if (p.tp > 1) return "tensor parallelism: partial sums the twin does not form";
    if (p.pp > 1) return "pipeline parallelism: a stage's accumulation order differs";
  }
  return "";
}

Verdict MirrorOracle::Check(const OracleInput& in) const {
  const std::string why = MirrorPreconditions(in.cfg);
  if (!why.empty()) return SkipVerdict(name(), why);
  if (!in.outcome.reporting.same_model_arithmetic)
    return SkipVerdict(
        name(),
        "the run does not declare the reference's per-micro-batch arithmetic (model_arithmetic)");
  // The twin mirrors the structure the run declares; where a structure the layout makes matter is
  // undeclared, the orders may differ (see Note [Declared reduction structure]).
  for (int64_t step :
       {int64_t{0}, in.cfg.checkpoint.save_at > 0 ? in.cfg.checkpoint.save_at : int64_t{0}}) {
    const std::string undeclared =
        MirrorUndeclared(in.outcome.reporting.reduction, LayoutAtStep(in.cfg, step));
    if (!undeclared.empty()) return SkipVerdict(name(), undeclared);
  }
  if (in.assembly == nullptr || in.ref == nullptr)
    return SkipVerdict(name(), "the engine failed; nothing to compare");
  if (!in.outcome.reporting.grad)
    return SkipVerdict(name(), "the run does not report its gradients");
  if (!(in.ref->reduction == in.outcome.reporting.reduction))
    return SkipVerdict(name(),
                       "the reference mirrors another reduction structure than the run declares");
  const RefRun& twin = in.ref->same;
  const Assembly& run = *in.assembly;
  int64_t step = -1;
  bool state_equal = true;
  for (const Quantity& q : QuantitiesInOrder(in.cfg, in.outcome.reporting)) {
    if (q.step != step) {
      if (!state_equal) break;  // the last update rounded differently: later steps may too
      step = q.step;
      if (run.steps[step].skipped || twin.steps[step].skipped) break;
    }
    if (!q.state()) continue;  // loss and norm are summed in other orders
    // A tied embedding's two gradient contributions (input embedding, output head) are added in
    // another order by the engine than by the twin's autograd: not mirrored.
    if (q.tensor_kind == "grad" && in.cfg.model.tied_embeddings && q.tensor == "embed.wte")
      continue;
    const BitwiseDiff d =
        CompareBitwise(ValueOf(run, q), ValueOf(twin, q), HeldDType(in.cfg, q.tensor_kind));
    if (d.equal()) continue;
    if (q.tensor_kind != "grad") {
      state_equal = false;
      continue;
    }
    return BitwiseFinding(
        in.cfg, name(), "", q, d, "the distributed run",
        "the same-precision twin, which mirrors its arithmetic from the same state "
        "(see Note [Mirrored arithmetic])");
  }
  return Verdict{};
}

}  // namespace paradiff
