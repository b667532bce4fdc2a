// TaskPool: where a campaign sends its tasks (fuzz/worker.h protocol: one JSON object per task) and
// gets results, crashes and hangs back. WorkerPool (fuzz/worker_pool.h) keeps worker processes on
// this machine; MpiTaskPool (fuzz/mpi_task_pool.h) adds the workers of the other ranks of an MPI
// job (`paradiff campaign --distributed`). The campaign loop does not know which it drives.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace paradiff {

struct PoolEvent {
  // kInterrupted: the worker ended by SIGINT, SIGTERM or SIGHUP, signals someone sends (a Ctrl-C
  // or a `timeout` reaches the whole process group), never one a checked config raises: the task
  // was not checked, and the campaign stops as interrupted. (Appended: MpiTaskPool sends kinds as
  // numbers.)
  enum Kind { kResult, kCrash, kTimeout, kInterrupted } kind = kResult;
  int64_t index = -1;
  nlohmann::json result;  // kResult: the worker's line
  std::string detail;     // kCrash, kInterrupted: how the worker ended (signal / exit code);
                          // kTimeout: the limit
  int host = 0;           // the MPI rank whose worker ran the task (0 without MPI)
};

class TaskPool {
 public:
  virtual ~TaskPool() = default;
  virtual bool HasIdle() const = 0;
  virtual int Busy() const = 0;
  // Sends `task` (a JSON object with "index") to an idle worker. Returns false if none is idle.
  virtual bool Submit(const nlohmann::json& task) = 0;
  // Waits up to `wait` for events; returns what happened (possibly nothing).
  virtual std::vector<PoolEvent> Poll(std::chrono::milliseconds wait) = 0;
  virtual int64_t restarts() const = 0;
};

}  // namespace paradiff
