// Self-test of the collective oracle: real mismatch and hang reports of the local backend become
// collective / hang findings naming both ranks and both calls, with layout-independent
// signatures; the after-the-fact log check is silent on clean runs and catches a rank whose
// recorded call differs (op, numel) or is missing.
#include "oracles/collective_oracle.h"

#include <gtest/gtest.h>

#include "comm/local_communicator.h"
#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::ExpectLocalized;
using testing::RunClean;
using testing::SmallConfig;

// Runs `fn` on two local ranks and packs the failure the way RunEngine does.
EngineOutcome Failing(std::chrono::milliseconds timeout,
                      const std::function<void(Communicator&)>& fn) {
  EngineOutcome out;
  const auto results = RunLocalRanks(2, timeout, fn);
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r].ok || results[r].error_kind == "aborted") continue;
    out.ok = false;
    out.failure_rank = static_cast<int>(r);
    out.failure = "rank " + std::to_string(r) + ": " + results[r].error;
    out.failure_kind = results[r].error_kind == "mismatch" ? FailureKind::kCollective
                       : results[r].error_kind == "hang"   ? FailureKind::kHang
                                                           : FailureKind::kCrash;
    break;
  }
  return out;
}

TEST(CollectiveOracle, MismatchOfTwoOpsNamesRanksAndCalls) {
  const EngineOutcome e = Failing(testing::kTestTimeout, [](Communicator& c) {
    at::Tensor t = at::ones({6});
    if (c.rank() == 0) {
      c.AllReduce(t, ReduceOp::kSum);
    } else {
      at::Tensor out = at::empty({3});
      c.ReduceScatter(t, out, {3, 3}, ReduceOp::kSum);
    }
  });
  ASSERT_FALSE(e.ok);
  Config cfg = SmallConfig(2, 0);
  const Verdict v = EngineFailureVerdict(e, cfg);
  ExpectLocalized(v, /*needs_step=*/false);
  EXPECT_EQ(v.kind, VerdictKind::kCollective);
  EXPECT_EQ(v.where.detail, "all_reduce_vs_reduce_scatter");
  EXPECT_EQ(v.Signature(), "collective.collective.-.-.collective.all_reduce_vs_reduce_scatter");
  EXPECT_NE(v.where.rank, v.where.other_rank);
  EXPECT_NE(v.message.find("all_reduce numel=6"), std::string::npos) << v.message;
  EXPECT_NE(v.message.find("reduce_scatter"), std::string::npos) << v.message;
  // The oracle itself gives the same verdict.
  EXPECT_EQ(CollectiveOracle().Check(OracleInput(cfg, e)).Signature(), v.Signature());
}

TEST(CollectiveOracle, MismatchOfOneFieldNamesTheField) {
  const EngineOutcome e = Failing(testing::kTestTimeout, [](Communicator& c) {
    at::Tensor t = at::ones({c.rank() == 0 ? 4 : 5});
    c.AllReduce(t, ReduceOp::kSum);
  });
  const Verdict v = EngineFailureVerdict(e, SmallConfig(2, 0));
  EXPECT_EQ(v.where.detail, "all_reduce.numel") << v.message;
  const EngineOutcome d = Failing(testing::kTestTimeout, [](Communicator& c) {
    at::Tensor t = at::ones({4}, c.rank() == 0 ? at::kFloat : at::kDouble);
    c.AllReduce(t, ReduceOp::kSum);
  });
  EXPECT_EQ(EngineFailureVerdict(d, SmallConfig(2, 0)).where.detail, "all_reduce.dtype");
}

TEST(CollectiveOracle, HangNamesTheWaiterAndTheOtherRank) {
  const EngineOutcome e = Failing(std::chrono::milliseconds(300), [](Communicator& c) {
    at::Tensor t = at::ones({4});
    if (c.rank() == 0) c.AllReduce(t, ReduceOp::kSum);  // rank 1 never comes
  });
  ASSERT_EQ(e.failure_kind, FailureKind::kHang) << e.failure;
  const Verdict v = EngineFailureVerdict(e, SmallConfig(2, 0));
  ExpectLocalized(v, /*needs_step=*/false);
  EXPECT_EQ(v.kind, VerdictKind::kHang);
  EXPECT_EQ(v.where.rank, 0);
  EXPECT_EQ(v.where.other_rank, 1);
  EXPECT_EQ(v.where.detail, "all_reduce_vs_finished") << v.message;
}

TEST(CollectiveOracle, CrashIsNotACollectiveFinding) {
  EngineOutcome e;
  e.ok = false;
  e.failure_kind = FailureKind::kCrash;
  e.failure = "rank 1: boom";
  e.failure_rank = 1;
  Config cfg = SmallConfig(2, 0);
  EXPECT_TRUE(IsSkip(CollectiveOracle().Check(OracleInput(cfg, e))));
  const Verdict v = EngineFailureVerdict(e, cfg);
  EXPECT_EQ(v.kind, VerdictKind::kCrash);
  EXPECT_EQ(v.oracle, "engine");
}

TEST(CollectiveOracle, LogCheckSilentOnCleanRuns) {
  for (int64_t stage = 0; stage <= 3; ++stage) {
    Config c = SmallConfig(3, stage);
    c.zero.bucket_elems = 1000;
    const Verdict v = CheckCollectiveLogs(c, RunClean(c).obs);
    EXPECT_EQ(v.kind, VerdictKind::kPass) << v.message;
  }
}

TEST(CollectiveOracle, LogCheckCatchesADisagreeingOrMissingCall) {
  Config c = SmallConfig(2, 2);
  const EngineOutcome clean = RunClean(c);
  ASSERT_GT(clean.obs.ranks[1].collectives.size(), 4u);
  EngineOutcome numel = clean;
  Fingerprint& f = numel.obs.ranks[1].collectives[3];
  f.numel += 1;
  f.shape_hash ^= 1;  // a gather-v op compares its counts instead of numel
  Verdict v = CheckCollectiveLogs(c, numel.obs);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.step, 0);
  EXPECT_EQ(v.where.rank, 0);
  EXPECT_EQ(v.where.other_rank, 1);
  const std::string op = Name(f.op);
  EXPECT_TRUE(v.where.detail == op + ".numel" || v.where.detail == op + ".counts")
      << v.where.detail;

  EngineOutcome other = clean;
  other.obs.ranks[0].collectives[3].op = clean.obs.ranks[0].collectives[3].op == CollOp::kBarrier
                                             ? CollOp::kAllReduce
                                             : CollOp::kBarrier;
  v = CheckCollectiveLogs(c, other.obs);
  EXPECT_EQ(v.kind, VerdictKind::kCollective);
  EXPECT_NE(v.where.detail.find("_vs_"), std::string::npos) << v.where.detail;

  EngineOutcome missing = clean;
  missing.obs.ranks[1].collectives.pop_back();
  v = CheckCollectiveLogs(c, missing.obs);
  EXPECT_EQ(v.kind, VerdictKind::kCollective);
  EXPECT_EQ(v.where.detail.substr(v.where.detail.find("_vs_")), "_vs_missing") << v.where.detail;
  EXPECT_EQ(v.where.step, c.steps - 1) << "the last call belongs to the last step";

  // The first call of step 1 (RankObservations::collective_marks) is localized to step 1.
  ASSERT_EQ(clean.obs.ranks[1].collective_marks.size(), static_cast<size_t>(c.steps));
  EngineOutcome later = clean;
  later.obs.ranks[1].collectives[clean.obs.ranks[1].collective_marks[0]].dtype = "double";
  v = CheckCollectiveLogs(c, later.obs);
  EXPECT_EQ(v.kind, VerdictKind::kCollective);
  EXPECT_EQ(v.where.step, 1) << v.message;
  EXPECT_NE(v.message.find("step 1"), std::string::npos) << v.message;
}

TEST(CollectiveOracle, AStoppedRunNamesTheStepOfTheFailingRank) {
  // Ranks that order their buckets by rank disagree in the first reduction of step 0.
  Config c = SmallConfig(2, 1);
  c.zero.bucket_elems = 500;
  c.faults = {"comm.rank_dependent_bucket_order"};
  const EngineOutcome e = RunEngine(c, testing::kTestTimeout);
  ASSERT_FALSE(e.ok);
  ASSERT_EQ(e.failure_kind, FailureKind::kCollective) << e.failure;
  const Verdict v = EngineFailureVerdict(e, c);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.step, 0);
}

}  // namespace
}  // namespace paradiff
