// Benchmark (Google Benchmark): checked configs per second on the local backend for the fixed,
// seeded small list (bench/bench_common.h), with and without the reference cache, with one or two
// checking threads (jobs; a worker checks one config at a time, `--jobs 2` on 2 cores is two of
// them). The jobs are threads started inside one iteration, so real time is the wall time of the
// whole pass (Google Benchmark's own ->Threads(n) averages the threads' times and would divide the
// rate by n). A job takes the list's next config when it is free, as a campaign's idle worker takes
// the next task (a fixed split by index leaves one core idle while the other finishes its share).
// Every iteration checks the whole list once through CheckRun (reference, engine, default oracles),
// exactly as a campaign worker does. Counters: checks_per_s (over real time), cpu_ms_per_check (the
// CPU of every thread and child process per check: steadier than wall time on a shared machine),
// passes (configs that passed; the list is clean, so anything else is printed as a warning in the
// counter), cache_hits.
//   reference_cache=0: no cache, every check computes its reference pair;
//   reference_cache=1: one cache shared by all iterations and warmed by one untimed pass (run
//                      before the first benchmark, whichever it is), so every
//                      reference is a hit (the steady state of a worker re-checking layouts of a
//                      model it has seen; the upper bound a cache can give).
//   hand_backward=0: the model's blocks through LibTorch's autograd instead of their hand-written
//                    backward (kernels/hand_backward.h; same bits), the baseline of that change.
// Run: bench_check_throughput --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <atomic>
#include <memory>
#include <thread>

#include "bench/bench_common.h"
#include "kernels/hand_backward.h"
#include "oracles/check.h"

namespace {

using paradiff::Config;

const std::vector<Config>& List() {
  static const std::vector<Config> kList = paradiff::bench::SmallList();
  return kList;
}

paradiff::ReferenceCache& WarmCache() {
  static paradiff::ReferenceCache* cache = [] {
    auto* c = new paradiff::ReferenceCache(List().size());
    paradiff::CheckOptions opts;
    opts.cache = c;
    for (const auto& cfg : List()) paradiff::CheckRun(cfg, opts);
    return c;
  }();
  return *cache;
}

void BM_CheckSmallList(benchmark::State& state) {
  const bool cached = state.range(0) != 0;
  const int jobs = static_cast<int>(state.range(1));
  paradiff::SetHandBackward(state.range(2) != 0);
  at::set_num_threads(1);
  paradiff::CheckOptions opts;
  // The untimed pass that warms the cache also comes before the first timed one whatever its
  // arguments (the mpi config's persistent job starts, first-touch allocations), so that no
  // benchmark carries the process's start.
  paradiff::ReferenceCache& cache = WarmCache();
  if (cached) opts.cache = &cache;
  const auto& list = List();
  std::atomic<int64_t> checks{0}, passes{0}, hits{0};
  std::atomic<size_t> next{0};  // the pass's next config: a job takes it when it is free
  auto job = [&] {
    for (size_t i; (i = next++) < list.size();) {
      const auto res = paradiff::CheckRun(list[i], opts);
      ++checks;
      passes += res.verdict.kind == paradiff::VerdictKind::kPass;
      hits += res.reference_cached;
    }
  };
  const double cpu0 = paradiff::bench::ProcessCpuS() + paradiff::bench::DescendantsCpuS();
  for (auto _ : state) {
    next = 0;
    std::vector<std::thread> threads;
    for (int j = 1; j < jobs; ++j) threads.emplace_back(job);
    job();
    for (auto& t : threads) t.join();
  }
  const double cpu_s = paradiff::bench::ProcessCpuS() + paradiff::bench::DescendantsCpuS() - cpu0;
  state.counters["cpu_ms_per_check"] =
      benchmark::Counter(checks > 0 ? 1e3 * cpu_s / static_cast<double>(checks) : 0.0);
  state.counters["checks_per_s"] =
      benchmark::Counter(static_cast<double>(checks), benchmark::Counter::kIsRate);
  state.counters["passes"] = benchmark::Counter(static_cast<double>(passes));
  state.counters["checks"] = benchmark::Counter(static_cast<double>(checks));
  state.counters["cache_hits"] = benchmark::Counter(static_cast<double>(hits));
  paradiff::SetHandBackward(true);
}

BENCHMARK(BM_CheckSmallList)
    ->ArgNames({"reference_cache", "jobs", "hand_backward"})
    ->ArgsProduct({{0, 1}, {1, 2}, {1}})
    ->Args({0, 1, 0})
    ->Args({0, 2, 0})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
