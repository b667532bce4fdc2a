// The bug zoo (../shared/BUGZOO.md, docs/ZOO.md): the catalogue of fault switches and the
// self-validation run (`paradiff zoo run`): for each switch a campaign from the seed corpus with
// the switch on — not told which switch, not steered toward its trigger — then one clean campaign
// whose findings are false positives.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "core/status.h"

namespace paradiff {

struct ZooSwitch {
  const char* name;
  const char* mechanism;
  const char* triggers;
  const char* precedent;
};

const std::vector<ZooSwitch>& ZooSwitches();

struct ZooOptions {
  double budget_s = 60;  // per switch (and for the clean campaign); 0 with `runs`
  int64_t runs = 0;      // executions per campaign instead of time (deterministic)
  int jobs = 2;
  uint64_t seed = 1;
  std::string corpus_dir = "corpus/seed";
  std::string workdir;         // campaigns go to workdir/<switch>/ and workdir/clean/
  std::string exe;             // the paradiff binary
  bool stop_on_first = false;  // stop each switch's campaign at its first finding
  double minimize_budget_s = 10;
  std::vector<std::string> only;  // run only these switches (empty = all)
  bool feedback = true;           // behaviour feedback in every campaign (fuzz/feedback.h)
};

struct ZooRow {
  std::string name;
  bool found = false;
  double time_to_detect_s = 0;
  int64_t execs_to_detect = 0;
  int64_t signatures = 0;
  std::string signature;                                 // of the first finding
  int64_t min_world = 0, min_layers = 0, min_steps = 0;  // its minimized config (0 = none)
};

struct ZooReport {
  std::vector<ZooRow> rows;
  int64_t false_positives = 0;  // findings of the clean campaign
  std::vector<std::string> false_positive_signatures;
  double detection_rate = 0, median_time_to_detect_s = 0;
  nlohmann::json ToJson() const;
};

StatusOr<ZooReport> RunZoo(const ZooOptions& opts, std::ostream& log);

}  // namespace paradiff
