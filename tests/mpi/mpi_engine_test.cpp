// mpi_engine_test PARADIFF_EXE SOURCE_DIR CASE [ARG]: the mpirun executor (kernels/engine_mpi.h)
// and the cross-backend oracle, one case per ctest test.
//
//   cross CONFIG [FAULT]  the same config (configs/examples/CONFIG or an absolute path, optionally
//                         with a bug-zoo fault)
//                         on the local and the mpi backend: the raw per-rank observations (every
//                         piece in its own dtype, losses, norms, memory, the collective log) and the
//                         assembled tensors (oracles/assemble.h) must be bitwise identical, since
//                         both backends reduce in rank order (Note [MPI reduction order]).
//   hang                  rank 1 of a 2-rank job sleeps before its first collective: a hang,
//                         reported within the watchdog timeout, naming rank 1 and what rank 0
//                         waits in; no process of the job is left behind; the logs are kept.
//   crash                 rank 1 aborts: a crash naming rank 1 and signal 6.
//   mismatch              a rank-dependent bucket order: a collective mismatch on both backends.
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
#include "oracles/assemble.h"

namespace paradiff {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool SameBits(const at::Tensor& a, const at::Tensor& b) {
  if (a.defined() != b.defined()) return false;
  if (!a.defined()) return true;
  return a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

bool SameBits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The first difference between two runs' raw observations, "" when bitwise identical.
std::string CompareRaw(const Observations& a, const Observations& b) {
  if (a.ranks.size() != b.ranks.size()) return "rank counts differ";
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    const RankObservations &x = a.ranks[r], &y = b.ranks[r];
    const std::string at_rank = "rank " + std::to_string(r) + ": ";
    if (x.rank != y.rank || x.steps.size() != y.steps.size()) return at_rank + "rank id or step count";
    for (size_t s = 0; s < x.steps.size(); ++s) {
      const RankStep &p = x.steps[s], &q = y.steps[s];
      const std::string at_step = at_rank + "step " + std::to_string(s) + ": ";
      if (!SameBits(p.loss_sum, q.loss_sum) || p.loss_count != q.loss_count) return at_step + "loss";
      if (!SameBits(p.grad_norm, q.grad_norm)) return at_step + "grad_norm";
      if (!SameBits(p.loss_scale, q.loss_scale) || p.skipped != q.skipped) return at_step + "loss scale";
      if (p.pieces.size() != q.pieces.size()) return at_step + "piece counts";
      for (size_t i = 0; i < p.pieces.size(); ++i) {
        const TensorPiece &u = p.pieces[i], &v = q.pieces[i];
        if (u.kind != v.kind || u.tensor != v.tensor || u.offset != v.offset || !SameBits(u.values, v.values))
          return at_step + "piece " + u.kind + ":" + u.tensor + "@" + std::to_string(u.offset);
      }
    }
    if (x.memory.size() != y.memory.size()) return at_rank + "memory account count";
    for (size_t s = 0; s < x.memory.size(); ++s)
      if (x.memory[s].bytes != y.memory[s].bytes) return at_rank + "memory account of step " + std::to_string(s);
    if (x.collectives.size() != y.collectives.size())
      return at_rank + "collective log length " + std::to_string(x.collectives.size()) + " vs " +
             std::to_string(y.collectives.size());
    for (size_t i = 0; i < x.collectives.size(); ++i)
      if (x.collectives[i].ToString() != y.collectives[i].ToString())
        return at_rank + "collective " + std::to_string(i) + ": " + x.collectives[i].ToString() + " vs " +
               y.collectives[i].ToString();
  }
  return "";
}

std::string CompareAssembled(const Config& cfg, const Observations& a, const Observations& b) {
  const Assembly x = Assemble(cfg, a), y = Assemble(cfg, b);
  if (x.verdict.kind != y.verdict.kind) return "assembly verdicts differ: " + x.verdict.message + " vs " + y.verdict.message;
  if (x.steps.size() != y.steps.size()) return "assembled step counts differ";
  for (size_t s = 0; s < x.steps.size(); ++s) {
    const std::string at_step = "assembled step " + std::to_string(s) + ": ";
    if (!SameBits(x.steps[s].loss, y.steps[s].loss) || !SameBits(x.steps[s].grad_norm, y.steps[s].grad_norm))
      return at_step + "loss or grad_norm";
    if (x.steps[s].tensors.size() != y.steps[s].tensors.size()) return at_step + "tensor sets";
    for (const auto& [name, t] : x.steps[s].tensors) {
      auto it = y.steps[s].tensors.find(name);
      if (it == y.steps[s].tensors.end() || !SameBits(t, it->second)) return at_step + name;
    }
  }
  return "";
}

struct Case {
  std::string exe, src, name;  // the paradiff binary, the source tree, the case
};

Config LoadExample(const std::string& src, const std::string& name) {
  StatusOr<Config> c = LoadConfigFile(name.rfind('/', 0) == 0 ? name : src + "/configs/examples/" + name);
  if (!c.ok()) throw std::runtime_error(c.status().ToString());
  return c.value();
}

MpiRunOptions Options(const Case& c, std::chrono::milliseconds timeout) {
  MpiRunOptions o;
  o.exe = c.exe;
  o.timeout = timeout;
  o.work_dir = (fs::temp_directory_path() / ("paradiff-mpi-test-" + c.name + "-" + std::to_string(::getpid()))).string();
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
    if (!cmd.empty() && cmd.find(needle) != std::string::npos && e.path().filename() != std::to_string(::getpid()))
      ++found;
  }
  return found;
}

std::string RunCase(const Case& c, const std::vector<std::string>& extra) {
  if (c.name == "cross") {
    Config cfg = LoadExample(c.src, extra.at(0));
    if (extra.size() > 1) cfg.faults.push_back(extra[1]);
    const EngineOutcome local = RunEngine(cfg, std::chrono::seconds(60));
    const MpiRunOptions o = Options(c, std::chrono::seconds(60));
    const EngineOutcome mpi = RunEngineMpi(cfg, o);
    if (!local.ok) return "local run failed: " + local.failure;
    if (!mpi.ok) return "mpi run failed: " + mpi.failure;
    const std::string raw = CompareRaw(local.obs, mpi.obs);
    if (!raw.empty()) return "raw observations differ (local vs mpi): " + raw;
    const std::string assembled = CompareAssembled(cfg, local.obs, mpi.obs);
    if (assembled.empty()) fs::remove_all(o.work_dir);
    return assembled;
  }
  if (c.name == "hang" || c.name == "crash") {
    const Config cfg = LoadExample(c.src, "dp2_bf16_accum.json");
    MpiRunOptions o = Options(c, std::chrono::milliseconds(3000));
    (c.name == "hang" ? o.debug_hang_rank : o.debug_crash_rank) = 1;
    const auto t0 = Clock::now();
    const EngineOutcome out = RunEngineMpi(cfg, o);
    const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    std::cout << "INFO: " << c.name << " reported after " << seconds << " s:\n" << out.failure << "\n";
    if (out.ok || out.failure_kind != c.name) return "expected kind " + c.name + ", got '" + out.failure_kind + "'";
    if (out.failure_rank != 1) return "expected rank 1 to be blamed, got " + std::to_string(out.failure_rank);
    if (!fs::exists(o.work_dir + "/rank0.log") || !fs::exists(o.work_dir + "/rank1.log")) return "rank logs not kept";
    std::string why;
    if (c.name == "hang") {
      if (seconds > 3 + 20) return "the hang was reported only after " + std::to_string(seconds) + " s";
      if (ProcessesMentioning(o.work_dir) != 0) return "processes of the killed job are still running";
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
  if (c.name == "mismatch") {
    Config cfg = LoadExample(c.src, "dp4_zero2.json");
    cfg.faults.push_back("comm.rank_dependent_bucket_order");
    const EngineOutcome local = RunEngine(cfg, std::chrono::seconds(60));
    const MpiRunOptions o = Options(c, std::chrono::seconds(60));
    const EngineOutcome mpi = RunEngineMpi(cfg, o);
    if (local.failure_kind != "collective") return "local: expected a collective failure: " + local.failure;
    if (mpi.failure_kind != "collective") return "mpi: expected a collective failure: " + mpi.failure;
    const std::string why = Contains(mpi.failure, "collective mismatch in group 'world/c0/c0.1'");
    if (why.empty()) fs::remove_all(o.work_dir);
    return why;
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
