#include "oracles/metamorphic_oracle.h"

#include <ATen/ATen.h>

#include <map>
#include <sstream>
#include <tuple>

#include "kernels/numerics.h"
#include "oracles/bitwise.h"
#include "oracles/numeric_oracle.h"
#include "oracles/quantities.h"
#include "oracles/tolerance.h"
#include "oracles/validation_oracle.h"

namespace paradiff {

namespace {

// Norms below this are treated as zero (absolute errors), as in the numeric oracle.
constexpr double kTinyNorm = 1e-30;

std::string Layout(const Config& c) {
  return "tp=" + std::to_string(c.parallel.tp) + " dp=" + std::to_string(c.parallel.dp) +
         " zero=" + std::to_string(c.zero.stage) +
         " micro_batch=" + std::to_string(c.batch.micro_batch) +
         " accumulation=" + std::to_string(c.batch.accumulation_steps);
}

Verdict Failed(const Config& cfg, const std::string& relation, const Config& variant,
               const EngineOutcome& e) {
  Verdict v;
  v.kind = VerdictKind::kMismatch;
  v.oracle = "metamorphic";
  v.where.phase = Phase::kRun;
  v.where.detail = relation;
  v.where.rank = e.failure_rank;
  v.where.error = 1;  // one run failed (see Note [Discrete bounds])
  v.where.bound = kDiscreteBound;
  v.message = "the " + relation + " variant (" + Layout(variant) +
              ") failed where the checked run (" + Layout(cfg) + ") completed: " + e.failure +
              " (seed " + std::to_string(cfg.seed) + ")";
  return v;
}

Verdict ZeroStageRelation(const OracleInput& in, const Config& variant, const EngineOutcome& e) {
  const Assembly other = AssembleTensors(variant, e.obs, e.reporting);
  const bool checked_is_k = in.cfg.zero.stage != 0;
  const Assembly& k = checked_is_k ? *in.assembly : other;
  const Assembly& zero = checked_is_k ? other : *in.assembly;
  const int64_t stage_k = checked_is_k ? in.cfg.zero.stage : variant.zero.stage;
  return FirstBitwiseDifference(
      in.cfg, "metamorphic", "zero_stage", [&](const Quantity& q) { return ValueOf(k, q); },
      [&](const Quantity& q) { return ValueOf(zero, q); },
      "the ZeRO stage " + std::to_string(stage_k) + " run", "the stage 0 run at the same dp");
}

// Note [Different overflow decisions]: the bound holds while both runs train the same way. Under
// a dynamic loss scale a relation may change which steps overflow: the engine scales each
// micro-batch's loss by scale / accumulation_steps, so dp 2 x 1 micro-batch and dp 1 x 2
// micro-batches backpropagate fp16 values a factor 2 apart, and each config's references (the
// float64 truth included, which follows its config's decisions) skip other steps than the
// other's. From the first step where the two runs' or the two configs' references' decisions
// differ the runs train different trajectories; those steps are not compared. Whether each run's
// decisions are right is the numeric oracle's question (each run against its own reference).
// Evidence: docs/EVIDENCE.md.
int64_t FirstDifferentDecision(const RefPair& a, const RefPair& b, const Observations& run_a,
                               const Observations& run_b, int64_t steps) {
  const auto run_skip = [](const Observations& o, int64_t s) {
    return !o.ranks.empty() && s < static_cast<int64_t>(o.ranks[0].steps.size()) &&
           o.ranks[0].steps[s].skipped;
  };
  const auto ref_skip = [](const RefRun& r, int64_t s) {
    return s < static_cast<int64_t>(r.steps.size()) && r.steps[s].skipped;
  };
  for (int64_t s = 0; s < steps; ++s)
    if (ref_skip(a.same, s) != ref_skip(b.same, s) ||
        ref_skip(a.truth, s) != ref_skip(b.truth, s) || run_skip(run_a, s) != run_skip(run_b, s))
      return s;
  return steps;
}

// See Note [Cross-run bound] in the header.
Verdict WithinBounds(const OracleInput& in, const std::string& relation, const Config& variant,
                     const EngineOutcome& e) {
  const Assembly other = AssembleTensors(variant, e.obs, e.reporting);
  const std::shared_ptr<const RefPair> ref =
      GetReference(variant, e.reporting.reduction, in.cache,
                   RandomTwinsFor(variant, e.reporting.same_model_arithmetic));
  NumericResult own = CheckNumerics(variant, other, *ref);
  if (IsFinding(own.verdict.kind)) {
    Verdict v = own.verdict;
    v.oracle = "metamorphic";
    v.where.detail = relation;
    v.message = "the " + relation + " variant (" + Layout(variant) +
                ") fails the numeric oracle: " + v.message;
    return v;
  }
  using Key = std::tuple<int64_t, std::string, std::string, std::string>;
  std::map<Key, const Comparison*> mine;
  for (const auto& c : in.numeric->comparisons)
    mine[{c.step, c.tensor_kind, c.tensor, c.detail}] = &c;
  const bool sgd = in.cfg.optimizer.kind == OptimizerKind::kSgd;
  const int64_t same_until =
      FirstDifferentDecision(*in.ref, *ref, in.outcome.obs, e.obs, in.cfg.steps);
  for (const auto& cb : own.comparisons) {
    if (!cb.detail.empty() || cb.step >= same_until) continue;
    if (!sgd && cb.tensor_kind != "loss" && cb.tensor_kind != "grad" &&
        cb.tensor_kind != "grad_norm")
      continue;
    auto it = mine.find({cb.step, cb.tensor_kind, cb.tensor, cb.detail});
    if (it == mine.end()) continue;
    const Comparison& ca = *it->second;
    const Quantity q{cb};
    const at::Tensor a = ValueOf(*in.assembly, q), b = ValueOf(other, q);
    const double tn = ValueOf(in.ref->truth, q).norm().item<double>();
    const at::Tensor diff = (a - b).abs();
    const bool finite = AllFinite(b) && AllFinite(a);
    const double error =
        finite ? diff.norm().item<double>() / (tn > kTinyNorm ? tn : 1.0) : INFINITY;
    const double bound = ca.bound + cb.bound;
    if (error <= bound) continue;
    Verdict v;
    v.kind = VerdictKind::kMismatch;
    v.oracle = "metamorphic";
    Localize(v, q);
    v.where.detail = relation;
    v.where.index = finite ? diff.argmax().item<int64_t>() : 0;
    v.where.expected = a[v.where.index].item<double>();
    v.where.actual = b[v.where.index].item<double>();
    v.where.error = error;
    v.where.bound = bound;
    std::ostringstream msg;
    msg.precision(6);
    msg << "step " << q.step << " " << Name(q.phase) << ": " << q.tensor_kind
        << (q.tensor.empty() ? "" : " of " + q.tensor) << " differs between the checked run ("
        << Layout(in.cfg) << ") and its " << relation << " variant (" << Layout(variant)
        << "), which train on the same global batch: relative difference " << error
        << " > the sum of their bounds " << bound << " (ratio " << error / bound
        << "); worst index " << v.where.index << ": " << v.where.expected << " vs "
        << v.where.actual << " (seed " << in.cfg.seed << ")";
    v.message = msg.str();
    return v;
  }
  return Verdict{};
}

}  // namespace

std::optional<Config> ZeroStageVariant(const Config& cfg) {
  Config v = cfg;
  v.zero.stage = cfg.zero.stage == 0 ? 3 : 0;
  v.zero.shard_group = 0;  // stage 0 shards nothing; stage 3 over every dp rank
  return v;
}

std::optional<Config> SplitVariant(const Config& cfg) {
  Config v = cfg;
  BatchConfig& b = v.batch;
  if (cfg.parallel.dp > 1) {
    b.accumulation_steps *= cfg.parallel.dp;
    v.parallel.world /= cfg.parallel.dp;
    v.parallel.dp = 1;
  } else if (b.micro_batch % 2 == 0) {
    b.micro_batch /= 2;
    b.accumulation_steps *= 2;
  } else if (b.accumulation_steps % 2 == 0) {
    b.micro_batch *= 2;
    b.accumulation_steps /= 2;
  } else {
    return std::nullopt;
  }
  return v;
}

std::optional<Config> TpVariant(const Config& cfg) {
  Config v = cfg;
  if (cfg.parallel.tp > 1) {
    v.parallel.world /= cfg.parallel.tp;
    v.parallel.tp = 1;
    v.parallel.sp = false;
  } else {
    v.parallel.tp = 2;
    v.parallel.world *= 2;
  }
  return v;
}

Verdict MetamorphicOracle::Check(const OracleInput& in) const {
  if (!in.outcome.ok || in.assembly == nullptr || in.numeric == nullptr || in.ref == nullptr)
    return SkipVerdict(name(), "the engine failed; no relation to check");
  if (!in.run_engine) return SkipVerdict(name(), "no engine runner for the variant runs");
  struct Relation {
    const char* name;
    std::optional<Config> variant;
  };
  const Relation relations[] = {{"zero_stage", ZeroStageVariant(in.cfg)},
                                {"split", SplitVariant(in.cfg)},
                                {"tp", TpVariant(in.cfg)}};
  std::string skipped;
  int applied = 0;
  for (const auto& r : relations) {
    Status gate;
    if (r.variant) gate = ValidationGate(*r.variant, in.budget);
    if (!r.variant || !gate.ok()) {
      skipped += std::string(skipped.empty() ? "" : "; ") + r.name + ": " +
                 (r.variant ? gate.ToString() : "no variant for this layout");
      continue;
    }
    ++applied;
    const EngineOutcome e = in.run_engine(*r.variant);
    if (!e.ok &&
        e.failure_kind == FailureKind::kUnsupported) {  // an external target cannot run the variant
      skipped += std::string(skipped.empty() ? "" : "; ") + r.name + ": " + e.failure;
      --applied;
      continue;
    }
    if (!e.ok) return Failed(in.cfg, r.name, *r.variant, e);
    // Bitwise only where the system promises its stages compute alike (Reporting).
    const bool bitwise =
        std::string(r.name) == "zero_stage" && in.outcome.reporting.zero_stages_bitwise;
    const Verdict v =
        bitwise ? ZeroStageRelation(in, *r.variant, e) : WithinBounds(in, r.name, *r.variant, e);
    if (IsFinding(v.kind)) return v;
  }
  if (applied == 0) return SkipVerdict(name(), skipped);
  return Verdict{};
}

}  // namespace paradiff
