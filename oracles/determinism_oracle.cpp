#include "oracles/determinism_oracle.h"

#include <ATen/ATen.h>

#include <cstring>

#include "core/model_spec.h"
#include "oracles/bitwise.h"
#include "oracles/tolerance.h"

namespace paradiff {

namespace {

Verdict Finding(const Config& cfg, const std::string& oracle, const std::string& detail, int rank,
                const std::string& msg) {
  Verdict v;
  v.kind = VerdictKind::kMismatch;
  v.oracle = oracle;
  v.where.phase = detail == "failure" ? Phase::kRun : Phase::kCollective;
  v.where.detail = detail;
  v.where.rank = rank;
  v.where.error = 1;
  v.where.bound = kDiscreteBound;
  v.message = msg + " (seed " + std::to_string(cfg.seed) + ")";
  return v;
}

// Note [A NaN is any NaN]: "the same run" for one rank's copy means the same bit patterns, except
// that a NaN equals any NaN. IEEE 754 leaves the sign and payload of a NaN an operation produces
// unspecified, and ATen's kernels differ between their vectorized body and their scalar tail: a
// bf16 add of inf and -inf gives 0xffff in a 32-element vector block and 0x7fc0 in the tail, so
// the pattern depends on how a tensor was cut into pieces (the mpi backend reduces each rank's
// piece of a tensor, the local backend the whole tensor), not on the arithmetic. -0.0 and 0.0 stay
// distinct: the sign of a zero result is specified.
bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  const at::Tensor x = a.contiguous(), y = b.contiguous();
  if (std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()) == 0) return true;
  if (!x.is_floating_point()) return false;
  const at::Tensor both_nan = x.isnan().logical_and(y.isnan());
  const at::Tensor zero = at::zeros({}, x.options());
  const at::Tensor xs = at::where(both_nan, zero, x).contiguous();
  const at::Tensor ys = at::where(both_nan, zero, y).contiguous();
  return std::memcmp(xs.data_ptr(), ys.data_ptr(), xs.nbytes()) == 0;
}

}  // namespace

Verdict CompareSecondRun(const OracleInput& in, const EngineOutcome& again,
                         const std::string& oracle, const std::string& first_name,
                         const std::string& second_name) {
  if (!again.ok)
    return Finding(in.cfg, oracle, "failure", again.failure_rank,
                   first_name + " completed but " + second_name + " failed: " + again.failure);
  const Assembly second = AssembleTensors(in.cfg, again.obs);
  const Assembly& first = *in.assembly;
  Verdict v = FirstBitwiseDifference(
      in.cfg, oracle, "", [&](const Quantity& q) { return ValueOf(second, q); },
      [&](const Quantity& q) { return ValueOf(first, q); }, second_name, first_name);
  if (IsFinding(v.kind)) return v;
  const auto& a = in.outcome.obs.ranks;
  const auto& b = again.obs.ranks;
  // Every rank's own copy too: the assembly reads one holder of replicated state.
  for (size_t r = 0; r < a.size() && r < b.size(); ++r) {
    for (size_t s = 0; s < a[r].steps.size() && s < b[r].steps.size(); ++s) {
      const auto &pa = a[r].steps[s].pieces, &pb = b[r].steps[s].pieces;
      for (size_t i = 0; i < pa.size(); ++i) {
        const bool same = i < pb.size() && pa[i].kind == pb[i].kind &&
                          pa[i].tensor == pb[i].tensor && pa[i].offset == pb[i].offset &&
                          SameBits(pa[i].values, pb[i].values);
        if (same) continue;
        Verdict v = Finding(in.cfg, oracle, "replica_copy", static_cast<int>(r),
                            "rank " + std::to_string(r) + "'s own copy of " + pa[i].kind + ":" +
                                pa[i].tensor + " at offset " + std::to_string(pa[i].offset) +
                                " differs at step " + std::to_string(s) + " between " + first_name +
                                " and " + second_name);
        v.where.step = static_cast<int64_t>(s);
        v.where.phase = PhaseOf(pa[i].kind);
        v.where.tensor_kind = pa[i].kind;
        v.where.tensor = pa[i].tensor;
        const ModelSpec spec = BuildModelSpec(in.cfg.model);  // outlives ps (ASan: use after free)
        if (const ParamSpec* ps = spec.Find(pa[i].tensor)) v.where.layer = Name(ps->layer);
        return v;
      }
    }
  }
  for (size_t r = 0; r < a.size() && r < b.size(); ++r) {
    const auto &la = a[r].collectives, &lb = b[r].collectives;
    for (size_t k = 0; k < la.size() || k < lb.size(); ++k) {
      if (k < la.size() && k < lb.size() && la[k].SameCall(lb[k])) continue;
      return Finding(in.cfg, oracle, "collective_log", static_cast<int>(r),
                     "rank " + std::to_string(r) + "'s call " + std::to_string(k) + " differs: " +
                         first_name + " made " + (k < la.size() ? la[k].ToString() : "none") +
                         ", " + second_name + " " + (k < lb.size() ? lb[k].ToString() : "none"));
    }
  }
  return Verdict{};
}

Verdict DeterminismOracle::Check(const OracleInput& in) const {
  if (!in.outcome.ok || in.assembly == nullptr)
    return SkipVerdict(name(), "the engine failed; nothing to repeat");
  if (!in.run_engine) return SkipVerdict(name(), "no engine runner to repeat the run");
  return CompareSecondRun(in, in.run_engine(in.cfg), name(), "the first run", "the second run");
}

}  // namespace paradiff
