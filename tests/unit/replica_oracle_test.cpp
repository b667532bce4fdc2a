// Self-test of the replica oracle: silent on clean runs (replicated parameters, gradients and
// optimizer state across dp); catches one element of one rank's replica off by one ulp, in any
// replicated kind, and names both ranks; NaN on both holders is agreement.
#include "oracles/replica_oracle.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::ExpectLocalized;
using testing::FindPiece;
using testing::NudgeOneUlp;
using testing::RunClean;
using testing::SmallConfig;

TEST(ReplicaOracle, SilentOnCleanRuns) {
  for (int64_t stage = 0; stage <= 3; ++stage) {
    Config c = SmallConfig(3, stage);
    const Verdict v = CheckReplicas(c, RunClean(c).obs);
    EXPECT_EQ(v.kind, VerdictKind::kPass) << "stage " << stage << ": " << v.message;
  }
}

TEST(ReplicaOracle, CatchesOneUlpInOneRanksReplica) {
  struct Case {
    int64_t stage;
    const char* kind;
  };
  for (const Case& k :
       {Case{0, "param"}, Case{1, "grad"}, Case{0, "exp_avg_sq"}, Case{2, "param"}}) {
    Config c = SmallConfig(3, k.stage);
    EngineOutcome e = RunClean(c);
    TensorPiece* p = FindPiece(e, 2, 1, k.kind);
    ASSERT_NE(p, nullptr) << k.kind;
    NudgeOneUlp(*p, 3);
    const Verdict v = CheckReplicas(c, e.obs);
    ExpectLocalized(v);
    EXPECT_EQ(v.kind, VerdictKind::kInvariant);
    EXPECT_EQ(v.oracle, "replica");
    EXPECT_EQ(v.where.tensor_kind, k.kind);
    EXPECT_EQ(v.where.tensor, p->tensor);
    EXPECT_EQ(v.where.step, 1);
    EXPECT_EQ(v.where.index, p->offset + 3);
    EXPECT_EQ(v.where.rank, 2);
    EXPECT_EQ(v.where.other_rank, 0);
    EXPECT_DOUBLE_EQ(v.where.error, 1.0) << "one ulp";
  }
}

TEST(ReplicaOracle, NanOnEveryHolderAgrees) {
  Config c = SmallConfig(2, 0);
  EngineOutcome e = RunClean(c);
  for (int r = 0; r < 2; ++r) FindPiece(e, r, 0, "param")->values.reshape({-1})[0] = NAN;
  EXPECT_EQ(CheckReplicas(c, e.obs).kind, VerdictKind::kPass);
  FindPiece(e, 1, 0, "param")->values.reshape({-1})[0] = 1.0;
  EXPECT_EQ(CheckReplicas(c, e.obs).kind, VerdictKind::kInvariant);
}

TEST(ReplicaOracle, CaughtThroughCheckRunBeforeTheNumericOracle) {
  Config c = SmallConfig(2, 0);
  auto corrupt = [](const Config& x) {
    EngineOutcome e = RunEngine(x, testing::kTestTimeout);
    NudgeOneUlp(*FindPiece(e, 1, 0, "param"), 0);
    return e;
  };
  const CheckResult r = testing::CheckWith(c, {"default"}, corrupt);
  EXPECT_EQ(r.verdict.oracle, "replica") << r.verdict.message;
  EXPECT_EQ(r.verdict.Signature().rfind("invariant.replica.param.", 0), 0u)
      << r.verdict.Signature();
}

}  // namespace
}  // namespace paradiff
