// The mpirun executor: runs a config on the `mpi` backend as a child job
//   mpirun [--allow-run-as-root] --oversubscribe --bind-to none [mpirun_args] -np WORLD
//          EXE rank DIR/config.json --obs-dir DIR [--debug-...]
// in its own session and process group (setsid), or (reuse_job) as a task of a persistent job
// whose ranks outlive it (kernels/mpi_job.h, see Note [Persistent mpi jobs]), under a watchdog, and
// turns what the job left in DIR into an EngineOutcome. A hang or crash of the job is a value,
// never a crash of the caller.
//
// DIR (the work dir) holds config.json, one progress log per rank (rank<r>.log, written by
// `paradiff rank`, tools/cmd_rank.cpp: "start", "enter <fingerprint>" / "done <fingerprint>" per
// call, "ERROR kind=...: message", "finish"), one observations file per rank (rank<r>.obs,
// kernels/observations_io.h), after a save one checkpoint entry per rank (rank<r>.ckpt.json) and
// mpirun's own output (mpirun.log). Stale files of an earlier run
// are removed first.
//
// Note [MPI watchdog]: the job is a hang when no rank log grew for `timeout` once every rank has
// written its log (the local backend's "a rank waited longer than timeout in one collective", seen
// from outside: a waiting rank writes nothing, and neither does anybody else once the job is
// stuck), when some rank has not started `start_timeout` after the launch (mpirun's start-up on a
// loaded machine is not a collective and is not judged by `timeout`), or when it outlives
// `total_timeout` (if set). The executor then SIGKILLs the process group and every process of the
// session (ranks may change their process group, not their session) and reports, per rank, what
// its log says it last did: waiting in a call, running after one, finished or failed.
//
// Outcome: ok with every rank's observations when mpirun exits 0 and every rank<r>.obs parses.
// Otherwise failure_kind is "hang" (watchdog), "collective" (a rank logged a CollectiveMismatch),
// or "crash" (a rank logged an exception, or died: the rank and signal / exit code come from
// mpirun's report, e.g. "process rank 1 ... exited on signal 6"). failure names the rank and ends
// with the per-rank states and the tail of every rank's log and of mpirun.log; the work dir is
// kept and named there. Errors of the environment (mpirun not executable, DIR not writable) throw
// std::runtime_error.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/watchdog.h"
#include "kernels/engine.h"

namespace paradiff {

struct MpiRunOptions {
  std::chrono::milliseconds timeout =
      kDefaultCollectiveTimeout;                   // no rank progress for this long: a hang
  std::chrono::milliseconds total_timeout{0};      // the whole job (0: no limit)
  std::chrono::milliseconds start_timeout{60000};  // every rank has written its log by then
  std::string exe;                // paradiff binary ("": ParadiffExecutable(), core/self_exe.h)
  std::string mpirun = "mpirun";  // looked up in PATH unless it contains a '/'
  std::vector<std::string> mpirun_args;  // extra arguments before -np (hostfile, --mca ...)
  // Work dir: "" makes a fresh one under the system temp dir, removed after a clean run and kept
  // after a failure; a given one is always kept.
  std::string work_dir;
  bool native_reduction = false;  // MpiReduction::kNative (comm/mpi_communicator.h)
  // Run as a task of a persistent job from this process's pool (kernels/mpi_job.h) instead of a
  // job of its own: the same files, logs, watchdog and outcome; a crash or hang ends that job.
  bool reuse_job = false;
  // One phase of a checkpointed run (kernels/engine.cpp): steps [first_step, last_step) (-1: the
  // config's steps), each rank's state loaded from `load_checkpoint` first, and saved to
  // `save_checkpoint` after (the ranks write their shards, the executor the manifest).
  int64_t first_step = 0;
  int64_t last_step = -1;
  std::string load_checkpoint;
  std::string save_checkpoint;
  // Testing: rank R sleeps forever / aborts before its first collective (-1: off).
  int debug_hang_rank = -1;
  int debug_crash_rank = -1;
};

EngineOutcome RunEngineMpi(const Config& cfg, const MpiRunOptions& opts);

}  // namespace paradiff
