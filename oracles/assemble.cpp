#include "oracles/assemble.h"

#include <ATen/ATen.h>

#include "comm/fresh.h"
#include "core/model_spec.h"
#include "kernels/optim.h"
#include "oracles/piece_values.h"
#include "oracles/replica_oracle.h"
#include "oracles/tiling_oracle.h"

namespace paradiff {

std::vector<std::string> ExpectedKinds(const Config& cfg, const Reporting& r) {
  std::vector<std::string> kinds;
  if (r.grad) kinds.push_back("grad");
  kinds.push_back("param");
  if (!r.optimizer) return kinds;
  if (cfg.precision.keeps_master()) kinds.push_back("master");
  for (const auto& s : OptimizerSlotNames(cfg.optimizer.kind)) kinds.push_back(s);
  return kinds;
}

Assembly AssembleTensors(const Config& cfg, const Observations& obs, const Reporting& r) {
  Assembly out;
  out.reporting = r;
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const auto kinds = ExpectedKinds(cfg);
  for (int64_t step = 0; step < cfg.steps; ++step) {
    AssembledStep as;
    for (const auto& ps : spec.params)
      for (const auto& k : kinds) as.tensors[k + ":" + ps.name] = Zeros({ps.numel()}, at::kDouble);
    double loss_sum = 0;
    int64_t loss_count = 0;
    for (const auto& rank : obs.ranks) {
      if (step >= static_cast<int64_t>(rank.steps.size())) continue;
      const RankStep& rs = rank.steps[step];
      loss_sum += rs.loss_sum;
      loss_count += rs.loss_count;
      if (rank.rank == 0) {
        as.grad_norm = rs.grad_norm;
        as.skipped = rs.skipped;
        as.loss_scale = rs.loss_scale;
      } else if (rs.skipped != obs.ranks[0].steps[step].skipped) {
        // Every rank must take the same overflow decision (BUGZOO: local overflow decisions).
        out.verdict.kind = VerdictKind::kInvariant;
        out.verdict.oracle = "overflow";
        out.verdict.where.step = step;
        out.verdict.where.phase = Phase::kOverflow;
        out.verdict.where.rank = rank.rank;
        out.verdict.message =
            "ranks disagree on skipping step " + std::to_string(step) + " for overflow: rank 0 " +
            (obs.ranks[0].steps[step].skipped ? "skipped" : "stepped") + ", rank " +
            std::to_string(rank.rank) + (rs.skipped ? " skipped" : " stepped") + " (seed " +
            std::to_string(cfg.seed) + ")";
        return out;
      }
    }
    // The first holder's value of every element: pieces are written in reverse (rank, piece)
    // order, so an earlier holder overwrites a later one. Same values as keeping the first holder
    // (the conversion to float64 is exact), with no operator per piece: checks report thousands
    // of pieces and every operator call costs about a microsecond of dispatch.
    for (auto rank = obs.ranks.rbegin(); rank != obs.ranks.rend(); ++rank) {
      if (step >= static_cast<int64_t>(rank->steps.size())) continue;
      const auto& pieces = rank->steps[step].pieces;
      for (auto p = pieces.rbegin(); p != pieces.rend(); ++p) {
        auto it = as.tensors.find(p->kind + ":" + p->tensor);
        const int64_t n = p->values.numel();
        if (it == as.tensors.end() || p->offset < 0 || p->offset + n > it->second.numel()) continue;
        CopyAsDouble(p->values, it->second.data_ptr<double>() + p->offset);
        if (!p->addend_abs.defined()) continue;
        auto [abs, added] = as.addend_abs.try_emplace(it->first);
        if (added) abs->second = at::zeros_like(it->second);
        CopyAsDouble(p->addend_abs, abs->second.data_ptr<double>() + p->offset);
      }
    }
    as.loss = loss_count > 0 ? loss_sum / static_cast<double>(loss_count) : 0.0;
    out.steps.push_back(std::move(as));
  }
  return out;
}

Assembly Assemble(const Config& cfg, const Observations& obs) {
  Assembly out = AssembleTensors(cfg, obs);
  out.verdict = CheckTiling(cfg, obs);
  if (out.verdict.kind == VerdictKind::kPass) out.verdict = CheckReplicas(cfg, obs);
  return out;
}

}  // namespace paradiff
