// Feedback: the campaign's memory of what its runs did (oracles/behaviour.h), turned into parents
// for later configs.
//
// Note [Behaviour feedback]: a config drawn from (seed, index) alone reaches a state that needs a
// run held at an edge (an overflow inside a growth interval that already had a clean step, a skip
// streak across a save, a comparison close to its bound) only by luck. So a campaign keeps, as a
// parent, every config whose run showed a behaviour feature no earlier run had, or a margin to a
// bound above every earlier one (>= kNearBound); later families start from a parent (a share
// kParentShare of them, all eight members mutated) instead of a fresh draw. To keep a seed
// reproducible at any --jobs and across a resume, the schedule is in generations of
// kGenerationSize executions: generation g's configs depend only on the results of generations
// before it, folded in index order once all of them are complete, and the campaign does not start
// generation g before that. Generation 0 is the seed-only schedule (see Note [Campaign schedule]),
// and so is every family that does not draw a parent.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"

namespace paradiff {

class Feedback {
 public:
  static constexpr int64_t kGenerationSize = 64;  // eight families
  static constexpr double kParentShare = 0.3;     // families (from generation 1) on a parent
  static constexpr double kNearBound = 0.5;       // error / bound counted as close to a bound
  static constexpr size_t kMaxParents = 1024;     // the oldest parent goes beyond this

  static int64_t GenerationOf(int64_t index) { return index / kGenerationSize; }

  // Execution `index` checked `cfg` and its run showed `behaviour` (the worker's "behaviour":
  // {"features": [...], "margin": x}). Executions without one (rejected, crashed, hung, a finding)
  // are not recorded: they are complete, and leave no parent.
  void Record(int64_t index, const Config& cfg, const nlohmann::json& behaviour);
  // Folds every generation that lies wholly below `done_below` (every index below it complete).
  void Fold(int64_t done_below);
  // Whether execution `index` may be drawn now: every generation before its own is folded.
  bool Ready(int64_t index) const { return GenerationOf(index) <= folded_; }
  const std::vector<Config>& parents() const { return parents_; }

  nlohmann::json ToJson() const;
  Status FromJson(const nlohmann::json& j);  // the work dir's stats.json "feedback"

 private:
  struct Pending {
    Config config;
    std::vector<std::string> features;
    double margin = 0;
  };
  std::map<int64_t, Pending> pending_;  // recorded, not folded yet
  std::set<std::string> seen_;
  double best_margin_ = 0;
  std::vector<Config> parents_;
  int64_t folded_ = 0;  // generations below this are folded
};

}  // namespace paradiff
