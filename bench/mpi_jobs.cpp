// Benchmark: configs on the mpi backend run by a fresh mpirun job each (one `paradiff rank` process
// per rank, started per config) against tasks of a persistent job (kernels/mpi_job.h), side by
// side in alternating rounds over the same configs. Prints one JSON object: runs per second and CPU
// seconds per run (this process and every descendant: mpirun and the ranks) of each way, their
// ratios, and whether every run's observations were bitwise equal between the two ways (they must
// be: a difference is printed and the exit code is 1).
//
// The configs: the first N configs on the mpi backend, without a checkpoint (RunEngineMpi runs
// one phase), drawn by the campaign's generator within the small list's bounds
// (bench/bench_common.h) from seed SEED. The first round of the persistent way starts its job (a
// job of the largest world among the configs, as a campaign worker's job grows to); it is
// reported apart as the start-up cost.
//
// Usage: bench_mpi_jobs [N=6] [ROUNDS=3] [SEED=20261205]
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "kernels/engine_mpi.h"
#include "kernels/observations_io.h"

namespace {

using Clock = std::chrono::steady_clock;

double CpuS() { return paradiff::bench::ProcessCpuS() + paradiff::bench::DescendantsCpuS(); }

struct Way {
  double wall_s = 0, cpu_s = 0;
  int runs = 0;
};

// Runs every config once; returns every rank's observations per config as bytes.
std::vector<std::string> Round(const std::vector<paradiff::Config>& configs, bool reuse, Way* way) {
  paradiff::MpiRunOptions o;
  o.reuse_job = reuse;
  std::vector<std::string> out;
  const auto t0 = Clock::now();
  const double c0 = CpuS();
  for (const auto& cfg : configs) {
    const paradiff::EngineOutcome r = paradiff::RunEngineMpi(cfg, o);
    std::string bytes = r.ok ? "" : "FAILED: " + r.failure;
    for (const auto& rank : r.obs.ranks) bytes += paradiff::SerializeObservations(rank);
    out.push_back(std::move(bytes));
  }
  way->wall_s += std::chrono::duration<double>(Clock::now() - t0).count();
  way->cpu_s += CpuS() - c0;
  way->runs += static_cast<int>(configs.size());
  return out;
}

nlohmann::json Figures(const Way& w) {
  return {{"runs", w.runs},
          {"runs_per_s", w.runs / w.wall_s},
          {"cpu_ms_per_run", 1e3 * w.cpu_s / w.runs}};
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::max(1, std::atoi(argv[1])) : 6;
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 3;
  const uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 20261205;
  at::set_num_threads(1);
  std::vector<paradiff::Config> configs;
  for (int batch = 0; static_cast<int>(configs.size()) < n && batch < 100; ++batch)
    for (const auto& c : paradiff::bench::GeneratedConfigs(seed + batch, 50))
      if (c.backend == paradiff::Backend::kMpi && c.checkpoint.save_at <= 0 &&
          static_cast<int>(configs.size()) < n)
        configs.push_back(c);
  if (static_cast<int>(configs.size()) < n) {
    std::fprintf(stderr, "only %zu configs on the mpi backend were drawn\n", configs.size());
    return 1;
  }
  Way fresh, first, persistent;
  int differ = 0;
  for (int r = 0; r < rounds; ++r) {
    const auto a = Round(configs, /*reuse=*/false, &fresh);
    const auto b = Round(configs, /*reuse=*/true, r == 0 ? &first : &persistent);
    for (size_t i = 0; i < configs.size(); ++i)
      if (a[i] != b[i] || a[i].rfind("FAILED", 0) == 0) {
        ++differ;
        std::fprintf(stderr, "config %zu (round %d): %s\n", i, r,
                     a[i].rfind("FAILED", 0) == 0   ? a[i].c_str()
                     : b[i].rfind("FAILED", 0) == 0 ? b[i].c_str()
                                                    : "observations differ");
      }
  }
  nlohmann::json worlds = nlohmann::json::array();
  for (const auto& c : configs) worlds.push_back(c.parallel.world);
  nlohmann::json out = {
      {"configs", n},
      {"worlds", worlds},
      {"rounds", rounds},
      {"seed", seed},
      {"load_average_1m", paradiff::bench::LoadAverage1()},
      {"fresh_job_per_run", Figures(fresh)},
      {"persistent_job_first_round", Figures(first)},
      {"observations_bitwise_equal", differ == 0},
  };
  if (rounds > 1) {
    out["persistent_job_after_first_round"] = Figures(persistent);
    out["speedup_runs_per_s"] = (persistent.runs / persistent.wall_s) / (fresh.runs / fresh.wall_s);
    out["cpu_ratio_fresh_over_persistent"] =
        (fresh.cpu_s / fresh.runs) / (persistent.cpu_s / persistent.runs);
  }
  std::printf("%s\n", out.dump(2).c_str());
  return differ == 0 ? 0 : 1;
}
