// Self-tests of the numeric oracle at the edges of the config domain the generator does not draw
// (found by probing valid configs by hand, session 6): a reference that diverges ends the check
// inconclusive instead of a mismatch (Note [Diverged reference]), and Adam at a fine-tuning
// learning rate on bf16 parameters passes (Note [Stored rounding of a flipped element]) while a
// parameter off by more than its rounding is still found.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "oracles/numeric_oracle.h"
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
  EXPECT_EQ(v.where.phase, "divergence");
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
    EXPECT_EQ(h.numeric.verdict.kind, VerdictKind::kPass) << "master " << master << ": "
                                                          << h.numeric.verdict.message;
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

}  // namespace
}  // namespace paradiff
