#include "oracles/check.h"

#include <algorithm>

#include "kernels/engine.h"
#include "oracles/assemble.h"

namespace paradiff {

namespace {

using Clock = std::chrono::steady_clock;

// Fingerprints per rank copied into the report (the full log can be thousands of calls).
constexpr size_t kReportedCollectives = 8;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

Verdict EngineFailure(const EngineOutcome& e, const Config& cfg) {
  Verdict v;
  v.kind = e.failure_kind == "collective" ? VerdictKind::kCollective
           : e.failure_kind == "hang"     ? VerdictKind::kHang
                                          : VerdictKind::kCrash;
  v.oracle = e.failure_kind == "crash" ? "engine" : "collective";
  v.where.phase = e.failure_kind == "crash" ? "run" : "collective";
  v.where.rank = e.failure_rank;
  v.message = e.failure + " (seed " + std::to_string(cfg.seed) + ")";
  return v;
}

}  // namespace

CheckResult CheckRun(const Config& cfg, const CheckOptions& opts) {
  CheckResult res;
  const auto t0 = Clock::now();
  std::shared_ptr<const RefPair> ref;
  if (opts.cache) {
    const int64_t hits = opts.cache->hits();
    ref = opts.cache->Get(cfg);
    res.reference_cached = opts.cache->hits() > hits;
  } else {
    auto pair = std::make_shared<RefPair>();
    pair->truth = RunReference(cfg, true);
    pair->same = RunReference(cfg, false);
    ref = pair;
  }
  const auto t1 = Clock::now();
  EngineOutcome eng = RunEngine(cfg, opts.timeout);
  const auto t2 = Clock::now();
  res.timing.reference_s = Seconds(t0, t1);
  res.timing.engine_s = Seconds(t1, t2);
  if (!eng.ok) {
    res.verdict = EngineFailure(eng, cfg);
    return res;
  }
  for (const auto& r : eng.obs.ranks) {
    RankSummary rs;
    if (!r.memory.empty()) {
      rs.memory_bytes = r.memory.back().bytes;
      for (const auto& [cat, bytes] : r.memory.back().bytes)
        rs.memory_grew |= bytes > r.memory.front().bytes.at(cat);
    }
    for (const auto& f : r.collectives) {
      ++rs.collectives[Name(f.op)];
      if (rs.first_collectives.size() < kReportedCollectives) rs.first_collectives.push_back(f.ToString());
    }
    res.ranks.push_back(std::move(rs));
  }
  Assembly dist = Assemble(cfg, eng.obs);
  if (dist.verdict.kind == VerdictKind::kPass) {
    NumericResult num = CheckNumerics(cfg, dist, *ref);
    res.verdict = num.verdict;
    res.comparisons = std::move(num.comparisons);
    for (int64_t s = 0; s < cfg.steps; ++s) {
      StepRow row;
      row.step = s;
      row.loss_dist = dist.steps[s].loss;
      row.loss_same = ref->same.steps[s].loss;
      row.loss_truth = ref->truth.steps[s].loss;
      for (const auto& c : res.comparisons) {
        if (c.step != s || c.ratio() < row.worst_ratio) continue;
        row.worst_ratio = c.ratio();
        row.worst_where = c.kind + (c.tensor.empty() ? "" : ":" + c.tensor);
      }
      res.rows.push_back(row);
    }
  } else {
    res.verdict = dist.verdict;
  }
  res.timing.compare_s = Seconds(t2, Clock::now());
  return res;
}

}  // namespace paradiff
