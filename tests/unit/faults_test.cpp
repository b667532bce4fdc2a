// Each bug-zoo switch of the data-parallel engine is caught on a config that triggers it, stays
// silent on configs that do not, and gets the same signature under different seeds.
#include <gtest/gtest.h>

#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

using testing::Check;
using testing::ExpectCaught;
using testing::ExpectSilent;
using testing::SmallConfig;

Config With(Config c, const std::string& fault) {
  c.faults.push_back(fault);
  return c;
}

TEST(Faults, ZeroUnevenLastShard) {
  const std::string f = "zero.uneven_last_shard";
  for (int64_t stage = 1; stage <= 3; ++stage) {
    Config c = SmallConfig(3, stage);  // 19360 % 3 == 1
    ExpectCaught(With(c, f), f + " stage " + std::to_string(stage), "invariant.tiling.");
  }
  ExpectSilent(With(SmallConfig(4, 2), f), f + " when dp divides the parameters");
  ExpectSilent(With(SmallConfig(3, 0), f), f + " without ZeRO sharding");
}

TEST(Faults, GasOverwriteGrad) {
  const std::string f = "gas.overwrite_grad";
  Config c = SmallConfig(2, 2);
  c.batch.accumulation_steps = 3;
  ExpectCaught(With(c, f), f, "mismatch.numeric.grad.");
  Config one = SmallConfig(2, 2);
  ExpectSilent(With(one, f), f + " without accumulation");
  Config z1 = SmallConfig(2, 1);
  z1.batch.accumulation_steps = 3;
  ExpectSilent(With(z1, f), f + " outside ZeRO-2");
}

TEST(Faults, CommRankDependentBucketOrder) {
  const std::string f = "comm.rank_dependent_bucket_order";
  for (int64_t stage : {0, 2}) {
    Config c = SmallConfig(2, stage);
    c.zero.bucket_elems = 1000;  // several buckets
    ExpectCaught(With(c, f), f + " stage " + std::to_string(stage), "collective.collective.");
  }
  Config one = SmallConfig(2, 0);
  one.zero.bucket_elems = 1 << 20;  // a single bucket
  ExpectSilent(With(one, f), f + " with one bucket");
  Config single = SmallConfig(1, 0);
  single.zero.bucket_elems = 1000;
  ExpectSilent(With(single, f), f + " at dp=1");
}

// The data-parallel engine has no tensor / pipeline parallelism yet, so world == dp and the
// world-size averaging bug cannot show: it must stay silent rather than corrupt every run.
TEST(Faults, DpAverageByWorldSizeSilentWhenWorldEqualsDp) {
  ExpectSilent(With(SmallConfig(4, 1), "dp.average_by_world_size"), "dp.average_by_world_size");
}

}  // namespace
}  // namespace paradiff
