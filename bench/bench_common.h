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

// Generated configs: `n` from the campaign's own generator (fuzz/config_domain.h) with the
// campaign's acceptance rule (EngineSupports), seed `seed`, bounded to world <= 8, layers <= 4,
// hidden <= 64, steps <= 3 by default. Same seed and generator, same configs; a change to the
// generator changes them, hence the frozen list below.
constexpr uint64_t kSmallListSeed = 20261201;
constexpr int kSmallListSize = 24;
struct SizeBounds {
  int64_t world = 8, layers = 4, hidden = 64, steps = 3;
};
std::vector<Config> GeneratedConfigs(uint64_t seed = kSmallListSeed, int n = kSmallListSize,
                                     const SizeBounds& bounds = SizeBounds{});

// The small list of the throughput and split figures: bench/small_list.json, GeneratedConfigs()
// as the generator made them on 2026-11-30 (commit 598c3cd), frozen so that figures stay
// comparable when the generator changes. Regenerate with `bench_time_split --write-list FILE`.
// Throws std::runtime_error when the file is missing or a config does not parse.
std::vector<Config> SmallList();
void WriteConfigList(const std::vector<Config>& configs, const std::string& path);

// The tiny config of the peak-memory figure: a one-layer gpt (hidden 16, 2 heads, ffn 32, vocab 61,
// seq_len 8), micro_batch 1, one step, pure data parallel over `world` ranks with ZeRO stage 3.
Config TinyConfig(int64_t world);

// A field of /proc/<pid>/status in KiB ("VmRSS", "VmHWM"); -1 when unreadable. pid 0 = self.
int64_t ProcStatusKiB(pid_t pid, const std::string& field);

// CPU seconds (user + system) of this process so far, all its threads.
double ProcessCpuS();

// CPU seconds of every descendant process: the reaped ones (RUSAGE_CHILDREN) and the live ones
// (/proc/<pid>/stat utime + stime), e.g. the ranks of the mpi backend's persistent jobs
// (kernels/mpi_job.h), which outlive a check. Take differences around the measured work.
double DescendantsCpuS();

// Load average over the last minute (from /proc/loadavg), -1 when unreadable.
double LoadAverage1();

}  // namespace paradiff::bench
