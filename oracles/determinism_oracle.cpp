#include "oracles/determinism_oracle.h"

#include "oracles/bitwise.h"
#include "oracles/tolerance.h"

namespace paradiff {

namespace {

Verdict Finding(const Config& cfg, const std::string& detail, int rank, const std::string& msg) {
  Verdict v;
  v.kind = VerdictKind::kMismatch;
  v.oracle = "determinism";
  v.where.phase = detail == "failure" ? "run" : "collective";
  v.where.detail = detail;
  v.where.rank = rank;
  v.where.error = 1;
  v.where.bound = kDiscreteBound;
  v.message = msg + " (seed " + std::to_string(cfg.seed) + ")";
  return v;
}

}  // namespace

Verdict DeterminismOracle::Check(const OracleInput& in) const {
  if (!in.outcome.ok || in.assembly == nullptr)
    return SkipVerdict(name(), "the engine failed; nothing to repeat");
  if (!in.run_engine) return SkipVerdict(name(), "no engine runner to repeat the run");
  const EngineOutcome again = in.run_engine(in.cfg);
  if (!again.ok)
    return Finding(
        in.cfg, "failure", again.failure_rank,
        "the first run completed but the second run of the same config failed: " + again.failure);
  const Assembly second = AssembleTensors(in.cfg, again.obs);
  const Assembly& first = *in.assembly;
  Verdict v = FirstBitwiseDifference(
      in.cfg, name(), "", [&](const Quantity& q) { return ValueOf(second, q); },
      [&](const Quantity& q) { return ValueOf(first, q); }, "the second run", "the first run");
  if (IsFinding(v.kind)) return v;
  const auto& a = in.outcome.obs.ranks;
  const auto& b = again.obs.ranks;
  for (size_t r = 0; r < a.size() && r < b.size(); ++r) {
    const auto &la = a[r].collectives, &lb = b[r].collectives;
    for (size_t k = 0; k < la.size() || k < lb.size(); ++k) {
      if (k < la.size() && k < lb.size() && la[k].SameCall(lb[k])) continue;
      return Finding(in.cfg, "collective_log", static_cast<int>(r),
                     "rank " + std::to_string(r) + "'s call " + std::to_string(k) +
                         " differs between two runs of the same config: " +
                         (k < la.size() ? la[k].ToString() : "none") + " then " +
                         (k < lb.size() ? lb[k].ToString() : "none"));
    }
  }
  return Verdict{};
}

}  // namespace paradiff
