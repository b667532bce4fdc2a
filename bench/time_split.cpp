// Benchmark: where the time of one checked config goes, over the small list (bench/bench_common.h),
// without the reference cache. Prints one JSON object (and a table on stderr).
//
// The split by phase is wall time from CheckRun's own clocks (CheckResult.timing and each
// oracle's seconds): reference (the reference pair), engine (the local backend's run, ranks as
// threads), assembly + numeric comparison, each default oracle, and the rest of CheckRun.
//
// A second, instrumented pass counts torch operator calls per check (at::RecordFunction callbacks,
// scopes FUNCTION and BACKWARD_FUNCTION; "outermost" = not called from inside another operator),
// in all and by phase, and the tensor pieces the ranks report (sut/observations.h), the two
// multipliers of the per-check cost: with tensors this small, an operator's cost is its dispatch
// (about a microsecond), not its arithmetic.
//
// "Harness overhead" vs "model arithmetic" is measured in instructions by callgrind, not here
// (see Note [Callgrind attribution] in bench/callgrind_split.py; scripts/bench part `callgrind`):
// timing every operator with a thread CPU clock costs two system calls per operator and would
// measure mostly itself.
//
// Usage: bench_time_split [repetitions=3] [--op-names N] [--op-sites N]
//        --op-names N: also the N most called outermost operators of each phase, on stderr;
//        --op-sites N: the N paradiff functions that call the most outermost operators in each
//        phase (bench/op_sites.h; needs addr2line from binutils to name them).
//        bench_time_split --write-list FILE   (regenerates the frozen small list,
//        bench/bench_common.h)
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "bench/op_sites.h"
#include "kernels/engine.h"
#include "oracles/check.h"

namespace {

using Clock = std::chrono::steady_clock;

std::atomic<int64_t> g_ops{0}, g_outer_ops{0};  // operator calls: all, outermost
// Outermost calls by phase of CheckRun (CheckOptions::on_phase: engine — the rank
// threads and the thread that waits on them —, reference, assemble, numeric, then each oracle).
// Phase names are registered on the checking thread; rank threads only read the current index.
constexpr int kMaxPhases = 32;
std::atomic<int> g_phase{0};
std::atomic<int64_t> g_outer_by_phase[kMaxPhases];
std::atomic<int64_t> g_all_by_phase[kMaxPhases];  // every call, nested ones included
std::vector<std::string> g_phase_names;

void EnterPhase(const std::string& name) {
  auto it = std::find(g_phase_names.begin(), g_phase_names.end(), name);
  if (it == g_phase_names.end()) {
    if (g_phase_names.size() == kMaxPhases) return;  // not reached: CheckRun has fewer phases
    it = g_phase_names.insert(g_phase_names.end(), name);
  }
  g_phase = static_cast<int>(it - g_phase_names.begin());
}
thread_local int t_depth = 0;
// Outermost calls by (phase, operator name); filled only with --op-names.
bool g_count_names = false;
std::mutex g_names_mu;
std::map<std::pair<int, std::string>, int64_t> g_outer_by_name;
// Outermost calls by calling function; filled only with --op-sites.
bool g_count_sites = false;
paradiff::bench::OpSites g_sites;

std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction& fn) {
  g_ops.fetch_add(1, std::memory_order_relaxed);
  g_all_by_phase[g_phase.load(std::memory_order_relaxed)].fetch_add(1, std::memory_order_relaxed);
  if (t_depth++ == 0) {
    g_outer_ops.fetch_add(1, std::memory_order_relaxed);
    const int phase = g_phase.load(std::memory_order_relaxed);
    g_outer_by_phase[phase].fetch_add(1, std::memory_order_relaxed);
    if (g_count_names) {
      std::lock_guard<std::mutex> lock(g_names_mu);
      ++g_outer_by_name[{phase, fn.name()}];
    }
    if (g_count_sites) g_sites.Record(phase, fn.name());
  }
  return nullptr;
}

void OnOpEnd(const at::RecordFunction&, at::ObserverContext*) { --t_depth; }

struct PlainSplit {
  double wall_s = 0, cpu_s = 0, children_cpu_s = 0, reference_s = 0, engine_s = 0,
         assemble_numeric_s = 0;
  std::map<std::string, double> oracle_s;
  std::vector<double> engine_by_config_s;  // per list index, summed over repetitions
  int64_t n = 0, passes = 0;
  nlohmann::json Json() const {
    nlohmann::json by_oracle;
    double oracles = 0;
    for (const auto& [name, s] : oracle_s) {
      by_oracle[name] = 1e3 * s / n;
      oracles += s;
    }
    return {
        {"wall_ms", 1e3 * wall_s / n},
        {"process_cpu_ms", 1e3 * cpu_s / n},
        {"children_cpu_ms", 1e3 * children_cpu_s / n},
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
  const double c0 = paradiff::bench::ProcessCpuS(), k0 = paradiff::bench::DescendantsCpuS();
  p.engine_by_config_s.assign(list.size(), 0.0);
  for (int r = 0; r < reps; ++r)
    for (size_t i = 0; i < list.size(); ++i) {
      const auto res = paradiff::CheckRun(list[i], opts);
      p.reference_s += res.timing.reference_s;
      p.engine_s += res.timing.engine_s;
      p.engine_by_config_s[i] += res.timing.engine_s;
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
  p.cpu_s = paradiff::bench::ProcessCpuS() - c0;
  p.children_cpu_s = paradiff::bench::DescendantsCpuS() - k0;
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-list") {
    paradiff::bench::WriteConfigList(paradiff::bench::GeneratedConfigs(), argv[2]);
    return 0;
  }
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  int top_names = 0, top_sites = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--op-names") {
      top_names = std::atoi(argv[i + 1]);
    } else if (flag == "--op-sites") {
      top_sites = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr,
                   "bench_time_split: unknown option %s (see the usage in time_split.cpp)\n",
                   argv[i]);
      return 2;
    }
  }
  g_count_names = top_names > 0;
  g_count_sites = top_sites > 0;
  at::set_num_threads(1);
  const auto list = paradiff::bench::SmallList();
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
    opts.on_phase = EnterPhase;
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
  std::vector<size_t> order(list.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plain.engine_by_config_s[a] > plain.engine_by_config_s[b];
  });
  nlohmann::json slowest = nlohmann::json::array();
  for (size_t k = 0; k < std::min<size_t>(5, order.size()); ++k) {
    const paradiff::Config& c = list[order[k]];
    char what[160];
    std::snprintf(what, sizeof what,
                  "world %lld (tp %lld pp %lld dp %lld) zero %lld %s steps %lld save_at %lld",
                  static_cast<long long>(c.parallel.world), static_cast<long long>(c.parallel.tp),
                  static_cast<long long>(c.parallel.pp), static_cast<long long>(c.parallel.dp),
                  static_cast<long long>(c.zero.stage), paradiff::Name(c.precision.param),
                  static_cast<long long>(c.steps), static_cast<long long>(c.checkpoint.save_at));
    slowest.push_back({{"index", order[k]},
                       {"engine_ms", 1e3 * plain.engine_by_config_s[order[k]] / reps},
                       {"config", what}});
  }
  nlohmann::json by_phase = nlohmann::json::object(), all_by_phase = nlohmann::json::object();
  for (size_t i = 0; i < g_phase_names.size(); ++i) {
    by_phase[g_phase_names[i]] = static_cast<double>(g_outer_by_phase[i].load()) / n;
    all_by_phase[g_phase_names[i]] = static_cast<double>(g_all_by_phase[i].load()) / n;
  }
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
      {"outermost_torch_ops_per_check_by_phase", by_phase},
      {"torch_ops_per_check_by_phase", all_by_phase},
      {"pieces_per_check", static_cast<double>(pieces) / n},
      {"slowest_engine_configs", slowest},
  };
  std::printf("%s\n", out.dump(2).c_str());
  const double wall = split["wall_ms"];
  std::fprintf(stderr, "%-26s %9s %6s\n", "phase (wall per check)", "ms", "share");
  for (const char* k :
       {"reference_ms", "engine_ms", "assemble_and_numeric_ms", "oracles_ms", "rest_ms"})
    std::fprintf(stderr, "%-26s %9.2f %5.1f%%\n", k, split[k].get<double>(),
                 100 * split[k].get<double>() / wall);
  for (const auto& [name, ms] : split["by_oracle_ms"].items())
    std::fprintf(stderr, "  oracle %-17s %9.2f %5.1f%%\n", name.c_str(), ms.get<double>(),
                 100 * ms.get<double>() / wall);
  std::fprintf(stderr, "%-26s %9.2f\n", "total", wall);
  const double cpu = split["process_cpu_ms"].get<double>();
  const double children = split["children_cpu_ms"].get<double>();
  std::fprintf(stderr,
               "%-26s %9.2f  (all threads) + %.2f (child processes: mpi ranks); 2 cores busy "
               "with both would give %.1f checks/s\n",
               "process cpu", cpu, children, 2e3 / (cpu + children));
  for (const auto& sl : slowest)
    std::fprintf(stderr, "slow engine: config %d %.1f ms: %s\n", sl["index"].get<int>(),
                 sl["engine_ms"].get<double>(), sl["config"].get<std::string>().c_str());
  std::fprintf(
      stderr, "per check: %.0f torch operator calls (%.0f outermost), %.0f reported pieces\n",
      out["torch_ops_per_check"].get<double>(), out["outermost_torch_ops_per_check"].get<double>(),
      out["pieces_per_check"].get<double>());
  std::fprintf(stderr, "operators per check by phase, outermost / all:");
  for (const auto& [phase, ops] : by_phase.items())
    std::fprintf(stderr, " %s %.0f / %.0f", phase.c_str(), ops.get<double>(),
                 all_by_phase[phase].get<double>());
  std::fprintf(stderr, "\n");
  for (size_t ph = 0; top_names > 0 && ph < g_phase_names.size(); ++ph) {
    std::vector<std::pair<int64_t, std::string>> ops;
    for (const auto& [key, count] : g_outer_by_name)
      if (key.first == static_cast<int>(ph)) ops.emplace_back(count, key.second);
    std::sort(ops.rbegin(), ops.rend());
    std::fprintf(stderr, "most called in %s:", g_phase_names[ph].c_str());
    for (size_t k = 0; k < ops.size() && k < static_cast<size_t>(top_names); ++k)
      std::fprintf(stderr, " %s %.0f", ops[k].second.c_str(),
                   static_cast<double>(ops[k].first) / n);
    std::fprintf(stderr, "\n");
  }
  if (top_sites > 0) g_sites.Report(g_phase_names, static_cast<size_t>(top_sites), n);
  return 0;
}
