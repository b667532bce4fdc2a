#include "oracles/replica_oracle.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
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
  at::Tensor values;  // float64, first holder's value per element
  at::Tensor owner;   // int32 rank of the first holder, -1 none
};

// CheckReplicas over the kinds the run reports (`r`).
Verdict CheckReplicasOf(const Config& cfg, const Observations& obs, const Reporting& r) {
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const auto kinds = ExpectedKinds(cfg, r);
  for (int64_t step = 0; step < cfg.steps; ++step) {
    std::map<std::string, Holder> held;
    std::vector<double> vals_buf;  // the current piece as float64
    for (const auto& ps : spec.params)
      for (const auto& k : kinds)
        held[k + ":" + ps.name] = {at::zeros({ps.numel()}, at::kDouble),
                                   at::full({ps.numel()}, -1, at::kInt)};
    for (const auto& rank : obs.ranks) {
      if (step >= static_cast<int64_t>(rank.steps.size())) continue;
      for (const auto& p : rank.steps[step].pieces) {
        auto it = held.find(p.kind + ":" + p.tensor);
        const int64_t n = p.values.numel();
        if (it == held.end() || p.offset < 0 || p.offset + n > it->second.values.numel()) continue;
        // Fast paths without torch operators (most pieces: a first holder, or a replica equal to
        // it bit for bit); anything else takes the element-wise path below, which decides.
        double* dst_data = it->second.values.data_ptr<double>() + p.offset;
        int* own_data = it->second.owner.data_ptr<int>() + p.offset;
        vals_buf.resize(static_cast<size_t>(n));
        CopyAsDouble(p.values, vals_buf.data());
        const double* val_data = vals_buf.data();
        const int64_t owned = std::count_if(own_data, own_data + n, [](int o) { return o >= 0; });
        if (owned == 0) {
          std::copy(val_data, val_data + n, dst_data);
          std::fill(own_data, own_data + n, rank.rank);
          continue;
        }
        if (owned == n && std::memcmp(val_data, dst_data, sizeof(double) * n) == 0) continue;
        at::Tensor dst = it->second.values.narrow(0, p.offset, n);
        at::Tensor own = it->second.owner.narrow(0, p.offset, n);
        at::Tensor vals = at::from_blob(vals_buf.data(), {n}, at::kDouble).clone();
        at::Tensor before = own.ge(0);
        if (before.any().item<bool>()) {
          at::Tensor mask = before.nonzero().reshape({-1});
          const BitwiseDiff d = CompareBitwise(vals.index_select(0, mask),
                                               dst.index_select(0, mask), HeldDType(cfg, p.kind));
          if (!d.equal()) {
            const int64_t local = mask[d.index].item<int64_t>();
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
            v.where.other_rank = own[local].item<int>();
            v.where.index = p.offset + local;
            v.where.expected = d.expected;
            v.where.actual = d.actual;
            v.where.error = d.ulps;
            v.where.bound = kDiscreteBound;
            std::ostringstream msg;
            msg.precision(17);
            msg << "replicas differ: " << it->first << "[" << v.where.index << "] is " << d.expected
                << " on rank " << v.where.other_rank << " but " << d.actual << " on rank "
                << rank.rank << " (" << d.ulps << " ulp; " << d.count
                << " element(s) of this piece differ) (step " << step << ", seed " << cfg.seed
                << ")";
            v.message = msg.str();
            return v;
          }
        }
        at::Tensor fresh = before.logical_not();
        dst.copy_(at::where(fresh, vals, dst));
        own.masked_fill_(fresh, rank.rank);
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
