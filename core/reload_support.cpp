#include "core/reload_support.h"

#include <algorithm>

namespace paradiff {

std::vector<int64_t> ReloadStages(const ReloadSupport& s, int64_t stage) {
  if (!s.zero_stage) return {stage};
  const auto it = s.zero_stages.find(stage);
  return it == s.zero_stages.end() ? std::vector<int64_t>{0, 1, 2, 3} : it->second;
}

namespace {

// Whether `s` lets cfg's checkpoints reload into another layout at all.
bool MayChange(const ReloadSupport& s, const Config& cfg) {
  const auto& o = s.changes_optimizers;
  return o.empty() || std::find(o.begin(), o.end(), cfg.optimizer.kind) != o.end();
}

}  // namespace

std::pair<std::string, std::string> ReloadRefusal(const ReloadSupport& s, const Config& cfg) {
  const ReloadConfig& r = cfg.checkpoint.reload;
  const ParallelConfig& p = cfg.parallel;
  if (!MayChange(s, cfg) &&
      (r.dp != p.dp || r.tp != p.tp || r.pp != p.pp || r.zero_stage != cfg.zero.stage))
    return {"checkpoint.reload", std::string("an ") + Name(cfg.optimizer.kind) +
                                     " checkpoint reloads only into the save layout"};
  struct Dim {
    const char* name;
    bool may_change;
    int64_t save, reload;
  };
  for (const Dim& d :
       {Dim{"dp", s.dp, p.dp, r.dp}, Dim{"tp", s.tp, p.tp, r.tp}, Dim{"pp", s.pp, p.pp, r.pp}})
    if (!d.may_change && d.save != d.reload)
      return {std::string("checkpoint.reload.") + d.name,
              std::string("reloads only into the same ") + d.name + " (" + std::to_string(d.save) +
                  ")"};
  const std::vector<int64_t> stages = ReloadStages(s, cfg.zero.stage);
  if (stages.empty())
    return {"checkpoint.save_at",
            "the target takes no checkpoint at ZeRO " + std::to_string(cfg.zero.stage)};
  if (std::find(stages.begin(), stages.end(), r.zero_stage) == stages.end()) {
    std::string list;
    for (int64_t z : stages) list += (list.empty() ? "" : ", ") + std::to_string(z);
    return {"checkpoint.reload.zero_stage", "a ZeRO " + std::to_string(cfg.zero.stage) +
                                                " checkpoint reloads only into stage " + list};
  }
  return {};
}

void RestrictReload(const ReloadSupport& s, Config& cfg, uint64_t pick) {
  ReloadConfig& r = cfg.checkpoint.reload;
  if (!MayChange(s, cfg)) r = {cfg.parallel.tp, cfg.parallel.pp, cfg.parallel.dp, cfg.zero.stage};
  if (!s.dp) r.dp = cfg.parallel.dp;
  if (!s.tp) r.tp = cfg.parallel.tp;
  if (!s.pp) r.pp = cfg.parallel.pp;
  const std::vector<int64_t> stages = ReloadStages(s, cfg.zero.stage);
  if (stages.empty())
    cfg.checkpoint = CheckpointConfig{};
  else if (std::find(stages.begin(), stages.end(), r.zero_stage) == stages.end())
    r.zero_stage = stages[pick % stages.size()];
}

}  // namespace paradiff
