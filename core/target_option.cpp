#include "core/target_option.h"

#include <algorithm>
#include <cstdlib>

namespace paradiff {

namespace {

// Where an option's value must fit: the config's own layout, and with a checkpoint the one it
// reloads into.
struct Layout {
  int64_t dp, stage;
  const char* dp_field;
  const char* stage_field;
};

std::vector<Layout> LayoutsOf(const Config& cfg) {
  std::vector<Layout> layouts = {{cfg.parallel.dp, cfg.zero.stage, "parallel.dp", "zero.stage"}};
  if (cfg.checkpoint.save_at > 0)
    layouts.push_back({cfg.checkpoint.reload.dp, cfg.checkpoint.reload.zero_stage,
                       "checkpoint.reload.dp", "checkpoint.reload.zero_stage"});
  return layouts;
}

}  // namespace

std::string OptionMisfit(const TargetOption& o, const std::string& value, const Config& cfg) {
  const std::vector<Layout> layouts = LayoutsOf(cfg);
  const auto& stages = o.zero_stages;
  for (const Layout& l : layouts) {
    if (stages.empty() || std::find(stages.begin(), stages.end(), l.stage) != stages.end())
      continue;
    std::string listed;
    for (int64_t s : stages) listed += (listed.empty() ? "" : ", ") + std::to_string(s);
    return value + " is not set at " + l.stage_field + " " + std::to_string(l.stage) +
           " (the target declares \"zero_stages\": [" + listed + "])";
  }
  for (const auto& [other, wanted] : o.requires) {
    const auto it = cfg.target_options.find(other);
    if (it != cfg.target_options.end() &&
        std::find(wanted.begin(), wanted.end(), it->second) != wanted.end())
      continue;
    std::string listed;
    for (const std::string& w : wanted) listed += (listed.empty() ? "" : ", ") + w;
    return value + " is set only with target_options." + other + " one of [" + listed +
           "] (the target declares \"requires\")";
  }
  if (!o.divides_dp) return "";
  // The target file's parser admits only positive integers under "divides" (target_file.cpp).
  const long long n = std::atoll(value.c_str());
  for (const Layout& l : layouts)
    if (n <= 0 || l.dp % n != 0)
      return value + " does not divide " + l.dp_field + " " + std::to_string(l.dp) +
             " (the target declares \"divides\": \"dp\")";
  return "";
}

}  // namespace paradiff
