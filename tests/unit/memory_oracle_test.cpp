// Self-test of the memory oracle: the analytical expectation matches the engine's accounts over
// dp x ZeRO stage x alignment x precision x optimizer; an inflated category, a peak above its
// bound and a category that grows from one step to the next (a leak) are caught, naming the rank,
// the category and both byte counts.
#include "oracles/memory_oracle.h"

#include <gtest/gtest.h>

#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::ExpectLocalized;
using testing::RunClean;
using testing::SmallConfig;

TEST(MemoryOracle, ExpectationMatchesCleanRunsAcrossLayouts) {
  int i = 0;
  for (int64_t dp : {1, 2, 3, 5}) {
    for (int64_t stage = 0; stage <= 3; ++stage, ++i) {
      Config c = SmallConfig(dp, stage);
      c.steps = 2;
      c.zero.align_elems = (i % 3 == 1) ? 8 : (i % 3 == 2 ? 3 : 1);
      c.zero.bucket_elems = (i % 2 == 0) ? 300 : 5000;
      c.optimizer.kind = (i % 2 == 0) ? OptimizerKind::kSgd : OptimizerKind::kAdam;
      if (i % 4 == 1) {
        c.precision.param = c.precision.compute = DType::kBf16;
        c.precision.master_weights = (i % 8 == 1);
      }
      const Verdict v = CheckMemory(c, RunClean(c).obs);
      EXPECT_EQ(v.kind, VerdictKind::kPass)
          << "dp " << dp << " stage " << stage << ": " << v.message;
    }
  }
}

TEST(MemoryOracle, ExpectationByHand) {
  // exact_linear hidden 4, 2 layers: 4 tensors of 16 elements = 64; align 8, dp 3 -> padded 72,
  // shard 24; adam (2 slots), fp32.
  Config c = SmallConfig(3, 3);
  c.model.kind = ModelKind::kExactLinear;
  c.model.hidden = 4;
  c.zero.align_elems = 8;
  c.optimizer.kind = OptimizerKind::kAdam;
  const MemoryExpectation m = ExpectedMemory(c, 2);  // holds [48, 72): 16 data elements
  EXPECT_EQ(m.exact.at("params"), 24 * 4);
  EXPECT_EQ(m.exact.at("optimizer"), 2 * 24 * 4);
  EXPECT_EQ(m.exact.at("grads"), 24 * 4);
  EXPECT_EQ(m.exact.at("padding"), 8 * 4);
  EXPECT_EQ(m.exact.at("master"), 0);
  c.zero.stage = 0;
  const MemoryExpectation z = ExpectedMemory(c, 2);
  EXPECT_EQ(z.exact.at("params"), 72 * 4);
  EXPECT_EQ(z.exact.at("grads"), 2 * 72 * 4);
  EXPECT_EQ(z.exact.at("padding"), 8 * 4);
}

TEST(MemoryOracle, CatchesAnInflatedCategory) {
  Config c = SmallConfig(3, 1);
  EngineOutcome e = RunClean(c);
  for (auto& m : e.obs.ranks[2].memory) m.bytes["optimizer"] += 4;  // one fp32 element too many
  const Verdict v = CheckMemory(c, e.obs);
  ExpectLocalized(v);
  EXPECT_EQ(v.kind, VerdictKind::kInvariant);
  EXPECT_EQ(v.oracle, "memory");
  EXPECT_EQ(v.where.tensor_kind, "optimizer");
  EXPECT_EQ(v.where.rank, 2);
  EXPECT_EQ(v.where.step, 0);
  EXPECT_DOUBLE_EQ(v.where.actual - v.where.expected, 4.0);
  EXPECT_EQ(v.Signature(), "invariant.memory.optimizer.-.memory");
}

TEST(MemoryOracle, CatchesWrongPaddingAndAPeakAboveItsBound) {
  Config c = SmallConfig(2, 2);
  c.zero.align_elems = 8;
  EngineOutcome e = RunClean(c);
  EngineOutcome pad = e;
  pad.obs.ranks[0].memory[0].bytes["padding"] += 4;
  EXPECT_EQ(CheckMemory(c, pad.obs).where.tensor_kind, "padding");
  EngineOutcome peak = e;
  peak.obs.ranks[1].memory[0].bytes["buffers_peak"] = 1 << 30;
  const Verdict v = CheckMemory(c, peak.obs);
  ExpectLocalized(v);
  EXPECT_EQ(v.where.tensor_kind, "buffers_peak");
  EXPECT_EQ(v.where.detail, "bound");
}

TEST(MemoryOracle, CatchesALeak) {
  Config c = SmallConfig(2, 0);
  c.steps = 3;
  EngineOutcome e = RunClean(c);
  e.obs.ranks[1].memory[2].bytes["grads"] += 1024;
  // With the analytical accounting the grown category is off at step 2 already.
  const Verdict accounted = CheckMemory(c, e.obs);
  ExpectLocalized(accounted);
  EXPECT_EQ(accounted.where.step, 2);
  EXPECT_EQ(accounted.where.detail, "");
  // Where only the leak check applies (tp > 1: no analytical accounting), it is a leak.
  Config tp = c;
  tp.parallel.tp = 2;  // changes only what CheckMemory may assume, not the observations
  const Verdict leak = CheckMemory(tp, e.obs);
  ExpectLocalized(leak);
  EXPECT_EQ(leak.where.step, 2);
  EXPECT_EQ(leak.where.detail, "leak");
  EXPECT_EQ(leak.where.tensor_kind, "grads");
  EXPECT_EQ(leak.where.rank, 1);
  EXPECT_EQ(leak.Signature(), "invariant.memory.grads.-.memory.leak");
}

}  // namespace
}  // namespace paradiff
