// Self-tests of the numeric oracle at the edges of the config domain the generator does not draw
// (found by probing valid configs by hand, session 6): a reference that diverges ends the check
// inconclusive instead of a mismatch (see Note [Diverged reference]), and Adam at a fine-tuning
// learning rate on bf16 parameters passes (see Note [Stored rounding of a flipped element]) while a
// parameter off by more than its rounding is still found. Session 7's probes: Adam without second
// moment memory (beta2 = 0) and with an eps of 1e-45 (see Note [Adam ratio bound] in
// numeric_oracle.cpp, Notes [Quotient overflow] and [Rounded second moment] in update_oracle.cpp),
// and a split variant whose fp16 overflow decisions differ from its config's (see Note [Different
// overflow decisions] in metamorphic_oracle.cpp): clean runs pass, a planted bug is still found.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/config_json.h"
#include "oracles/numeric_oracle.h"
#include "oracles/update_oracle.h"
#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::MakeHarness;
using testing::RunClean;
using testing::SmallConfig;

// Plain SGD at a learning rate that blows the model up within a few steps in any precision.
Config Diverging() {
  Config c = SmallConfig(2, 2);
  c.steps = 4;
  c.optimizer.kind = OptimizerKind::kSgd;
  c.optimizer.momentum = 0;
  c.optimizer.lr = 1e30;
  return c;
}

int64_t FirstNonFiniteStep(const RefRun& run) {
  for (size_t s = 0; s < run.steps.size(); ++s)
    if (!std::isfinite(run.steps[s].loss)) return static_cast<int64_t>(s);
  return -1;
}

TEST(DivergedReference, IsInconclusiveAtTheStepTheReferenceDiverged) {
  const Config c = Diverging();
  const testing::Harness h = MakeHarness(c, RunClean(c));
  const Verdict& v = h.numeric.verdict;
  EXPECT_EQ(v.kind, VerdictKind::kInconclusive) << v.message;
  EXPECT_EQ(v.where.phase, Phase::kDivergence);
  const int64_t diverged = FirstNonFiniteStep(h.ref->same);
  ASSERT_GE(diverged, 1) << "the test wants a reference that diverges after step 0";
  // Parameters go non-finite at the update before the loss does.
  EXPECT_LE(v.where.step, diverged);
  EXPECT_NE(v.message.find("diverged"), std::string::npos) << v.message;
}

TEST(DivergedReference, ABugBeforeTheDivergenceIsStillAFinding) {
  const Config c = Diverging();
  EngineOutcome e = RunClean(c);
  testing::ScalePieces(e, 0, "grad", 1.01);
  const testing::Harness h = MakeHarness(c, e);
  testing::ExpectLocalized(h.numeric.verdict);
  EXPECT_EQ(h.numeric.verdict.where.step, 0);
}

Config FineTuning() {
  Config c = SmallConfig(3, 1);
  c.steps = 3;
  c.zero.stage = 2;
  c.precision.param = DType::kBf16;
  c.precision.compute = DType::kBf16;
  c.optimizer.kind = OptimizerKind::kAdamW;
  c.optimizer.lr = 1e-6;
  return c;
}

TEST(StoredRounding, AdamAtAFineTuningRateOnBf16ParametersPasses) {
  for (bool master : {true, false}) {
    Config c = FineTuning();
    c.precision.master_weights = master;
    const testing::Harness h = MakeHarness(c, RunClean(c));
    EXPECT_EQ(h.numeric.verdict.kind, VerdictKind::kPass)
        << "master " << master << ": " << h.numeric.verdict.message;
  }
}

TEST(StoredRounding, AParameterOffByMoreThanItsRoundingIsFound) {
  const Config c = FineTuning();
  EngineOutcome e = RunClean(c);
  // Four bf16 ulps on every element of one tensor: beyond a step's rounding and 4 lr.
  testing::ScalePieces(e, 1, "master", 1.0 + 4 * 0x1p-8, "embed.wte");
  const testing::Harness h = MakeHarness(c, e);
  testing::ExpectLocalized(h.numeric.verdict);
  EXPECT_EQ(h.numeric.verdict.where.step, 1) << h.numeric.verdict.message;
  EXPECT_EQ(h.numeric.verdict.where.tensor, "embed.wte") << h.numeric.verdict.message;
}

// A config as a user writes it (the defaults fill the rest), as the probe found it.
Config Parsed(const std::string& text) {
  StatusOr<Config> c = ParseConfig(text);
  if (!c.ok()) ADD_FAILURE() << c.status().ToString();
  return c.ok() ? c.value() : Config{};
}

// beta2 = 0: the second moment is the last squared gradient, so |m / sqrt(v)| is no longer at
// most about 1 and the numeric oracle's 4 lr bound on an Adam step was too tight (ratio 1.6).
TEST(AdamWithoutSecondMomentMemory, PassesAndAGradientBugIsStillFound) {
  const Config c = Parsed(
      R"({"seed":2,"steps":2,"model":{"layers":1},"optimizer":{"kind":"adam","betas":[0.9,0]}})");
  const testing::Harness h = MakeHarness(c, RunClean(c));
  EXPECT_EQ(h.numeric.verdict.kind, VerdictKind::kPass) << h.numeric.verdict.message;
  EngineOutcome e = RunClean(c);
  testing::ScalePieces(e, 0, "grad", 1.01);
  const testing::Harness bad = MakeHarness(c, e);
  testing::ExpectLocalized(bad.numeric.verdict);
  EXPECT_EQ(bad.numeric.verdict.where.step, 0) << bad.numeric.verdict.message;
}

// eps 1e-45 is 2^-149 in float32: where a gradient is 0 the run divides by that (1.4 times 1e-45)
// and its quotient overflows bf16 or rounds from a subnormal second moment. Not a finding of the
// update oracle; the run may diverge (inconclusive) but is never a mismatch.
TEST(AdamWithASubnormalEps, TheUpdateOracleFindsNothing) {
  const Config c = Parsed(R"({"steps":4,"optimizer":{"kind":"adam","betas":[0.9,0],"eps":1e-45},
      "precision":{"param":"bf16","compute":"bf16"},"parallel":{"dp":2}})");
  const testing::Harness h = MakeHarness(c, RunClean(c));
  const Verdict v = UpdateOracle().Check(h.Input());
  EXPECT_FALSE(IsFinding(v.kind)) << v.message;
  EXPECT_FALSE(IsFinding(h.numeric.verdict.kind)) << h.numeric.verdict.message;
}

// dp 2 x 1 micro-batch and its split (dp 1 x 2) backpropagate fp16 values a factor 2 apart, so at
// scale 2^24 with backoff 1/8 they skip different steps; the steps after the decisions part were
// compared (ratio 23). Both runs are right; the relation holds where they train alike.
TEST(SplitVariantWithOtherOverflowDecisions, Passes) {
  const Config c = Parsed(R"({"steps":4,"parallel":{"dp":2},"precision":{"param":"fp16",
      "compute":"fp16","loss_scale":{"mode":"dynamic","init":16777216,"hysteresis":1,"backoff":0.125}}})");
  const CheckResult r = testing::CheckWith(c, {"metamorphic"});
  ASSERT_EQ(r.oracles.size(), 1u);
  EXPECT_EQ(r.oracles[0].status, OracleStatus::kPass) << r.oracles[0].note << r.verdict.message;
}

}  // namespace
}  // namespace paradiff
