#include "oracles/tiling_oracle.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include "core/model_spec.h"
#include "kernels/engine.h"
#include "oracles/layout_expectation.h"
#include "oracles/tolerance.h"

namespace paradiff {

namespace {

Verdict Finding(const Config& cfg, int64_t step, const std::string& kind, const ParamSpec* ps,
                const std::string& tensor, int rank, int64_t index, int64_t count,
                const std::string& detail, const std::string& msg) {
  Verdict v;
  v.kind = VerdictKind::kInvariant;
  v.oracle = "tiling";
  v.where.step = step;
  v.where.phase = kind.empty() ? Phase::kObservation : PhaseOf(kind);
  v.where.tensor = tensor;
  v.where.tensor_kind = kind;
  v.where.layer = ps ? Name(ps->layer) : "";
  v.where.rank = rank;
  v.where.index = index;
  v.where.error = static_cast<double>(count);
  v.where.bound = kDiscreteBound;
  v.where.detail = detail;
  v.message = msg + " (step " + std::to_string(step) + ", seed " + std::to_string(cfg.seed) + ")";
  return v;
}

// Note [Padding after a divergence]: a padded vocabulary row is part of the head's product, so
// once activations are NaN its gradient is 0 x NaN = NaN, and so is the row after the update:
// arithmetic, not a write to padding. A non-finite padding counts as a finding only while the
// rank's data is all finite; a finite non-zero padding always does. A config whose activations
// go NaN diverges, and the numeric oracle already judges its reference inconclusive
// (see Note [Diverged reference]). Evidence: docs/EVIDENCE.md.
bool NonFinitePropagated(const RankStep& step) {
  if (std::isfinite(step.padding_max_abs)) return false;
  for (const auto& p : step.pieces)
    if (!at::isfinite(p.values).all().item<bool>()) return true;
  return false;
}

}  // namespace

int64_t ExpectedHolders(const Config& cfg, const std::string& kind, const ParamSpec& p,
                        const Reporting::PartitionedFrom& from) {
  const int64_t dp = cfg.parallel.dp, stage = cfg.zero.stage;
  // A sharded kind is held once per shard group (zero.shard_group: each group a replica).
  const int64_t sharded = cfg.zero.shard_group > 0 ? dp / cfg.zero.shard_group : 1;
  const int64_t dp_holders = kind == "param" ? (stage >= from.param ? sharded : dp)
                             : kind == "grad"
                                 ? (stage >= from.grad ? sharded : dp)
                                 : (stage >= from.optimizer ? sharded : dp);  // masters, slots
  return dp_holders * TpHolders(cfg.model, p, cfg.parallel.tp) * PpHolders(cfg, p);
}

namespace {

// CheckTiling over the kinds the run reports (`r`): an unreported kind has no holders to count.
Verdict CheckTilingOf(const Config& cfg, const Observations& obs, const Reporting& r) {
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const auto kinds = ExpectedKinds(cfg, r);
  for (int64_t step = 0; step < cfg.steps; ++step) {
    // Padding (alignment, dp padding, padded vocabulary rows) is zero and never updated.
    for (const auto& rank : obs.ranks) {
      if (step >= static_cast<int64_t>(rank.steps.size()) || rank.steps[step].padding_max_abs == 0)
        continue;
      if (NonFinitePropagated(rank.steps[step])) continue;
      Verdict v;
      v.kind = VerdictKind::kInvariant;
      v.oracle = "tiling";
      v.where.step = step;
      v.where.phase = Phase::kOptimizer;
      v.where.tensor_kind = "padding";
      v.where.rank = rank.rank;
      v.where.actual = rank.steps[step].padding_max_abs;
      v.where.detail = "padding";
      v.message = "rank " + std::to_string(rank.rank) + " holds non-zero padding after step " +
                  std::to_string(step) + " (max |value| " +
                  std::to_string(rank.steps[step].padding_max_abs) +
                  "; padding must stay zero) (seed " + std::to_string(cfg.seed) + ")";
      return v;
    }
    // "kind:tensor" -> holders per element (plain counters: a check touches thousands of pieces)
    std::map<std::string, std::vector<int32_t>> holders;
    for (const auto& ps : spec.params)
      for (const auto& k : kinds) holders[k + ":" + ps.name].assign(ps.numel(), 0);
    for (const auto& rank : obs.ranks) {
      if (step >= static_cast<int64_t>(rank.steps.size()))
        return Finding(
            cfg, step, "", nullptr, "", rank.rank, -1, 1, "missing_step",
            "rank " + std::to_string(rank.rank) + " reported no step " + std::to_string(step));
      for (const auto& p : rank.steps[step].pieces) {
        const std::string key = p.kind + ":" + p.tensor;
        const ParamSpec* ps = spec.Find(p.tensor);
        auto it = holders.find(key);
        const int64_t n = p.values.numel();
        const int64_t size = it == holders.end() ? 0 : static_cast<int64_t>(it->second.size());
        if (it == holders.end() || p.offset < 0 || p.offset + n > size) {
          return Finding(cfg, step, p.kind, ps, p.tensor, rank.rank, p.offset, n, "bounds",
                         "rank " + std::to_string(rank.rank) + " reported " + key + " [" +
                             std::to_string(p.offset) + ", " + std::to_string(p.offset + n) +
                             ") outside the logical tensor" +
                             (it == holders.end() ? " (no such tensor for this config)"
                                                  : " of " + std::to_string(size) + " elements"));
        }
        for (int64_t i = p.offset; i < p.offset + n; ++i) ++it->second[i];
      }
    }
    // Checked in localization order: kinds by phase, tensors in model order.
    for (const auto& kind : kinds) {
      const Config layout = LayoutAtStep(cfg, step);  // the reload layout after a checkpoint
      for (const auto& ps : spec.params) {
        const int64_t want = ExpectedHolders(layout, kind, ps, r.partitioned_from);
        const std::string key = kind + ":" + ps.name;
        const std::vector<int32_t>& count = holders[key];
        const auto gap = std::find(count.begin(), count.end(), 0);
        if (gap != count.end()) {
          const int64_t first = gap - count.begin();
          const int64_t n = std::count(count.begin(), count.end(), 0);
          // No detail: the gap keeps the signature it always had (invariant.tiling.<kind>...).
          return Finding(cfg, step, kind, &ps, ps.name, -1, first, n, "",
                         "shards do not tile " + key + ": " + std::to_string(n) +
                             " element(s) held by no rank, the first at index " +
                             std::to_string(first));
        }
        const auto off =
            std::find_if(count.begin(), count.end(), [&](int32_t c) { return c != want; });
        if (off == count.end()) continue;
        const int64_t first = off - count.begin();
        const int64_t got = *off;
        const int64_t n =
            std::count_if(count.begin(), count.end(), [&](int32_t c) { return c != want; });
        return Finding(
            cfg, step, kind, &ps, ps.name, -1, first, n, got > want ? "overlap" : "replication",
            key + "[" + std::to_string(first) + "] is held by " + std::to_string(got) +
                " ranks, expected " + std::to_string(want) + " (ZeRO stage " +
                std::to_string(layout.zero.stage) + ", dp " + std::to_string(layout.parallel.dp) +
                (layout.zero.shard_group > 0
                     ? " in shard groups of " + std::to_string(layout.zero.shard_group)
                     : "") +
                ", tp " + std::to_string(layout.parallel.tp) + ", pp " +
                std::to_string(layout.parallel.pp) + "); " + std::to_string(n) +
                " element(s) of the tensor are off");
      }
    }
  }
  return Verdict{};
}

}  // namespace

Verdict CheckTiling(const Config& cfg, const Observations& obs) {
  return CheckTilingOf(cfg, obs, Reporting{});
}

Verdict TilingOracle::Check(const OracleInput& in) const {
  if (!in.outcome.ok) return SkipVerdict(name(), "the engine failed; nothing to tile");
  return CheckTilingOf(in.cfg, in.outcome.obs, in.outcome.reporting);
}

}  // namespace paradiff
