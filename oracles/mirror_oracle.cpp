#include "oracles/mirror_oracle.h"

#include <algorithm>

#include "kernels/engine.h"
#include "oracles/bitwise.h"
#include "oracles/quantities.h"

namespace paradiff {

std::string MirrorPreconditions(const Config& cfg) {
  for (int64_t step : {int64_t{0}, cfg.checkpoint.save_at > 0 ? cfg.checkpoint.save_at : int64_t{0}}) {
    const ParallelConfig& p = LayoutAtStep(cfg, step).parallel;
    if (p.tp > 1) return "tensor parallelism: partial sums the twin does not form";
    if (p.pp > 1) return "pipeline parallelism: a stage's accumulation order differs";
  }
  return "";
}

namespace {

int64_t MaxDp(const Config& cfg) {
  const int64_t save = cfg.checkpoint.save_at;
  return std::max(cfg.parallel.dp, save > 0 ? LayoutAtStep(cfg, save).parallel.dp : int64_t{1});
}

}  // namespace

Verdict MirrorOracle::Check(const OracleInput& in) const {
  const std::string why = MirrorPreconditions(in.cfg);
  if (!why.empty()) return SkipVerdict(name(), why);
  // Two addends round alike in either order; more in another order do not (gloo's ring).
  if (!in.outcome.reporting.dp_sum_in_rank_order && MaxDp(in.cfg) > 2)
    return SkipVerdict(name(), "the run's data-parallel sum order over more than two ranks is unknown");
  if (in.assembly == nullptr || in.ref == nullptr)
    return SkipVerdict(name(), "the engine failed; nothing to compare");
  if (!in.outcome.reporting.grad) return SkipVerdict(name(), "the run does not report its gradients");
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
    if (q.kind == "grad" && in.cfg.model.tied_embeddings && q.tensor == "embed.wte") continue;
    const BitwiseDiff d = CompareBitwise(ValueOf(run, q), ValueOf(twin, q), HeldDType(in.cfg, q.kind));
    if (d.equal()) continue;
    if (q.kind != "grad") {
      state_equal = false;
      continue;
    }
    return BitwiseFinding(in.cfg, name(), "", q, d, "the distributed run",
                          "the same-precision twin, which mirrors its arithmetic from the same state "
                          "(Note [Mirrored arithmetic])");
  }
  return Verdict{};
}

}  // namespace paradiff
