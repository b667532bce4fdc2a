#include "core/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace paradiff {

double LrRatio(const LrScheduleConfig& s, int64_t applied) {
  if (s.kind == LrScheduleKind::kConstant) return 1.0;
  const double i = static_cast<double>(applied - 1);
  const double w = static_cast<double>(s.warmup_steps);
  const double t = static_cast<double>(s.total_steps);
  if (i < 0) return 0.0;
  if (i < w) return i / w;
  switch (s.kind) {
    case LrScheduleKind::kWarmupLinear:
      return std::max(0.0, (t - i) / std::max(1.0, t - w));
    case LrScheduleKind::kWarmupCosine: {
      const double progress = std::min(1.0, (i - w + 1) / std::max(1.0, t - w));
      const double cosine = (1 + std::cos(M_PI * progress)) / 2;
      return std::max(0.0, s.min_ratio + (1.0 - s.min_ratio) * cosine);
    }
    default:
      return 1.0;
  }
}

OptimizerConfig AtUpdate(const OptimizerConfig& o, int64_t applied) {
  OptimizerConfig at = o;
  at.lr = o.lr * LrRatio(o.schedule, applied);
  return at;
}

}  // namespace paradiff
