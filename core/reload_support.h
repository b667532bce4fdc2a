// ReloadSupport: which layouts a system under test can reload its checkpoints into (a target's
// supports.checkpoint, docs/TARGETS.md). A field that may not change must equal the save layout's;
// the built-in engine reloads into any layout. Used by the target's support check (refusal) and
// by the generator (a drawn reload layout is restricted to what the system takes).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"

namespace paradiff {

struct ReloadSupport {
  bool dp = true, tp = true, pp = true;  // may differ from the save layout
  bool zero_stage = true;
  // With zero_stage: save stage -> the stages it may reload into (a stage absent: any; an empty
  // list: a config at that stage takes no checkpoint).
  std::map<int64_t, std::vector<int64_t>> zero_stages;
  // The optimizers whose checkpoints may reload into another layout (empty: every one); the
  // others reload only into the save layout (DeepSpeed's universal checkpoint knows Adam's state
  // names only, upstream issue 8608).
  std::vector<OptimizerKind> changes_optimizers;
  bool Unrestricted() const {
    return dp && tp && pp && zero_stage && zero_stages.empty() && changes_optimizers.empty();
  }
};

// The reload stages `s` allows after a save at `stage` (all four when unrestricted).
std::vector<int64_t> ReloadStages(const ReloadSupport& s, int64_t stage);

// Why `s` does not take cfg's reload layout: {field, reason}, or two empty strings when it does.
std::pair<std::string, std::string> ReloadRefusal(const ReloadSupport& s, const Config& cfg);

// Sets each reload field that may not change to the save layout's, and a zero stage outside the
// allowed ones to the allowed stage `pick` selects (pick modulo their count); drops the checkpoint
// where the save stage allows none.
void RestrictReload(const ReloadSupport& s, Config& cfg, uint64_t pick);

}  // namespace paradiff
