// Benchmark: where the time of one checked config goes, over the small list (bench/bench_common.h),
// without the reference cache. Prints one JSON object (and a table on stderr).
//
// The split by phase is wall time from CheckRun's own clocks (CheckResult.timing and each
// oracle's seconds): reference (the reference pair), engine (the local backend's run, ranks as
// threads), assembly + numeric comparison, each default oracle, and the rest of CheckRun.
//
// A second, instrumented pass counts torch operator calls per check (at::RecordFunction callbacks,
// scopes FUNCTION and BACKWARD_FUNCTION; "outermost" = not called from inside another operator)
// and the tensor pieces the ranks report (kernels/observations.h), the two multipliers of the
// per-check cost: with tensors this small, an operator's cost is its dispatch (about a microsecond),
// not its arithmetic.
//
// "Harness overhead" vs "model arithmetic" is measured in instructions by callgrind, not here
// (Note [Callgrind attribution] in bench/callgrind_split.py; scripts/bench part `callgrind`):
// timing every operator with a thread CPU clock costs two system calls per operator and would
// measure mostly itself.
//
// Usage: bench_time_split [repetitions=3]
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_common.h"
#include "kernels/engine.h"
#include "oracles/check.h"

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int64_t> g_ops{0}, g_outer_ops{0};  // operator calls: all, outermost
thread_local int t_depth = 0;

std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction&) {
  g_ops.fetch_add(1, std::memory_order_relaxed);
  if (t_depth++ == 0) g_outer_ops.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void OnOpEnd(const at::RecordFunction&, at::ObserverContext*) { --t_depth; }

struct PlainSplit {
  double wall_s = 0, reference_s = 0, engine_s = 0, assemble_numeric_s = 0;
  std::map<std::string, double> oracle_s;
  int64_t n = 0, passes = 0;
  nlohmann::json Json() const {
    nlohmann::json by_oracle;
    double oracles = 0;
    for (const auto& [name, s] : oracle_s) {
      by_oracle[name] = 1e3 * s / n;
      oracles += s;
    }
    return {{"wall_ms", 1e3 * wall_s / n},
            {"reference_ms", 1e3 * reference_s / n},
            {"engine_ms", 1e3 * engine_s / n},
            {"assemble_and_numeric_ms", 1e3 * assemble_numeric_s / n},
            {"oracles_ms", 1e3 * oracles / n},
            {"by_oracle_ms", by_oracle},
            {"rest_ms", 1e3 * (wall_s - reference_s - engine_s - assemble_numeric_s - oracles) / n}};
  }
};

PlainSplit CheckPlain(const std::vector<paradiff::Config>& list, int reps) {
  PlainSplit p;
  paradiff::CheckOptions opts;
  const auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r)
    for (const auto& c : list) {
      const auto res = paradiff::CheckRun(c, opts);
      p.reference_s += res.timing.reference_s;
      p.engine_s += res.timing.engine_s;
      double in_oracles = 0;
      for (const auto& o : res.oracles) {
        p.oracle_s[o.name] += o.seconds;
        in_oracles += o.seconds;
      }
      p.assemble_numeric_s += res.timing.compare_s - in_oracles;
      p.passes += res.verdict.kind == paradiff::VerdictKind::kPass;
      ++p.n;
    }
  p.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  at::set_num_threads(1);
  const auto list = paradiff::bench::SmallConfigs();
  CheckPlain(list, 1);  // warm-up: first-touch allocations, lazy torch initialisation
  const PlainSplit plain = CheckPlain(list, reps);

  // Instrumented pass: operator calls and reported pieces per check.
  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(OnOpStart, OnOpEnd)
          .needsInputs(false)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  int64_t pieces = 0;
  for (const auto& cfg : list) {
    paradiff::CheckOptions opts;
    bool first = true;
    opts.run_engine = [&](const paradiff::Config& c) {
      paradiff::EngineOutcome out = paradiff::RunEngine(c, opts.timeout);
      if (first)
        for (const auto& r : out.obs.ranks)
          for (const auto& s : r.steps) pieces += static_cast<int64_t>(s.pieces.size());
      first = false;
      return out;
    };
    paradiff::CheckRun(cfg, opts);
  }
  at::removeCallback(handle);
  const double n = static_cast<double>(list.size());

  const nlohmann::json split = plain.Json();
  const nlohmann::json out = {
      {"configs", list.size()},
      {"repetitions", reps},
      {"passes", plain.passes},
      {"checks", plain.n},
      {"list_seed", paradiff::bench::kSmallListSeed},
      {"load_average_1m", paradiff::bench::LoadAverage1()},
      {"split_ms", split},
      {"torch_ops_per_check", static_cast<double>(g_ops.load()) / n},
      {"outermost_torch_ops_per_check", static_cast<double>(g_outer_ops.load()) / n},
      {"pieces_per_check", static_cast<double>(pieces) / n},
  };
  std::printf("%s\n", out.dump(2).c_str());
  const double wall = split["wall_ms"];
  std::fprintf(stderr, "%-26s %9s %6s\n", "phase (wall per check)", "ms", "share");
  for (const char* k : {"reference_ms", "engine_ms", "assemble_and_numeric_ms", "oracles_ms", "rest_ms"})
    std::fprintf(stderr, "%-26s %9.2f %5.1f%%\n", k, split[k].get<double>(), 100 * split[k].get<double>() / wall);
  for (const auto& [name, ms] : split["by_oracle_ms"].items())
    std::fprintf(stderr, "  oracle %-17s %9.2f %5.1f%%\n", name.c_str(), ms.get<double>(), 100 * ms.get<double>() / wall);
  std::fprintf(stderr, "%-26s %9.2f\n", "total", wall);
  std::fprintf(stderr, "per check: %.0f torch operator calls (%.0f outermost), %.0f reported pieces\n",
               out["torch_ops_per_check"].get<double>(), out["outermost_torch_ops_per_check"].get<double>(),
               out["pieces_per_check"].get<double>());
  return 0;
}
