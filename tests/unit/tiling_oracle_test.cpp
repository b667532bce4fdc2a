// Self-test of the tiling oracle: silent on clean runs of every ZeRO stage (uneven shards and
// alignment padding included); catches a dropped piece (gap), a piece outside its tensor, a piece
// reported twice where the state is partitioned (overlap), and a missing step.
#include "oracles/tiling_oracle.h"

#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::ExpectLocalized;
using testing::FindPiece;
using testing::RunClean;
using testing::SmallConfig;

TEST(TilingOracle, ExpectedHoldersFollowZeroStage) {
  Config c = SmallConfig(4, 0);
  const ModelSpec spec = BuildModelSpec(c.model);
  const ParamSpec& q = *spec.Find("blocks.0.attn.q.weight");
  EXPECT_EQ(ExpectedHolders(c, "param", q), 4);
  EXPECT_EQ(ExpectedHolders(c, "exp_avg", q), 4);
  c.zero.stage = 1;
  EXPECT_EQ(ExpectedHolders(c, "grad", q), 4);
  EXPECT_EQ(ExpectedHolders(c, "exp_avg", q), 1);
  c.zero.stage = 2;
  EXPECT_EQ(ExpectedHolders(c, "grad", q), 1);
  EXPECT_EQ(ExpectedHolders(c, "param", q), 4);
  c.zero.stage = 3;
  EXPECT_EQ(ExpectedHolders(c, "param", q), 1);
  // A system that partitions gradients from stage 1 (DeepSpeed's ZeRO-1 reduces each slice to its
  // owner) declares it; ZeRO-1 gradients then have one holder, stage 0 still dp.
  Reporting::PartitionedFrom early;
  early.grad = 1;
  c.zero.stage = 1;
  EXPECT_EQ(ExpectedHolders(c, "grad", q, early), 1);
  c.zero.stage = 0;
  EXPECT_EQ(ExpectedHolders(c, "grad", q, early), 4);
}

// Shard groups (torch's HSDP): a sharded kind is held once per group, a replicated one by every
// dp rank.
TEST(TilingOracle, ExpectedHoldersCountOneHolderPerShardGroup) {
  Config c = SmallConfig(4, 0);
  const ModelSpec spec = BuildModelSpec(c.model);
  const ParamSpec& q = *spec.Find("blocks.0.attn.q.weight");
  c.zero.stage = 3;
  c.zero.shard_group = 2;
  EXPECT_EQ(ExpectedHolders(c, "param", q), 2);
  EXPECT_EQ(ExpectedHolders(c, "exp_avg", q), 2);
  c.zero.shard_group = 1;  // every rank a whole replica
  EXPECT_EQ(ExpectedHolders(c, "grad", q), 4);
  c.zero.shard_group = 4;  // one group: every dp rank, as 0
  EXPECT_EQ(ExpectedHolders(c, "param", q), 1);
  c.zero.stage = 1;
  c.zero.shard_group = 2;
  EXPECT_EQ(ExpectedHolders(c, "grad", q), 4);
  EXPECT_EQ(ExpectedHolders(c, "exp_avg", q), 2);
}

TEST(TilingOracle, ExpectedHoldersFollowTensorAndPipelineSplits) {
  Config c = SmallConfig(2, 1);  // 4 heads, 4 kv heads, tied embeddings
  c.parallel.tp = 4;
  c.parallel.pp = 2;
  c.parallel.world = 16;
  const ModelSpec spec = BuildModelSpec(c.model);
  const auto holders = [&](const char* kind, const char* name) {
    return ExpectedHolders(c, kind, *spec.Find(name));
  };
  EXPECT_EQ(holders("param", "blocks.0.attn.q.weight"), 2) << "split over tp, replicated over dp";
  EXPECT_EQ(holders("exp_avg", "blocks.0.attn.q.weight"), 1);
  EXPECT_EQ(holders("exp_avg", "blocks.0.ln1.weight"), 4) << "norms on every tp rank";
  EXPECT_EQ(holders("exp_avg", "blocks.0.attn.proj.bias"), 4) << "row-parallel bias replicated";
  EXPECT_EQ(holders("exp_avg", "embed.wte"), 2) << "tied: first and last stage";
  c.model.kv_heads = 1;
  const ModelSpec mqa = BuildModelSpec(c.model);
  EXPECT_EQ(ExpectedHolders(c, "exp_avg", *mqa.Find("blocks.0.attn.kv.weight")), 4)
      << "one kv head shared by all four tp ranks";
  c.model.kv_heads = 2;
  EXPECT_EQ(ExpectedHolders(c, "exp_avg", *BuildModelSpec(c.model).Find("blocks.0.attn.kv.weight")),
            2);
}

TEST(TilingOracle, SilentOnCleanTensorAndPipelineParallelRuns) {
  const testing::TpPpLayout layouts[] = {{2, 1, 2, 3, 2, true, false},
                                         {4, 1, 1, 1, 1, false, true},
                                         {1, 3, 2, 2, 4, false, true},
                                         {2, 2, 2, 1, 4, false, true},
                                         {4, 2, 1, 0, 2, true, false}};
  for (const auto& l : layouts) {
    const Config c = testing::TpPpConfig(l);
    const Verdict v = CheckTiling(c, RunClean(c).obs);
    EXPECT_EQ(v.kind, VerdictKind::kPass) << testing::Describe(l) << ": " << v.message;
  }
}

TEST(TilingOracle, CatchesATensorParallelShardReportedTwice) {
  // A tp rank that also reports its neighbour's slice of a column-parallel weight: an overlap.
  Config c = SmallConfig(1, 0);
  c.parallel.tp = c.parallel.world = 2;
  EngineOutcome e = RunClean(c);
  const TensorPiece* theirs = nullptr;
  for (const auto& p : e.obs.ranks[1].steps[0].pieces)
    if (p.kind == "param" && p.tensor == "blocks.0.mlp.fc1.weight") theirs = &p;
  ASSERT_NE(theirs, nullptr);
  e.obs.ranks[0].steps[0].pieces.push_back(*theirs);
  const Verdict v = CheckTiling(c, e.obs);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.detail, "overlap");
  EXPECT_EQ(v.where.tensor, "blocks.0.mlp.fc1.weight");
}

TEST(TilingOracle, SilentOnCleanRunsOfEveryStage) {
  for (int64_t dp : {1, 3, 4}) {
    for (int64_t stage = 0; stage <= 3; ++stage) {
      Config c = SmallConfig(dp, stage);
      c.zero.align_elems = dp == 4 ? 8 : 1;
      const Verdict v = CheckTiling(c, RunClean(c).obs);
      EXPECT_EQ(v.kind, VerdictKind::kPass)
          << "dp " << dp << " stage " << stage << ": " << v.message;
    }
  }
}

TEST(TilingOracle, CatchesADroppedPiece) {
  Config c = SmallConfig(3, 2);
  EngineOutcome e = RunClean(c);
  auto& pieces = e.obs.ranks[1].steps[1].pieces;
  TensorPiece* grad = FindPiece(e, 1, 1, "grad");
  ASSERT_NE(grad, nullptr);
  const std::string tensor = grad->tensor;
  const int64_t offset = grad->offset;
  pieces.erase(pieces.begin() + (grad - pieces.data()));
  const Verdict v = CheckTiling(c, e.obs);
  ExpectLocalized(v);
  EXPECT_EQ(v.kind, VerdictKind::kInvariant);
  EXPECT_EQ(v.oracle, "tiling");
  EXPECT_EQ(v.where.step, 1);
  EXPECT_EQ(v.where.tensor_kind, "grad");
  EXPECT_EQ(v.where.tensor, tensor);
  EXPECT_EQ(v.where.index, offset);
  EXPECT_EQ(v.where.phase, Phase::kGradient);
  EXPECT_EQ(v.Signature().rfind("invariant.tiling.grad.", 0), 0u) << v.Signature();
}

TEST(TilingOracle, CatchesAPieceOutsideItsTensor) {
  Config c = SmallConfig(2, 3);
  EngineOutcome e = RunClean(c);
  TensorPiece* p = FindPiece(e, 1, 0, "param");
  ASSERT_NE(p, nullptr);
  p->offset += 1000000;
  const Verdict v = CheckTiling(c, e.obs);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.detail, "bounds");
  EXPECT_EQ(v.where.rank, 1);
}

TEST(TilingOracle, CatchesAnOverlapOfPartitionedState) {
  Config c = SmallConfig(2, 1);  // optimizer slots partitioned: one holder per element
  EngineOutcome e = RunClean(c);
  TensorPiece* p = FindPiece(e, 0, 0, "exp_avg");
  ASSERT_NE(p, nullptr);
  e.obs.ranks[1].steps[0].pieces.push_back(*p);  // rank 1 claims rank 0's elements too
  const Verdict v = CheckTiling(c, e.obs);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.detail, "overlap");
  EXPECT_EQ(v.where.tensor_kind, "exp_avg");
  EXPECT_EQ(v.where.phase, Phase::kOptimizer);
}

TEST(TilingOracle, CatchesAMissingStep) {
  Config c = SmallConfig(2, 0);
  EngineOutcome e = RunClean(c);
  e.obs.ranks[1].steps.pop_back();
  const Verdict v = CheckTiling(c, e.obs);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.detail, "missing_step");
  EXPECT_EQ(v.where.step, 1);
  EXPECT_EQ(v.where.rank, 1);
}

TEST(TilingOracle, AssembleKeepsReportingTheFirstViolation) {
  Config c = SmallConfig(3, 3);
  c.faults = {"zero.uneven_last_shard"};
  const Assembly a = Assemble(c, RunClean(c).obs);
  EXPECT_EQ(a.verdict.kind, VerdictKind::kInvariant);
  EXPECT_EQ(a.verdict.oracle, "tiling");
  EXPECT_EQ(a.steps.size(), 2u);
}

TEST(TilingOracle, CaughtThroughCheckRunWithItsOwnSignature) {
  Config c = SmallConfig(3, 1);
  c.faults = {"zero.uneven_last_shard"};
  const CheckResult r = testing::CheckWith(c, {"tiling"});
  ExpectLocalized(r.verdict);
  EXPECT_EQ(r.verdict.oracle, "tiling");
  ASSERT_EQ(r.oracles.size(), 1u);
  EXPECT_EQ(r.oracles[0].status, OracleStatus::kFinding);
}

}  // namespace
}  // namespace paradiff

namespace paradiff {
namespace {

using testing::RunClean;
using testing::SmallConfig;

// Planted: one rank's padding (alignment or padded vocabulary rows) holds a non-zero value.
TEST(TilingOracle, CatchesNonZeroPadding) {
  Config c = SmallConfig(3, 1);
  c.zero.align_elems = 8;
  EngineOutcome e = RunClean(c);
  ASSERT_EQ(CheckTiling(c, e.obs).kind, VerdictKind::kPass);
  e.obs.ranks[2].steps[1].padding_max_abs = 1e-30;
  const Verdict v = CheckTiling(c, e.obs);
  EXPECT_EQ(v.kind, VerdictKind::kInvariant);
  EXPECT_EQ(v.where.detail, "padding");
  EXPECT_EQ(v.where.rank, 2);
  EXPECT_EQ(v.where.step, 1);
}

// The vocabulary-padding bug lets padded rows train: their padding turns non-zero.
TEST(TilingOracle, PaddedVocabularyRowsStayZeroOnlyWithTheMask) {
  Config c = SmallConfig(1, 0);
  c.parallel.tp = 2;
  c.parallel.world = 2;
  c.model.vocab = 61;  // padded to 64
  EXPECT_EQ(CheckTiling(c, RunClean(c).obs).kind, VerdictKind::kPass);
  c.faults = {"tp.vocab_padding_in_loss"};
  EXPECT_EQ(CheckTiling(c, RunClean(c).obs).where.detail, "padding");
}

// See Note [Padding after a divergence]: NaN padding beside NaN data is 0 x NaN arithmetic (a
// diverged run), not judged; NaN padding beside finite data is a write to padding, found.
TEST(TilingOracle, NanPaddingIsAFindingOnlyWhileTheDataIsFinite) {
  Config c = SmallConfig(3, 1);
  c.zero.align_elems = 8;
  EngineOutcome e = RunClean(c);
  RankStep& st = e.obs.ranks[1].steps[1];
  st.padding_max_abs = std::nan("");
  const Verdict planted = CheckTiling(c, e.obs);
  EXPECT_EQ(planted.kind, VerdictKind::kInvariant);
  EXPECT_EQ(planted.where.detail, "padding");
  ASSERT_FALSE(st.pieces.empty());
  st.pieces.front().values.view(-1)[0] = std::nan("");
  EXPECT_EQ(CheckTiling(c, e.obs).kind, VerdictKind::kPass);
  st.padding_max_abs = 2.0;  // finite: a bug whatever the data holds
  EXPECT_EQ(CheckTiling(c, e.obs).where.detail, "padding");
}

}  // namespace
}  // namespace paradiff
