// Self-test of the numeric oracle: silent on a clean run; catches gradients scaled as a whole
// (attributed to the reduction, detail "scale"), a reported gradient norm that does not match the
// reported gradients (reduction, detail "consistency"), a gradient that is wrong in one element
// (gradient phase), a parameter that is wrong after the update (optimizer phase), and a loss scale
// that left the sequence the overflow decisions fix (lost scaler state).
#include "oracles/numeric_oracle.h"

#include <gtest/gtest.h>

#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::ExpectLocalized;
using testing::FindPiece;
using testing::MakeHarness;
using testing::RunClean;
using testing::SmallConfig;

Verdict Numeric(const Config& c, EngineOutcome e) {
  const testing::Harness h = MakeHarness(c, std::move(e));
  return NumericOracle().Check(h.Input());
}

TEST(NumericOracle, SilentOnACleanRun) {
  Config c = SmallConfig(2, 1);
  EXPECT_EQ(Numeric(c, RunClean(c)).kind, VerdictKind::kPass);
}

TEST(NumericOracle, ScaledGradientsAreAttributedToTheReduction) {
  Config c = SmallConfig(2, 0);
  EngineOutcome e = RunClean(c);
  for (auto& r : e.obs.ranks)
    for (auto& p : r.steps[0].pieces)
      if (p.kind == "grad") p.values.mul_(0.5);
  const Verdict v = Numeric(c, e);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.step, 0);
  EXPECT_EQ(v.where.tensor_kind, "grad");
  EXPECT_EQ(v.where.phase, Phase::kReduction);
  EXPECT_EQ(v.where.detail, "scale");
  EXPECT_NE(v.message.find("scaled by 0.5"), std::string::npos) << v.message;
}

TEST(NumericOracle, InconsistentGradNormIsAReductionFinding) {
  Config c = SmallConfig(2, 2);
  EngineOutcome e = RunClean(c);
  e.obs.ranks[0].steps[1].grad_norm *= 1.0001;  // far inside the truth's tolerance
  const Verdict v = Numeric(c, e);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.step, 1);
  EXPECT_EQ(v.where.tensor_kind, "grad_norm");
  EXPECT_EQ(v.where.phase, Phase::kReduction);
  EXPECT_EQ(v.where.detail, "consistency");
}

TEST(NumericOracle, OneWrongGradientElementIsAGradientFinding) {
  Config c = SmallConfig(2, 2);
  EngineOutcome e = RunClean(c);
  TensorPiece* p = FindPiece(e, 1, 0, "grad");
  ASSERT_NE(p, nullptr);
  p->values.reshape({-1})[0] += 0.01;
  const Verdict v = Numeric(c, e);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.phase, Phase::kGradient);
  EXPECT_EQ(v.where.detail, "");
  EXPECT_EQ(v.where.tensor, p->tensor);
  EXPECT_EQ(v.where.index, p->offset);
}

TEST(NumericOracle, OneWrongParameterIsAnOptimizerFinding) {
  Config c = SmallConfig(2, 3);
  EngineOutcome e = RunClean(c);
  TensorPiece* p = FindPiece(e, 0, 1, "param");
  ASSERT_NE(p, nullptr);
  p->values.reshape({-1})[2] += 1.0;  // beyond Adam's per-step movement bound too
  const Verdict v = Numeric(c, e);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.step, 1);
  EXPECT_EQ(v.where.phase, Phase::kOptimizer);
  EXPECT_EQ(v.where.tensor_kind, "param");
  EXPECT_EQ(v.where.index, p->offset + 2);
}

TEST(NumericOracle, ALossScaleOffItsSequenceIsAFindingBeforeAnySkip) {
  Config c = SmallConfig(2, 2);
  c.precision.param = c.precision.compute = DType::kFp16;
  c.precision.master_weights = true;
  LossScaleConfig& ls = c.precision.loss_scale;
  ls.mode = LossScaleMode::kDynamic;
  ls.init = 256;
  ls.growth_interval = 1;  // grows after every good step: step 1 uses 512
  EngineOutcome e = RunClean(c);
  ASSERT_EQ(Numeric(c, e).kind, VerdictKind::kPass);
  // A scaler that lost its state (a checkpoint reload that did not restore it) uses the initial
  // scale again at step 1; nothing else about the run changes (the scale cancels in the update).
  for (auto& r : e.obs.ranks) r.steps[1].loss_scale = ls.init;
  const Verdict v = Numeric(c, e);
  ExpectLocalized(v);
  EXPECT_EQ(v.kind, VerdictKind::kMismatch);
  EXPECT_EQ(v.where.step, 1);
  EXPECT_EQ(v.where.tensor_kind, "loss_scale");
  EXPECT_EQ(v.where.phase, Phase::kOverflow);
  EXPECT_EQ(v.where.actual, 256);
  EXPECT_EQ(v.where.expected, 512);
}

}  // namespace
}  // namespace paradiff

namespace paradiff {
namespace {

// The twin mirrors the run's loss multiplier and summation order, so a cached reference is
// shared only by configs that split the micro-batches alike (see Note [Mirrored reduction order]):
// a campaign's neighbours (same global batch, another split or schedule) once hit each other's
// cached twin and the exact oracle flagged a clean run 1 ulp off.
TEST(ReferenceKey, SplitAndPipelineOrderCountLayoutDoesNot) {
  Config a = testing::SmallConfig(2, 1);
  a.batch.accumulation_steps = 2;
  Config zero = a;
  zero.zero.stage = 3;
  zero.zero.bucket_elems = 77;
  EXPECT_EQ(ReferenceKey(a, BuiltInReduction()), ReferenceKey(zero, BuiltInReduction()))
      << "ZeRO stage and buckets do not change the reference";
  Config split = a;  // the same 4 micro-batches per step, split 4 x 1 instead of 2 x 2
  split.parallel.dp = split.parallel.world = 4;
  split.batch.accumulation_steps = 1;
  EXPECT_NE(ReferenceKey(a, BuiltInReduction()), ReferenceKey(split, BuiltInReduction()));
  Config gpipe = a;
  gpipe.parallel.dp = 1;
  gpipe.parallel.pp = gpipe.parallel.world = 2;
  gpipe.batch.accumulation_steps = 4;
  gpipe.parallel.schedule = Schedule::kGpipe;
  Config one_f_one_b = gpipe;
  one_f_one_b.parallel.schedule = Schedule::k1F1B;
  EXPECT_NE(ReferenceKey(gpipe, BuiltInReduction()), ReferenceKey(one_f_one_b, BuiltInReduction()));
  // After a checkpoint's reload the twin mirrors the reload layout's split (LayoutAtStep).
  Config steps3 = a;
  steps3.steps = 3;
  Config reload_dp1 = steps3;
  reload_dp1.checkpoint.save_at = 1;
  reload_dp1.checkpoint.reload.dp = 1;  // 2 x 2 micro-batches become 1 x 4
  Config reload_dp2 = reload_dp1;
  reload_dp2.checkpoint.reload.dp = 2;
  EXPECT_NE(ReferenceKey(reload_dp1, BuiltInReduction()),
            ReferenceKey(reload_dp2, BuiltInReduction()));
  EXPECT_NE(ReferenceKey(reload_dp1, BuiltInReduction()), ReferenceKey(steps3, BuiltInReduction()));
}

}  // namespace
}  // namespace paradiff
