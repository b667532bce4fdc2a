#include "kernels/engine.h"

#include <ATen/Parallel.h>
#include <stdlib.h>

#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>

#include "comm/local_communicator.h"
#include "comm/recording_communicator.h"
#include "core/budget.h"
#ifdef PARADIFF_HAVE_MPI
#include "kernels/engine_mpi.h"
#endif
#include "kernels/checkpoint.h"
#include "kernels/faults.h"
#include "kernels/loss_scaler.h"
#include "kernels/rank_engine.h"

namespace paradiff {

namespace {

// One phase: steps [first, last) of `cfg`, optionally restored from a checkpoint (`load`, read
// from `load_dir`) and saved to `save_dir`.
struct Phase {
  const Config* cfg;
  int64_t first, last;
  const CheckpointReader* load;
  std::string load_dir, save_dir;
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
  std::vector<nlohmann::json> entries(world);
  LossScaler::State scaler{};
  int64_t updates = 0;
  auto results = RunLocalRanks(world, timeout, [&](Communicator& comm) {
    std::vector<Fingerprint> log;
    // A recorded duplicate of the world group: every call the engine makes lands in `log`.
    RecordingCommunicator rec(comm.Split(/*color=*/0, /*key=*/comm.rank()), &log);
    RankEngine engine(cfg, faults, rec);
    if (ph.load) engine.LoadShard(*ph.load);
    RankObservations& o = obs.ranks[comm.rank()];
    o.rank = comm.rank();
    engine.RunSteps(ph.first, ph.last, o, &log);
    if (!ph.save_dir.empty()) {
      entries[comm.rank()] = WriteCheckpointShard(ph.save_dir, engine.SaveShard());
      if (comm.rank() == 0) {
        scaler = engine.scaler_state();
        updates = engine.updates();
      }
    }
    o.collectives = std::move(log);
  });
  if (!NoteFailures(results, obs, ph.first, out)) return false;
  if (!ph.save_dir.empty())
    WriteCheckpointManifest(ph.save_dir, cfg, ph.last, updates,
                            {{"scale", scaler.scale},
                             {"good_steps", scaler.good_steps},
                             {"hysteresis_left", scaler.hysteresis_left}},
                            entries);
  return true;
}

// The phase on the config's backend: ranks as threads here, or processes under mpirun.
bool RunPhase(const Phase& ph, const FaultSet& faults, std::chrono::milliseconds timeout,
              Observations& obs, EngineOutcome& out) {
#ifdef PARADIFF_HAVE_MPI
  if (ph.cfg->backend ==
      Backend::kMpi) {  // ranks as processes under mpirun, watched (engine_mpi.h)
    MpiRunOptions mpi;
    mpi.timeout = timeout;
    mpi.first_step = ph.first;
    mpi.last_step = ph.last;
    mpi.load_checkpoint = ph.load_dir;
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

Config ReloadPhaseConfig(const Config& c) {
  Config r = c;
  const paradiff::ReloadConfig& rl = c.checkpoint.reload;
  r.parallel.tp = rl.tp;
  r.parallel.pp = rl.pp;
  r.parallel.dp = rl.dp;
  r.parallel.world = rl.tp * rl.pp * rl.dp;
  r.zero.stage = rl.zero_stage;
  // The global batch stays the same: the micro-batches per step are re-divided over the new dp.
  const int64_t micro_batches = c.parallel.dp * c.batch.accumulation_steps;
  if (rl.dp > 0 && micro_batches % rl.dp == 0) r.batch.accumulation_steps = micro_batches / rl.dp;
  if (r.parallel.pp != c.parallel.pp) {  // stage structure does not carry over
    r.parallel.virtual_stages = 1;
    if (r.parallel.schedule == Schedule::kInterleaved) r.parallel.schedule = Schedule::k1F1B;
    r.parallel.partition = PartitionMethod::kUniform;
    r.parallel.partition_layers.clear();
  }
  if (r.parallel.tp == 1 || r.model.seq_len % r.parallel.tp != 0) r.parallel.sp = false;
  r.checkpoint.save_at = 0;
  return r;
}

Config LayoutAtStep(const Config& cfg, int64_t step) {
  return cfg.checkpoint.save_at > 0 && step >= cfg.checkpoint.save_at ? ReloadPhaseConfig(cfg)
                                                                      : cfg;
}

int64_t PhaseFirstStep(const Config& cfg, int64_t step) {
  return cfg.checkpoint.save_at > 0 && step >= cfg.checkpoint.save_at ? cfg.checkpoint.save_at : 0;
}

Observations JoinPhases(const Observations& a, const Observations& b, int64_t split,
                        int64_t steps) {
  if (b.ranks.empty() && split == steps) return a;
  Observations out;
  const size_t n = std::max(a.ranks.size(), b.ranks.size());
  out.ranks.resize(n);
  // Memory and collective marks only where the phases recorded them (an external target does not).
  bool memory = false, marks_recorded = false;
  for (const Observations* phase : {&a, &b})
    for (const RankObservations& ro : phase->ranks) {
      memory = memory || !ro.memory.empty();
      marks_recorded = marks_recorded || !ro.collective_marks.empty();
    }
  for (size_t r = 0; r < n; ++r) {
    RankObservations& o = out.ranks[r];
    o.rank = static_cast<int>(r);
    for (const Observations* phase : {&a, &b}) {
      const bool have = r < phase->ranks.size();
      const int64_t from = phase == &a ? 0 : split, to = phase == &a ? split : steps;
      const int64_t before = static_cast<int64_t>(o.collectives.size());  // calls of earlier phases
      for (int64_t s = from; s < to; ++s) {
        const int64_t i = s - from;
        if (have && i < static_cast<int64_t>(phase->ranks[r].steps.size())) {
          o.steps.push_back(phase->ranks[r].steps[i]);
          if (i < static_cast<int64_t>(phase->ranks[r].memory.size()))
            o.memory.push_back(phase->ranks[r].memory[i]);
          const auto& marks = phase->ranks[r].collective_marks;
          if (i < static_cast<int64_t>(marks.size()))
            o.collective_marks.push_back(before + marks[i]);
        } else {
          RankStep placeholder;
          if (!phase->ranks.empty() && i < static_cast<int64_t>(phase->ranks[0].steps.size()))
            placeholder.skipped = phase->ranks[0].steps[i].skipped;
          o.steps.push_back(placeholder);
          if (memory) o.memory.push_back(MemoryAccount{});
          if (marks_recorded)
            o.collective_marks.push_back(
                before + (have ? static_cast<int64_t>(phase->ranks[r].collectives.size()) : 0));
        }
      }
      if (!have) continue;
      for (Fingerprint f : phase->ranks[r].collectives) {
        // The reloaded ranks form new groups: keep their calls apart from the first phase's.
        if (phase == &b) f.group = "reload:" + f.group;
        o.collectives.push_back(std::move(f));
      }
    }
  }
  return out;
}

Status ReloadSupports(const Config& cfg) {
  Status s;
  if (cfg.checkpoint.save_at <= 0) return s;
  const int64_t micro_batches = cfg.parallel.dp * cfg.batch.accumulation_steps;
  if (cfg.checkpoint.reload.dp < 1 || micro_batches % cfg.checkpoint.reload.dp != 0)
    s.Add("checkpoint.reload.dp",
          "checkpoint.reload.dp=" + std::to_string(cfg.checkpoint.reload.dp) +
              " must divide parallel.dp * batch.accumulation_steps = " +
              std::to_string(micro_batches) +
              " (the global batch stays the same across the reload)");
  Status r = CheckConfig(ReloadPhaseConfig(cfg), ResourceBudget{});
  for (const auto& e : r.errors())
    s.Add("checkpoint.reload", "checkpoint.reload gives an invalid layout: " + e.message);
  return s;
}

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

EngineOutcome RunEngine(const Config& cfg, const EngineOptions& opts) {
  // One intra-op thread per rank: ranks are threads already (TOOLCHAIN.md).
  if (cfg.backend == Backend::kLocal && at::get_num_threads() != 1) at::set_num_threads(1);
  const FaultSet faults = MakeFaultSet(cfg.faults);
  EngineOutcome out;
  if (cfg.checkpoint.save_at <= 0 && opts.checkpoint_dir.empty()) {
    RunPhase({&cfg, 0, cfg.steps, nullptr, "", ""}, faults, opts.timeout, out.obs, out);
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
  if (RunPhase({&cfg, 0, save_at, nullptr, "", dir}, faults, opts.timeout, first, out) &&
      cfg.checkpoint.save_at > 0) {
    const Config reload = ReloadPhaseConfig(cfg);
    try {
      CheckpointReader reader(dir);
      RunPhase({&reload, save_at, cfg.steps, &reader, dir, ""}, faults, opts.timeout, second, out);
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
