#include "bench/bench_common.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "core/child_process.h"
#include "core/config_json.h"
#include "core/rng.h"
#include "core/self_exe.h"
#include "fuzz/config_domain.h"
#include "kernels/engine.h"

namespace paradiff::bench {
namespace {

// The list has a config on the mpi backend, which the engine runs as `paradiff rank` under mpirun:
// the paradiff built beside the benchmarks, never the benchmark itself (core/self_exe.h).
const bool g_exe_set = (SetParadiffExecutable(PARADIFF_BENCH_EXE), true);

}  // namespace

std::vector<Config> GeneratedConfigs(uint64_t seed, int n, const SizeBounds& bounds) {
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

std::vector<Config> SmallList() {
  std::ifstream in(PARADIFF_BENCH_SMALL_LIST);
  const nlohmann::json list = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!list.is_array())
    throw std::runtime_error(std::string("cannot read ") + PARADIFF_BENCH_SMALL_LIST);
  std::vector<Config> out;
  for (const auto& j : list) {
    StatusOr<Config> c = ConfigFromJson(j);
    if (!c.ok())
      throw std::runtime_error(std::string(PARADIFF_BENCH_SMALL_LIST) + ": " +
                               c.status().ToString());
    out.push_back(c.value());
  }
  return out;
}

void WriteConfigList(const std::vector<Config>& configs, const std::string& path) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& c : configs) list.push_back(ConfigToJson(c));
  std::ofstream(path) << list.dump(1) << "\n";
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

namespace {

double RusageCpuS(int who) {
  rusage ru;
  getrusage(who, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

}  // namespace

double ProcessCpuS() { return RusageCpuS(RUSAGE_SELF); }

double DescendantsCpuS() {
  double s = RusageCpuS(RUSAGE_CHILDREN);
  // Live processes whose parent chain reaches us.
  std::map<pid_t, ProcessInfo> procs;
  for (const ProcessInfo& p : ListProcesses()) procs[p.pid] = p;
  const pid_t self = ::getpid();
  for (const auto& [pid, info] : procs) {
    if (pid == self) continue;
    pid_t up = info.ppid;
    for (int hops = 0; up > 1 && up != self && hops < 64; ++hops) {
      const auto it = procs.find(up);
      up = it == procs.end() ? 0 : it->second.ppid;
    }
    if (up == self) s += info.cpu_s;
  }
  return s;
}

double LoadAverage1() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

}  // namespace paradiff::bench
