#include "core/target_option.h"

#include <cstdlib>

namespace paradiff {

std::string OptionMisfit(const TargetOption& o, const std::string& value, const Config& cfg) {
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
