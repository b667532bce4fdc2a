#include "core/grad_reduction.h"

#include <utility>

namespace paradiff {

namespace {

constexpr std::pair<GradReduction::When, const char*> kWhenNames[] = {
    {GradReduction::When::kMicroStep, "micro_step"},
    {GradReduction::When::kStep, "step"},
    {GradReduction::When::kUnknown, "unknown"}};
constexpr std::pair<GradReduction::Average, const char*> kAverageNames[] = {
    {GradReduction::Average::kAfterSum, "after_sum"},
    {GradReduction::Average::kBeforeSum, "before_sum"},
    {GradReduction::Average::kDivideBeforeSum, "divide_before_sum"},
    {GradReduction::Average::kUnknown, "unknown"}};

bool PowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

}  // namespace

bool GradReduction::TwinReducesOncePerStep(const Config& layout) const {
  const When w = WhenFor(layout);
  if (w != When::kUnknown) return w == When::kStep;
  return BuiltInReduction().WhenFor(layout) == When::kStep;
}

GradReduction BuiltInReduction() {
  GradReduction r;
  r.when = GradReduction::When::kMicroStep;
  r.when_pipelined = GradReduction::When::kStep;
  r.rank_order = true;
  r.average = GradReduction::BuiltInAverage();
  return r;
}

std::string MirrorUndeclared(const GradReduction& r, const Config& layout) {
  const int64_t dp = layout.parallel.dp;
  if (r.WhenFor(layout) == GradReduction::When::kUnknown && layout.batch.accumulation_steps > 1)
    return "the run does not declare whether it reduces each micro-step or once per step "
           "(grad_reduction.when), and it accumulates";
  if (!r.rank_order && dp > 2)
    return "the run's data-parallel sum order over more than two ranks is unknown";
  if (r.average == GradReduction::Average::kUnknown && dp > 1 &&
      (!PowerOfTwo(dp) || layout.precision.reduce == DType::kFp16))
    return "the run does not declare where it divides by dp (grad_reduction.average)";
  return "";
}

const char* Name(GradReduction::When w) {
  for (const auto& [v, n] : kWhenNames)
    if (v == w) return n;
  return "?";
}

const char* Name(GradReduction::Average a) {
  for (const auto& [v, n] : kAverageNames)
    if (v == a) return n;
  return "?";
}

bool ParseWhen(const std::string& s, GradReduction::When* out) {
  for (const auto& [v, n] : kWhenNames)
    if (s == n) return *out = v, true;
  return false;
}

bool ParseAverage(const std::string& s, GradReduction::Average* out) {
  for (const auto& [v, n] : kAverageNames)
    if (s == n) return *out = v, true;
  return false;
}

}  // namespace paradiff
