// Benchmark: checked configs per second for a fixed list of small data-parallel configs, and the
// split of time between reference, engine and comparison. Prints figures; never passes or fails on
// time. Usage: bench_check_throughput [repetitions=3]
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/config.h"
#include "oracles/check.h"

namespace {

using paradiff::Config;

std::vector<Config> FixedConfigs() {
  std::vector<Config> out;
  const int64_t dps[] = {1, 2, 3, 4, 5, 8};
  for (int64_t dp : dps) {
    for (int64_t stage = 0; stage <= 3; stage += (dp == 1 ? 3 : 1)) {
      Config c;
      c.parallel.dp = c.parallel.world = dp;
      c.zero.stage = stage;
      c.zero.bucket_elems = 1000;
      c.batch.accumulation_steps = 1 + stage % 2;
      if (stage == 2) c.precision.param = c.precision.compute = paradiff::DType::kBf16;
      out.push_back(c);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 3;
  at::set_num_threads(1);
  const auto configs = FixedConfigs();
  for (bool cached : {false, true}) {
    paradiff::ReferenceCache cache;
    paradiff::CheckOptions opts;
    opts.cache = cached ? &cache : nullptr;
    double ref = 0, eng = 0, cmp = 0;
    int n = 0, pass = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r)
      for (const auto& c : configs) {
        const auto res = paradiff::CheckRun(c, opts);
        ref += res.timing.reference_s;
        eng += res.timing.engine_s;
        cmp += res.timing.compare_s;
        pass += res.verdict.kind == paradiff::VerdictKind::kPass;
        ++n;
      }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double tot = ref + eng + cmp;
    std::printf("bench check_throughput: reference_cache=%s configs=%d pass=%d wall=%.2fs "
                "checks/s=%.1f split: reference=%.0f%% engine=%.0f%% compare=%.0f%%\n",
                cached ? "on " : "off", n, pass, wall, n / wall, 100 * ref / tot, 100 * eng / tot,
                100 * cmp / tot);
  }
  return 0;
}
