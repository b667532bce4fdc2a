// Benchmark: peak resident memory of checking the tiny config (bench/bench_common.h TinyConfig)
// at one world size, in this process: run it as a fresh child process per world size (scripts/bench
// does). Prints one JSON object: the peak (VmHWM from /proc/self/status, and getrusage ru_maxrss)
// after the check, and VmRSS before it (the process with libtorch loaded, no check yet).
// Exit 2 when the config is not valid and supported, 3 when the check does not pass.
// Usage: bench_peak_memory WORLD
#include <ATen/Parallel.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "bench/bench_common.h"
#include "core/budget.h"
#include "kernels/engine.h"
#include "oracles/check.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: bench_peak_memory WORLD\n");
    return 2;
  }
  at::set_num_threads(1);
  const paradiff::Config cfg = paradiff::bench::TinyConfig(std::atoll(argv[1]));
  paradiff::Status ok = paradiff::CheckConfig(cfg, paradiff::ResourceBudget{});
  if (ok.ok()) ok = paradiff::EngineSupports(cfg);
  if (!ok.ok()) {
    std::fprintf(stderr, "ERROR: %s\n", ok.ToString().c_str());
    return 2;
  }
  const int64_t before = paradiff::bench::ProcStatusKiB(0, "VmRSS");
  const auto t0 = std::chrono::steady_clock::now();
  const auto res = paradiff::CheckRun(cfg, paradiff::CheckOptions{});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  const nlohmann::json out = {{"world", cfg.parallel.world},
                              {"verdict", paradiff::Name(res.verdict.kind)},
                              {"rss_before_check_kib", before},
                              {"vm_hwm_kib", paradiff::bench::ProcStatusKiB(0, "VmHWM")},
                              {"ru_maxrss_kib", static_cast<int64_t>(ru.ru_maxrss)},
                              {"check_s", secs}};
  std::printf("%s\n", out.dump().c_str());
  return res.verdict.kind == paradiff::VerdictKind::kPass ? 0 : 3;
}
