// Self-test of the exact-arithmetic oracle: it applies (is not skipped) to exact_linear configs in
// the measured exact regime (see Note [Exact regime]) and is silent there over dp x ZeRO stage x
// accumulation and over tp x sp x pp (see Note [Exact tensor parallelism]); it catches a gradient
// or parameter one ulp off, which the numeric oracle's tolerance cannot see; it is skipped outside
// its preconditions and where the arithmetic rounds.
#include "oracles/exact_oracle.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::ExpectLocalized;
using testing::FindPiece;
using testing::MakeHarness;
using testing::NudgeOneUlp;
using testing::RunClean;
using testing::SmallConfig;

// Inside the measured regime: one layer, hidden 8, seq_len 4, SGD with lr 4.
Config ExactConfig(int64_t dp, int64_t stage, int64_t accumulation) {
  Config c = SmallConfig(dp, stage);
  c.model.kind = ModelKind::kExactLinear;
  c.model.layers = 1;
  c.model.hidden = 8;
  c.model.seq_len = 4;
  c.batch.micro_batch = 2;
  c.batch.accumulation_steps = accumulation;
  c.zero.bucket_elems = 50;
  c.optimizer.kind = OptimizerKind::kSgd;
  c.optimizer.lr = 4;
  return c;
}

// Moves the first non-zero element of a piece one ulp; returns its index in the piece.
int64_t NudgeFirstNonZero(TensorPiece& p) {
  int64_t i = 0;
  while (p.values.reshape({-1})[i].item<float>() == 0) ++i;
  NudgeOneUlp(p, i);
  return i;
}

TEST(ExactOracle, PreconditionsSkipOtherConfigs) {
  EXPECT_EQ(ExactPreconditions(ExactConfig(2, 1, 1)), "");
  EXPECT_NE(ExactPreconditions(SmallConfig(2, 1)), "");
  Config adam = ExactConfig(2, 1, 1);
  adam.optimizer.kind = OptimizerKind::kAdam;
  EXPECT_NE(ExactPreconditions(adam), "");
  Config bf16 = ExactConfig(2, 1, 1);
  bf16.precision.accumulate = DType::kBf16;
  EXPECT_NE(ExactPreconditions(bf16), "");
  Config clip = ExactConfig(2, 1, 1);
  clip.clip_grad_norm = 1.0;
  EXPECT_NE(ExactPreconditions(clip), "");
  const CheckResult r = testing::CheckWith(SmallConfig(2, 1), {"exact"});
  ASSERT_EQ(r.oracles.size(), 1u);
  EXPECT_EQ(r.oracles[0].status, OracleStatus::kSkipped);
}

TEST(ExactOracle, AppliesAndIsSilentAcrossLayouts) {
  ReferenceCache cache;
  for (int64_t dp : {1, 2, 4, 8}) {
    for (int64_t stage = 0; stage <= 3; ++stage) {
      const Config c = ExactConfig(dp, stage, dp <= 2 ? 2 : 1);
      const CheckResult r = testing::CheckWith(c, {"exact"}, {}, &cache);
      ASSERT_EQ(r.oracles.size(), 1u);
      EXPECT_EQ(r.oracles[0].status, OracleStatus::kPass)
          << "dp " << dp << " stage " << stage << ": " << r.oracles[0].note << r.verdict.message;
    }
  }
}

// tp x sp x pp x dp with the exact layers split (kernels/model.cpp).
Config ExactTpConfig(int64_t tp, bool sp, int64_t pp, int64_t dp, int64_t stage) {
  Config c = ExactConfig(dp, stage, 1);
  c.model.layers = std::max<int64_t>(1, pp);
  c.parallel.tp = tp;
  c.parallel.sp = sp;
  c.parallel.pp = pp;
  c.parallel.world = tp * pp * dp;
  return c;
}

TEST(ExactOracle, AppliesAndIsSilentUnderTensorParallelism) {
  ReferenceCache cache;
  for (int64_t tp : {2, 4}) {
    for (bool sp : {false, true}) {
      for (int64_t pp : {1, 2}) {
        const int64_t dp = tp == 2 ? 2 : 1, stage = pp == 1 ? tp - 1 : 1;
        const Config c = ExactTpConfig(tp, sp, pp, dp, stage);
        const CheckResult r = testing::CheckWith(c, {"exact"}, {}, &cache);
        ASSERT_EQ(r.oracles.size(), 1u);
        EXPECT_EQ(r.oracles[0].status, OracleStatus::kPass)
            << "tp " << tp << " sp " << sp << " pp " << pp << ": " << r.oracles[0].note
            << r.verdict.message;
      }
    }
  }
}

// dp_average_by_world_size divides the dp-summed gradients by the world (tp x dp) instead of dp:
// the gradients are a power of two off, so the exact oracle sees it bit for bit at step 0.
TEST(ExactOracle, CatchesADpAverageOverTheWorldUnderTensorParallelism) {
  Config c = ExactTpConfig(2, true, 1, 2, 1);
  c.faults = {"dp.average_by_world_size"};
  const CheckResult r = testing::CheckWith(c, {"exact"});
  ASSERT_EQ(r.oracles.size(), 1u);
  EXPECT_EQ(r.verdict.kind, VerdictKind::kMismatch) << r.oracles[0].note;
  EXPECT_EQ(r.verdict.oracle, "exact");
  EXPECT_EQ(r.verdict.where.step, 0);
  EXPECT_EQ(r.verdict.where.tensor_kind, "grad");
}

TEST(ExactOracle, SkippedWhereTheArithmeticRounds) {
  Config c = ExactConfig(2, 1, 1);
  c.model.layers = 3;  // three hidden products of 32 terms: the step-0 gradients round
  c.model.hidden = 32;
  c.model.seq_len = 8;
  c.optimizer.lr = 0.0625;
  const CheckResult r = testing::CheckWith(c, {"exact"});
  EXPECT_EQ(r.oracles[0].status, OracleStatus::kSkipped);
  EXPECT_NE(r.oracles[0].note.find("rounds"), std::string::npos) << r.oracles[0].note;
}

TEST(ExactOracle, CatchesOneUlpInAShardedGradient) {
  const Config c = ExactConfig(2, 2, 1);  // ZeRO-2: gradients partitioned, no replica to compare
  EngineOutcome e = RunClean(c);
  TensorPiece* p = FindPiece(e, 1, 0, "grad");
  ASSERT_NE(p, nullptr);
  const int64_t i = NudgeFirstNonZero(*p);
  const testing::Harness h = MakeHarness(c, e);
  EXPECT_EQ(h.numeric.verdict.kind, VerdictKind::kPass) << "one ulp is below any tolerance";
  const Verdict v = ExactOracle().Check(h.Input());
  ExpectLocalized(v);
  EXPECT_EQ(v.kind, VerdictKind::kMismatch);
  EXPECT_EQ(v.oracle, "exact");
  EXPECT_EQ(v.where.step, 0);
  EXPECT_EQ(v.where.tensor_kind, "grad");
  EXPECT_EQ(v.where.tensor, p->tensor);
  EXPECT_EQ(v.where.index, p->offset + i);
  EXPECT_DOUBLE_EQ(v.where.error, 1.0);
}

TEST(ExactOracle, CatchesOneUlpInATensorParallelShard) {
  const Config c = ExactTpConfig(2, false, 1, 1, 0);
  EngineOutcome e = RunClean(c);
  TensorPiece* p = FindPiece(e, 1, 0, "grad", "head.out.weight");  // rows 4..7 of 8
  ASSERT_NE(p, nullptr);
  const int64_t i = NudgeFirstNonZero(*p);
  const Verdict v = ExactOracle().Check(MakeHarness(c, e).Input());
  ExpectLocalized(v);
  EXPECT_EQ(v.where.tensor, "head.out.weight");
  EXPECT_EQ(v.where.index, p->offset + i);
  EXPECT_GE(p->offset, 4 * 8) << "rank 1 holds the second half of the output rows";
}

TEST(ExactOracle, CatchesOneUlpInAParameterAfterTheUpdate) {
  const Config c = ExactConfig(4, 3, 1);
  EngineOutcome e = RunClean(c);
  TensorPiece* p = FindPiece(e, 3, 0, "param");
  ASSERT_NE(p, nullptr);
  NudgeFirstNonZero(*p);
  const Verdict v = ExactOracle().Check(MakeHarness(c, e).Input());
  ExpectLocalized(v);
  EXPECT_EQ(v.where.phase, Phase::kOptimizer);
  EXPECT_EQ(v.where.tensor_kind, "param");
}

}  // namespace
}  // namespace paradiff
