#include "bench/bench_common.h"

#include <fstream>
#include <sstream>

#include "core/rng.h"
#include "fuzz/config_domain.h"
#include "kernels/engine.h"

namespace paradiff::bench {

std::vector<Config> SmallConfigs(uint64_t seed, int n, const SizeBounds& bounds) {
  DomainOptions domain;
  domain.max_world = bounds.world;
  domain.max_layers = bounds.layers;
  domain.max_hidden = bounds.hidden;
  domain.max_steps = bounds.steps;
  domain.accept = [](const Config& c) { return EngineSupports(c).ok(); };
  SeqRng rng(seed);
  std::vector<Config> out;
  for (int i = 0; i < n; ++i) out.push_back(GenerateConfig(rng, domain));
  return out;
}

Config TinyConfig(int64_t world) {
  Config c;
  c.steps = 1;
  c.model.layers = 1;
  c.model.hidden = 16;
  c.model.heads = c.model.kv_heads = 2;
  c.model.ffn = 32;
  c.batch.micro_batch = 1;
  c.parallel.world = c.parallel.dp = world;
  c.zero.stage = 3;
  return c;
}

int64_t ProcStatusKiB(pid_t pid, const std::string& field) {
  std::ifstream in(pid == 0 ? std::string("/proc/self/status")
                            : "/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, field.size() + 1, field + ":") != 0) continue;
    std::istringstream ss(line.substr(field.size() + 1));
    int64_t kib = -1;
    ss >> kib;
    return kib;
  }
  return -1;
}

double LoadAverage1() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

}  // namespace paradiff::bench
