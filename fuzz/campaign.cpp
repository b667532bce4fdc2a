#include "fuzz/campaign.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "core/budget.h"
#include "core/config_json.h"
#include "core/fault_names.h"
#include "core/rng.h"
#include "core/watchdog.h"
#include "fuzz/coverage.h"
#include "fuzz/feedback.h"
#include "fuzz/finding_minimizer.h"
#include "fuzz/workdir.h"
#include "fuzz/workdir_lock.h"
#include "fuzz/worker_pool.h"
#include "kernels/engine.h"
#include "targets/system_under_test.h"

namespace paradiff {

namespace {

constexpr int64_t kFamilySize = 8;        // executions sharing one base config
constexpr double kSeedCorpusShare = 0.3;  // families based on a seed-corpus config
constexpr double kStatsEverySeconds = 1.0;
constexpr std::chrono::milliseconds kPollWait{100};
constexpr size_t kMaxHistory = 512;  // stats.json "history" samples; thinned 2:1 beyond

// Set by SIGINT / SIGTERM; the only way a signal handler may talk to the loop.
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void OnInterrupt(int) { g_interrupted = 1; }

using Clock = std::chrono::steady_clock;

nlohmann::json WorkerVerdict(const char* kind, const std::string& detail, const Config& cfg) {
  // Stable signatures: the reason class, never the pid or the time.
  const std::string what = std::string(kind) == "hang" ? "timeout" : "worker-died";
  return {{"kind", kind},
          {"oracle", "worker"},
          {"signature", std::string(kind) + ".worker.-.-." + what},
          {"message", detail + " (seed " + std::to_string(cfg.seed) + ")"}};
}

struct State {
  int64_t done_below = 0;       // every index below is complete
  std::set<int64_t> completed;  // complete indices >= done_below
  int64_t execs = 0, findings = 0, inconclusive = 0, rejected = 0;
  double elapsed_prev = 0;
  PairCoverage coverage;
  Feedback feedback;
  nlohmann::json history = nlohmann::json::array();  // one sample per progress line

  void Complete(int64_t i) {
    completed.insert(i);
    while (completed.count(done_below)) completed.erase(done_below++);
    feedback.Fold(done_below);
  }
  bool IsComplete(int64_t i) const { return i < done_below || completed.count(i); }
};

nlohmann::json StatsJson(const CampaignOptions& o, const State& s, double elapsed) {
  return {{"paradiff_campaign", 1},
          {"seed", o.seed},
          {"inject", o.inject},
          {"behaviour_feedback", o.feedback},
          {"feedback", s.feedback.ToJson()},
          {"done_below", s.done_below},
          {"completed", s.completed},
          {"execs", s.execs},
          {"findings", s.findings},
          {"inconclusive", s.inconclusive},
          {"rejected", s.rejected},
          {"elapsed_s", elapsed},
          {"coverage", s.coverage.ToJson()},
          {"history", s.history}};
}

Status LoadState(const CampaignOptions& o, const nlohmann::json& j, State& s) {
  if (j.empty()) return Status();
  if (j.value("seed", uint64_t{0}) != o.seed)
    return Status::Error("--seed", "--seed=" + std::to_string(o.seed) +
                                       " differs from the work dir's seed " +
                                       std::to_string(j.value("seed", uint64_t{0})) +
                                       " (resume with the same seed, or use a new --workdir)");
  if (j.value("inject", std::vector<std::string>{}) != o.inject)
    return Status::Error("--inject",
                         "--inject differs from the work dir's (resume with the same switches)");
  if (j.value("behaviour_feedback", true) != o.feedback)
    return Status::Error(
        "--no-feedback",
        "--no-feedback differs from the work dir's (resume with the same schedule)");
  s.done_below = j.value("done_below", int64_t{0});
  s.completed = j.value("completed", std::set<int64_t>{});
  s.execs = j.value("execs", int64_t{0});
  s.findings = j.value("findings", int64_t{0});
  s.inconclusive = j.value("inconclusive", int64_t{0});
  s.rejected = j.value("rejected", int64_t{0});
  s.elapsed_prev = j.value("elapsed_s", 0.0);
  if (j.contains("coverage")) s.coverage.FromJson(j["coverage"]);
  if (j.contains("history") && j["history"].is_array()) s.history = j["history"];
  return s.feedback.FromJson(j.value("feedback", nlohmann::json()));
}

// The signatures stored under DIR/findings.
std::vector<std::string> Signatures(const std::string& workdir) {
  return RecordedSignatures(workdir, "findings");
}

}  // namespace

Config ConfigAt(const CampaignOptions& opts, const std::vector<Config>& seeds,
                const DomainOptions& domain, int64_t i, const std::vector<Config>& parents) {
  const int64_t family = i / kFamilySize;
  SeqRng frng(Mix64(opts.seed ^ Mix64(static_cast<uint64_t>(family) + 0xFA5EEDULL)));
  // A family on a feedback parent draws from its own stream, so the others keep the seed-only
  // schedule's configs; every member is a mutation (the parent itself was checked).
  SeqRng prng(Mix64(opts.seed ^ Mix64(static_cast<uint64_t>(family) + 0xFEEDBAC4ULL)));
  const bool on_parent = !parents.empty() && prng.Chance(Feedback::kParentShare);
  Config base;
  if (on_parent) {
    base = parents[prng.Below(parents.size())];
  } else if (!seeds.empty() && frng.Chance(kSeedCorpusShare)) {
    base = seeds[frng.Below(seeds.size())];
    for (const auto& f : opts.inject)
      if (std::find(base.faults.begin(), base.faults.end(), f) == base.faults.end())
        base.faults.push_back(f);
  } else {
    base = GenerateConfig(frng, domain);
  }
  Config c = base;
  if (on_parent || i % kFamilySize != 0) {
    SeqRng rng(Mix64(opts.seed ^ Mix64(static_cast<uint64_t>(i) + 0x5EEDULL)));
    c = MutateConfig(base, rng, domain);
  }
  if (opts.backend) c.backend = *opts.backend;  // --backend: every config on that backend
  return c;
}

StatusOr<std::vector<Config>> LoadCorpus(const std::string& dir) {
  std::vector<Config> out;
  if (dir.empty()) return out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    return Status::Error("--corpus", "--corpus=" + dir + ": not a directory");
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  Status bad;
  for (const auto& f : files) {
    StatusOr<Config> c = LoadConfigFile(f);
    Status s = c.ok() ? CheckConfig(c.value(), ResourceBudget{}) : c.status();
    if (!s.ok()) {
      for (const auto& e : s.errors()) bad.Add(e.field, f + ": " + e.message);
      continue;
    }
    if (EngineSupports(c.value()).ok()) out.push_back(c.value());
  }
  if (!bad.ok()) return bad;
  return out;
}

// Target runs one check makes at most: the config's two phases (a checkpoint) and variants.
constexpr int64_t kTargetRunsPerCheck = 4;

DomainOptions DomainFor(const SystemUnderTest& system) {
  DomainOptions domain;
  domain.accept = [system](const Config& c) { return system.Supports(c).ok(); };
  const SystemLimits limits = system.Limits();
  domain.max_world = std::min(domain.max_world, limits.max_world);
  domain.target_options = limits.options;
  domain.shard_groups = limits.shard_groups;
  domain.reload = limits.reload;
  domain.parallel = std::set<std::string>(limits.parallel.begin(), limits.parallel.end());
  for (const TargetPrecision& t : limits.precisions) {
    PrecisionConfig p;
    p.param = t.param, p.compute = t.compute, p.reduce = t.reduce, p.accumulate = t.accumulate;
    for (const bool master : {true, false}) {
      if (t.master_weights != -1 && master != (t.master_weights == 1)) continue;
      if (!master && p.param == DType::kFp32) continue;  // fp32 parameters are their own masters
      p.master_weights = master;
      domain.precisions.push_back(p);
    }
  }
  return domain;
}

StatusOr<CampaignSummary> RunCampaign(const CampaignOptions& opts, std::ostream& log) {
  if (opts.workdir.empty()) return Status::Error("--workdir", "--workdir is required");
  if (opts.jobs < 1 || opts.jobs > 64) return Status::Error("--jobs", "--jobs must be in 1..64");
  if (opts.budget_s <= 0 && opts.runs <= 0)
    return Status::Error("--budget", "give --budget (e.g. 90s, 10m, 8h) or --runs N");
  for (const auto& f : opts.inject)
    if (!IsKnownFault(f))
      return Status::Error("--inject", "--inject=" + f + ": unknown fault switch");
  StatusOr<std::vector<Config>> seeds = LoadCorpus(opts.corpus_dir);
  if (!seeds.ok()) return seeds.status();
  std::string stale;
  const StatusOr<std::shared_ptr<WorkDirLock>> lock = WorkDirLock::Acquire(opts.workdir, &stale);
  if (!lock.ok()) return lock.status();
  if (!stale.empty()) log << "INFO: campaign: took over the stale lock of " << stale << std::endl;
  WorkDir wd(opts.workdir);
  StatusOr<nlohmann::json> stats = wd.LoadStats();
  if (!stats.ok()) return stats.status();
  State st;
  Status loaded = LoadState(opts, stats.value(), st);
  if (!loaded.ok()) return loaded;
  st.feedback.Fold(st.done_below);
  const Status mk = wd.SaveStats(StatsJson(opts, st, st.elapsed_prev));
  if (!mk.ok()) return mk;

  StatusOr<SystemUnderTest> sut = LoadSystemUnderTest(opts.target);
  if (!sut.ok()) return sut.status();
  const SystemUnderTest system = sut.value();
  DomainOptions domain = DomainFor(system);
  domain.faults = opts.inject;

  g_interrupted = 0;
  auto old_int = std::signal(SIGINT, OnInterrupt);
  auto old_term = std::signal(SIGTERM, OnInterrupt);
  const auto start = Clock::now();
  auto elapsed = [&] {
    return st.elapsed_prev + std::chrono::duration<double>(Clock::now() - start).count();
  };
  log << "INFO: campaign workdir=" << opts.workdir << " seed=" << opts.seed << " jobs=" << opts.jobs
      << " budget=" << opts.budget_s << "s runs=" << opts.runs << " resume_from=" << st.done_below
      << " seeds=" << seeds.value().size() << std::endl;

  // A target's own watchdog must fire before the pool's: its hang finding names the run and quotes
  // the target's log (and its processes go with its session), where the pool's only says the
  // check took too long. A check runs the target up to kTargetRunsPerCheck times.
  double task_timeout_s = opts.task_timeout_s;
  const int64_t run_timeout_s = system.Limits().run_timeout_s;
  if (task_timeout_s < kTargetRunsPerCheck * run_timeout_s) {
    task_timeout_s = static_cast<double>(kTargetRunsPerCheck * run_timeout_s);
    log << "INFO: campaign: task timeout " << task_timeout_s << " s (" << kTargetRunsPerCheck
        << " x the target's timeout_s " << run_timeout_s << "; --task-timeout-s was "
        << opts.task_timeout_s << ")" << std::endl;
  }
  CampaignSummary sum;
  std::unique_ptr<TaskPool> pool_owner =
      opts.make_pool ? opts.make_pool()
                     : std::make_unique<WorkerPool>(
                           opts.exe, opts.jobs, opts.worker_mem_mb,
                           std::chrono::milliseconds(static_cast<int64_t>(task_timeout_s * 1000)));
  TaskPool& pool = *pool_owner;
  std::map<int, int64_t> per_host;  // executions by MPI rank (only rank 0 without --distributed)
  std::map<int64_t, Config> in_flight;
  int64_t next = st.done_below;
  bool found = false;
  auto last_progress = Clock::now(), last_stats = Clock::now();
  const int64_t execs_at_start = st.execs;

  auto progress = [&](const char* tag) {
    const double e = elapsed(), here = std::chrono::duration<double>(Clock::now() - start).count();
    const int64_t possible = st.coverage.possible();
    char line[400];
    std::snprintf(line, sizeof line,
                  "%s: campaign elapsed=%.0fs execs=%lld execs/s=%.1f findings=%lld unique=%zu "
                  "inconclusive=%lld rejected=%lld pairs=%lld/%lld (%.0f%%) parents=%zu",
                  tag, e, static_cast<long long>(st.execs),
                  here > 0 ? static_cast<double>(st.execs - execs_at_start) / here : 0.0,
                  static_cast<long long>(st.findings), Signatures(opts.workdir).size(),
                  static_cast<long long>(st.inconclusive), static_cast<long long>(st.rejected),
                  static_cast<long long>(st.coverage.covered()), static_cast<long long>(possible),
                  possible ? 100.0 * static_cast<double>(st.coverage.covered()) / possible : 0.0,
                  st.feedback.parents().size());
    log << line << std::endl;
    if (st.history.size() >= kMaxHistory) {
      nlohmann::json thin = nlohmann::json::array();
      for (size_t k = 0; k < st.history.size(); k += 2) thin.push_back(st.history[k]);
      st.history = std::move(thin);
    }
    st.history.push_back(
        {{"elapsed_s", e},
         {"execs", st.execs},
         {"findings", st.findings},
         {"unique", Signatures(opts.workdir).size()},
         {"execs_per_s", here > 0 ? static_cast<double>(st.execs - execs_at_start) / here : 0.0},
         {"pairs_covered", st.coverage.covered()},
         {"pairs_possible", possible}});
  };

  for (;;) {
    const bool stop = g_interrupted || (opts.budget_s > 0 && elapsed() >= opts.budget_s) ||
                      (opts.stop_on_first && found);
    while (!stop && pool.HasIdle()) {
      while (st.IsComplete(next) || in_flight.count(next)) ++next;
      if (opts.runs > 0 && next >= opts.runs) break;
      if (opts.feedback && !st.feedback.Ready(next)) break;  // the generation before is running
      const int64_t i = next++;
      // Without feedback nothing is recorded, so there are no parents.
      Config cfg = ConfigAt(opts, seeds.value(), domain, i, st.feedback.parents());
      if (!CheckConfig(cfg, ResourceBudget{}).ok() || !system.Supports(cfg).ok()) {
        ++st.rejected;  // a deliberately invalid config, rejected before any rank starts
        ++st.execs;
        st.Complete(i);
        continue;
      }
      if (st.coverage.Add(ConfigFeatures(cfg))) wd.SaveCorpus(cfg);
      nlohmann::json task = {{"index", i}, {"config", ConfigToJson(cfg)}};
      if (!opts.oracles.empty()) task["oracles"] = opts.oracles;
      if (!opts.target.empty()) task["target"] = opts.target;
      if (i == opts.debug_crash_at) task["debug"] = "crash";
      if (i == opts.debug_hang_at) task["debug"] = "hang";
      pool.Submit(task);
      in_flight[i] = std::move(cfg);
    }
    if (pool.Busy() == 0 && (stop || (opts.runs > 0 && next >= opts.runs))) break;
    for (const PoolEvent& e : pool.Poll(kPollWait)) {
      auto it = in_flight.find(e.index);
      if (it == in_flight.end()) continue;
      const Config cfg = it->second;
      in_flight.erase(it);
      if (e.kind == PoolEvent::kInterrupted) {
        // Not a finding (see PoolEvent::kInterrupted): the index stays incomplete, a resume runs
        // it.
        log << "INFO: index " << e.index << " not checked: its " << e.detail
            << "; the campaign stops (rerun the same command to resume)" << std::endl;
        g_interrupted = 1;
        continue;
      }
      nlohmann::json verdict = e.kind == PoolEvent::kResult
                                   ? e.result.value("verdict", nlohmann::json::object())
                               : e.kind == PoolEvent::kCrash ? WorkerVerdict("crash", e.detail, cfg)
                                                             : WorkerVerdict("hang", e.detail, cfg);
      const std::string kind = verdict.value("kind", "crash");
      const std::string sig = verdict.value("signature", "?");
      const nlohmann::json report =
          e.result.is_object() && e.result.contains("report")
              ? e.result["report"]
              : nlohmann::json{{"verdict", verdict}, {"config", ConfigToJson(cfg)}};
      if (kind == "inconclusive") {
        // Kept like a finding (see Note [Idempotent findings]), so a reason can be read and rerun.
        ++st.inconclusive;
        StatusOr<bool> rec = wd.RecordInconclusive(verdict, cfg, report, e.index, elapsed());
        if (!rec.ok()) return rec.status();
        if (rec.value())
          log << "INFO: new inconclusive reason sig=" << sig << " index=" << e.index
              << " dir=" << wd.InconclusiveDir(sig) << std::endl;
      } else if (kind != "pass") {
        ++st.findings;
        const bool known = opts.baseline.count(sig) > 0;
        found = found || !known;
        StatusOr<bool> rec = wd.RecordFinding(verdict, cfg, report, e.index, elapsed());
        if (!rec.ok()) return rec.status();
        if (rec.value()) {
          ++sum.new_unique;
          log << "INFO: new finding sig=" << sig << (known ? " (known: in the baseline)" : "")
              << " index=" << e.index << " seed=" << cfg.seed << " dir=" << wd.FindingDir(sig)
              << "\nINFO:   " << verdict.value("message", "") << std::endl;
        }
      }
      if (opts.feedback && e.kind == PoolEvent::kResult &&
          (kind == "pass" || kind == "inconclusive"))
        st.feedback.Record(e.index, cfg, e.result.value("behaviour", nlohmann::json()));
      ++st.execs;
      ++per_host[e.host];
      st.Complete(e.index);
      if (kind != "pass" ||
          std::chrono::duration<double>(Clock::now() - last_stats).count() > kStatsEverySeconds) {
        const Status s = wd.SaveStats(StatsJson(opts, st, elapsed()));
        if (!s.ok()) return s;
        last_stats = Clock::now();
      }
    }
    if (std::chrono::duration<double>(Clock::now() - last_progress).count() >=
        opts.progress_every_s) {
      progress("INFO");
      last_progress = Clock::now();
    }
  }
  sum.interrupted = g_interrupted != 0;
  std::signal(SIGINT, old_int);
  std::signal(SIGTERM, old_term);
  progress("INFO");
  if (per_host.size() > 1 || (per_host.size() == 1 && per_host.begin()->first != 0)) {
    log << "INFO: distributed: executions by rank:";
    for (const auto& [host, n] : per_host) log << " rank" << host << "=" << n;
    log << std::endl;
  }
  const Status s = wd.SaveStats(StatsJson(opts, st, elapsed()));
  if (!s.ok()) return s;
  if (!sum.interrupted && opts.minimize_budget_s > 0)
    MinimizeStoredFindings(wd,
                           {opts.minimize_budget_s, kDefaultCollectiveTimeout.count(), opts.oracles,
                            opts.target, opts.baseline},
                           log);
  sum.execs = st.execs;
  sum.findings = st.findings;
  sum.inconclusive = st.inconclusive;
  sum.rejected = st.rejected;
  sum.pairs_covered = st.coverage.covered();
  sum.pairs_possible = st.coverage.possible();
  sum.elapsed_s = elapsed();
  sum.signatures = Signatures(opts.workdir);
  sum.inconclusive_reasons = RecordedSignatures(opts.workdir, "inconclusive");
  sum.unique = static_cast<int64_t>(sum.signatures.size());
  for (const auto& sig : sum.signatures) sum.known += opts.baseline.count(sig);
  return sum;
}

}  // namespace paradiff
