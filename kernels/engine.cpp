#include "kernels/engine.h"

#include <ATen/Parallel.h>

#include <mutex>

#include "comm/local_communicator.h"
#include "comm/recording_communicator.h"
#ifdef PARADIFF_HAVE_MPI
#include "kernels/engine_mpi.h"
#endif
#include "kernels/faults.h"
#include "kernels/rank_engine.h"

namespace paradiff {

Status EngineSupports(const Config& cfg) {
  Status s;
  if (cfg.checkpoint.save_at != 0)
    s.Add("checkpoint.save_at", "checkpoint.save_at=" + std::to_string(cfg.checkpoint.save_at) +
                                    ": checkpoints are not implemented yet (use 0)");
#ifdef PARADIFF_HAVE_MPI
  if (cfg.backend == Backend::kNccl)
    s.Add("backend", "backend=nccl: the nccl backend is not built in this version (use local or mpi)");
#else
  if (cfg.backend != Backend::kLocal)
    s.Add("backend", std::string("backend=") + Name(cfg.backend) +
                         ": only the local backend is built in this version (built without MPI)");
#endif
  return s;
}

EngineOutcome RunEngine(const Config& cfg, std::chrono::milliseconds timeout) {
#ifdef PARADIFF_HAVE_MPI
  if (cfg.backend == Backend::kMpi) {  // ranks as processes under mpirun, watched (engine_mpi.h)
    MpiRunOptions mpi;
    mpi.timeout = timeout;
    return RunEngineMpi(cfg, mpi);
  }
#endif
  // One intra-op thread per rank: ranks are threads already (TOOLCHAIN.md).
  if (at::get_num_threads() != 1) at::set_num_threads(1);
  const FaultSet faults = MakeFaultSet(cfg.faults);
  const int world = static_cast<int>(cfg.parallel.world);
  EngineOutcome out;
  out.obs.ranks.resize(world);
  auto results = RunLocalRanks(world, timeout, [&](Communicator& comm) {
    std::vector<Fingerprint> log;
    // A recorded duplicate of the world group: every call the engine makes lands in `log`.
    RecordingCommunicator rec(comm.Split(/*color=*/0, /*key=*/comm.rank()), &log);
    RankEngine engine(cfg, faults, rec);
    RankObservations obs = engine.Run();
    obs.collectives = std::move(log);
    out.obs.ranks[comm.rank()] = std::move(obs);
  });
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r].ok || results[r].error_kind == "aborted") continue;
    out.ok = false;
    out.failure_rank = static_cast<int>(r);
    out.failure = "rank " + std::to_string(r) + ": " + results[r].error;
    out.failure_kind = results[r].error_kind == "mismatch" ? "collective"
                       : results[r].error_kind == "hang"   ? "hang"
                                                           : "crash";
    break;
  }
  if (out.ok) {
    for (size_t r = 0; r < results.size(); ++r) {
      if (results[r].ok) continue;
      out.ok = false;
      out.failure_rank = static_cast<int>(r);
      out.failure = "rank " + std::to_string(r) + ": " + results[r].error;
      out.failure_kind = "crash";
      break;
    }
  }
  return out;
}

}  // namespace paradiff
