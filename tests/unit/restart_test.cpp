// Self-test of the restarted comparison (see Note [Local restart] in oracles/reference.cpp, see
// Note [Restarted comparison] in oracles/numeric_oracle.cpp): a reference restarted from a state is
// the reference that reached that state, continued; a model that amplifies rounding differences
// is compared from the run's own state; a bug planted at the step that first disagrees, or at a
// step after a restart, is still found.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "core/config_json.h"
#include "oracles/bitwise.h"
#include "oracles/numeric_oracle.h"
#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::FindPiece;
using testing::MakeHarness;
using testing::RunClean;
using testing::SmallConfig;

// A clean config whose first disagreement with the pair from the initial parameters is
// rounding amplified by the model (hidden 2: every layer norm normalizes two numbers), found by a
// clean campaign (seed 14, session 4).
Config Chaotic() {
  const auto path = std::filesystem::path(PARADIFF_SOURCE_DIR) /
                    "corpus/regression/clean_fp32_adamw_dp3_tied_hidden2_step1.json";
  StatusOr<Config> c = LoadConfigFile(path.string());
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.value();
}

// fp16 parameters with master weights, Adam, dynamic loss scaling that overflows at first (it
// starts far too high), clipping and accumulation: every piece of state a restart must carry.
Config Stateful() {
  Config c = SmallConfig(2, 1);
  c.steps = 5;
  c.batch.accumulation_steps = 2;
  c.precision.param = DType::kFp16;
  c.precision.compute = DType::kFp16;
  c.precision.master_weights = true;
  c.precision.loss_scale.mode = LossScaleMode::kDynamic;
  c.precision.loss_scale.init = 1e30;
  c.precision.loss_scale.hysteresis = 2;
  c.precision.loss_scale.growth_interval = 1;
  c.optimizer.kind = OptimizerKind::kAdam;
  c.optimizer.weight_decay = 0.01;
  c.clip_grad_norm = 0.5;
  return c;
}

TEST(LocalRestart, FromTheTwinsOwnStateContinuesTheTwinBitForBit) {
  const Config c = Stateful();
  const RefPair base = RunReferencePair(c, BuiltInReduction());
  const std::vector<bool> skips = SkippedSteps(base.same);
  ASSERT_TRUE(skips[0]) << "the test wants an overflowed step before a restart";
  for (int64_t k = 0; k + 1 < c.steps; ++k) {
    RefOrigin from;
    from.step = k;
    from.state = &base.same.steps[k].tensors;
    from.skips = skips;
    const RefPair again = RestartReferencePair(c, base, from);
    ASSERT_EQ(again.same.steps.size(), base.same.steps.size());
    for (int64_t s = k + 1; s < c.steps; ++s) {
      const RefStep &a = again.same.steps[s], &b = base.same.steps[s];
      EXPECT_EQ(a.loss_scale, b.loss_scale) << "restart at " << k << ", step " << s;
      EXPECT_EQ(a.skipped, b.skipped) << "restart at " << k << ", step " << s;
      EXPECT_EQ(a.loss, b.loss) << "restart at " << k << ", step " << s;
      ASSERT_EQ(a.tensors.size(), b.tensors.size());
      // Equal bit for bit, NaN where NaN (an overflowed step's gradients).
      for (const auto& [key, value] : b.tensors)
        EXPECT_TRUE(CompareBitwise(a.tensors.at(key), value, DType::kFp64).equal())
            << key << ", restart at " << k << ", step " << s;
    }
    // At the origin both sides hold the given state; the truth's parameters are its master weights.
    for (const auto& [key, value] : base.same.steps[k].tensors) {
      if (key.rfind("grad:", 0) == 0) continue;
      EXPECT_TRUE(at::equal(again.same.steps[k].tensors.at(key), value)) << key;
      const std::string truth_key = key.rfind("param:", 0) == 0 ? "master:" + key.substr(6) : key;
      EXPECT_TRUE(
          at::equal(again.truth.steps[k].tensors.at(key), base.same.steps[k].tensors.at(truth_key)))
          << key;
    }
  }
}

// Adds `delta` to the first element of the gradient of `tensor` at `step`, in whichever rank
// reports a piece of it.
void PlantGradient(EngineOutcome& e, int64_t step, const std::string& tensor, double delta) {
  for (int rank = 0; rank < static_cast<int>(e.obs.ranks.size()); ++rank)
    if (TensorPiece* p = FindPiece(e, rank, step, "grad", tensor)) {
      p->values.reshape({-1})[0] += delta;
      return;
    }
  ADD_FAILURE() << "no rank reports grad:" << tensor << " at step " << step;
}

TEST(LocalRestart, AChaoticCleanRunIsComparedFromItsOwnState) {
  const Config c = Chaotic();
  const testing::Harness h = MakeHarness(c, RunClean(c));
  EXPECT_EQ(h.numeric.verdict.kind, VerdictKind::kPass) << h.numeric.verdict.message;
  ASSERT_EQ(h.numeric.restarts, std::vector<int64_t>{1});
  ASSERT_NE(h.numeric.restarted, nullptr);
  // Without the restart the same comparison fails: the pair from the initial parameters alone.
  bool fails_from_the_start = false;
  for (const auto& cmp : h.numeric.comparisons) fails_from_the_start |= !cmp.ok();
  EXPECT_FALSE(fails_from_the_start);
  const RefStep& initial = h.ref->same.steps[1];
  EXPECT_NE(initial.loss, h.numeric.restarted->same.steps[1].loss);
}

TEST(LocalRestart, ABugAtTheFirstDisagreementIsStillFound) {
  const Config c = Chaotic();
  EngineOutcome e = RunClean(c);
  PlantGradient(e, 1, "blocks.0.mlp.fc1.weight", 1e-3);
  const testing::Harness h = MakeHarness(c, e);
  const Verdict& v = h.numeric.verdict;
  testing::ExpectLocalized(v);
  EXPECT_EQ(v.where.step, 1);
  EXPECT_TRUE(h.numeric.restarts.empty());
}

TEST(LocalRestart, ABugAfterARestartIsFound) {
  const Config c = Chaotic();
  EngineOutcome e = RunClean(c);
  PlantGradient(e, 2, "blocks.0.mlp.fc1.weight", 0.05);
  const testing::Harness h = MakeHarness(c, e);
  const Verdict& v = h.numeric.verdict;
  testing::ExpectLocalized(v);
  EXPECT_EQ(v.where.step, 2) << v.message;
  EXPECT_EQ(v.where.tensor, "blocks.0.mlp.fc1.weight") << v.message;
  EXPECT_EQ(h.numeric.restarts, std::vector<int64_t>{1});
  EXPECT_NE(v.message.find("own state since step 0"), std::string::npos) << v.message;
}

TEST(LocalRestart, AStepOneBugOnAnOrdinaryModelIsFoundWithoutRestarting) {
  Config c = SmallConfig(2, 2);
  c.steps = 3;
  EngineOutcome e = RunClean(c);
  testing::ScalePieces(e, 1, "param", 1.001);
  const testing::Harness h = MakeHarness(c, e);
  testing::ExpectLocalized(h.numeric.verdict);
  EXPECT_EQ(h.numeric.verdict.where.step, 1);
  EXPECT_TRUE(h.numeric.restarts.empty());
}

}  // namespace
}  // namespace paradiff
