// mpi_engine_test PARADIFF_EXE SOURCE_DIR CASE [ARG]: the mpirun executor (kernels/engine_mpi.h)
// and the cross-backend oracle, one case per ctest test.
//
//   cross CONFIG [FAULT]  the same config (configs/examples/CONFIG or an absolute path, optionally
//                         with a bug-zoo fault)
//                         on the local and the mpi backend, through the cross-backend oracle
//                         (oracles/cross_backend_oracle.h): assembled quantities, every rank's own
//                         pieces and the collective logs bitwise identical, since both backends
//                         reduce in rank order (see Note [MPI reduction order]).
//   hang                  rank 1 of a 2-rank job sleeps before its first collective: a hang,
//                         reported within the watchdog timeout, naming rank 1 and what rank 0
//                         waits in; no process of the job is left behind; the logs are kept.
//   crash                 rank 1 aborts: a crash naming rank 1 and signal 6.
//   mismatch              a rank-dependent bucket order: a collective mismatch on both backends.
//   slow_start            mpirun starts the ranks 4 s late (a loaded machine) under a 3 s
//                         collective timeout: the run ends ok; start-up is bounded by
//                         start_timeout, not by the collective timeout (see Note [MPI watchdog]).
//   no_start              the same with a 2 s start_timeout: a hang saying the ranks did not start.
//   job                   persistent jobs (kernels/mpi_job.h): a world-2 config, then a world-4
//                         one (a larger job), then the world-2 one again on the world-4 job (two
//                         idle ranks): its observations equal a fresh job's bit for bit every
//                         time, so nothing of a config crosses into the next; then a world
//                         above MpiJob::kMaxKeptRanks, whose job is not kept.
//   job_crash, job_hang   a rank of a persistent job aborts / hangs: the same outcome as a fresh
//                         job's (kind, rank, mpirun's report in the kept work dir), and the next
//                         config runs on a new job with the same observations as a fresh job.
// Prints "PASS: CASE" or "FAIL: CASE: why"; exits 0 / 1.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "core/config_json.h"
#include "kernels/engine.h"
#include "kernels/engine_mpi.h"
#include "kernels/mpi_job.h"
#include "kernels/observations_io.h"
#include "oracles/assemble.h"
#include "oracles/cross_backend_oracle.h"
#include "oracles/reference.h"

namespace paradiff {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct Case {
  std::string exe, src, name;  // the paradiff binary, the source tree, the case
};

Config LoadExample(const std::string& src, const std::string& name) {
  StatusOr<Config> c =
      LoadConfigFile(name.rfind('/', 0) == 0 ? name : src + "/configs/examples/" + name);
  if (!c.ok()) throw std::runtime_error(c.status().ToString());
  return c.value();
}

MpiRunOptions Options(const Case& c, std::chrono::milliseconds timeout) {
  MpiRunOptions o;
  o.exe = c.exe;
  o.timeout = timeout;
  o.work_dir = (fs::temp_directory_path() /
                ("paradiff-mpi-test-" + c.name + "-" + std::to_string(::getpid())))
                   .string();
  return o;
}

std::string Contains(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos ? "" : "the report lacks '" + what + "':\n" + text;
}

// Processes whose command line mentions `needle` (the job's work dir): leftovers of a killed job.
int ProcessesMentioning(const std::string& needle) {
  int found = 0;
  for (const auto& e : fs::directory_iterator("/proc")) {
    std::ifstream f(e.path() / "cmdline");
    std::string cmd((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    if (!cmd.empty() && cmd.find(needle) != std::string::npos &&
        e.path().filename() != std::to_string(::getpid()))
      ++found;
  }
  return found;
}

std::string RunCase(const Case& c, const std::vector<std::string>& extra) {
  if (c.name == "cross") {
    Config cfg = LoadExample(c.src, extra.at(0));
    if (extra.size() > 1) cfg.faults.push_back(extra[1]);
    const EngineOutcome local = RunEngine(cfg, std::chrono::seconds(60));
    if (!local.ok) return "local run failed: " + local.failure;
    const MpiRunOptions o = Options(c, std::chrono::seconds(60));
    bool ran = false;
    const CrossBackendOracle oracle([&](const Config& other) {
      ran = other.backend == Backend::kMpi;
      return RunEngineMpi(other, o);
    });
    const auto ref = GetReference(cfg, BuiltInReduction(), nullptr, 0);
    const Assembly assembly = AssembleTensors(cfg, local.obs);
    OracleInput in(cfg, local);
    in.ref = ref.get();
    in.assembly = &assembly;
    const Verdict v = oracle.Check(in);
    if (!ran) return "the oracle did not run the mpi backend: " + v.message;
    if (v.kind != VerdictKind::kPass || IsSkip(v)) return "cross-backend: " + v.message;
    fs::remove_all(o.work_dir);
    return "";
  }
  if (c.name == "hang" || c.name == "crash") {
    const Config cfg = LoadExample(c.src, "dp2_bf16_accum.json");
    MpiRunOptions o = Options(c, std::chrono::milliseconds(3000));
    (c.name == "hang" ? o.debug_hang_rank : o.debug_crash_rank) = 1;
    const auto t0 = Clock::now();
    const EngineOutcome out = RunEngineMpi(cfg, o);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "INFO: " << c.name << " reported after " << seconds << " s:\n"
              << out.failure << "\n";
    if (out.ok || Name(out.failure_kind) != c.name)
      return "expected kind " + c.name + ", got '" + Name(out.failure_kind) + "'";
    if (out.failure_rank != 1)
      return "expected rank 1 to be blamed, got " + std::to_string(out.failure_rank);
    if (!fs::exists(o.work_dir + "/rank0.log") || !fs::exists(o.work_dir + "/rank1.log"))
      return "rank logs not kept";
    std::string why;
    if (c.name == "hang") {
      if (seconds > 3 + 20)
        return "the hang was reported only after " + std::to_string(seconds) + " s";
      if (ProcessesMentioning(o.work_dir) != 0)
        return "processes of the killed job are still running";
      for (const char* s : {"no rank made progress for 3000 ms", "rank 0: waiting in world#0 split",
                            "rank 1: running (last: debug: sleeping forever"})
        if (why.empty()) why = Contains(out.failure, s);
    } else {
      for (const char* s : {"rank 1: killed by signal 6", "rank 1: running (last: debug: aborting"})
        if (why.empty()) why = Contains(out.failure, s);
    }
    if (why.empty()) fs::remove_all(o.work_dir);
    return why;
  }
  if (c.name == "slow_start" || c.name == "no_start") {
    const Config cfg = LoadExample(c.src, "dp2_bf16_accum.json");
    MpiRunOptions o = Options(c, std::chrono::milliseconds(3000));
    if (c.name == "no_start") o.start_timeout = std::chrono::milliseconds(2000);
    fs::create_directories(o.work_dir);
    o.mpirun = o.work_dir + "/slow-mpirun.sh";
    std::ofstream(o.mpirun) << "#!/bin/sh\nsleep 4\nexec mpirun \"$@\"\n";
    fs::permissions(o.mpirun, fs::perms::owner_exec, fs::perm_options::add);
    const EngineOutcome out = RunEngineMpi(cfg, o);
    std::string why;
    if (c.name == "slow_start") {
      if (!out.ok) why = "a slow start was judged: " + out.failure;
    } else if (out.ok || out.failure_kind != FailureKind::kHang) {
      why = std::string("expected a hang, got '") + Name(out.failure_kind) + "'";
    } else {
      why = Contains(out.failure, "2 of 2 ranks did not start within 2000 ms");
    }
    if (why.empty()) fs::remove_all(o.work_dir);
    return why;
  }
  if (c.name == "mismatch") {
    Config cfg = LoadExample(c.src, "dp4_zero2.json");
    cfg.faults.push_back("comm.rank_dependent_bucket_order");
    const EngineOutcome local = RunEngine(cfg, std::chrono::seconds(60));
    const MpiRunOptions o = Options(c, std::chrono::seconds(60));
    const EngineOutcome mpi = RunEngineMpi(cfg, o);
    if (local.failure_kind != FailureKind::kCollective)
      return "local: expected a collective failure: " + local.failure;
    if (mpi.failure_kind != FailureKind::kCollective)
      return "mpi: expected a collective failure: " + mpi.failure;
    const std::string why = Contains(mpi.failure, "collective mismatch in group 'world/c0/c0.1'");
    if (why.empty()) fs::remove_all(o.work_dir);
    return why;
  }
  if (c.name == "job" || c.name == "job_crash" || c.name == "job_hang") {
    const Config two = LoadExample(c.src, "dp2_bf16_accum.json");
    const Config four = LoadExample(c.src, "dp4_zero2.json");
    const MpiRunOptions fresh = Options(c, std::chrono::seconds(60));
    MpiRunOptions pooled = fresh;
    pooled.reuse_job = true;
    // Every rank's observations as bytes (kernels/observations_io.h), or why the run failed.
    auto run = [](const Config& cfg, const MpiRunOptions& o) {
      const EngineOutcome out = RunEngineMpi(cfg, o);
      if (!out.ok) return "FAILED: " + out.failure;
      std::string bytes;
      for (const auto& r : out.obs.ranks) bytes += SerializeObservations(r);
      return bytes;
    };
    const std::string want_two = run(two, fresh), want_four = run(four, fresh);
    for (const std::string* w : {&want_two, &want_four})
      if (w->rfind("FAILED", 0) == 0) return "fresh job: " + *w;
    std::vector<std::pair<const Config*, const std::string*>> order = {
        {&two, &want_two}, {&four, &want_four}, {&two, &want_two}};
    if (c.name != "job") {
      MpiRunOptions faulty = pooled;
      (c.name == "job_hang" ? faulty.debug_hang_rank : faulty.debug_crash_rank) = 1;
      faulty.timeout = std::chrono::milliseconds(3000);
      if (run(two, pooled) != want_two) return "the job's first run differs from a fresh job's";
      const EngineOutcome out = RunEngineMpi(two, faulty);
      std::cout << "INFO: " << c.name << ":\n" << out.failure << "\n";
      const std::string kind = c.name == "job_hang" ? "hang" : "crash";
      if (out.ok || Name(out.failure_kind) != kind || out.failure_rank != 1)
        return "expected a " + kind + " of rank 1, got '" + Name(out.failure_kind) + "' of rank " +
               std::to_string(out.failure_rank);
      const std::string why =
          Contains(out.failure, kind == "hang" ? "no rank made progress for 3000 ms"
                                               : "rank 1: killed by signal 6");
      if (!why.empty()) return why;
      if (!fs::exists(fresh.work_dir + "/mpirun.log")) return "the task's mpirun.log was not kept";
      order = {{&four, &want_four}, {&two, &want_two}};
    }
    for (size_t i = 0; i < order.size(); ++i)
      if (run(*order[i].first, pooled) != *order[i].second)
        return "run " + std::to_string(i) + " on a persistent job (world " +
               std::to_string(order[i].first->parallel.world) + ") differs from a fresh job's";
    if (c.name == "job") {  // a world above kMaxKeptRanks: a job of its own, not kept
      Config big = four;
      big.parallel.world = big.parallel.dp = MpiJob::kMaxKeptRanks + 1;
      if (run(big, pooled) != run(big, fresh))
        return "a world-" + std::to_string(big.parallel.world) + " run differs from a fresh job's";
      const int left = ProcessesMentioning("paradiff-mpijob-" + std::to_string(::getpid()) + "-");
      if (left > MpiJob::kMaxKeptRanks + 1)
        return std::to_string(left) + " processes of persistent jobs are left, more than " +
               std::to_string(MpiJob::kMaxKeptRanks) + " kept ranks and their mpirun";
    }
    fs::remove_all(fresh.work_dir);
    return "";
  }
  return "unknown case " + c.name;
}

}  // namespace
}  // namespace paradiff

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: mpi_engine_test PARADIFF_EXE SOURCE_DIR CASE [ARG...]\n";
    return 2;
  }
  at::set_num_threads(1);
  paradiff::Case c{argv[1], argv[2], argv[3]};
  const std::vector<std::string> extra(argv + 4, argv + argc);
  std::string why;
  try {
    why = paradiff::RunCase(c, extra);
  } catch (const std::exception& e) {
    why = std::string("exception: ") + e.what();
  }
  std::string label = c.name;
  for (const auto& e : extra) label += " " + e;
  if (!why.empty()) {
    std::cout << "FAIL: " << label << ": " << why << std::endl;
    return 1;
  }
  std::cout << "PASS: " << label << std::endl;
  return 0;
}
