#include "oracles/assemble.h"

#include <ATen/ATen.h>

#include <sstream>

#include "core/model_spec.h"
#include "kernels/numerics.h"
#include "kernels/optim.h"

namespace paradiff {

namespace {

Verdict Invariant(const std::string& oracle, int64_t step, const std::string& kind,
                  const std::string& tensor, LayerType layer, int rank, int64_t index,
                  const std::string& msg) {
  Verdict v;
  v.kind = VerdictKind::kInvariant;
  v.oracle = oracle;
  v.message = msg;
  v.where.step = step;
  v.where.phase = kind == "grad" ? "gradient" : "optimizer";
  v.where.tensor = tensor;
  v.where.tensor_kind = kind;
  v.where.layer = Name(layer);
  v.where.rank = rank;
  v.where.index = index;
  return v;
}

}  // namespace

std::vector<std::string> ExpectedKinds(const Config& cfg) {
  std::vector<std::string> kinds = {"grad", "param"};
  if (cfg.precision.master_weights && cfg.precision.param != DType::kFp32)
    kinds.push_back("master");
  for (const auto& s : OptimizerSlotNames(cfg.optimizer.kind)) kinds.push_back(s);
  return kinds;
}

Assembly Assemble(const Config& cfg, const Observations& obs) {
  Assembly out;
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const auto kinds = ExpectedKinds(cfg);
  for (int64_t step = 0; step < cfg.steps; ++step) {
    AssembledStep as;
    double loss_sum = 0;
    int64_t loss_count = 0;
    std::map<std::string, at::Tensor>
        owner;  // "kind:tensor" -> int32 rank holding each element (-1 none)
    for (const auto& ps : spec.params)
      for (const auto& k : kinds) {
        as.tensors[k + ":" + ps.name] = at::zeros({ps.numel()}, at::kDouble);
        owner[k + ":" + ps.name] = at::full({ps.numel()}, -1, at::kInt);
      }
    for (const auto& rank : obs.ranks) {
      if (step >= static_cast<int64_t>(rank.steps.size())) {
        out.verdict =
            Invariant("observation", step, "", "", LayerType::kLinear, rank.rank, -1,
                      "rank " + std::to_string(rank.rank) + " reported no step " +
                          std::to_string(step) + " (seed " + std::to_string(cfg.seed) + ")");
        return out;
      }
      const RankStep& rs = rank.steps[step];
      loss_sum += rs.loss_sum;
      loss_count += rs.loss_count;
      if (rank.rank == 0) as.grad_norm = rs.grad_norm;
      for (const auto& p : rs.pieces) {
        const std::string key = p.kind + ":" + p.tensor;
        const ParamSpec* ps = spec.Find(p.tensor);
        auto it = as.tensors.find(key);
        const int64_t n = p.values.numel();
        if (it == as.tensors.end() || ps == nullptr || p.offset < 0 || p.offset + n > ps->numel()) {
          out.verdict =
              Invariant("tiling", step, p.kind, p.tensor, ps ? ps->layer : LayerType::kLinear,
                        rank.rank, p.offset,
                        "rank " + std::to_string(rank.rank) + " reported " + key + " [" +
                            std::to_string(p.offset) + ", " + std::to_string(p.offset + n) +
                            ") outside the logical tensor (seed " + std::to_string(cfg.seed) + ")");
          return out;
        }
        at::Tensor dst = it->second.narrow(0, p.offset, n);
        at::Tensor own = owner[key].narrow(0, p.offset, n);
        at::Tensor vals = p.values.to(at::kDouble).reshape({-1});
        at::Tensor held = own.ge(0);
        // Replica consistency: elements already held by another rank must match bitwise.
        at::Tensor differ = held.logical_and(dst.ne(vals).logical_and(vals.eq(vals)));
        if (differ.any().item<bool>()) {
          const int64_t i = differ.nonzero()[0][0].item<int64_t>();
          std::ostringstream msg;
          msg.precision(17);
          msg << "replicas differ: " << key << "[" << p.offset + i << "] is "
              << dst[i].item<double>() << " on rank " << own[i].item<int>() << " but "
              << vals[i].item<double>() << " on rank " << rank.rank << " (step " << step
              << ", seed " << cfg.seed << ")";
          out.verdict = Invariant("replica", step, p.kind, p.tensor, ps->layer, rank.rank,
                                  p.offset + i, msg.str());
          return out;
        }
        dst.copy_(vals);
        own.masked_fill_(own.lt(0), rank.rank);
      }
    }
    // Partition coverage: every element held by some rank.
    // Checked in localization order: kinds by phase, tensors in model order.
    for (const auto& kind : kinds)
      for (const auto& ps : spec.params) {
        const std::string key = kind + ":" + ps.name;
        at::Tensor missing = owner[key].lt(0);
        if (!missing.any().item<bool>()) continue;
        const int64_t first = missing.nonzero()[0][0].item<int64_t>();
        const int64_t count = missing.sum().item<int64_t>();
        out.verdict = Invariant("tiling", step, kind, ps.name, ps.layer, -1, first,
                                "shards do not tile " + key + ": " + std::to_string(count) +
                                    " element(s) held by no rank, the first at index " +
                                    std::to_string(first) + " (step " + std::to_string(step) +
                                    ", seed " + std::to_string(cfg.seed) + ")");
        return out;
      }
    as.loss = loss_count > 0 ? loss_sum / static_cast<double>(loss_count) : 0.0;
    out.steps.push_back(std::move(as));
  }
  return out;
}

}  // namespace paradiff
