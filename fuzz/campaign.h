// The campaign driver (`paradiff campaign`): generates configs deterministically from (seed,
// execution index) (see Note [Campaign schedule]), checks them in worker processes under a
// watchdog, deduplicates findings by signature into the work dir, saves configs that cover new
// feature pairs, prints progress, and resumes from the work dir after SIGINT or SIGKILL.
//
// Note [Campaign schedule]: execution i checks ConfigAt(seed, i): executions come in families of
// kFamilySize sharing one generated (or seed-corpus) base config; members after the first are
// field-aware mutations of it, mostly of the layout, so the reference cache is shared within a
// family. The config depends only on (seed, i, the seed corpus, the injected faults) and, with
// behaviour feedback, on the results of earlier generations (see Note [Behaviour feedback] in
// fuzz/feedback.h), never on timing, so the same seed gives the same configs at any --jobs and
// after a resume.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "fuzz/config_domain.h"
#include "fuzz/task_pool.h"

namespace paradiff {

struct SystemUnderTest;  // targets/system_under_test.h

struct CampaignOptions {
  std::string workdir;
  double budget_s = 0;  // total wall time over all resumptions (0 = no time limit)
  int64_t runs = 0;     // total executions (0 = no execution limit)
  int jobs = 1;
  uint64_t seed = 1;
  std::string corpus_dir;           // seed corpus of JSON configs (optional)
  std::vector<std::string> inject;  // fault switches turned on in every config
  bool stop_on_first = false;
  double task_timeout_s = 120;   // a config taking longer is a hang
  int64_t worker_mem_mb = 8192;  // address-space limit per worker
  double progress_every_s = 2;
  std::string exe;              // the paradiff binary (workers run `exe worker`)
  int64_t debug_crash_at = -1;  // tests: execution whose worker aborts
  int64_t debug_hang_at = -1;   // tests: execution whose worker blocks
  std::vector<std::string>
      oracles;  // oracle selection of every check (resolved names; empty = default)
  std::optional<Backend> backend;  // every config's backend; none: each config's own
  // Where tasks go: empty = a WorkerPool of `jobs` workers here; `--distributed` passes an
  // MpiTaskPool.
  std::function<std::unique_ptr<TaskPool>()> make_pool;
  double minimize_budget_s =
      20;                // after the loop, per stored finding (fuzz/finding_minimizer.h); 0 = off
  std::string target;    // external target file (docs/TARGETS.md); "" = the built-in engine
  bool feedback = true;  // behaviour feedback (fuzz/feedback.h); off: the seed-only schedule
  // Known signatures (--baseline, fuzz/gate.h LoadBaseline): their findings are recorded as any
  // other, but neither minimized nor a reason to stop (--stop-on-first) or to fail.
  std::set<std::string> baseline;
};

struct CampaignSummary {
  int64_t execs = 0, findings = 0, unique = 0, new_unique = 0, inconclusive = 0, rejected = 0;
  int64_t known = 0;  // of the unique signatures, those in the baseline
  int64_t pairs_covered = 0, pairs_possible = 0;
  double elapsed_s = 0;
  bool interrupted = false;
  std::vector<std::string> signatures;            // every signature in the work dir
  std::vector<std::string> inconclusive_reasons;  // signatures under DIR/inconclusive
};

// The configs a campaign against `system` draws: what it supports, at most its max_world ranks.
DomainOptions DomainFor(const SystemUnderTest& system);

// Execution i of a campaign with these options, given the feedback's parents as they stand when
// i's generation starts (none: the seed-only schedule).
Config ConfigAt(const CampaignOptions& opts, const std::vector<Config>& seeds,
                const DomainOptions& domain, int64_t i, const std::vector<Config>& parents = {});

// Loads a seed corpus directory (every *.json); errors name the file and the field.
StatusOr<std::vector<Config>> LoadCorpus(const std::string& dir);

// Runs (or resumes) a campaign; progress and INFO lines go to `log`. Bad options or an
// incompatible work dir: a Status error (exit code 2 in main).
StatusOr<CampaignSummary> RunCampaign(const CampaignOptions& opts, std::ostream& log);

}  // namespace paradiff
