// `paradiff campaign` (the fuzzing campaign) and `paradiff worker` (its worker processes).
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "core/exit_codes.h"
#include "core/self_exe.h"
#include "fuzz/campaign.h"
#include "fuzz/gate.h"
#ifdef PARADIFF_HAVE_MPI
#include "comm/mpi_communicator.h"
#include "fuzz/mpi_task_pool.h"
#endif
#include "fuzz/worker.h"
#include "fuzz/worker_pool.h"
#include "tools/cli.h"

namespace paradiff {

// A pool's worker removes its scratch dir once its input ends (see Note [Job scratch] in
// fuzz/worker_pool.cpp), its warm workers ended with its systems.
int CmdWorker(const Args&) {
  const int code = RunWorker(std::cin, std::cout);
  if (const char* scratch = std::getenv(kJobScratchEnv)) {
    std::error_code ec;
    std::filesystem::remove_all(scratch, ec);
  }
  return code;
}

namespace {

int RunAndSummarize(const CampaignOptions& o);

// `--distributed` (fuzz/mpi_task_pool.h): under mpirun, rank 0 drives, the other ranks serve.
int DistributedCampaign(CampaignOptions o) {
#ifdef PARADIFF_HAVE_MPI
  MpiRuntime mpi(nullptr, nullptr);
  RemoteWorkers w;
  w.exe = o.exe;
  w.jobs = o.jobs;
  w.mem_mb = o.worker_mem_mb;
  w.task_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.task_timeout_s * 1000));
  if (mpi.world_rank() != 0) return ServeRemoteTasks(w);
  const int world = mpi.world_size();
  std::cout << "INFO: distributed campaign over " << world << " MPI ranks, " << o.jobs
            << " worker(s) each" << std::endl;
  o.make_pool = [w, world] { return std::make_unique<MpiTaskPool>(w, world); };
  int code = kExitInternal;
  try {
    code = RunAndSummarize(o);
  } catch (const std::exception& e) {
    std::cerr << "ERROR: internal: " << e.what() << "\n";
  }
  StopRemoteTasks(world);  // also after an error, so that no rank waits forever
  return code;
#else
  (void)o;
  std::cerr
      << "ERROR: --distributed needs the mpi backend, and this paradiff was built without MPI\n";
  return kExitBadInput;
#endif
}

}  // namespace

int CmdCampaign(const Args& a) {
  CampaignOptions o;
  o.workdir = a.workdir;
  if (!a.budget.empty()) {
    o.budget_s = ParseDuration(a.budget);
    if (o.budget_s <= 0) {
      std::cerr << "ERROR: --budget=" << a.budget << ": expected a duration like 90s, 10m or 8h\n";
      return kExitBadInput;
    }
  }
  if (a.runs < 0 || a.task_timeout_s <= 0 || a.worker_mem_mb < 0) {
    std::cerr << "ERROR: --runs, --task-timeout-s and --worker-mem-mb must not be negative\n";
    return kExitBadInput;
  }
  o.runs = a.runs;
  o.jobs = a.jobs;
  o.seed = a.seed;
  o.corpus_dir = a.corpus;
  o.inject = a.inject;
  o.stop_on_first = a.stop_on_first;
  o.task_timeout_s = a.task_timeout_s;
  o.worker_mem_mb = a.worker_mem_mb;
  o.debug_crash_at = a.debug_crash_at;
  o.debug_hang_at = a.debug_hang_at;
  o.minimize_budget_s = a.minimize_budget_s;
  o.oracles = a.oracles;
  o.target = a.target;
  o.exe = ParadiffExecutable();
  o.backend = a.backend;
  o.feedback = !a.no_feedback;
  if (!a.baseline.empty()) {
    StatusOr<std::set<std::string>> b = LoadBaseline(a.baseline);
    if (!b.ok()) {
      for (const auto& e : b.status().errors()) std::cerr << "ERROR: " << e.message << "\n";
      return kExitBadInput;
    }
    o.baseline = b.value();
  }
  if (a.distributed) return DistributedCampaign(o);
  return RunAndSummarize(o);
}

namespace {

int RunAndSummarize(const CampaignOptions& o) {
  StatusOr<CampaignSummary> r = RunCampaign(o, std::cout);
  if (!r.ok()) {
    for (const auto& e : r.status().errors()) std::cerr << "ERROR: " << e.message << "\n";
    return kExitBadInput;
  }
  const CampaignSummary& s = r.value();
  for (const auto& sig : s.signatures)
    std::printf("INFO: finding %s/findings/%s%s\n", o.workdir.c_str(), sig.c_str(),
                o.baseline.count(sig) ? " (known: in the baseline)" : "");
  const bool failed = s.unique > s.known;
  for (const auto& sig : s.inconclusive_reasons)
    std::printf("INFO: inconclusive %s/inconclusive/%s\n", o.workdir.c_str(), sig.c_str());
  std::printf(
      "SUMMARY: paradiff: campaign %s seed=%llu execs=%lld findings=%lld unique=%lld new=%lld "
      "known=%lld inconclusive=%lld rejected=%lld pairs=%lld/%lld elapsed=%.0fs%s\n",
      failed ? "FINDINGS" : "CLEAN", static_cast<unsigned long long>(o.seed),
      static_cast<long long>(s.execs), static_cast<long long>(s.findings),
      static_cast<long long>(s.unique), static_cast<long long>(s.new_unique),
      static_cast<long long>(s.known), static_cast<long long>(s.inconclusive),
      static_cast<long long>(s.rejected), static_cast<long long>(s.pairs_covered),
      static_cast<long long>(s.pairs_possible), s.elapsed_s,
      s.interrupted ? " (interrupted; rerun the same command to resume)" : "");
  return failed ? kExitFinding : kExitPass;
}

}  // namespace

}  // namespace paradiff
