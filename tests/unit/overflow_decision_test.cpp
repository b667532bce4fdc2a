// Self-test of the numeric oracle's overflow decisions (see Note [Overflow consistency], see Note
// [Overflow margin], see Note [Following the run's decision] in oracles/numeric_oracle.cpp): a step
// taken with non-finite reported gradients is a finding; a skip the reference does not share is
// a finding when the reference stays finite even at 4x the loss scale, and inconclusive when it
// is borderline; after a borderline decision the run's decision stands and later steps are still
// compared.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "oracles/numeric_oracle.h"
#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::MakeHarness;
using testing::RunClean;
using testing::SmallConfig;

Config Fp16Dynamic(double init) {
  Config c = SmallConfig(2, 1);
  c.steps = 3;
  c.precision.param = DType::kFp16;
  c.precision.compute = DType::kFp16;
  c.precision.master_weights = true;
  c.precision.loss_scale.mode = LossScaleMode::kDynamic;
  c.precision.loss_scale.init = init;
  c.precision.loss_scale.hysteresis = 2;
  return c;
}

void SetSkipped(EngineOutcome& e, int64_t step, bool skipped) {
  for (auto& r : e.obs.ranks) r.steps.at(step).skipped = skipped;
}

// The smallest power of two at which the twin's first step overflows.
double FirstOverflowingScale(const Config& c) {
  RefOrigin from;
  from.step = -1;
  for (int k = 0; k < 60; ++k) {
    Config at = c;
    at.precision.loss_scale.init = std::ldexp(1.0, k);
    if (TwinOverflows(at, BuiltInReduction(), from)) return at.precision.loss_scale.init;
  }
  ADD_FAILURE() << "the twin never overflows";
  return 0;
}

TEST(OverflowDecision, ATakenStepWithNonFiniteGradientsIsAFinding) {
  const Config probe = Fp16Dynamic(1);
  const Config c = Fp16Dynamic(FirstOverflowingScale(probe) * 16);  // overflows at step 0
  EngineOutcome e = RunClean(c);
  ASSERT_TRUE(e.obs.ranks[0].steps[0].skipped);
  SetSkipped(e, 0, false);  // an overflow check that missed it
  const testing::Harness h = MakeHarness(c, e);
  const Verdict& v = h.numeric.verdict;
  testing::ExpectLocalized(v);
  EXPECT_EQ(v.where.step, 0);
  EXPECT_EQ(v.where.phase, Phase::kOverflow);
  EXPECT_EQ(v.where.detail, "consistency");
}

TEST(OverflowDecision, ASkipFarFromTheEdgeIsAFinding) {
  const Config c = Fp16Dynamic(FirstOverflowingScale(Fp16Dynamic(1)) / 64);
  EngineOutcome e = RunClean(c);
  ASSERT_FALSE(e.obs.ranks[0].steps[1].skipped);
  SetSkipped(e, 1, true);
  const testing::Harness h = MakeHarness(c, e);
  const Verdict& v = h.numeric.verdict;
  testing::ExpectLocalized(v);
  EXPECT_EQ(v.where.step, 1);
  EXPECT_EQ(v.where.detail, "margin");
  EXPECT_NE(v.message.find("stays finite"), std::string::npos) << v.message;
}

// A run that skipped step 0 and went on from there, as the engine would if its rounding had
// taken it over the edge: the twin's own arithmetic with step 0's decision forced.
Assembly SkippingRun(const Config& c) {
  std::vector<bool> forced(static_cast<size_t>(c.steps), false);
  forced[0] = true;
  const RefRun run = RunReference(c, BuiltInReduction(), false, &forced);
  Assembly a;
  for (const RefStep& r : run.steps) {
    AssembledStep d;
    d.loss = r.loss;
    d.grad_norm = r.grad_norm;
    d.skipped = r.skipped;
    d.loss_scale = r.loss_scale;
    d.tensors = r.tensors;
    a.steps.push_back(std::move(d));
  }
  return a;
}

TEST(OverflowDecision, ABorderlineSkipIsInconclusiveAndTheRunsDecisionIsFollowed) {
  // At step 0 the twin is finite at this scale and overflows at 4x: borderline. Without
  // hysteresis the run's skip backs the scale off: the steps after it pass only if the restarted
  // reference replays the run's decision.
  Config c = Fp16Dynamic(FirstOverflowingScale(Fp16Dynamic(1)) / 2);
  c.precision.loss_scale.hysteresis = 1;
  const RefPair ref = RunReferencePair(c, BuiltInReduction());
  ASSERT_FALSE(ref.same.steps[0].skipped);
  Assembly run = SkippingRun(c);
  {
    const NumericResult n = CheckNumerics(c, run, ref);
    EXPECT_EQ(n.verdict.kind, VerdictKind::kInconclusive) << n.verdict.message;
    EXPECT_NE(n.verdict.message.find("borderline"), std::string::npos) << n.verdict.message;
    EXPECT_EQ(n.restarts, std::vector<int64_t>{1});
    EXPECT_FALSE(n.comparisons.empty());  // steps 1 and 2 were compared
    for (const auto& cmp : n.comparisons) EXPECT_GE(cmp.step, 1);
  }
  ASSERT_LT(run.steps[1].loss_scale, ref.same.steps[1].loss_scale);
  // A bug after the borderline step is still found: a loss scale off its sequence.
  run.steps[2].loss_scale *= 2;
  const NumericResult n = CheckNumerics(c, run, ref);
  testing::ExpectLocalized(n.verdict);
  EXPECT_EQ(n.verdict.where.step, 2);
  EXPECT_EQ(n.verdict.where.tensor_kind, "loss_scale");
}

}  // namespace
}  // namespace paradiff
