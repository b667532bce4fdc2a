#include "oracles/check.h"

#include <algorithm>

#include "kernels/engine.h"
#include "oracles/assemble.h"
#include "oracles/behaviour.h"
#include "oracles/collective_oracle.h"
#include "oracles/oracle_registry.h"
#include "oracles/validation_oracle.h"

namespace paradiff {

namespace {

using Clock = std::chrono::steady_clock;

// Fingerprints per rank copied into the report (the full log can be thousands of calls).
constexpr size_t kReportedCollectives = 8;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::vector<RankSummary> Summarize(const Observations& obs) {
  std::vector<RankSummary> out;
  for (const auto& r : obs.ranks) {
    RankSummary rs;
    if (!r.memory.empty()) {
      rs.memory_bytes = r.memory.back().bytes;
      for (const auto& [cat, bytes] : r.memory.back().bytes) {
        auto first = r.memory.front().bytes.find(cat);
        rs.memory_grew |= bytes > (first == r.memory.front().bytes.end() ? 0 : first->second);
      }
    }
    for (const auto& f : r.collectives) {
      ++rs.collectives[Name(f.op)];
      if (rs.first_collectives.size() < kReportedCollectives)
        rs.first_collectives.push_back(f.ToString());
    }
    out.push_back(std::move(rs));
  }
  return out;
}

std::vector<StepRow> Rows(const Config& cfg, const Assembly& dist, const NumericResult& num,
                          const RefPair& initial) {
  const RefPair& ref = num.restarted ? *num.restarted : initial;
  const std::vector<Comparison>& comparisons = num.comparisons;
  std::vector<StepRow> rows;
  for (int64_t s = 0; s < cfg.steps; ++s) {
    StepRow row;
    row.step = s;
    row.loss_dist = dist.steps[s].loss;
    row.loss_same = ref.same.steps[s].loss;
    row.loss_truth = ref.truth.steps[s].loss;
    row.restarted = std::count(num.restarts.begin(), num.restarts.end(), s) > 0;
    for (const auto& c : comparisons) {
      if (c.step != s || c.ratio() < row.worst_ratio) continue;
      row.worst_ratio = c.ratio();
      row.worst_where = c.tensor_kind + (c.tensor.empty() ? "" : ":" + c.tensor);
    }
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

CheckResult CheckRun(const Config& cfg, const CheckOptions& opts) {
  const auto oracles = MakeOracles(opts.oracles);
  CheckResult res;
  const bool gate = std::any_of(oracles.begin(), oracles.end(), [](const auto& o) {
    return std::string(o->name()) == "validation";
  });
  if (gate) {
    const Status s = ValidationGate(cfg, opts.budget);
    if (!s.ok()) {
      res.verdict = GateRejection(cfg, s);
      res.rejected = true;
      res.oracles.push_back({"validation", OracleStatus::kSkipped, res.verdict.message, 0});
      return res;
    }
  }
  auto phase = [&opts](const char* name) {
    if (opts.on_phase) opts.on_phase(name);
  };
  const std::chrono::milliseconds timeout = opts.timeout;
  const EngineRunner run = opts.run_engine ? opts.run_engine : [timeout](const Config& c) {
    return RunEngine(c, timeout);
  };
  phase("engine");
  const auto t0 = Clock::now();
  const EngineOutcome eng = run(cfg);
  const auto t1 = Clock::now();
  // The twin mirrors the reduction structure the run declares (see Note [Declared reduction
  // structure]), so the reference follows the run.
  phase("reference");
  const int64_t hits = opts.cache ? opts.cache->hits() : 0;
  std::shared_ptr<const RefPair> ref =
      GetReference(cfg, eng.reporting.reduction, opts.cache,
                   RandomTwinsFor(cfg, eng.reporting.same_model_arithmetic));
  res.reference_cached = opts.cache && opts.cache->hits() > hits;
  const auto t2 = Clock::now();
  res.timing.engine_s = Seconds(t0, t1);
  res.timing.reference_s = Seconds(t1, t2);

  OracleInput in(cfg, eng);
  in.ref = ref.get();
  in.run_engine = run;
  in.cache = opts.cache;
  in.budget = opts.budget;
  Assembly dist;
  NumericResult num;
  if (eng.ok) {
    res.ranks = Summarize(eng.obs);
    phase("assemble");
    dist = AssembleTensors(cfg, eng.obs, eng.reporting);
    if (IsFinding(dist.verdict.kind)) {
      // A check inside the assembly itself failed (ranks disagreeing on an overflow skip); its
      // steps are incomplete, so nothing else can be compared.
      res.verdict = dist.verdict;
      res.oracles.push_back(
          {dist.verdict.oracle, OracleStatus::kFinding, dist.verdict.Signature(), 0});
      res.timing.compare_s = Seconds(t2, Clock::now());
      return res;
    }
    phase("numeric");
    num = CheckNumerics(cfg, dist, *ref);
    res.rows = Rows(cfg, dist, num, *ref);
    in.assembly = &dist;
    in.numeric = &num;
  }
  for (const auto& oracle : oracles) {
    phase(oracle->name());
    const auto s0 = Clock::now();
    const Verdict v = oracle->Check(in);
    OracleOutcome o{oracle->name(), OracleStatus::kPass, "", Seconds(s0, Clock::now())};
    if (IsFinding(v.kind)) {
      o.status = OracleStatus::kFinding;
      o.note = v.Signature();
    } else if (IsSkip(v)) {
      o.status = OracleStatus::kSkipped;
      o.note = v.message;
    } else if (v.kind == VerdictKind::kInconclusive) {
      o.status = OracleStatus::kInconclusive;
      o.note = v.message;
      if (res.verdict.kind == VerdictKind::kPass) res.verdict = v;  // unless a finding follows
    }
    res.oracles.push_back(o);
    if (IsFinding(v.kind)) {
      res.verdict = v;
      break;
    }
  }
  if (!eng.ok && !IsFinding(res.verdict.kind)) res.verdict = EngineFailureVerdict(eng, cfg);
  res.behaviour = BehaviourOf(cfg, eng, res);
  res.comparisons = std::move(num.comparisons);
  res.timing.compare_s = Seconds(t2, Clock::now());
  return res;
}

}  // namespace paradiff
