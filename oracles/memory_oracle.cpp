#include "oracles/memory_oracle.h"

#include <algorithm>
#include <set>
#include <vector>

#include "core/model_spec.h"
#include "kernels/engine.h"
#include "kernels/model.h"
#include "kernels/optim.h"
#include "oracles/layout_expectation.h"
#include "oracles/tolerance.h"

namespace paradiff {

namespace {

int64_t Bytes(DType d) { return d == DType::kFp64 ? 8 : (d == DType::kFp32 ? 4 : 2); }
int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// Categories in the order they are checked (see Note [Memory expectation]).
const char* const kCategories[] = {"params", "master",  "optimizer",
                                   "grads",  "padding", "buffers_peak"};

Verdict Finding(const Config& cfg, int64_t step, int rank, const std::string& category,
                const std::string& detail, double expected, double actual, double error,
                double bound, const std::string& msg) {
  Verdict v;
  v.kind = VerdictKind::kInvariant;
  v.oracle = "memory";
  v.where.step = step;
  v.where.phase = Phase::kMemory;
  v.where.tensor_kind = category;
  v.where.rank = rank;
  v.where.expected = expected;
  v.where.actual = actual;
  v.where.error = error;
  v.where.bound = bound;
  v.where.detail = detail;
  v.message = msg + " (rank " + std::to_string(rank) + ", step " + std::to_string(step) +
              ", seed " + std::to_string(cfg.seed) + ")";
  return v;
}

}  // namespace

MemoryExpectation ExpectedMemory(const Config& cfg, int rank,
                                 const std::set<std::string>* stage_params) {
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const int64_t align = std::max<int64_t>(cfg.zero.align_elems, 1), dp = cfg.parallel.dp;
  const int64_t tp = cfg.parallel.tp, dp_rank = (rank / tp) % dp;
  const int64_t stage = cfg.zero.stage;
  std::vector<std::pair<int64_t, int64_t>> ranges;  // [begin, end) of each held parameter
  std::map<std::string, int64_t> local;             // held parameter -> local elements
  int64_t off = 0, largest = 0;
  for (const auto& p : spec.params) {
    if (stage_params && !stage_params->count(p.name)) continue;
    const int64_t n = TpLocalNumel(cfg.model, p, tp);
    local[p.name] = n;
    off = RoundUp(off, align);
    ranges.push_back({off, off + n});
    off += n;
    largest = std::max(largest, n);
  }
  const int64_t padded = RoundUp(std::max<int64_t>(off, 1), dp * align);
  const int64_t shard = padded / dp;
  const int64_t held_begin = stage == 3 ? dp_rank * shard : 0;
  const int64_t held = stage == 3 ? shard : padded;
  const int64_t owned = stage == 0 ? padded : shard;
  int64_t data_in_held = 0;
  for (const auto& [b, e] : ranges)
    data_in_held += std::max<int64_t>(0, std::min(e, held_begin + held) - std::max(b, held_begin));
  const int64_t pbytes = Bytes(cfg.precision.param), abytes = Bytes(cfg.precision.accumulate);
  const bool master = cfg.precision.keeps_master();
  const int64_t slots = static_cast<int64_t>(OptimizerSlotNames(cfg.optimizer.kind).size());

  MemoryExpectation m;
  m.exact["params"] = held * pbytes;
  m.exact["master"] = master ? owned * 4 : 0;
  m.exact["optimizer"] = slots * owned * 4;
  m.exact["grads"] = ((stage <= 2 ? padded : 0) + (stage <= 1 ? padded : shard)) * abytes;
  m.exact["padding"] = (held - data_in_held) * pbytes;
  const int64_t bucket = std::max(cfg.zero.bucket_elems, largest);
  if (stage <= 1) {
    m.upper["buffers_peak"] = bucket * Bytes(cfg.precision.reduce);
  } else if (stage == 2) {
    m.upper["buffers_peak"] = bucket * abytes;
  } else {
    int64_t unit_max = 0;
    for (const auto& u : BuildUnits(spec, cfg.model)) {
      std::set<std::string> names(u.params.begin(), u.params.end());
      int64_t n = 0;
      for (const auto& name : names) n += local.count(name) ? local[name] : 0;
      unit_max = std::max(unit_max, n);
    }
    m.upper["buffers_peak"] = unit_max * pbytes;
  }
  return m;
}

Verdict CheckMemory(const Config& run_cfg, const Observations& obs) {
  for (int64_t step = 0; step < run_cfg.steps; ++step) {
    // After a checkpoint reload the reload layout runs (kernels/engine.h LayoutAtStep).
    const Config cfg = LayoutAtStep(run_cfg, step);
    // Each pipeline stage's parameters: those any rank of the stage reports (a tp rank may hold
    // only padding of a tensor, e.g. vocabulary rows past the vocabulary, and report none).
    const int64_t ranks_per_stage = cfg.parallel.tp * cfg.parallel.dp;
    std::vector<std::set<std::string>> stage_params(cfg.parallel.pp);
    for (const auto& other : obs.ranks) {
      const int64_t stage = other.rank / ranks_per_stage;
      if (cfg.parallel.pp == 1 || stage >= cfg.parallel.pp) continue;
      if (step >= static_cast<int64_t>(other.steps.size())) continue;
      for (const auto& piece : other.steps[step].pieces)
        if (piece.kind == "param") stage_params[stage].insert(piece.tensor);
    }
    for (const auto& r : obs.ranks) {
      if (step >= static_cast<int64_t>(r.memory.size())) continue;
      if (r.rank >= cfg.parallel.world) continue;  // not a rank of this phase
      const MemoryExpectation want = ExpectedMemory(
          cfg, r.rank, cfg.parallel.pp > 1 ? &stage_params[r.rank / ranks_per_stage] : nullptr);
      const auto& got = r.memory[step].bytes;
      for (const char* cat : kCategories) {
        auto it = got.find(cat);
        const int64_t actual = it == got.end() ? 0 : it->second;
        if (auto e = want.exact.find(cat); e != want.exact.end() && actual != e->second) {
          const int64_t diff = actual - e->second;
          return Finding(
              cfg, step, r.rank, cat, "", static_cast<double>(e->second),
              static_cast<double>(actual), static_cast<double>(std::abs(diff)), kDiscreteBound,
              std::string("memory category ") + cat + " holds " + std::to_string(actual) +
                  " bytes, expected " + std::to_string(e->second) + " for ZeRO stage " +
                  std::to_string(cfg.zero.stage) + ", dp " + std::to_string(cfg.parallel.dp) +
                  ", tp " + std::to_string(cfg.parallel.tp) + ", pp " +
                  std::to_string(cfg.parallel.pp) + ", align " +
                  std::to_string(cfg.zero.align_elems) + " (" + (diff > 0 ? "+" : "") +
                  std::to_string(diff) + " bytes)");
        }
        if (auto u = want.upper.find(cat); u != want.upper.end() && actual > u->second) {
          return Finding(cfg, step, r.rank, cat, "bound", static_cast<double>(u->second),
                         static_cast<double>(actual), static_cast<double>(actual),
                         static_cast<double>(u->second),
                         std::string("memory category ") + cat + " peaked at " +
                             std::to_string(actual) + " bytes, above the bound of " +
                             std::to_string(u->second) + " for ZeRO stage " +
                             std::to_string(cfg.zero.stage) + " and bucket_elems " +
                             std::to_string(cfg.zero.bucket_elems));
        }
      }
    }
  }
  // Leaks: no category larger after a later step than after the first step of its phase.
  const Config& cfg = run_cfg;
  for (int64_t step = 1; step < cfg.steps; ++step) {
    const int64_t first_step = PhaseFirstStep(cfg, step);
    if (first_step == step) continue;
    for (const auto& r : obs.ranks) {
      if (step >= static_cast<int64_t>(r.memory.size())) continue;
      const auto& base = r.memory[first_step].bytes;
      for (const auto& [cat, bytes] : r.memory[step].bytes) {
        auto first = base.find(cat);
        const int64_t before = first == base.end() ? 0 : first->second;
        if (bytes <= before) continue;
        return Finding(cfg, step, r.rank, cat, "leak", static_cast<double>(before),
                       static_cast<double>(bytes), static_cast<double>(bytes - before),
                       kDiscreteBound,
                       "memory category " + cat + " grew from " + std::to_string(before) +
                           " bytes after step 0 to " + std::to_string(bytes) + " bytes");
      }
    }
  }
  return Verdict{};
}

Verdict MemoryOracle::Check(const OracleInput& in) const {
  if (!in.outcome.target.empty())
    return SkipVerdict(name(),
                       "external target " + in.outcome.target + ": its buffers are not accounted");
  if (!in.outcome.ok) return SkipVerdict(name(), "the engine failed; no memory accounts");
  return CheckMemory(in.cfg, in.outcome.obs);
}

}  // namespace paradiff
