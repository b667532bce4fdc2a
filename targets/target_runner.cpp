#include "targets/target_runner.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "core/child_process.h"
#include "oracles/assemble.h"
#include "sut/phases.h"
#include "targets/crash_state.h"
#include "targets/run_dir.h"
#include "targets/warm_workers.h"

namespace paradiff {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kPollInterval{10};
constexpr std::chrono::milliseconds kKillWait{5000};
constexpr size_t kLogTail = 15;  // lines of the target's log quoted in a failure

std::string MakeRunDir(const TargetRunOptions& o) {
  std::error_code ec;
  // Absolute: a warm worker (protocol 2) runs it from its own working directory.
  const fs::path parent =
      fs::absolute(o.work_dir.empty() ? fs::temp_directory_path(ec) : fs::path(o.work_dir));
  fs::create_directories(parent, ec);
  std::string tmpl = (parent / "paradiff-target-XXXXXX").string();
  if (::mkdtemp(&tmpl[0]) == nullptr)
    throw std::runtime_error("target runner: cannot create a run dir " + tmpl + ": " +
                             std::strerror(errno));
  return tmpl;
}

std::string LogTail(const std::string& path) {
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  const size_t from = lines.size() > kLogTail ? lines.size() - kLogTail : 0;
  std::string out = "\n--- " + path + " (last " + std::to_string(lines.size() - from) + " of " +
                    std::to_string(lines.size()) + " lines) ---";
  for (size_t i = from; i < lines.size(); ++i) out += "\n    " + lines[i];
  return out;
}

EngineOutcome Failure(const TargetSpec& t, FailureKind kind, const std::string& detail, int rank,
                      const std::string& msg) {
  EngineOutcome out;
  out.ok = false;
  out.target = t.name;
  out.failure_kind = kind;
  out.failure_detail = detail;
  out.failure_rank = rank;
  out.failure = "target " + t.name + ": " + msg;
  return out;
}

// Protocol 1: one launch of the target's argv on the written run dir `dir`, under the watchdog.
LaunchEnd Launch(const TargetSpec& t, const Config& cfg, const std::string& dir,
                 const std::string& log) {
  const pid_t pid = SpawnSession(TargetArgv(t, cfg, dir), log, dir);
  const auto start = Clock::now();
  const auto limit = std::chrono::seconds(t.timeout_s);
  LaunchEnd end;
  int status = 0;
  for (;;) {
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) {
      KillSession(pid, kKillWait);
      throw std::logic_error(std::string("target runner: waitpid: ") + std::strerror(errno));
    }
    if (Clock::now() - start > limit) {
      end.kind = LaunchEnd::kTimedOut;
      KillSession(pid, kKillWait);
      ::waitpid(pid, &status, 0);
      return end;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
  // Whatever the launcher left behind (ranks that outlive it) goes with its session.
  KillSession(pid, kKillWait);
  return FromWaitStatus(status);
}

// One run of the target on `dir` (created) for `phase` of `cfg`; a failure's message starts with
// `context` after the target's name, and says whether `keep` keeps the run dir.
EngineOutcome RunOnce(const TargetSpec& t, WarmWorkers* warm, const Config& cfg,
                      const RunPhase& phase, const std::string& dir, KeepRunDirs keep,
                      const std::string& context) {
  auto fail = [&](FailureKind kind, const std::string& detail, int rank, const std::string& msg) {
    return Failure(t, kind, detail, rank, context + msg);
  };
  const std::vector<std::string> kinds = ExpectedKinds(cfg, t.reporting);
  const Status wrote = WriteRunDir(cfg, kinds, dir, phase);
  if (!wrote.ok()) throw std::runtime_error("target runner: " + wrote.ToString());
  const std::string log = dir + "/target.log";
  const std::string where =
      keep == KeepRunDirs::kNone
          ? " (run dir removed; `paradiff run` on the config keeps a failed run's)"
          : " (run dir " + dir + " kept)";
  LaunchEnd end;
  try {
    end = t.protocol == 2 ? warm->Run(dir) : Launch(t, cfg, dir, log);
  } catch (const std::runtime_error& e) {
    return fail(FailureKind::kCrash, "exec", -1, e.what() + where);
  }
  const std::string worker = end.worker_failure.empty() ? "" : " (" + end.worker_failure + ")";
  // The log is read only when the run failed.
  auto kept = [&] { return worker + where + LogTail(log); };
  if (end.kind == LaunchEnd::kTimedOut)
    return fail(FailureKind::kHang, "timeout", -1,
                "hang: still running after timeout_s=" + std::to_string(t.timeout_s) +
                    " s; the watchdog killed its session" + kept());
  // A crash's detail carries its state when the log names what it died of (see Note [Crash state]).
  auto crash = [&](const std::string& how) {
    std::ifstream f(log);
    std::stringstream text;
    text << f.rdbuf();
    const std::string state = CrashState(text.str());
    return state.empty() ? how : how + "." + state;
  };
  if (end.kind == LaunchEnd::kSignaled)
    return fail(FailureKind::kCrash, crash("signal"), -1,
                "crashed: killed by signal " + std::to_string(end.code) + kept());
  if (end.code != 0)
    return fail(FailureKind::kCrash, crash("exit"), -1,
                "crashed: exited with code " + std::to_string(end.code) + kept());
  EngineOutcome out;
  out.target = t.name;
  out.reporting = t.reporting;
  ObservationError err;
  if (!ReadObservations(cfg, dir, kinds, &out.obs, &err, phase))
    return fail(FailureKind::kCrash, err.detail, err.rank,
                "exited 0 but its observations are unusable: " + err.message + kept());
  return out;
}

}  // namespace

EngineOutcome RunTarget(const TargetSpec& t, const Config& cfg, const TargetRunOptions& o,
                        WarmWorkers* warm) {
  const Status sup = TargetSupports(t, cfg);
  if (!sup.ok()) return Failure(t, FailureKind::kUnsupported, "unsupported", -1, sup.ToString());
  if (t.protocol == 2 && warm == nullptr)
    throw std::logic_error("RunTarget: protocol-2 target " + t.name + " without warm workers");
  const std::string dir = MakeRunDir(o);
  EngineOutcome out;
  const int64_t save_at = cfg.checkpoint.save_at;
  if (save_at <= 0) {
    out = RunOnce(t, warm, cfg, {0, cfg.steps, "", ""}, dir, o.keep, "");
  } else {  // see Note [Checkpointed target runs]
    const std::string ckpt = fs::absolute(dir + "/checkpoint").string();
    out = RunOnce(t, warm, cfg, {0, save_at, ckpt, ""}, dir + "/save", o.keep, "");
    if (out.ok) {
      const EngineOutcome reload =
          RunOnce(t, warm, ReloadPhaseConfig(cfg), {save_at, cfg.steps, "", ckpt}, dir + "/reload",
                  o.keep, "after the reload at step " + std::to_string(save_at) + ": ");
      if (reload.ok)
        out.obs = JoinPhases(out.obs, reload.obs, save_at, cfg.steps);
      else
        out = reload;
    }
  }
  const bool keep = o.keep == KeepRunDirs::kAll || (o.keep == KeepRunDirs::kFailed && !out.ok);
  std::error_code ec;
  if (!keep) fs::remove_all(dir, ec);
  return out;
}

}  // namespace paradiff
