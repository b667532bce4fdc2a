// RunEngineMpi (engine_mpi.h): prepare the work dir, launch mpirun in its own session, watch the
// rank logs (see Note [MPI watchdog]), then read what the job left behind into an EngineOutcome.
#include "kernels/engine_mpi.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "core/atomic_file.h"
#include "core/child_process.h"
#include "core/config_json.h"
#include "core/json_text.h"
#include "core/self_exe.h"
#include "kernels/mpi_job.h"
#include "kernels/observations_io.h"
#include "kernels/rank_phase.h"

extern char** environ;

namespace paradiff {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kPollInterval{20};
constexpr std::chrono::milliseconds kKillWait{5000};  // for killed processes to be gone
constexpr size_t kRankLogTail = 8;                    // lines of each rank log quoted in a failure
constexpr size_t kMpirunLogTail = 12;

[[noreturn]] void EnvError(const std::string& what) {
  throw std::runtime_error("mpi executor: " + what);
}

std::string RankFile(const std::string& dir, int r, const char* ext) {
  return dir + "/rank" + std::to_string(r) + ext;
}

// The given or a fresh temporary work dir, without the files of an earlier run.
std::string PrepareWorkDir(const MpiRunOptions& o, bool* temporary) {
  std::string dir = o.work_dir;
  *temporary = dir.empty();
  std::error_code ec;
  if (dir.empty()) {
    std::string tmpl = (fs::temp_directory_path(ec) / "paradiff-mpi-XXXXXX").string();
    if (ec || ::mkdtemp(&tmpl[0]) == nullptr)
      EnvError("cannot create a temporary work dir " + tmpl + ": " + std::strerror(errno));
    return tmpl;
  }
  fs::create_directories(dir, ec);
  if (ec) EnvError("cannot create work dir " + dir + ": " + ec.message());
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    const bool rank_file =
        name.rfind("rank", 0) == 0 && (ext == ".log" || ext == ".obs" || ext == ".json");
    if (rank_file || name == "mpirun.log") fs::remove(entry.path(), ec);
  }
  return dir;
}

// Whether an environment entry tells a process it is a rank of an enclosing MPI job (mpirun sets
// these for its ranks). A job started from inside one (a config on the mpi backend checked by a
// distributed campaign's worker, or `paradiff run --backend mpi` under mpirun) must not inherit
// them, or its mpirun joins the enclosing job and fails. User settings (OMPI_MCA_pml,
// OMPI_ALLOW_RUN_AS_ROOT, ...) are kept.
bool EnclosingJobVariable(const std::string& entry) {
  const auto starts = [&](const char* p) { return entry.rfind(p, 0) == 0; };
  if (starts("PMIX_")) return true;
  if (starts("OMPI_MCA_"))
    return starts("OMPI_MCA_ess") || starts("OMPI_MCA_orte_") || starts("OMPI_MCA_pmix") ||
           starts("OMPI_MCA_initial_wdir=") || starts("OMPI_MCA_shmem_RUNTIME_QUERY_hint=");
  return starts("OMPI_") && !starts("OMPI_ALLOW_RUN_AS_ROOT");
}

// SpawnSession (core/child_process.h) of mpirun in an environment without an enclosing job's
// variables, with the executor's error prefix and hint.
pid_t Spawn(const std::vector<std::string>& args, const std::string& log_path) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e)
    if (!EnclosingJobVariable(*e)) env.emplace_back(*e);
  try {
    return SpawnSession(args, log_path, "", &env);
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EnvError(what + (what.rfind("cannot execute", 0) == 0
                         ? " (is Open MPI installed and mpirun on PATH?)"
                         : ""));
  }
}

void KillSession(pid_t sid) { paradiff::KillSession(sid, kKillWait); }

struct JobEnd {
  int status = 0;        // waitpid status of mpirun
  std::string watchdog;  // why the watchdog killed the job; "" if it ended by itself
};

// Kills the job's session unless it was reaped (an exception must not leave ranks behind).
class JobGuard {
 public:
  explicit JobGuard(pid_t pid) : pid_(pid) {}
  ~JobGuard() {
    if (pid_ <= 0) return;
    KillSession(pid_);
    ::waitpid(pid_, nullptr, 0);
  }
  void Reaped() { pid_ = -1; }

 private:
  pid_t pid_;
};

struct LogState {
  int64_t bytes = 0;  // summed over the rank logs that exist
  int started = 0;    // ranks whose log exists
};

LogState Logs(const std::string& dir, int world) {
  LogState s;
  for (int r = 0; r < world; ++r) {
    struct stat st;
    if (::stat(RankFile(dir, r, ".log").c_str(), &st) != 0) continue;
    s.bytes += st.st_size;
    ++s.started;
  }
  return s;
}

// See Note [MPI watchdog] in engine_mpi.h. With a persistent job (mpi_job.h), the task ends when
// every rank of its world has answered, and the job stays; a job that ends or is killed is marked
// ended. Otherwise the task is the whole job.
JobEnd Watch(pid_t pid, const std::string& dir, int world, const MpiRunOptions& o,
             MpiJob* job = nullptr) {
  JobGuard guard(job != nullptr ? -1 : pid);  // a job's processes are the pool's to end
  const auto start = Clock::now();
  auto last_progress = start;
  int64_t seen = -1;
  for (;;) {
    JobEnd end;
    if (job != nullptr && job->Answers(kPollInterval) == world) return end;
    const pid_t r = ::waitpid(pid, &end.status, WNOHANG);
    if (r == pid) {
      guard.Reaped();
      if (job != nullptr) job->Ended();
      return end;
    }
    if (r < 0 && errno != EINTR) EnvError(std::string("waitpid: ") + std::strerror(errno));
    const auto now = Clock::now();
    const LogState logs = Logs(dir, world);
    if (logs.bytes != seen) {
      seen = logs.bytes;
      last_progress = now;
    }
    const bool started = logs.started == world;
    if (!started && now - start > o.start_timeout) {
      end.watchdog = std::to_string(world - logs.started) + " of " + std::to_string(world) +
                     " ranks did not start within " + std::to_string(o.start_timeout.count()) +
                     " ms";
    } else if (started && now - last_progress > o.timeout) {
      end.watchdog = "no rank made progress for " + std::to_string(o.timeout.count()) + " ms";
    } else if (o.total_timeout.count() > 0 && now - start > o.total_timeout) {
      end.watchdog = "the job ran longer than " + std::to_string(o.total_timeout.count()) + " ms";
    }
    if (!end.watchdog.empty()) {
      KillSession(pid);
      ::waitpid(pid, &end.status, 0);
      guard.Reaped();
      if (job != nullptr) job->Ended();
      return end;
    }
    if (job == nullptr) std::this_thread::sleep_for(kPollInterval);
  }
}

std::vector<std::string> ReadLines(const std::string& path, bool* exists) {
  std::ifstream f(path);
  *exists = static_cast<bool>(f);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  return lines;
}

// What one rank's log says about it.
struct RankState {
  std::vector<std::string> lines;
  bool exists = false, waiting = false, finished = false;
  int64_t done = 0;
  std::string error_kind, error;  // from "ERROR kind=K: message" (continuation lines indented)
  std::string summary;
};

RankState Summarize(const std::string& path) {
  RankState s;
  s.lines = ReadLines(path, &s.exists);
  std::string last;
  for (size_t i = 0; i < s.lines.size(); ++i) {
    const std::string& line = s.lines[i];
    if (line.rfind("  ", 0) == 0) {
      if (!s.error_kind.empty()) s.error += "\n" + line.substr(2);
      continue;
    }
    last = line;
    if (line.rfind("done ", 0) == 0) ++s.done;
    if (line == "finish") s.finished = true;
    if (line.rfind("ERROR kind=", 0) == 0) {
      const size_t colon = line.find(": ");
      s.error_kind = line.substr(11, colon == std::string::npos ? std::string::npos : colon - 11);
      s.error = colon == std::string::npos ? "" : line.substr(colon + 2);
    }
  }
  s.waiting = last.rfind("enter ", 0) == 0;
  if (!s.exists)
    s.summary = "no log (the rank never started)";
  else if (!s.error_kind.empty())
    s.summary = "failed (" + s.error_kind + "): " + s.error.substr(0, s.error.find('\n'));
  else if (s.finished)
    s.summary = "finished";
  else if (s.waiting)
    s.summary = "waiting in " + last.substr(6);
  else if (last.rfind("done ", 0) == 0)
    s.summary = "running (last completed: " + last.substr(5) + ")";
  else
    s.summary = "running (last: " + (last.empty() ? std::string("nothing logged") : last) + ")";
  return s;
}

// How mpirun says a rank ended ("" / -1 when it does not say).
std::string DeathFromMpirun(const std::string& text, int* rank) {
  std::smatch m;
  const std::regex by_signal(
      R"(process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)( \([^)]*\))?)");
  const std::regex by_exit(R"(Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code:\s+(\d+))");
  const std::regex by_abort(
      R"(MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (\d+))");
  if (std::regex_search(text, m, by_signal)) {
    *rank = std::stoi(m[1]);
    return "killed by signal " + m[2].str() + m[3].str();
  }
  if (std::regex_search(text, m, by_abort)) {
    *rank = std::stoi(m[1]);
    return "called MPI_Abort with error code " + m[2].str();
  }
  if (std::regex_search(text, m, by_exit)) {
    *rank = std::stoi(m[1]);
    return "exited with code " + m[2].str();
  }
  *rank = -1;
  return "";
}

std::string Tail(const std::vector<std::string>& lines, size_t n, const std::string& title) {
  std::ostringstream os;
  const size_t from = lines.size() > n ? lines.size() - n : 0;
  os << "\n--- " << title << " (last " << lines.size() - from << " of " << lines.size()
     << " lines) ---";
  for (size_t i = from; i < lines.size(); ++i) os << "\n    " << lines[i];
  return os.str();
}

std::string DescribeStatus(int status) {
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

EngineOutcome Interpret(const JobEnd& end, const std::string& dir, int world) {
  EngineOutcome out;
  std::vector<RankState> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back(Summarize(RankFile(dir, r, ".log")));
  const bool clean = end.watchdog.empty() && WIFEXITED(end.status) && WEXITSTATUS(end.status) == 0;
  if (clean) {
    out.obs.ranks.resize(world);
    int r = 0;
    for (; r < world; ++r) {
      StatusOr<RankObservations> obs = ReadObservationsFile(RankFile(dir, r, ".obs"));
      if (!obs.ok()) {
        out.failure_kind = FailureKind::kCrash;
        out.failure_rank = r;
        out.failure =
            "rank " + std::to_string(r) + ": the job ended cleanly but " + obs.status().ToString();
        break;
      }
      out.obs.ranks[r] = std::move(obs).value();
    }
    if (r == world) return out;
  } else if (!end.watchdog.empty()) {
    int suspect = -1;
    for (int r = 0; r < world && suspect < 0; ++r)
      if (!ranks[r].waiting && !ranks[r].finished) suspect = r;
    if (suspect < 0) {  // everybody waits: blame the rank that completed the fewest calls
      suspect = 0;
      for (int r = 1; r < world; ++r)
        if (ranks[r].done < ranks[suspect].done) suspect = r;
    }
    out.failure_kind = FailureKind::kHang;
    out.failure_rank = suspect;
    out.failure = "collective hang (mpi): " + end.watchdog +
                  "; the watchdog killed the job; rank " + std::to_string(suspect) + " is " +
                  ranks[suspect].summary;
  } else {
    auto first = [&](auto pred) {
      for (int r = 0; r < world; ++r)
        if (pred(ranks[r])) return r;
      return -1;
    };
    const int mismatch = first([](const RankState& s) { return s.error_kind == "mismatch"; });
    const int error = first([](const RankState& s) { return !s.error_kind.empty(); });
    bool exists = false;
    std::string mpirun_text;
    for (const auto& l : ReadLines(dir + "/mpirun.log", &exists)) mpirun_text += l + "\n";
    int dead = -1;
    const std::string death = DeathFromMpirun(mpirun_text, &dead);
    out.failure_kind = mismatch >= 0 ? FailureKind::kCollective : FailureKind::kCrash;
    out.failure_rank = mismatch >= 0 ? mismatch : error >= 0 ? error : dead;
    if (out.failure_rank >= 0 && !ranks[out.failure_rank].error_kind.empty()) {
      out.failure =
          "rank " + std::to_string(out.failure_rank) + ": " + ranks[out.failure_rank].error;
    } else if (dead >= 0) {
      out.failure = "rank " + std::to_string(dead) + ": " + death + " (reported by mpirun)";
    } else {
      out.failure = "mpirun " + DescribeStatus(end.status) + " and no rank logged why";
    }
  }
  out.ok = false;
  std::ostringstream os;
  os << out.failure << "\nper-rank states (world of " << world << "):";
  for (int r = 0; r < world; ++r) os << "\n  rank " << r << ": " << ranks[r].summary;
  os << "\nwork dir kept: " << dir << " (config.json, rank<r>.log, rank<r>.obs, mpirun.log)";
  for (int r = 0; r < world; ++r)
    os << Tail(ranks[r].lines, kRankLogTail, "rank " + std::to_string(r) + " log");
  if (end.watchdog.empty()) {
    bool exists = false;
    os << Tail(ReadLines(dir + "/mpirun.log", &exists), kMpirunLogTail, "mpirun.log");
  }
  out.failure = os.str();
  return out;
}

// After a clean job that saved: the manifest from what the ranks left (rank<r>.ckpt.json,
// kernels/rank_phase.h), as the local backend writes it. A missing or unreadable file turns the
// outcome into a crash of that rank.
void WriteManifest(const Config& cfg, const MpiRunOptions& o, const std::string& dir,
                   EngineOutcome& out) {
  const int world = static_cast<int>(cfg.parallel.world);
  std::vector<nlohmann::json> saved;
  for (int r = 0; r < world; ++r) {
    const std::string path = RankFile(dir, r, ".ckpt.json");
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    nlohmann::json j = ParseJsonText(text.str());
    if (j.is_discarded() || !j.is_object() || !j.contains("entry") || !j.contains("updates") ||
        !j.contains("scaler")) {
      out.ok = false;
      out.failure_kind = FailureKind::kCrash;
      out.failure_rank = r;
      out.failure = "rank " + std::to_string(r) + ": the job ended cleanly but " + path +
                    " (its checkpoint entry) is missing or incomplete; work dir kept: " + dir;
      return;
    }
    saved.push_back(std::move(j));
  }
  WritePhaseManifest(o.save_checkpoint, cfg, o.last_step < 0 ? cfg.steps : o.last_step, saved);
}

// mpirun's command line in front of `np` ranks of `program`.
std::vector<std::string> MpirunCommand(const MpiRunOptions& o, int np,
                                       const std::vector<std::string>& program) {
  std::vector<std::string> args = {o.mpirun};
  if (::geteuid() == 0) args.push_back("--allow-run-as-root");
  for (const char* a : {"--oversubscribe", "--bind-to", "none"}) args.push_back(a);
  args.insert(args.end(), o.mpirun_args.begin(), o.mpirun_args.end());
  args.insert(args.end(), {"-np", std::to_string(np)});
  args.insert(args.end(), program.begin(), program.end());
  return args;
}

// The `paradiff rank` options of this run (after `rank`).
std::vector<std::string> RankOptions(const MpiRunOptions& o, const std::string& config_path,
                                     const std::string& dir) {
  std::vector<std::string> args = {config_path, "--obs-dir", dir};
  if (o.native_reduction) args.push_back("--native-reduction");
  if (o.first_step > 0) args.insert(args.end(), {"--first-step", std::to_string(o.first_step)});
  if (o.last_step >= 0) args.insert(args.end(), {"--last-step", std::to_string(o.last_step)});
  if (!o.load_checkpoint.empty())
    args.insert(args.end(), {"--load-checkpoint", fs::absolute(o.load_checkpoint).string()});
  if (!o.save_checkpoint.empty())
    args.insert(args.end(), {"--save-checkpoint", fs::absolute(o.save_checkpoint).string()});
  if (o.debug_hang_rank >= 0)
    args.insert(args.end(), {"--debug-hang-rank", std::to_string(o.debug_hang_rank)});
  if (o.debug_crash_rank >= 0)
    args.insert(args.end(), {"--debug-crash-rank", std::to_string(o.debug_crash_rank)});
  return args;
}

// What the job wrote to its log since the task began, as the task's DIR/mpirun.log (where a fresh
// job's mpirun writes it), so that Interpret reads and the kept work dir holds this task's part.
void CopyJobLog(const MpiJob& job, const std::string& dir) {
  std::ifstream in(job.log_path(), std::ios::binary);
  in.seekg(job.log_offset());
  std::ofstream out(dir + "/mpirun.log", std::ios::binary | std::ios::trunc);
  out << in.rdbuf();
}

// The run as a task of a persistent job from the pool (see Note [Persistent mpi jobs]).
JobEnd RunOnJob(const std::string& exe, int world, const std::vector<std::string>& rank_options,
                const std::string& dir, const MpiRunOptions& o) {
  const MpiSpawn spawn = [&o](int np, const std::vector<std::string>& program,
                              const std::string& log) {
    return Spawn(MpirunCommand(o, np, program), log);
  };
  std::unique_ptr<MpiJob> job = AcquireMpiJob({exe, o.mpirun, o.mpirun_args}, world, spawn);
  job->Send(rank_options, world);
  const JobEnd end = Watch(job->pid(), dir, world, o, job.get());
  if (!job->alive()) CopyJobLog(*job, dir);
  ReleaseMpiJob(std::move(job));
  return end;
}

}  // namespace

EngineOutcome RunEngineMpi(const Config& cfg, const MpiRunOptions& o) {
  const int world = static_cast<int>(cfg.parallel.world);
  bool temporary = false;
  const std::string dir = PrepareWorkDir(o, &temporary);
  const std::string config_path = dir + "/config.json";
  const Status written = WriteFileAtomic(config_path, WriteConfig(cfg));
  if (!written.ok()) {
    std::error_code ec;
    if (temporary) fs::remove_all(dir, ec);
    EnvError(written.ToString());
  }
  const std::string exe = o.exe.empty() ? ParadiffExecutable() : fs::absolute(o.exe).string();
  if (exe.empty()) {
    std::error_code ec;
    if (temporary) fs::remove_all(dir, ec);
    EnvError(
        "the mpi backend starts `paradiff rank` under mpirun, and this program does not know where "
        "paradiff is: set MpiRunOptions.exe, SetParadiffExecutable() or PARADIFF_EXE");
  }
  std::vector<std::string> rank_options = RankOptions(o, config_path, dir);
  std::error_code ec;
  try {
    JobEnd end;
    if (o.reuse_job) {
      end = RunOnJob(exe, world, rank_options, dir, o);
    } else {
      rank_options.insert(rank_options.begin(), {exe, "rank"});
      end = Watch(Spawn(MpirunCommand(o, world, rank_options), dir + "/mpirun.log"), dir, world, o);
    }
    EngineOutcome out = Interpret(end, dir, world);
    if (out.ok && !o.save_checkpoint.empty()) WriteManifest(cfg, o, dir, out);
    if (out.ok && temporary) fs::remove_all(dir, ec);
    return out;
  } catch (...) {  // an environment failure: nothing in a temporary dir is worth keeping
    if (temporary) fs::remove_all(dir, ec);
    throw;
  }
}

}  // namespace paradiff
