#include "tools/cli.h"

#include <boost/program_options.hpp>
#include <sstream>

#include "core/watchdog.h"
#include "oracles/oracle_registry.h"

namespace paradiff {

namespace po = boost::program_options;

const std::vector<Subcommand>& Subcommands() {
  static const std::vector<Subcommand> kSubcommands = {
      {"version", "paradiff version", "print the version and build facts", CmdVersion},
      {"validate", "paradiff validate CONFIG...",
       "check configs against the schema, the rules and the resource budget", CmdValidate},
      {"run", "paradiff run CONFIG [--inject NAME]... [--report FILE.json]",
       "train one config distributed and on the reference; compare; print a verdict", CmdRun},
      {"campaign", "paradiff campaign --workdir DIR (--budget 90s | --runs N) [options]",
       "fuzz: generate configs, check them in worker processes, store findings; resumable",
       CmdCampaign},
      {"ckpt", "paradiff ckpt save CONFIG DIR | inspect DIR | consolidate DIR OUT",
       "sharded checkpoints: save a run, verify and print a manifest, write one unsharded fp32 "
       "state",
       CmdCkpt},
      {"zoo", "paradiff zoo list | zoo run [--budget 60s] [--jobs N] [--seed S] [--json FILE]",
       "the bug zoo: list the fault switches, or prove each is found by a campaign", CmdZoo},
      {"domain", "paradiff domain [--runs N] [--seed S] [--target FILE] [--json FILE]",
       "blind spots of the config generator: feature and pair shares, valid pairs never drawn",
       CmdDomain},
      {"worker", "paradiff worker", "internal: the campaign's worker process (tasks on stdin)",
       CmdWorker},
#ifdef PARADIFF_HAVE_MPI
      {"rank", "paradiff rank CONFIG --obs-dir DIR | paradiff rank --serve DIR",
       "internal: one rank of an mpi job, started by mpirun (kernels/engine_mpi.h)", CmdRank},
#endif
      {"minimize", "paradiff minimize CONFIG [--inject NAME]... --out MIN.json",
       "shrink a failing config to a 1-minimal one with the same signature", CmdMinimize},
      {"replay", "paradiff replay PATH...",
       "re-check configs, finding dirs, work dirs or corpora: same / different / pass / invalid",
       CmdReplay},
      {"gate",
       "paradiff gate --suite DIR [--regression DIR] [--budget 10m] [--baseline FILE] "
       "--junit FILE --json FILE --html FILE",
       "pre-release gate: a config suite, the regression corpus, an optional short campaign",
       CmdGate},
      {"report", "paradiff report (WORKDIR | REPORT.json) --html FILE",
       "render a campaign work dir or a JSON report as one self-contained HTML file", CmdReport},
      {"import",
       "paradiff import deepspeed DS_CONFIG.json | megatron ARGS_FILE | megatron -- ARGS... "
       "[--out CONFIG.json]",
       "a paradiff config from a DeepSpeed config or Megatron-LM arguments (docs/TARGETS.md)",
       CmdImport},
      {"export", "paradiff export deepspeed|megatron CONFIG [--out FILE]",
       "a DeepSpeed config or Megatron-LM arguments for a paradiff config (docs/TARGETS.md)",
       CmdExport},
  };
  return kSubcommands;
}

namespace {

// The one options table: which subcommands take each option.
po::options_description Options(const std::string& sub, Args& a) {
  po::options_description d("options");
  d.add_options()("help,h", po::bool_switch(&a.help), "show help for this subcommand");
  if (sub == "run" || sub == "campaign")
    d.add_options()("backend", po::value<std::string>(&a.backend_name),
                    "override the config's backend: local | mpi (mpi runs the ranks under mpirun)");
  if (sub == "run")
    d.add_options()(
        "cross-backend", po::bool_switch(&a.cross_backend),
        "also run the config on the mpi backend; its observations must equal the local ones");
  if (sub == "campaign")
    d.add_options()("distributed", po::bool_switch(&a.distributed),
                    "run under mpirun: rank 0 drives the campaign, every other rank is a worker");
  if (sub == "domain")
    d.add_options()("runs", po::value<int64_t>(&a.runs)->default_value(2000),
                    "configs to generate")("seed", po::value<uint64_t>(&a.seed)->default_value(1),
                                           "seed of the draws and of the search")(
        "target", po::value<std::string>(&a.target),
        "draw only configs this target file supports, as its campaign does")(
        "json", po::value<std::string>(&a.json), "write the whole report as JSON here");
  if (sub == "run" || sub == "campaign" || sub == "minimize" || sub == "replay" || sub == "gate")
    d.add_options()("oracles", po::value<std::vector<std::string>>(&a.oracles)->composing(),
                    "oracles to apply: names or sets, comma-separated, repeatable (default | all | "
                    "numeric,tiling,...)")("target", po::value<std::string>(&a.target),
                                           "check an external target described by this file "
                                           "instead of the built-in engine (docs/TARGETS.md)");
  if (sub == "run" || sub == "replay")
    d.add_options()("keep-run-dirs", po::value<std::string>(&a.keep_run_dirs),
                    "with --target: put the target's run dirs (inputs, outputs, logs) here and "
                    "keep them all");
  if (sub == "rank")
    d.add_options()("obs-dir", po::value<std::string>(&a.obs_dir),
                    "write rank<r>.log and rank<r>.obs here (required)")(
        "native-reduction", po::bool_switch(&a.native_reduction),
        "reduce with MPI's own ops (not rank order)")(
        "debug-hang-rank", po::value<int>(&a.debug_hang_rank), "testing: this rank sleeps forever")(
        "debug-crash-rank", po::value<int>(&a.debug_crash_rank), "testing: this rank aborts")(
        "first-step", po::value<int64_t>(&a.first_step), "train from this step (default 0)")(
        "last-step", po::value<int64_t>(&a.last_step),
        "train up to this step, exclusive (default: the config's steps)")(
        "load-checkpoint", po::value<std::string>(&a.load_checkpoint),
        "load this rank's state from this checkpoint before the first step")(
        "save-checkpoint", po::value<std::string>(&a.save_checkpoint),
        "save this rank's shard here after the last step (the caller writes the manifest)")(
        "serve", po::value<std::string>(&a.serve_dir),
        "a persistent job's rank: take tasks (the options above, one JSON array a line) from "
        "DIR/in<r> and answer on DIR/out (kernels/mpi_job.h)");
  if (sub == "run") {
    d.add_options()("inject", po::value<std::vector<std::string>>(&a.inject)->composing(),
                    "turn on a bug-zoo fault switch (repeatable; see docs/BUGZOO.md)")(
        "report", po::value<std::string>(&a.report),
        "write the JSON report to this file (atomically)")(
        "timeout-ms",
        po::value<int64_t>(&a.timeout_ms)->default_value(kDefaultCollectiveTimeout.count()),
        "watchdog: a rank waiting longer than this in one collective is a hang")(
        "html", po::value<std::string>(&a.html), "write a self-contained HTML report to this file");
  }
  if (sub == "minimize" || sub == "replay" || sub == "gate")
    d.add_options()(
        "timeout-ms",
        po::value<int64_t>(&a.timeout_ms)->default_value(kDefaultCollectiveTimeout.count()),
        "watchdog of every check: a rank waiting longer than this in one collective is a hang");
  if (sub == "minimize")
    d.add_options()("inject", po::value<std::vector<std::string>>(&a.inject)->composing(),
                    "turn on a bug-zoo fault switch (repeatable); kept in the minimized config")(
        "out", po::value<std::string>(&a.out), "write the minimized config here (required)")(
        "budget", po::value<std::string>(&a.budget), "stop shrinking after this long: 90s, 10m");
  if (sub == "import" || sub == "export")
    d.add_options()("out", po::value<std::string>(&a.out),
                    "write the result here instead of stdout");
  if (sub == "gate")
    d.add_options()("suite", po::value<std::string>(&a.suite),
                    "directory of configs expected to pass (required)")(
        "regression", po::value<std::string>(&a.regression),
        "regression corpus (NAME.json + NAME.expect.json)")(
        "budget", po::value<std::string>(&a.budget), "also fuzz for this long: 90s, 10m")(
        "seed", po::value<uint64_t>(&a.seed)->default_value(1), "seed of the gate's campaign")(
        "jobs", po::value<int>(&a.jobs)->default_value(1),
        "worker processes of the gate's campaign")(
        "workdir", po::value<std::string>(&a.workdir),
        "work dir of the gate's campaign (default: a temporary one)")(
        "baseline", po::value<std::string>(&a.baseline),
        "JSON list of known signatures: only others fail the gate")(
        "junit", po::value<std::string>(&a.junit), "write JUnit XML here")(
        "json", po::value<std::string>(&a.json), "write the JSON result here")(
        "html", po::value<std::string>(&a.html), "write the HTML report here");
  if (sub == "gate" || sub == "campaign")
    d.add_options()(
        "minimize-budget-s", po::value<double>(&a.minimize_budget_s)->default_value(20),
        "after fuzzing, minimize each new finding for at most this long (0 = do not minimize)");
  if (sub == "report")
    d.add_options()("html", po::value<std::string>(&a.html),
                    "write the HTML report here (required)");
  if (sub == "zoo") {
    d.add_options()("workdir", po::value<std::string>(&a.workdir)->default_value("work/zoo"),
                    "one campaign work dir per switch goes here")(
        "budget", po::value<std::string>(&a.budget)->default_value("60s"),
        "time budget per switch (and for the clean run)")(
        "jobs", po::value<int>(&a.jobs)->default_value(2), "worker processes per campaign")(
        "seed", po::value<uint64_t>(&a.seed)->default_value(1), "campaign seed")(
        "corpus", po::value<std::string>(&a.corpus)->default_value("corpus/seed"), "seed corpus")(
        "json", po::value<std::string>(&a.json), "write the table as JSON here")(
        "stop-on-first", po::bool_switch(&a.stop_on_first),
        "end each switch's campaign at its first finding")(
        "only", po::value<std::vector<std::string>>(&a.inject)->composing(),
        "run only this switch (repeatable)")(
        "runs", po::value<int64_t>(&a.runs),
        "executions per campaign instead of a time budget (deterministic)")(
        "minimize-budget-s", po::value<double>(&a.minimize_budget_s)->default_value(10),
        "seconds to minimize each finding (0 = off)")(
        "no-feedback", po::bool_switch(&a.no_feedback),
        "draw configs from the seed alone, without behaviour feedback");
  }
  if (sub == "campaign") {
    d.add_options()("workdir", po::value<std::string>(&a.workdir),
                    "work dir: findings/, corpus/, stats.json (resumed if present)")(
        "budget", po::value<std::string>(&a.budget), "total time budget: 90s, 10m, 8h")(
        "runs", po::value<int64_t>(&a.runs), "total executions budget")(
        "jobs", po::value<int>(&a.jobs)->default_value(1), "worker processes")(
        "seed", po::value<uint64_t>(&a.seed)->default_value(1),
        "campaign seed (same seed, same configs)")("corpus", po::value<std::string>(&a.corpus),
                                                   "seed corpus directory of JSON configs")(
        "inject", po::value<std::vector<std::string>>(&a.inject)->composing(),
        "turn on a bug-zoo fault switch in every config (repeatable)")(
        "stop-on-first", po::bool_switch(&a.stop_on_first), "stop at the first finding")(
        "baseline", po::value<std::string>(&a.baseline),
        "JSON list of known signatures: their findings are recorded, not minimized, and do not "
        "fail the campaign or stop it")(
        "no-feedback", po::bool_switch(&a.no_feedback),
        "draw configs from the seed alone, without behaviour feedback (docs/FUZZING.md)")(
        "task-timeout-s", po::value<double>(&a.task_timeout_s)->default_value(120),
        "a config whose check takes longer is recorded as a hang (with --target: at least 4 x "
        "the target's timeout_s, so that the target's own watchdog fires first)")(
        "worker-mem-mb", po::value<int64_t>(&a.worker_mem_mb)->default_value(8192),
        "address-space limit of each worker process")(
        "debug-crash-at", po::value<int64_t>(&a.debug_crash_at),
        "testing: the worker aborts at this execution")(
        "debug-hang-at", po::value<int64_t>(&a.debug_hang_at),
        "testing: the worker blocks at this execution");
  }
  if (sub == "validate" || sub == "run" || sub == "minimize" || sub == "replay")
    d.add_options()("quiet,q", po::bool_switch(&a.quiet), "print only ERROR and SUMMARY lines");
  return d;
}

const Subcommand* Find(const std::string& name) {
  for (const auto& s : Subcommands())
    if (name == s.name) return &s;
  return nullptr;
}

}  // namespace

double ParseDuration(const std::string& text) {
  if (text.empty()) return -1;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    return -1;
  }
  const std::string unit = text.substr(used);
  const double mult = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (mult < 0 || !(v > 0)) return -1;
  return v * mult;
}

bool ParseArgs(int argc, char** argv, Args& out, std::string& error) {
  if (argc < 2) {
    out.help = true;
    return true;
  }
  const std::string first = argv[1];
  if (first == "--help" || first == "-h" || first == "help") {
    out.help = true;
    if (first == "help" && argc > 2) out.subcommand = argv[2];
    return true;
  }
  if (first == "--version") {
    out.subcommand = "version";
    return true;
  }
  if (!Find(first)) {
    error = "unknown subcommand '" + first + "' (see paradiff --help)";
    return false;
  }
  out.subcommand = first;
  po::options_description opts = Options(first, out);
  po::options_description hidden;
  hidden.add_options()("positional", po::value<std::vector<std::string>>(&out.positional));
  po::options_description all;
  all.add(opts).add(hidden);
  po::positional_options_description pos;
  pos.add("positional", -1);
  try {
    po::variables_map vm;
    po::store(po::command_line_parser(argc - 1, argv + 1).options(all).positional(pos).run(), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    error = std::string(e.what()) + " (see paradiff " + first + " --help)";
    return false;
  }
  if (!out.backend_name.empty()) {
    out.backend = ParseIn(kBackendNames, out.backend_name);
    if (!out.backend || *out.backend == Backend::kNccl) {
      error = "--backend must be local or mpi, got '" + out.backend_name + "'";
      return false;
    }
  }
  if (!out.oracles.empty()) {
    StatusOr<std::vector<std::string>> names = ResolveOracleNames(out.oracles);
    if (!names.ok()) {
      error = "--oracles: " + names.status().ToString();
      return false;
    }
    out.oracles = names.value();
  }
  if (out.timeout_ms <= 0) {
    error = "--timeout-ms must be positive";
    return false;
  }
  if (!out.keep_run_dirs.empty() && out.target.empty()) {
    error = "--keep-run-dirs keeps an external target's run dirs: it needs --target FILE";
    return false;
  }
  return true;
}

std::string HelpText(const std::string& sub) {
  std::ostringstream os;
  const Subcommand* s = Find(sub);
  if (!s) {
    os << "paradiff: differential testing and fuzzing of distributed LLM training\n\n"
       << "usage: paradiff SUBCOMMAND [options]\n\nsubcommands:\n";
    for (const auto& c : Subcommands())
      if (std::string(c.name) != "worker" && std::string(c.name) != "rank")  // internal ones
        os << "  " << c.name << "\t" << c.summary << "\n";
    os << "\nexit codes: 0 pass, 1 internal error, 2 bad input, 3 finding\n"
       << "paradiff SUBCOMMAND --help shows a subcommand's options.\n";
    return os.str();
  }
  Args scratch;
  os << "usage: " << s->usage << "\n" << s->summary << "\n\n" << Options(sub, scratch);
  return os.str();
}

}  // namespace paradiff
