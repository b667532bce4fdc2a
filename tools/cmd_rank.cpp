// `paradiff rank CONFIG --obs-dir DIR` (hidden): one rank of an mpi job, launched under mpirun by
// the executor (kernels/engine_mpi.h). Initializes MPI, trains its rank of the config on the mpi
// backend through a recording decorator (exactly like one thread of the local backend, kernels/
// engine.cpp: a recorded split of the world), writes DIR/rank<r>.obs and finalizes MPI. One phase
// of a checkpointed run: --first-step / --last-step bound the steps, --load-checkpoint loads this
// rank's state first, --save-checkpoint writes its shard after the last step and
// DIR/rank<r>.ckpt.json
// ({"entry": its manifest entry, "updates", "scaler"}) from which the executor writes the manifest.
//
// `paradiff rank --serve JOBDIR`: a rank of a persistent job (kernels/mpi_job.h). It initializes
// MPI once, then reads tasks from JOBDIR/in<r>, one line each: a JSON array of the options above
// (CONFIG, --obs-dir DIR, ...). A task of a config of world W reaches ranks [0, W) only; they train
// it on a communicator of those ranks (MpiRuntime::World(options, W)) exactly as above, then each
// writes "<r>\n" to JOBDIR/out. At the end of in<r> (the executor closed it, or died) the rank
// finalizes MPI and exits. It dies with mpirun (PR_SET_PDEATHSIG).
//
// It appends its progress to DIR/rank<r>.log, one whole line per write(2), so a rank killed at any
// moment leaves whole lines: "start ...", "enter <fingerprint>" / "done <fingerprint>" around every
// call, "debug: ...", then "finish" or "ERROR kind=mismatch|config|exception: message" (further
// lines of a message indented by two spaces). On an error it logs and calls MPI_Abort, ending
// every rank of the job (the others may wait in a collective forever otherwise).
// Testing options: --debug-hang-rank R sleeps forever, --debug-crash-rank R aborts (SIGABRT), in
// rank R, before its first logged collective.
#include <ATen/Parallel.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "comm/mpi_communicator.h"
#include "core/atomic_file.h"
#include "core/child_process.h"
#include "core/exit_codes.h"
#include "core/json_text.h"
#include "kernels/checkpoint.h"
#include "kernels/faults.h"
#include "kernels/observations_io.h"
#include "kernels/rank_phase.h"
#include "tools/cli.h"
#include "tools/load_config.h"

namespace paradiff {

namespace {

class RankLog {
 public:
  explicit RankLog(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {}
  ~RankLog() {
    if (fd_ >= 0) ::close(fd_);
  }
  RankLog(const RankLog&) = delete;
  RankLog& operator=(const RankLog&) = delete;
  bool ok() const { return fd_ >= 0; }
  void Line(const std::string& text) const {
    std::string line;
    for (char c : text) line += c == '\n' ? std::string("\n  ") : std::string(1, c);
    line += '\n';
    for (size_t done = 0; fd_ >= 0 && done < line.size();) {
      const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
      if (n < 0) return;  // nothing better to do: the log is diagnostics only
      done += static_cast<size_t>(n);
    }
  }

 private:
  int fd_;
};

// Trains this rank's phase (kernels/rank_phase.h) into `obs` on a world of `size` ranks (-1: the
// whole job); returns what a save leaves for the manifest (null without --save-checkpoint).
nlohmann::json TrainRank(const Config& cfg, const Args& args, MpiRuntime& mpi, int size,
                         const RankLog& log, RankObservations& obs) {
  MpiOptions mo;
  mo.reduction = args.native_reduction ? MpiReduction::kNative : MpiReduction::kRankOrder;
  mo.progress = [&log](const std::string& line) { log.Line(line); };
  std::unique_ptr<Communicator> world = size < 0 ? mpi.World(mo) : mpi.World(mo, size);
  if (args.debug_hang_rank == world->rank()) {
    log.Line("debug: sleeping forever before the first collective (--debug-hang-rank)");
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
  }
  if (args.debug_crash_rank == world->rank()) {
    log.Line("debug: aborting before the first collective (--debug-crash-rank)");
    std::abort();
  }
  std::optional<CheckpointReader> load;
  if (!args.load_checkpoint.empty()) load.emplace(args.load_checkpoint);
  const RankPhase phase{args.first_step, args.last_step < 0 ? cfg.steps : args.last_step,
                        load ? &*load : nullptr, args.save_checkpoint};
  return TrainRankPhase(cfg, MakeFaultSet(cfg.faults), *world, phase, obs);
}

// One config's run on this rank: the job's whole world (`serving` false) or, in a persistent job,
// the first parallel.world ranks. Returns only on success; an error is logged and aborts the job.
void RunTask(const Args& args, MpiRuntime& mpi, bool serving) {
  const int r = mpi.world_rank();
  const std::string base = args.obs_dir + "/rank" + std::to_string(r);
  const RankLog log(base + ".log");
  if (!log.ok()) {
    std::cerr << "ERROR: rank " << r << ": cannot open " << base << ".log\n";
    mpi.Abort(kExitInternal);
  }
  log.Line("start world_rank=" + std::to_string(r) + " world_size=" +
           std::to_string(mpi.world_size()) + " pid=" + std::to_string(::getpid()));
  try {
    StatusOr<Config> loaded = LoadCheckedConfig(args.positional[0], {});
    if (!loaded.ok()) {
      log.Line("ERROR kind=config: " + args.positional[0] + ": " + loaded.status().ToString());
      mpi.Abort(kExitBadInput);
    }
    const Config& cfg = loaded.value();
    const bool fits = serving ? cfg.parallel.world <= mpi.world_size() && r < cfg.parallel.world
                              : cfg.parallel.world == mpi.world_size();
    if (!fits) {
      log.Line("ERROR kind=config: parallel.world=" + std::to_string(cfg.parallel.world) +
               " but mpirun started " + std::to_string(mpi.world_size()) + " ranks" +
               (serving ? " and this is rank " + std::to_string(r) : std::string()));
      mpi.Abort(kExitBadInput);
    }
    RankObservations obs;
    const nlohmann::json saved =
        TrainRank(cfg, args, mpi, serving ? static_cast<int>(cfg.parallel.world) : -1, log, obs);
    if (!saved.is_null()) {
      const Status kept = WriteFileAtomic(base + ".ckpt.json", saved.dump());
      if (!kept.ok()) throw std::runtime_error(kept.ToString());
    }
    const Status written = WriteObservationsFile(base + ".obs", obs);
    if (!written.ok()) throw std::runtime_error(written.ToString());
    log.Line("finish");
  } catch (const CollectiveMismatch& e) {
    log.Line(std::string("ERROR kind=mismatch: ") + e.what());
    mpi.Abort(kExitFinding);
  } catch (const std::exception& e) {
    log.Line(std::string("ERROR kind=exception: ") + e.what());
    mpi.Abort(kExitInternal);
  }
}

// A task line: a JSON array of `paradiff rank` options, parsed as the command line would be.
bool ParseTask(const std::string& line, Args& task, std::string& error) {
  const nlohmann::json j = ParseJsonText(line);
  if (!j.is_array()) {
    error = "a task is a JSON array of strings, got: " + line;
    return false;
  }
  std::vector<std::string> words = {"paradiff", "rank"};
  for (const auto& w : j) {
    if (!w.is_string()) {
      error = "a task is a JSON array of strings, got: " + line;
      return false;
    }
    words.push_back(w.get<std::string>());
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  if (!ParseArgs(static_cast<int>(argv.size()), argv.data(), task, error)) return false;
  if (task.positional.size() != 1 || task.obs_dir.empty() || !task.serve_dir.empty()) {
    error = "a task names exactly one CONFIG and --obs-dir DIR, and no --serve: " + line;
    return false;
  }
  return true;
}

int Serve(const std::string& dir) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with mpirun, which dies with its caller
  MpiRuntime mpi(nullptr, nullptr);
  const int r = mpi.world_rank();
  const std::string in_path = dir + "/in" + std::to_string(r);
  std::FILE* in = std::fopen(in_path.c_str(), "re");
  const int out = ::open((dir + "/out").c_str(), O_WRONLY | O_CLOEXEC);
  if (in == nullptr || out < 0) {
    std::cerr << "ERROR: rank " << r << ": cannot open " << in_path << " and " << dir
              << "/out (the job dir of a persistent job)\n";
    mpi.Abort(kExitInternal);
  }
  char* line = nullptr;
  size_t cap = 0;
  for (ssize_t n; (n = ::getline(&line, &cap, in)) > 0;) {
    Args task;
    std::string error;
    if (!ParseTask(std::string(line, static_cast<size_t>(n)), task, error)) {
      std::cerr << "ERROR: rank " << r << ": " << error << "\n";
      mpi.Abort(kExitInternal);
    }
    RunTask(task, mpi, /*serving=*/true);
    if (!WriteAll(out, std::to_string(r) + "\n")) break;  // the executor is gone
  }
  std::free(line);
  std::fclose(in);
  ::close(out);
  return kExitPass;  // ~MpiRuntime: MPI_Finalize, once every rank has seen the end of its tasks
}

}  // namespace

int CmdRank(const Args& args) {
  at::set_num_threads(1);  // one process per rank: one intra-op thread each (TOOLCHAIN.md)
  if (!args.serve_dir.empty()) {
    if (!args.positional.empty() || !args.obs_dir.empty()) {
      std::cerr << "ERROR: rank --serve DIR takes no CONFIG and no --obs-dir (tasks name them)\n";
      return kExitBadInput;
    }
    return Serve(args.serve_dir);
  }
  if (args.positional.size() != 1 || args.obs_dir.empty()) {
    std::cerr
        << "ERROR: rank takes exactly one CONFIG and --obs-dir DIR (see paradiff rank --help)\n";
    return kExitBadInput;
  }
  MpiRuntime mpi(nullptr, nullptr);
  RunTask(args, mpi, /*serving=*/false);
  return kExitPass;  // ~MpiRuntime: MPI_Finalize
}

}  // namespace paradiff
