#include "kernels/engine.h"

#include <ATen/Parallel.h>
#include <stdlib.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "comm/local_communicator.h"
#ifdef PARADIFF_HAVE_MPI
#include "kernels/engine_mpi.h"
#endif
#include "kernels/checkpoint.h"
#include "kernels/faults.h"
#include "kernels/rank_phase.h"

namespace paradiff {

namespace {

// One phase: steps [first, last) of `cfg`, optionally restored from / saved to a checkpoint.
struct Phase {
  const Config* cfg;
  int64_t first, last;
  const CheckpointReader* load;
  std::string save_dir;
};

// Maps rank failures to the outcome; returns false if any rank failed.
bool NoteFailures(const std::vector<RankResult>& results, const Observations& obs,
                  int64_t first_step, EngineOutcome& out) {
  const int r = PrimaryErrorRank(results);
  if (r < 0) return true;
  out.ok = false;
  out.failure_rank = r;
  // The step the failing rank was in: the steps it completed in this phase come first.
  if (r < static_cast<int>(obs.ranks.size()))
    out.failure_step = first_step + static_cast<int64_t>(obs.ranks[r].steps.size());
  out.failure = "rank " + std::to_string(r) + ": " + results[r].error;
  out.failure_kind = results[r].error_kind == "mismatch" ? FailureKind::kCollective
                     : results[r].error_kind == "hang"   ? FailureKind::kHang
                                                         : FailureKind::kCrash;
  return false;
}

bool RunLocalPhase(const Phase& ph, const FaultSet& faults, std::chrono::milliseconds timeout,
                   Observations& obs, EngineOutcome& out) {
  const Config& cfg = *ph.cfg;
  const int world = static_cast<int>(cfg.parallel.world);
  obs.ranks.assign(world, RankObservations{});
  std::vector<nlohmann::json> saved(world);
  auto results = RunLocalRanks(world, timeout, [&](Communicator& comm) {
    saved[comm.rank()] = TrainRankPhase(
        cfg, faults, comm, {ph.first, ph.last, ph.load, ph.save_dir}, obs.ranks[comm.rank()]);
  });
  if (!NoteFailures(results, obs, ph.first, out)) return false;
  if (!ph.save_dir.empty()) WritePhaseManifest(ph.save_dir, cfg, ph.last, saved);
  return true;
}

// The phase on the config's backend: ranks as threads here, or processes under mpirun.
bool RunPhase(const Phase& ph, const FaultSet& faults, std::chrono::milliseconds timeout,
              Observations& obs, EngineOutcome& out) {
#ifdef PARADIFF_HAVE_MPI
  // Ranks as processes under mpirun, watched (engine_mpi.h); each loads the checkpoint itself.
  // They outlive the config: a persistent job of this process's pool runs it (mpi_job.h).
  if (ph.cfg->backend == Backend::kMpi) {
    MpiRunOptions mpi;
    mpi.reuse_job = true;
    mpi.timeout = timeout;
    mpi.first_step = ph.first;
    mpi.last_step = ph.last;
    if (ph.load != nullptr) mpi.load_checkpoint = ph.load->dir();
    mpi.save_checkpoint = ph.save_dir;
    EngineOutcome job = RunEngineMpi(*ph.cfg, mpi);
    if (!job.ok) {
      out = std::move(job);
      return false;
    }
    obs = std::move(job.obs);
    return true;
  }
#endif
  return RunLocalPhase(ph, faults, timeout, obs, out);
}

}  // namespace

Status EngineSupports(const Config& cfg) {
  Status s = ReloadSupports(cfg);
#ifdef PARADIFF_HAVE_MPI
  if (cfg.backend == Backend::kNccl)
    s.Add("backend",
          "backend=nccl: the nccl backend is not built in this version (use local or mpi)");
#else
  if (cfg.backend != Backend::kLocal)
    s.Add("backend", std::string("backend=") + Name(cfg.backend) +
                         ": only the local backend is built in this version (built without MPI)");
#endif
  return s;
}

std::string EngineShardGroupRefusal(const Config& cfg) {
  if (cfg.zero.shard_group == 0) return "";
  return "zero.shard_group=" + std::to_string(cfg.zero.shard_group) +
         ": not supported by the built-in engine, which shards over every dp rank (0); shard "
         "groups are an external target's (supports.shard_groups)";
}

EngineOutcome RunEngine(const Config& cfg, const EngineOptions& opts) {
  EngineOutcome out;
  if (const std::string why = EngineShardGroupRefusal(cfg); !why.empty()) {
    out.ok = false;  // a direct caller (the libFuzzer target) gets a refusal, not a wrong layout
    out.failure_kind = FailureKind::kUnsupported;
    out.failure = why;
    return out;
  }
  // One intra-op thread per rank: ranks are threads already (TOOLCHAIN.md).
  if (cfg.backend == Backend::kLocal && at::get_num_threads() != 1) at::set_num_threads(1);
  const FaultSet faults = MakeFaultSet(cfg.faults);
  if (cfg.checkpoint.save_at <= 0 && opts.checkpoint_dir.empty()) {
    RunPhase({&cfg, 0, cfg.steps, nullptr, ""}, faults, opts.timeout, out.obs, out);
    return out;
  }
  // Note [Checkpointed runs]: train to save_at, save, reload into the reload layout (a different
  // world, so a second set of ranks), continue to `steps`. The two phases' observations are joined
  // per rank index; a rank present in one phase only reports nothing in the other.
  const bool temp = opts.checkpoint_dir.empty();
  std::string dir = opts.checkpoint_dir;
  if (temp) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "paradiff-ckpt-XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr)
      throw std::runtime_error("cannot create a checkpoint directory");
    dir = tmpl;
  }
  const int64_t save_at = cfg.checkpoint.save_at > 0 ? cfg.checkpoint.save_at : cfg.steps;
  Observations first, second;
  if (RunPhase({&cfg, 0, save_at, nullptr, dir}, faults, opts.timeout, first, out) &&
      cfg.checkpoint.save_at > 0) {
    const Config reload = ReloadPhaseConfig(cfg);
    try {
      CheckpointReader reader(dir);
      RunPhase({&reload, save_at, cfg.steps, &reader, ""}, faults, opts.timeout, second, out);
    } catch (const CheckpointError& e) {
      out.ok = false;
      out.failure_kind = FailureKind::kCrash;
      out.failure = std::string("checkpoint reload: ") + e.what();
    }
  }
  if (temp) std::filesystem::remove_all(dir);
  out.obs = JoinPhases(first, second, save_at, cfg.steps);
  return out;
}

EngineOutcome RunEngine(const Config& cfg, std::chrono::milliseconds timeout) {
  EngineOptions opts;
  opts.timeout = timeout;
  return RunEngine(cfg, opts);
}

}  // namespace paradiff
