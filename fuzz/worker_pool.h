// WorkerPool: child processes running `paradiff worker` (fuzz/worker.h), each with a memory limit,
// fed one task at a time over pipes. The pool notices a worker that died (crash) or overran its
// task's time limit (hang: the worker is killed), reports the lost task, and starts a fresh worker.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz/task_pool.h"

namespace paradiff {

// The environment variable that names a pool worker's scratch dir, its TMPDIR, to the worker (see
// Note [Job scratch] in worker_pool.cpp).
inline constexpr char kJobScratchEnv[] = "PARADIFF_JOB_SCRATCH";

class WorkerPool : public TaskPool {
 public:
  // `exe`: the paradiff binary; `mem_mb`: address-space limit per worker (0 = none).
  WorkerPool(std::string exe, int jobs, int64_t mem_mb, std::chrono::milliseconds task_timeout);
  ~WorkerPool() override;  // kills every worker
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  bool HasIdle() const override;
  int Busy() const override;
  // Sends `task` (a JSON object with "index") to an idle worker. Returns false if none is idle.
  bool Submit(const nlohmann::json& task) override;
  // Waits up to `wait` for events; returns what happened (possibly nothing).
  std::vector<PoolEvent> Poll(std::chrono::milliseconds wait) override;
  int64_t restarts() const override { return restarts_; }

 private:
  struct Worker {
    pid_t pid = -1;
    int to = -1, from = -1;
    std::string buffer;
    int64_t task = -1;
    std::chrono::steady_clock::time_point started;
    std::string scratch;  // its TMPDIR (see Note [Job scratch] in worker_pool.cpp)
  };
  void Start(Worker& w);
  void Stop(Worker& w, bool kill);
  // Waits for `w` to end and removes its scratch dir; how it ended, in words, and the signal that
  // ended it (0 if none).
  std::string Reap(Worker& w, int* signal = nullptr);

  std::string exe_;
  int64_t mem_mb_;
  std::chrono::milliseconds task_timeout_;
  std::vector<Worker> workers_;
  int64_t restarts_ = 0;
};

}  // namespace paradiff
