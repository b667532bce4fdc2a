// Persistent mpi jobs: ranks that outlive a config on the mpi backend.
//
// Note [Persistent mpi jobs]: a fresh job per config costs one mpirun and `world` fresh
// `paradiff rank` processes, each loading LibTorch and initializing MPI (about 0.45 s of CPU each
// before its first step; docs/PERFORMANCE.md); a persistent job pays that once. It is one
//   mpirun ... -np SIZE EXE rank --serve JOBDIR
// whose ranks take tasks one after another (tools/cmd_rank.cpp): the executor (engine_mpi.h)
// writes a task, the `paradiff rank` options of one run as a JSON array, to JOBDIR/in<r> for each
// rank r below the config's world; those ranks form a communicator of the first `world` ranks,
// train exactly as a fresh job's ranks would (same per-rank routine, same logs and files in the
// task's own work dir) and answer "<r>" on JOBDIR/out. Ranks at or above the config's world get
// nothing and wait in read(2), using no CPU. A rank that fails aborts the whole job as before
// (MPI_Abort); a hang is killed by the watchdog: either way the job is gone, the task's outcome is
// what a fresh job's would have been, and the next config starts a new job.
//
// The pool keeps idle jobs per process, keyed by (rank program, mpirun, mpirun arguments); a config
// takes an idle job with at least `world` ranks, or starts one of max(world, the largest kept size
// so far) ranks and drops a smaller idle one. An idle rank holds about 100 MB of private memory
// (LibTorch and MPI initialized), so only jobs of at most kMaxKeptRanks ranks are kept: a larger
// config gets a job of exactly its world that ends with its task, as a fresh job would. Jobs are
// spawned by one pool thread that lives as long as the process, so PR_SET_PDEATHSIG
// (core/child_process.h) ties them to the process, not to the calling thread. At exit the pool
// closes every in<r> (the ranks finalize MPI and exit) and kills what is left after a grace period;
// a process killed outright takes its jobs along (mpirun dies with the pool thread, the ranks with
// mpirun).
//
// What crosses configs in a job: the processes, MPI's state and the communicators' context ids;
// nothing of the engine (a task builds everything from its config, as a thread of the local
// backend does). The mpi tests check that a job's observations equal a fresh job's bit for bit
// after other configs, and that a job recovers from a crash and a hang.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace paradiff {

// What a job runs: the rank program and the mpirun command in front of it.
struct MpiJobKey {
  std::string exe;     // the paradiff binary (absolute)
  std::string mpirun;  // mpirun, looked up in PATH unless it contains a '/'
  std::vector<std::string> mpirun_args;
  bool operator==(const MpiJobKey& o) const {
    return exe == o.exe && mpirun == o.mpirun && mpirun_args == o.mpirun_args;
  }
};

// Starts `program` as `np` ranks under mpirun in its own session, mpirun's output to `log`;
// returns mpirun's pid (the executor's mpirun command line, engine_mpi.cpp).
using MpiSpawn =
    std::function<pid_t(int np, const std::vector<std::string>& program, const std::string& log)>;

class MpiJob {
 public:
  // Makes JOBDIR (TMP/paradiff-mpijob-<pid>-XXXXXX) with its FIFOs and starts the job through
  // `spawn`; the first job of a process removes the job dirs of processes that are gone.
  // Throws std::runtime_error on environment failures (and whatever `spawn` throws).
  MpiJob(const MpiJobKey& key, int size, const MpiSpawn& spawn);
  // Closes the ranks' inputs, waits up to `kGrace` for mpirun to end, then kills its session;
  // removes JOBDIR. Does nothing to the processes in a forked child of the owner.
  ~MpiJob();
  MpiJob(const MpiJob&) = delete;
  MpiJob& operator=(const MpiJob&) = delete;

  const MpiJobKey& key() const { return key_; }
  int size() const { return size_; }
  pid_t pid() const { return pid_; }  // mpirun's, also its session id
  const std::string& log_path() const { return log_; }
  bool alive() const { return pid_ > 0; }

  // Sends one task (`paradiff rank` options) to ranks [0, world). Returns false when the job's
  // ranks cannot be reached (the job has ended).
  bool Send(const std::vector<std::string>& rank_args, int world);
  // Waits up to `wait` for answers and returns how many ranks answered the current task so far.
  int Answers(std::chrono::milliseconds wait);
  // The job has ended (the caller reaped mpirun, or killed its session and reaped it); the pool
  // drops it.
  void Ended() { pid_ = -1; }
  // Bytes in the job's log before the current task (its output starts there).
  int64_t log_offset() const { return log_offset_; }
  // Reaps mpirun if it has ended (an idle job's ranks can die too); returns alive().
  bool Reap();
  // Closes the ranks' inputs: they finalize MPI and exit (the destructor's first step).
  void CloseInputs();

  static constexpr std::chrono::milliseconds kGrace{3000};
  static constexpr int kMaxKeptRanks = 8;

 private:
  MpiJobKey key_;
  int size_;
  std::string dir_, log_;
  pid_t pid_ = -1;
  pid_t owner_;
  std::vector<int> in_;  // write ends of JOBDIR/in<r>
  int out_ = -1;         // read end of JOBDIR/out
  std::string pending_;  // a partial answer line
  int answers_ = 0;
  int64_t log_offset_ = 0;
};

// The process-wide pool (see Note [Persistent mpi jobs]). Acquire returns an idle live job of `key`
// with at least `world` ranks, or a new one; Release returns it (a job that has ended is dropped).
std::unique_ptr<MpiJob> AcquireMpiJob(const MpiJobKey& key, int world, const MpiSpawn& spawn);
void ReleaseMpiJob(std::unique_ptr<MpiJob> job);

}  // namespace paradiff
