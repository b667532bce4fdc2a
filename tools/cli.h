// The `paradiff` command line: one options table (cli.cpp) shared by every subcommand, parsed with
// Boost.Program_options into a plain Args value. Subcommands live in cmd_*.cpp and return exit
// codes (core/exit_codes.h); only main() returns them to the shell.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/watchdog.h"

namespace paradiff {

struct Args {
  std::string subcommand;
  std::vector<std::string> positional;                     // CONFIG... for validate / run
  std::vector<std::string> inject;                         // --inject NAME (repeatable)
  std::string report;                                      // --report FILE.json
  int64_t timeout_ms = kDefaultCollectiveTimeout.count();  // --timeout-ms
  bool quiet = false;                                      // --quiet
  bool help = false;
  // campaign
  std::string workdir;            // --workdir DIR
  std::string budget;             // --budget 90s | 10m | 8h
  int64_t runs = 0;               // --runs N
  int jobs = 1;                   // --jobs N
  uint64_t seed = 1;              // --seed S
  std::string corpus;             // --corpus DIR
  bool stop_on_first = false;     // --stop-on-first
  bool no_feedback = false;       // --no-feedback (campaign, zoo)
  double task_timeout_s = 120;    // --task-timeout-s
  int64_t worker_mem_mb = 8192;   // --worker-mem-mb
  int64_t debug_crash_at = -1;    // --debug-crash-at N (tests)
  int64_t debug_hang_at = -1;     // --debug-hang-at N (tests)
  double minimize_budget_s = 20;  // --minimize-budget-s (campaign, gate; 0 = off)
  // minimize, replay, gate, report
  std::string out;         // --out MIN.json
  std::string html;        // --html FILE
  std::string junit;       // --junit FILE
  std::string json;        // --json FILE
  std::string suite;       // --suite DIR
  std::string regression;  // --regression DIR
  std::string baseline;    // --baseline FILE
  // run: backend override; rank (hidden, the mpi backend's per-rank process)
  std::string backend_name;        // --backend local|mpi as given ("" = the config's)
  std::optional<Backend> backend;  // the parsed --backend
  std::string obs_dir;             // --obs-dir DIR
  bool native_reduction = false;   // --native-reduction
  int debug_hang_rank = -1;        // --debug-hang-rank R (tests)
  int debug_crash_rank = -1;       // --debug-crash-rank R (tests)
  int64_t first_step = 0;          // rank --first-step N (a checkpointed run's second phase)
  int64_t last_step = -1;          // rank --last-step N (-1: the config's steps)
  std::string load_checkpoint;     // rank --load-checkpoint DIR
  std::string save_checkpoint;     // rank --save-checkpoint DIR
  std::string serve_dir;           // rank --serve DIR (a persistent job's rank)
  // oracle selection, external targets, backends
  std::vector<std::string> oracles;  // --oracles NAME[,NAME] (repeatable; names or sets)
  std::string target;                // --target FILE (an external target, docs/TARGETS.md)
  std::string keep_run_dirs;         // run / replay --keep-run-dirs DIR
  bool distributed = false;          // campaign --distributed (under mpirun)
  bool cross_backend = false;        // run --cross-backend (local vs mpi)
};

// "90s", "10m", "8h", "1.5h" or plain seconds; -1 on a malformed value.
double ParseDuration(const std::string& text);

struct Subcommand {
  const char* name;
  const char* usage;    // e.g. "paradiff run CONFIG [options]"
  const char* summary;  // one line
  int (*run)(const Args&);
};

const std::vector<Subcommand>& Subcommands();

// Parses argv[1..] (argv[1] is the subcommand). Returns false and fills `error` on a usage error.
bool ParseArgs(int argc, char** argv, Args& out, std::string& error);
std::string HelpText(const std::string& subcommand);  // "" = top-level help

int CmdVersion(const Args& args);
int CmdValidate(const Args& args);
int CmdRun(const Args& args);
int CmdCampaign(const Args& args);
int CmdWorker(const Args& args);
int CmdCkpt(const Args& args);
int CmdZoo(const Args& args);
int CmdRank(const Args& args);  // built with MPI only (PARADIFF_HAVE_MPI)
int CmdMinimize(const Args& args);
int CmdReplay(const Args& args);
int CmdGate(const Args& args);
int CmdReport(const Args& args);
int CmdImport(const Args& args);
int CmdExport(const Args& args);
int CmdDomain(const Args& args);

}  // namespace paradiff
