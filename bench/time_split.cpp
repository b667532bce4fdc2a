// Benchmark: where the time of one checked config goes, over the small list (bench/bench_common.h),
// without the reference cache. Prints one JSON object (and a table on stderr).
//
// Note [Model arithmetic vs harness overhead]
// "Model arithmetic" is the CPU time spent inside torch operators: every outermost ATen operator
// call and every autograd backward node (at::RecordFunction scopes FUNCTION and
// BACKWARD_FUNCTION; an operator called from inside another one is not counted twice), measured
// with the calling thread's CPU clock (CLOCK_THREAD_CPUTIME_ID) at entry and exit and summed over
// all threads (ranks are threads). That includes the operator's dispatch, allocation and the BLAS
// work it does. "Harness overhead" is everything else: the process's CPU time
// (getrusage(RUSAGE_SELF), all threads) during the check minus the model arithmetic, i.e. config
// handling, rank threads and their start-up, the local communicator's synchronisation and copies,
// observation gathering, the oracles' C++ loops, reports. CPU time (not wall time) is used so that
// ranks oversubscribing 2 cores do not count waiting as work; the one exception is "wall", printed
// beside it. Collective waits that block (condition variables) cost no CPU and so count nowhere.
//
// The phases are the slices of one CheckRun: reference (start of CheckRun up to the engine, i.e.
// the validation gate and the reference pair), engine (the run_engine call; wrapped here to read
// the clocks), and oracles (from the engine's end to CheckRun's end: assembly, numeric comparison
// and the default oracles, including any engine re-runs an oracle makes).
//
// The instrumentation costs time itself (a RecordFunction per operator and two clock reads per
// outermost one): the figures also give the wall time per check with and without it.
//
// Usage: bench_time_split [repetitions=3]
#include <ATen/Parallel.h>
#include <ATen/record_function.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
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

std::atomic<int64_t> g_op_ns{0};  // CPU ns inside outermost torch operators, all threads
std::atomic<int64_t> g_ops{0}, g_outer_ops{0};  // operator calls: all, outermost
thread_local int t_depth = 0;
thread_local int64_t t_entry_ns = 0;

int64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

int64_t ProcessCpuNs() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1'000'000'000LL +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
}

std::unique_ptr<at::ObserverContext> OnOpStart(const at::RecordFunction&) {
  g_ops.fetch_add(1, std::memory_order_relaxed);
  if (t_depth++ == 0) {
    g_outer_ops.fetch_add(1, std::memory_order_relaxed);
    t_entry_ns = ThreadCpuNs();
  }
  return nullptr;
}

void OnOpEnd(const at::RecordFunction&, at::ObserverContext*) {
  if (--t_depth == 0) g_op_ns.fetch_add(ThreadCpuNs() - t_entry_ns, std::memory_order_relaxed);
}

struct Mark {
  Clock::time_point wall;
  int64_t cpu_ns, op_ns;
  static Mark Now() { return {Clock::now(), ProcessCpuNs(), g_op_ns.load()}; }
};

struct Phase {
  double wall_s = 0, cpu_s = 0, op_s = 0;
  void Add(const Mark& a, const Mark& b) {
    wall_s += std::chrono::duration<double>(b.wall - a.wall).count();
    cpu_s += (b.cpu_ns - a.cpu_ns) * 1e-9;
    op_s += (b.op_ns - a.op_ns) * 1e-9;
  }
  nlohmann::json Json(int64_t n) const {
    return {{"wall_ms", 1e3 * wall_s / n},
            {"cpu_ms", 1e3 * cpu_s / n},
            {"torch_op_cpu_ms", 1e3 * op_s / n},
            {"overhead_cpu_ms", 1e3 * (cpu_s - op_s) / n}};
  }
};

// The phase split of uninstrumented checks, from CheckResult's own clocks (wall time): reference,
// engine, assembly + numeric comparison, and each oracle.
struct PlainSplit {
  double wall_s = 0, reference_s = 0, engine_s = 0, assemble_numeric_s = 0;
  std::map<std::string, double> oracle_s;
  int64_t n = 0, passes = 0;
  nlohmann::json Json() const {
    nlohmann::json by_oracle;
    for (const auto& [name, s] : oracle_s) by_oracle[name] = 1e3 * s / n;
    const double other = wall_s - reference_s - engine_s - assemble_numeric_s;
    double oracles = 0;
    for (const auto& [name, s] : oracle_s) oracles += s;
    return {{"wall_ms", 1e3 * wall_s / n},
            {"reference_ms", 1e3 * reference_s / n},
            {"engine_ms", 1e3 * engine_s / n},
            {"assemble_and_numeric_ms", 1e3 * assemble_numeric_s / n},
            {"oracles_ms", 1e3 * oracles / n},
            {"by_oracle_ms", by_oracle},
            {"rest_of_checkrun_ms", 1e3 * (other - oracles) / n}};
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

  auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(OnOpStart, OnOpEnd)
          .needsInputs(false)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  Phase ref, eng, orc, total;
  int64_t n = 0;
  for (int r = 0; r < reps; ++r) {
    for (const auto& cfg : list) {
      Mark m0 = Mark::Now(), m1{}, m2{};
      int engine_calls = 0;
      paradiff::CheckOptions opts;
      opts.run_engine = [&](const paradiff::Config& c) {
        const bool first = engine_calls++ == 0;
        if (first) m1 = Mark::Now();
        paradiff::EngineOutcome out = paradiff::RunEngine(c, opts.timeout);
        if (first) m2 = Mark::Now();
        return out;
      };
      paradiff::CheckRun(cfg, opts);
      const Mark m3 = Mark::Now();
      ref.Add(m0, m1);
      eng.Add(m1, m2);
      orc.Add(m2, m3);
      total.Add(m0, m3);
      ++n;
    }
  }
  at::removeCallback(handle);

  const double overhead_share = (total.cpu_s - total.op_s) / total.cpu_s;
  nlohmann::json out = {
      {"configs", list.size()},
      {"repetitions", reps},
      {"checks", n},
      {"passes", plain.passes},
      {"list_seed", paradiff::bench::kSmallListSeed},
      {"load_average_1m", paradiff::bench::LoadAverage1()},
      {"wall_ms_per_check_uninstrumented", 1e3 * plain.wall_s / plain.n},
      {"wall_ms_per_check_instrumented", 1e3 * total.wall_s / n},
      {"torch_ops_per_check", static_cast<double>(g_ops.load()) / n},
      {"outermost_torch_ops_per_check", static_cast<double>(g_outer_ops.load()) / n},
      {"uninstrumented", plain.Json()},
      {"phases", {{"reference", ref.Json(n)}, {"engine", eng.Json(n)}, {"oracles", orc.Json(n)},
                  {"total", total.Json(n)}}},
      {"harness_overhead_share", overhead_share},
  };
  std::printf("%s\n", out.dump(2).c_str());
  std::fprintf(stderr, "%-10s %10s %10s %14s %14s\n", "phase", "wall ms", "cpu ms", "torch-op cpu ms", "overhead cpu ms");
  for (const auto& [name, p] : {std::pair<const char*, const Phase*>{"reference", &ref}, {"engine", &eng},
                                {"oracles", &orc}, {"total", &total}})
    std::fprintf(stderr, "%-10s %10.2f %10.2f %14.2f %14.2f\n", name, 1e3 * p->wall_s / n,
                 1e3 * p->cpu_s / n, 1e3 * p->op_s / n, 1e3 * (p->cpu_s - p->op_s) / n);
  std::fprintf(stderr, "uninstrumented wall per check: %s\n", plain.Json().dump().c_str());
  std::fprintf(stderr, "harness overhead = %.1f %% of a checked config's CPU time (target < 50 %%)\n",
               100 * overhead_share);
  return 0;
}
