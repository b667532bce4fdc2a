// Shared pieces of the benchmarks (bench/): the fixed, seeded list of small configs, the tiny
// config of the memory figures, and readers of a process's resident memory. Benchmarks print
// figures; nothing here passes or fails on time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"

namespace paradiff::bench {

// The small list: `n` configs from the campaign's own generator (fuzz/config_domain.h) with the
// campaign's acceptance rule (EngineSupports), seed `seed`, bounded to world <= 8, layers <= 4,
// hidden <= 64, steps <= 3. Same seed, same list.
constexpr uint64_t kSmallListSeed = 20261201;
constexpr int kSmallListSize = 24;
struct SizeBounds {
  int64_t world = 8, layers = 4, hidden = 64, steps = 3;
};
std::vector<Config> SmallConfigs(uint64_t seed = kSmallListSeed, int n = kSmallListSize,
                                 const SizeBounds& bounds = SizeBounds{});

// The tiny config of the peak-memory figure: a one-layer gpt (hidden 16, 2 heads, ffn 32, vocab 61,
// seq_len 8), micro_batch 1, one step, pure data parallel over `world` ranks with ZeRO stage 3.
Config TinyConfig(int64_t world);

// A field of /proc/<pid>/status in KiB ("VmRSS", "VmHWM"); -1 when unreadable. pid 0 = self.
int64_t ProcStatusKiB(pid_t pid, const std::string& field);

// Load average over the last minute (from /proc/loadavg), -1 when unreadable.
double LoadAverage1();

}  // namespace paradiff::bench
