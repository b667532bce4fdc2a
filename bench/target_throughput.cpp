// Benchmark: an external target's runs per second with warm workers (protocol 2, the target file
// as written) against one launch per run (protocol 1: the same file with `--serve` replaced by the
// run dir), side by side over the same configs: the campaign's generator inside the target's
// `supports` (fuzz/campaign.h DomainFor), seed given. Only the target runs are timed (RunTarget:
// run dir written, target run, observations read back); no reference, no oracle. The two passes
// alternate in rounds (protocol 1 then 2, `rounds` times) so that a machine that gets busier
// mid-run slows both. The warm passes share their workers, as a campaign job keeps its own for
// the whole campaign; their time includes starting them and the first runs' lazy imports
// (adapters/torch/serve.py); `warm_over_cold_after_first_round` leaves the first round out, as a
// long campaign's workers have long started. Per-config times go to stderr.
//
// Every config's observations must be bitwise equal under both protocols (the warm worker leaks
// nothing between configs): `mismatches` counts those that are not. Last, one pass of whole checks
// (CheckRun with the default oracles: the reference pair and every oracle's extra runs) on warm
// workers gives `warm_checks_per_s`, the figure to set beside bench/spawn_per_config.py's.
//
// With --keep DIR the protocol-1 run dirs of the first round are kept there (for
// bench/spawn_per_config.py, which checks the same configs the way framework test suites do).
//
// Prints one JSON object. Usage: bench_target_throughput TARGET_FILE [n=16] [seed=1] [rounds=2]
// [--keep DIR]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "bench/bench_common.h"
#include "fuzz/campaign.h"
#include "fuzz/config_domain.h"
#include "oracles/check.h"
#include "targets/system_under_test.h"
#include "targets/target_runner.h"

namespace {

using paradiff::Config;
using paradiff::EngineOutcome;
using Clock = std::chrono::steady_clock;

bool SameObservations(const EngineOutcome& a, const EngineOutcome& b) {
  const auto& x = a.obs.ranks;
  const auto& y = b.obs.ranks;
  if (!a.ok || !b.ok || x.size() != y.size()) return false;
  for (size_t r = 0; r < x.size(); ++r) {
    if (x[r].steps.size() != y[r].steps.size()) return false;
    for (size_t s = 0; s < x[r].steps.size(); ++s) {
      const auto& u = x[r].steps[s];
      const auto& v = y[r].steps[s];
      if (u.loss_sum != v.loss_sum || u.loss_count != v.loss_count || u.grad_norm != v.grad_norm ||
          u.pieces.size() != v.pieces.size())
        return false;
      for (size_t i = 0; i < u.pieces.size(); ++i) {
        const auto& p = u.pieces[i];
        const auto& q = v.pieces[i];
        if (p.kind != q.kind || p.tensor != q.tensor || p.offset != q.offset ||
            !p.values.equal(q.values))
          return false;
      }
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> pos;
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--keep") == 0 && i + 1 < argc) {
      keep = argv[++i];
    } else {
      pos.push_back(argv[i]);
    }
  }
  if (pos.empty()) {
    std::fprintf(stderr,
                 "usage: bench_target_throughput TARGET_FILE [n=16] [seed=1] [rounds=2] "
                 "[--keep DIR]\n");
    return 2;
  }
  const int n = pos.size() > 1 ? std::atoi(pos[1].c_str()) : 16;
  const uint64_t seed = pos.size() > 2 ? std::strtoull(pos[2].c_str(), nullptr, 10) : 1;
  const int rounds = pos.size() > 3 ? std::atoi(pos[3].c_str()) : 2;
  auto sut = paradiff::LoadSystemUnderTest(pos[0]);
  if (!sut.ok() || !sut.value().target || sut.value().target->protocol != 2) {
    std::fprintf(stderr, "%s: not a protocol-2 target file: %s\n", pos[0].c_str(),
                 sut.ok() ? "protocol 1" : sut.status().ToString().c_str());
    return 2;
  }
  const paradiff::TargetSpec warm_spec = *sut.value().target;
  paradiff::TargetSpec cold_spec = warm_spec;
  cold_spec.protocol = 1;
  bool replaced = false;
  for (auto& a : cold_spec.command)
    if (a == "--serve") {
      a = "{run_dir}";
      replaced = true;
    }
  if (!replaced) {
    std::fprintf(stderr, "%s: its command has no --serve to replace by the run dir\n",
                 pos[0].c_str());
    return 2;
  }
  paradiff::DomainOptions domain = paradiff::DomainFor(sut.value());
  paradiff::SeqRng rng(seed);
  std::vector<Config> configs;
  for (int i = 0; i < n; ++i) configs.push_back(paradiff::GenerateConfig(rng, domain));

  std::vector<double> cold_by_round, warm_by_round;
  int64_t failed = 0, mismatches = 0;
  paradiff::WarmWorkers warm(warm_spec, "");
  for (int round = 0; round < rounds; ++round) {
    paradiff::TargetRunOptions cold_opts;
    if (round == 0 && !keep.empty()) cold_opts = {keep, paradiff::KeepRunDirs::kAll};
    std::vector<EngineOutcome> cold;
    std::vector<double> cold_each;
    auto t0 = Clock::now();
    for (const Config& c : configs) {
      const auto t = Clock::now();
      cold.push_back(paradiff::RunTarget(cold_spec, c, cold_opts));
      cold_each.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    }
    cold_by_round.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    t0 = Clock::now();
    for (size_t i = 0; i < configs.size(); ++i) {
      const auto t = Clock::now();
      const EngineOutcome w = paradiff::RunTarget(warm_spec, configs[i], {}, &warm);
      std::fprintf(stderr, "round %d config %zu (world %lld%s): cold %.2f s, warm %.2f s\n", round,
                   i, static_cast<long long>(configs[i].parallel.world),
                   configs[i].checkpoint.save_at > 0 ? ", checkpointed" : "", cold_each[i],
                   std::chrono::duration<double>(Clock::now() - t).count());
      if (!w.ok || !cold[i].ok) {
        ++failed;
        std::fprintf(stderr, "config %zu failed: %s\n", i, (w.ok ? cold[i] : w).failure.c_str());
      } else if (!SameObservations(w, cold[i])) {
        ++mismatches;
      }
    }
    warm_by_round.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const double cold_s = std::accumulate(cold_by_round.begin(), cold_by_round.end(), 0.0);
  const double warm_s = std::accumulate(warm_by_round.begin(), warm_by_round.end(), 0.0);
  const int64_t warm_started = warm.started();
  paradiff::CheckOptions check;
  check.run_engine = [&](const Config& c) { return paradiff::RunTarget(warm_spec, c, {}, &warm); };
  int64_t findings = 0;
  auto t0 = Clock::now();
  for (const Config& c : configs)
    findings += paradiff::IsFinding(paradiff::CheckRun(c, check).verdict.kind) ? 1 : 0;
  const double checks_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double runs = static_cast<double>(n) * rounds;
  nlohmann::json out = {{"target", warm_spec.name},
                        {"configs", n},
                        {"seed", seed},
                        {"rounds", rounds},
                        {"cold_runs_per_s", runs / cold_s},
                        {"warm_runs_per_s", runs / warm_s},
                        {"warm_over_cold", cold_s / warm_s},
                        {"cold_s_by_round", cold_by_round},
                        {"warm_s_by_round", warm_by_round},
                        {"warm_workers_started", warm_started},
                        {"warm_checks_per_s", n / checks_s},
                        {"check_findings", findings},
                        {"failed", failed},
                        {"mismatches", mismatches},
                        {"load_average_1m", paradiff::bench::LoadAverage1()}};
  if (rounds > 1) {
    // After the first round the worker has started and done its lazy imports: the ratio a long
    // campaign sees.
    const double cold_later = cold_s - cold_by_round[0], warm_later = warm_s - warm_by_round[0];
    out["warm_over_cold_after_first_round"] = cold_later / warm_later;
  }
  std::printf("%s\n", out.dump(2).c_str());
  return failed == 0 && mismatches == 0 ? 0 : 1;
}
