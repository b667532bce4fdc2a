// core/lr_schedule.h against DeepSpeed's WarmupLR / WarmupDecayLR / WarmupCosineLR as
// docs/CONFIG.md states them: iteration i = applied - 1, ratio 0 before the first step of the
// scheduler, linear warmup i / W, then constant, (T - i) / (T - W) floored at 0, or a cosine whose
// progress is clamped at 1 (the rate stays at min_ratio past total_steps).
#include "core/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

namespace paradiff {
namespace {

using K = LrScheduleKind;

TEST(LrSchedule, ConstantIsThePeakRate) {
  for (int64_t a : {0, 1, 7}) EXPECT_EQ(LrRatio(LrScheduleConfig{}, a), 1.0);
}

TEST(LrSchedule, TheFirstTwoUpdatesRunAtZeroThenTheWarmupRises) {
  const LrScheduleConfig s{K::kWarmup, 4, 0, 0.0};
  const double want[] = {0.0, 0.0, 0.25, 0.5, 0.75, 1.0, 1.0};
  for (int64_t a = 0; a < 7; ++a) EXPECT_EQ(LrRatio(s, a), want[a]) << "applied " << a;
}

TEST(LrSchedule, LinearDecayEndsAtZero) {
  const LrScheduleConfig s{K::kWarmupLinear, 2, 4, 0.0};
  const double want[] = {0.0, 0.0, 0.5, 1.0, 0.5, 0.0, 0.0};
  for (int64_t a = 0; a < 7; ++a) EXPECT_EQ(LrRatio(s, a), want[a]) << "applied " << a;
}

TEST(LrSchedule, CosineStaysAtItsFloorPastTheEnd) {
  const LrScheduleConfig s{K::kWarmupCosine, 2, 4, 0.1};
  EXPECT_EQ(LrRatio(s, 2), 0.5);
  EXPECT_DOUBLE_EQ(LrRatio(s, 3), 0.1 + 0.9 * (1 + std::cos(M_PI / 2)) / 2);
  for (int64_t a = 4; a < 9; ++a) EXPECT_DOUBLE_EQ(LrRatio(s, a), 0.1) << "applied " << a;
}

TEST(LrSchedule, AtUpdateScalesOnlyTheRate) {
  OptimizerConfig o;
  o.lr = 0.02;
  o.schedule = {K::kWarmup, 2, 0, 0.0};
  const OptimizerConfig at = AtUpdate(o, 2);
  EXPECT_EQ(at.lr, 0.01);
  EXPECT_EQ(at.schedule, o.schedule);
  EXPECT_EQ(at.beta1, o.beta1);
}

}  // namespace
}  // namespace paradiff
