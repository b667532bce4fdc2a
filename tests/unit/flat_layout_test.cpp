// FlatLayout / buckets / packs: shards tile the flat buffer, buckets cover every parameter once,
// pack plans agree with the shards.
#include "kernels/flat_layout.h"

#include <gtest/gtest.h>

#include <set>

#include "core/rng.h"
#include "kernels/buckets.h"
#include "kernels/flat_pack.h"

namespace paradiff {
namespace {

ModelSpec Spec(int64_t layers, bool tied) {
  ModelConfig m;
  m.layers = layers;
  m.tied_embeddings = tied;
  return BuildModelSpec(m);
}

TEST(FlatLayout, ShardsTileAndAlign) {
  SeqRng rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t dp = rng.Range(1, 13), align = int64_t{1} << rng.Range(0, 5);
    const ModelSpec spec = Spec(rng.Range(1, 3), rng.Chance(0.5));
    FlatLayout l(spec, align, dp, FaultSet{});
    EXPECT_EQ(l.padded() % (dp * align), 0);
    EXPECT_GE(l.padded(), l.data_end());
    int64_t end = 0;
    for (int64_t r = 0; r < dp; ++r) {
      EXPECT_EQ(l.ShardBegin(r), end);
      EXPECT_EQ(l.ShardBegin(r) % align, 0);
      end += l.ShardSize(r);
    }
    EXPECT_EQ(end, l.padded());
    int64_t prev_end = 0;
    for (const auto& e : l.entries()) {
      EXPECT_EQ(e.offset % align, 0);
      EXPECT_GE(e.offset, prev_end);
      prev_end = e.offset + e.numel;
    }
    int64_t covered = 0;
    for (const auto& p : l.Pieces(0, l.padded())) covered += p.count;
    EXPECT_EQ(covered, spec.TotalParams());
  }
}

TEST(FlatLayout, UnevenFaultLeavesTailUnowned) {
  const ModelSpec spec = Spec(2, true);
  FaultSet f;
  f.zero_uneven_last_shard = true;
  FlatLayout l(spec, 1, 3, f);
  ASSERT_NE(spec.TotalParams() % 3, 0);
  EXPECT_LT(l.ShardBegin(2) + l.ShardSize(2), spec.TotalParams());
  FlatLayout even(spec, 1, 4, f);  // divides: the fault changes nothing
  EXPECT_EQ(even.ShardBegin(3) + even.ShardSize(3), even.padded());
}

TEST(Buckets, CoverEveryParameterOnceAndRespectSize) {
  const ModelSpec spec = Spec(2, false);
  FlatLayout l(spec, 1, 2, FaultSet{});
  for (int64_t size : {1, 100, 1000, 5000, 1 << 30}) {
    auto buckets = PlanBuckets(l, size, 0, FaultSet{});
    std::multiset<int> seen;
    for (const auto& b : buckets) {
      int64_t n = 0;
      for (int e : b) {
        seen.insert(e);
        n += l.entries()[e].numel;
      }
      EXPECT_TRUE(n <= size || b.size() == 1) << "bucket over size " << size;
    }
    EXPECT_EQ(seen.size(), l.entries().size());
    EXPECT_EQ(std::set<int>(seen.begin(), seen.end()).size(), l.entries().size());
    // Ranks agree on the buckets without the fault.
    EXPECT_EQ(PlanBuckets(l, size, 1, FaultSet{}), buckets);
  }
}

TEST(FlatPack, CountsSumToOwnedElements) {
  const ModelSpec spec = Spec(2, true);
  for (int64_t dp : {1, 2, 3, 7}) {
    FlatLayout l(spec, 4, dp, FaultSet{});
    std::vector<int> entries = {0, 3, 5};
    PackPlan plan = MakePackPlan(l, entries);
    int64_t numel = 0;
    for (int e : entries) numel += l.entries()[e].numel;
    EXPECT_EQ(plan.numel, numel);
    EXPECT_EQ(plan.owned, numel);
    EXPECT_EQ(static_cast<int64_t>(plan.counts.size()), dp);
  }
}

}  // namespace
}  // namespace paradiff
