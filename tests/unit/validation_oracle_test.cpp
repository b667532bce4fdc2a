// Self-test of the validation oracle: a config the validator rejects (or this build does not
// support) is refused by CheckRun before any rank starts, with the validator's message and no
// finding; a valid, supported config the engine refuses is a rejected-valid finding naming the
// field; an ordinary crash stays a crash.
#include "oracles/validation_oracle.h"

#include <gtest/gtest.h>

#include <atomic>

#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::ExpectLocalized;
using testing::SmallConfig;

// An engine runner that counts its calls and otherwise fails the test if it is reached.
struct CountingRunner {
  std::shared_ptr<std::atomic<int>> calls = std::make_shared<std::atomic<int>>(0);
  EngineRunner Runner() const {
    auto c = calls;
    return [c](const Config& cfg) {
      ++*c;
      return RunEngine(cfg, testing::kTestTimeout);
    };
  }
};

TEST(ValidationOracle, InvalidConfigIsRejectedBeforeAnyRankStarts) {
  Config c = SmallConfig(2, 1);
  c.parallel.world = 3;  // != tp * pp * dp
  ASSERT_FALSE(CheckConfig(c, ResourceBudget{}).ok());
  CountingRunner run;
  const CheckResult r = testing::CheckWith(c, {}, run.Runner());
  EXPECT_EQ(*run.calls, 0) << "the engine ran an invalid config";
  EXPECT_TRUE(r.rejected);
  EXPECT_FALSE(IsFinding(r.verdict.kind));
  EXPECT_EQ(r.verdict.oracle, "validation");
  EXPECT_NE(r.verdict.message.find("parallel.world"), std::string::npos) << r.verdict.message;
}

TEST(ValidationOracle, OverBudgetConfigIsRejectedBeforeAnyRankStarts) {
  Config c = SmallConfig(2, 1);
  CheckOptions opts;
  opts.budget.max_steps = 1;  // c.steps = 2
  CountingRunner run;
  opts.run_engine = run.Runner();
  const CheckResult r = CheckRun(c, opts);
  EXPECT_EQ(*run.calls, 0);
  EXPECT_TRUE(r.rejected);
  EXPECT_NE(r.verdict.message.find("steps"), std::string::npos) << r.verdict.message;
}

TEST(ValidationOracle, UnsupportedConfigIsRejectedNotAFinding) {
  // Whatever this build does not support yet (the first candidate EngineSupports refuses).
  std::vector<Config> candidates;
  Config nccl = SmallConfig(2, 0);
  nccl.backend = Backend::kNccl;
  candidates.push_back(nccl);
  Config ckpt = SmallConfig(2, 0);
  ckpt.checkpoint.save_at = 1;
  candidates.push_back(ckpt);
  for (const Config& c : candidates) {
    if (!CheckConfig(c, ResourceBudget{}).ok() || EngineSupports(c).ok()) continue;
    CountingRunner run;
    const CheckResult r = testing::CheckWith(c, {}, run.Runner());
    EXPECT_EQ(*run.calls, 0);
    EXPECT_TRUE(r.rejected);
    EXPECT_EQ(r.verdict.kind, VerdictKind::kInconclusive);
    return;
  }
  GTEST_SKIP() << "this engine build supports every candidate";
}

TEST(ValidationOracle, EngineRefusingAValidConfigIsRejectedValid) {
  Config c = SmallConfig(2, 1);
  auto refuse = [](const Config&) {
    EngineOutcome e;
    e.ok = false;
    e.failure_kind = FailureKind::kCrash;
    e.failure_rank = 1;
    e.failure = "rank 1: zero.bucket_elems=4096: buckets of this size are not implemented";
    return e;
  };
  const CheckResult r = testing::CheckWith(c, {}, refuse);
  ExpectLocalized(r.verdict, /*needs_step=*/false);
  EXPECT_EQ(r.verdict.kind, VerdictKind::kRejectedValid);
  EXPECT_EQ(r.verdict.oracle, "validation");
  EXPECT_EQ(r.verdict.where.detail, "zero.bucket_elems");
  EXPECT_EQ(r.verdict.Signature(), "rejected-valid.validation.-.-.validation.zero.bucket_elems");
}

TEST(ValidationOracle, OrdinaryCrashStaysACrash) {
  Config c = SmallConfig(2, 1);
  auto crash = [](const Config&) {
    EngineOutcome e;
    e.ok = false;
    e.failure_kind = FailureKind::kCrash;
    e.failure_rank = 0;
    e.failure = "rank 0: map::at";
    return e;
  };
  const CheckResult r = testing::CheckWith(c, {}, crash);
  EXPECT_EQ(r.verdict.kind, VerdictKind::kCrash);
  EXPECT_EQ(r.verdict.oracle, "engine");
}

TEST(ValidationOracle, ValidConfigRunsCleanly) {
  Config c = SmallConfig(2, 1);
  CountingRunner run;
  const CheckResult r = testing::CheckWith(c, {}, run.Runner());
  EXPECT_EQ(*run.calls, 1);
  EXPECT_FALSE(r.rejected);
  EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << r.verdict.message;
}

}  // namespace
}  // namespace paradiff
