#include "core/target_option.h"

#include <algorithm>
#include <cstdlib>

namespace paradiff {

namespace {

std::string StageMisfit(const TargetOption& o, const std::string& value, const Config& cfg) {
  if (o.zero_stages.empty()) return "";
  auto misfit = [&](int64_t stage, const char* field) {
    if (std::find(o.zero_stages.begin(), o.zero_stages.end(), stage) != o.zero_stages.end())
      return std::string();
    std::string listed;
    for (int64_t s : o.zero_stages) listed += (listed.empty() ? "" : ", ") + std::to_string(s);
    return value + " is not set at " + field + " " + std::to_string(stage) +
           " (the target declares \"zero_stages\": [" + listed + "])";
  };
  std::string why = misfit(cfg.zero.stage, "zero.stage");
  if (why.empty() && cfg.checkpoint.save_at > 0)
    why = misfit(cfg.checkpoint.reload.zero_stage, "checkpoint.reload.zero_stage");
  return why;
}

}  // namespace

std::string OptionMisfit(const TargetOption& o, const std::string& value, const Config& cfg) {
  if (std::string why = StageMisfit(o, value, cfg); !why.empty()) return why;
  if (!o.divides_dp) return "";
  // The target file's parser admits only positive integers under "divides" (target_file.cpp).
  const long long n = std::atoll(value.c_str());
  auto misfit = [&](int64_t dp, const char* field) {
    return n > 0 && dp % n == 0 ? std::string()
                                : value + " does not divide " + field + " " + std::to_string(dp) +
                                      " (the target declares \"divides\": \"dp\")";
  };
  std::string why = misfit(cfg.parallel.dp, "parallel.dp");
  if (why.empty() && cfg.checkpoint.save_at > 0)
    why = misfit(cfg.checkpoint.reload.dp, "checkpoint.reload.dp");
  return why;
}

}  // namespace paradiff
