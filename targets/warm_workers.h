// WarmWorkers: the running workers of a protocol-2 target (docs/TARGETS.md "Warm workers"). A
// worker is the target file's command, started once in its own session with its imports done; it
// reads run dirs from its stdin, one per line, runs each as a protocol-1 launch would (in a fresh
// fork of itself, its ranks' output in RUN/target.log) and answers each on its file descriptor 3
// with one JSON line {"run_dir", "exit" | "signal"}. Its own output goes to a worker log.
//
// Run() hands a run dir to an idle worker (starting one when none is idle) and waits for the answer
// under the target's watchdog. The worker goes back to the idle list only after a clean run: after
// a hang (its session is killed), a failed run, a malformed answer or its own death it is dropped,
// and the next run starts a fresh one. Safe to call from several threads (one worker each); call
// it from threads that outlive the workers they start (core/child_process.h: PR_SET_PDEATHSIG).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "targets/target_file.h"

namespace paradiff {

// How one run of a target ended (a protocol-1 launch or a protocol-2 request).
struct LaunchEnd {
  enum Kind { kExited, kSignaled, kTimedOut } kind = kExited;
  int code = 0;  // the exit code or the signal
  // Protocol 2, when the worker itself failed (died, or answered nonsense): what happened, with
  // its log's path; "" otherwise.
  std::string worker_failure;
};

// A wait status (waitpid) as a LaunchEnd: exited with its code, or killed by its signal.
LaunchEnd FromWaitStatus(int status);

class WarmWorkers {
 public:
  // `log_dir`: where worker logs go ("" = the system temp dir); a log is removed with its worker
  // unless the worker failed or `keep_logs`.
  WarmWorkers(TargetSpec target, std::string log_dir, bool keep_logs = false);
  ~WarmWorkers();  // ends every idle worker (end of its stdin, then its session is killed)
  WarmWorkers(const WarmWorkers&) = delete;
  WarmWorkers& operator=(const WarmWorkers&) = delete;

  // Runs the written run dir `run_dir` (absolute). Throws std::runtime_error "cannot execute ..."
  // when a worker cannot be started (core/child_process.h).
  LaunchEnd Run(const std::string& run_dir);
  int64_t started() const;  // workers started so far

 private:
  struct Worker {
    pid_t pid = -1;
    int to = -1, from = -1;
    std::string log;
  };
  std::unique_ptr<Worker> Start();
  // Kills its session, reaps it (returns its wait status), closes its pipes.
  int End(Worker& w, bool keep_log);

  TargetSpec target_;
  std::string log_dir_;
  bool keep_logs_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<Worker>> idle_;
  int64_t started_ = 0;
};

}  // namespace paradiff
