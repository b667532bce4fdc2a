#include "oracles/replica_oracle.h"

#include <ATen/ATen.h>

#include <map>
#include <sstream>
#include <vector>

#include "core/model_spec.h"
#include "oracles/bitwise.h"
#include "oracles/piece_values.h"
#include "oracles/quantities.h"
#include "oracles/tolerance.h"

namespace paradiff {

namespace {

struct Holder {
  std::vector<double> values;  // first holder's value per element
  std::vector<int> owner;      // rank of the first holder, -1 none
};

// CheckReplicasOf in plain loops over the values: a check has thousands of pieces.
Verdict CheckReplicasOf(const Config& cfg, const Observations& obs, const Reporting& r) {
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const auto kinds = ExpectedKinds(cfg, r);
  for (int64_t step = 0; step < cfg.steps; ++step) {
    std::map<std::string, Holder> held;
    std::vector<double> vals;  // the current piece as float64
    for (const auto& ps : spec.params)
      for (const auto& k : kinds)
        held[k + ":" + ps.name] = {std::vector<double>(static_cast<size_t>(ps.numel()), 0.0),
                                   std::vector<int>(static_cast<size_t>(ps.numel()), -1)};
    for (const auto& rank : obs.ranks) {
      if (step >= static_cast<int64_t>(rank.steps.size())) continue;
      for (const auto& p : rank.steps[step].pieces) {
        auto it = held.find(p.kind + ":" + p.tensor);
        const int64_t n = p.values.numel();
        if (it == held.end() || p.offset < 0 ||
            p.offset + n > static_cast<int64_t>(it->second.values.size()))
          continue;
        double* dst = it->second.values.data() + p.offset;
        int* own = it->second.owner.data() + p.offset;
        vals.resize(static_cast<size_t>(n));
        CopyAsDouble(p.values, vals.data());
        // Elements held before must be equal (CompareBitwise's equality and distance).
        const DType dtype = HeldDType(cfg, p.kind);
        BitwiseDiff d;  // d.index: within the piece
        for (int64_t i = 0; i < n; ++i)
          if (own[i] >= 0) TallyBitwise(d, i, vals[i], dst[i], dtype);
        if (!d.equal()) {
          const ParamSpec* ps = spec.Find(p.tensor);
          Verdict v;
          v.kind = VerdictKind::kInvariant;
          v.oracle = "replica";
          v.where.step = step;
          v.where.phase = PhaseOf(p.kind);
          v.where.tensor = p.tensor;
          v.where.tensor_kind = p.kind;
          v.where.layer = ps ? Name(ps->layer) : "";
          v.where.rank = rank.rank;
          v.where.other_rank = own[d.index];
          PlaceBitwise(v.where, d, p.offset);
          std::ostringstream msg;
          msg.precision(17);
          msg << "replicas differ: " << it->first << "[" << v.where.index << "] is " << d.expected
              << " on rank " << v.where.other_rank << " but " << d.actual << " on rank "
              << rank.rank << " (" << d.ulps << " ulp; " << d.count
              << " element(s) of this piece differ) (step " << step << ", seed " << cfg.seed << ")";
          v.message = msg.str();
          return v;
        }
        for (int64_t i = 0; i < n; ++i)
          if (own[i] < 0) {
            dst[i] = vals[i];
            own[i] = rank.rank;
          }
      }
    }
  }
  return Verdict{};
}

}  // namespace

Verdict CheckReplicas(const Config& cfg, const Observations& obs) {
  return CheckReplicasOf(cfg, obs, Reporting{});
}

Verdict ReplicaOracle::Check(const OracleInput& in) const {
  if (!in.outcome.ok) return SkipVerdict(name(), "the engine failed; no replicas to compare");
  return CheckReplicasOf(in.cfg, in.outcome.obs, in.outcome.reporting);
}

}  // namespace paradiff
