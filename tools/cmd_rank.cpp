// `paradiff rank CONFIG --obs-dir DIR` (hidden): one rank of an mpi job, launched under mpirun by
// the executor (kernels/engine_mpi.h). Initializes MPI, trains its rank of the config on the mpi
// backend through a recording decorator (exactly like one thread of the local backend, kernels/
// engine.cpp: a recorded split of the world), writes DIR/rank<r>.obs and finalizes MPI. One phase
// of a checkpointed run: --first-step / --last-step bound the steps, --load-checkpoint loads this
// rank's state first, --save-checkpoint writes its shard after the last step and
// DIR/rank<r>.ckpt.json
// ({"entry": its manifest entry, "updates", "scaler"}) from which the executor writes the manifest.
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
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <thread>

#include "comm/mpi_communicator.h"
#include "core/atomic_file.h"
#include "core/exit_codes.h"
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

// Trains this rank's phase (kernels/rank_phase.h) into `obs`; returns what a save leaves for the
// manifest (null without --save-checkpoint).
nlohmann::json TrainRank(const Config& cfg, const Args& args, MpiRuntime& mpi, const RankLog& log,
                         RankObservations& obs) {
  MpiOptions mo;
  mo.reduction = args.native_reduction ? MpiReduction::kNative : MpiReduction::kRankOrder;
  mo.progress = [&log](const std::string& line) { log.Line(line); };
  std::unique_ptr<Communicator> world = mpi.World(mo);
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

}  // namespace

int CmdRank(const Args& args) {
  if (args.positional.size() != 1 || args.obs_dir.empty()) {
    std::cerr
        << "ERROR: rank takes exactly one CONFIG and --obs-dir DIR (see paradiff rank --help)\n";
    return kExitBadInput;
  }
  MpiRuntime mpi(nullptr, nullptr);
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
    if (cfg.parallel.world != mpi.world_size()) {
      log.Line("ERROR kind=config: parallel.world=" + std::to_string(cfg.parallel.world) +
               " but mpirun started " + std::to_string(mpi.world_size()) + " ranks");
      mpi.Abort(kExitBadInput);
    }
    at::set_num_threads(1);  // one process per rank: one intra-op thread each (TOOLCHAIN.md)
    RankObservations obs;
    const nlohmann::json saved = TrainRank(cfg, args, mpi, log, obs);
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
  return kExitPass;  // ~MpiRuntime: MPI_Finalize
}

}  // namespace paradiff
