// Benchmark: resident memory of one campaign worker (`paradiff worker`, fuzz/worker.h) over many
// checked configs. The worker is started and fed exactly as a campaign does it (fuzz/worker_pool.h,
// one worker, the campaign's 8 GiB address-space limit and 120 s task limit); the configs come from
// the campaign's generator (bench/bench_common.h GeneratedConfigs: world <= 8, layers <= 4,
// hidden <= 64, steps <= 3; with --smaller world <= 4, layers <= 2, hidden <= 32, steps <= 2 so
// that 10,000 configs fit in minutes on a loaded machine), seed given. VmRSS of the worker
// (/proc/<pid>/status) is read after `warmup` configs and then at 20 checkpoints up to `warmup + n`
// configs.
//
// Growth = (RSS after warmup + n configs - RSS after warmup configs) / RSS after warmup configs.
// The warm-up lets the bounded state of a worker fill first (its reference cache holds 64 pairs;
// the allocator's arenas grow to the largest config seen); what still grows after it is a leak.
// Also printed: RSS after the first config, and the growth from there.
//
// Prints one JSON object. Usage: bench_worker_rss PARADIFF_EXE [n=10000] [warmup=1000] [seed]
// [--smaller]
#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "bench/bench_common.h"
#include "core/config_json.h"
#include "fuzz/worker_pool.h"

namespace {

// The one child of this process (the pool's worker), found through /proc/*/stat; -1 if none.
pid_t OnlyChild() {
  pid_t found = -1;
  DIR* d = ::opendir("/proc");
  if (!d) return -1;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0) continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string stat;
    std::getline(in, stat);
    const size_t paren = stat.rfind(')');
    if (paren == std::string::npos) continue;
    std::istringstream ss(stat.substr(paren + 2));
    char state;
    pid_t ppid = -1;
    ss >> state >> ppid;
    if (ppid == ::getpid()) found = pid;
  }
  ::closedir(d);
  return found;
}

}  // namespace

int main(int argc, char** argv) {
  paradiff::bench::SizeBounds bounds;
  if (argc > 1 && std::string(argv[argc - 1]) == "--smaller") {
    bounds = {4, 2, 32, 2};
    --argc;
  }
  if (argc < 2) {
    std::fprintf(
        stderr,
        "usage: bench_worker_rss PARADIFF_EXE [n=10000] [warmup=1000] [seed] [--smaller]\n");
    return 2;
  }
  const std::string exe = argv[1];
  const int64_t n = argc > 2 ? std::atoll(argv[2]) : 10000;
  const int64_t warmup = argc > 3 ? std::atoll(argv[3]) : 1000;
  const uint64_t seed =
      argc > 4 ? std::strtoull(argv[4], nullptr, 10) : paradiff::bench::kSmallListSeed;
  const int64_t total = warmup + n;
  const auto configs = paradiff::bench::GeneratedConfigs(seed, static_cast<int>(total), bounds);

  paradiff::WorkerPool pool(exe, /*jobs=*/1, /*mem_mb=*/8192, std::chrono::seconds(120));
  nlohmann::json checkpoints = nlohmann::json::array();
  nlohmann::json lost_tasks =
      nlohmann::json::array();  // crashes and timeouts: the worker restarted
  int64_t done = 0, passes = 0, lost = 0, first_rss = -1, warm_rss = -1;
  const auto t0 = std::chrono::steady_clock::now();
  auto checkpoint = [&] {
    const pid_t worker = OnlyChild();
    const int64_t rss = paradiff::bench::ProcStatusKiB(worker, "VmRSS");
    const int64_t vsz = paradiff::bench::ProcStatusKiB(worker, "VmSize");
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    checkpoints.push_back({{"configs", done},
                           {"rss_kib", rss},
                           {"vm_size_kib", vsz},
                           {"elapsed_s", s},
                           {"restarts", pool.restarts()}});
    std::fprintf(
        stderr,
        "INFO: bench worker_rss: %lld configs, worker VmRSS %lld KiB, VmSize %lld KiB, %.0f s\n",
        static_cast<long long>(done), static_cast<long long>(rss), static_cast<long long>(vsz), s);
    return rss;
  };
  for (int64_t i = 0; i < total; ++i) {
    pool.Submit({{"index", i}, {"config", paradiff::ConfigToJson(configs[i])}});
    for (bool got = false; !got;) {
      for (const paradiff::PoolEvent& ev : pool.Poll(std::chrono::milliseconds(1000))) {
        got = true;
        if (ev.kind != paradiff::PoolEvent::kResult) {
          ++lost;
          lost_tasks.push_back(
              {{"index", ev.index},
               {"kind", ev.kind == paradiff::PoolEvent::kCrash     ? "crash"
                        : ev.kind == paradiff::PoolEvent::kTimeout ? "timeout"
                                                                   : "interrupted"},
               {"detail", ev.detail},
               {"config", paradiff::ConfigToJson(configs[ev.index])}});
          std::fprintf(stderr,
                       "WARNING: bench worker_rss: task %lld lost (%s); the worker restarts\n",
                       static_cast<long long>(ev.index), ev.detail.c_str());
        } else {
          passes +=
              ev.result.value("verdict", nlohmann::json::object()).value("kind", "") == "pass";
        }
      }
    }
    ++done;
    if (done == 1)
      first_rss = checkpoint();
    else if (done == warmup)
      warm_rss = checkpoint();
    else if (done > warmup && (done - warmup) % std::max<int64_t>(1, n / 20) == 0)
      checkpoint();
  }
  const int64_t last_rss = checkpoints.back()["rss_kib"];
  const nlohmann::json out = {
      {"configs", n},
      {"warmup", warmup},
      {"seed", seed},
      {"bounds",
       {{"world", bounds.world},
        {"layers", bounds.layers},
        {"hidden", bounds.hidden},
        {"steps", bounds.steps}}},
      {"passes", passes},
      {"lost_tasks", lost},
      {"worker_restarts", pool.restarts()},
      {"lost", lost_tasks},
      {"rss_after_first_kib", first_rss},
      {"rss_after_warmup_kib", warm_rss},
      {"rss_final_kib", last_rss},
      {"growth_pct", warm_rss > 0 ? 100.0 * (last_rss - warm_rss) / warm_rss : -1},
      {"growth_from_first_pct", first_rss > 0 ? 100.0 * (last_rss - first_rss) / first_rss : -1},
      {"elapsed_s", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()},
      {"load_average_1m", paradiff::bench::LoadAverage1()},
      {"checkpoints", checkpoints}};
  std::printf("%s\n", out.dump().c_str());
  return 0;
}
