// `paradiff campaign --distributed`: one campaign over the ranks of an MPI job (started with
// `mpirun -np N paradiff campaign --distributed --workdir DIR ...`). Rank 0 runs the campaign loop
// (fuzz/campaign.h) with an MpiTaskPool: its own `jobs` local workers plus `jobs` workers on every
// other rank, each rank keeping its workers in a WorkerPool with the usual memory limit and
// watchdog, so a crash or hang of a checked config takes down one worker process, never a rank.
// Ranks 1..N-1 run ServeRemoteTasks until rank 0 says stop. Findings, corpus and stats are written
// by rank 0 only, into its work dir; there is one progress line and one summary.
//
// Messages on MPI_COMM_WORLD (bytes): rank 0 -> r: kTagTask (a task, fuzz/worker.h) and kTagStop;
// r -> 0: kTagEvent ({"kind", "index", "result", "detail"}: a PoolEvent). Rank 0 never sends a rank
// more tasks than it has workers.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "fuzz/worker_pool.h"

namespace paradiff {

struct RemoteWorkers {
  std::string exe;  // the paradiff binary on this rank
  int jobs = 1;     // workers per rank
  int64_t mem_mb = 8192;
  std::chrono::milliseconds task_timeout{120000};
};

// Rank 0's pool. Requires MPI to be initialized (comm/mpi_communicator.h MpiRuntime).
class MpiTaskPool : public TaskPool {
 public:
  MpiTaskPool(const RemoteWorkers& w, int world_size);
  bool HasIdle() const override;
  int Busy() const override;
  bool Submit(const nlohmann::json& task) override;
  std::vector<PoolEvent> Poll(std::chrono::milliseconds wait) override;
  int64_t restarts() const override { return local_.restarts(); }

 private:
  WorkerPool local_;
  int jobs_;
  std::map<int, int> remote_busy_;  // rank -> tasks it is running
};

// Ranks 1..N-1: serve rank 0's tasks with local workers until told to stop. Returns an exit code.
int ServeRemoteTasks(const RemoteWorkers& w);

// Rank 0, when the campaign is over (or failed before it started): every other rank stops.
void StopRemoteTasks(int world_size);

}  // namespace paradiff
