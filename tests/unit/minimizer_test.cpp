// The minimizer: a switch-triggered finding shrinks to a 1-minimal config with the same signature
// (no candidate of ShrinkCandidates keeps it), a passing config is left alone, the budget stops
// the search early, and steps are described field by field.
#include "fuzz/minimizer.h"

#include <gtest/gtest.h>

#include "core/budget.h"
#include "core/config_json.h"
#include "fuzz/config_domain.h"
#include "kernels/engine.h"
#include "oracles/check.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

using testing::SmallConfig;

std::string SignatureOf(const Config& c, ReferenceCache& cache) {
  CheckOptions o;
  o.cache = &cache;
  return CheckRun(c, o).verdict.Signature();
}

// Every valid, supported single shrink of `c` loses `sig`.
void ExpectOneMinimal(const Config& c, const std::string& sig, ReferenceCache& cache) {
  int checked = 0;
  for (const Config& cand : ShrinkCandidates(c)) {
    if (!CheckConfig(cand, ResourceBudget{}).ok() || !EngineSupports(cand).ok()) continue;
    ++checked;
    EXPECT_NE(SignatureOf(cand, cache), sig) << "a further shrink keeps the signature:\n"
                                             << DescribeChange(c, cand);
  }
  EXPECT_GT(checked, 0);
}

void ExpectMinimized(const Config& start, const std::string& what) {
  SCOPED_TRACE(what);
  ReferenceCache cache;
  MinimizeOptions o;
  o.cache = &cache;
  int seen_steps = 0;
  o.on_step = [&](const MinimizeStep&) { ++seen_steps; };
  const MinimizeResult r = Minimize(start, o);
  ASSERT_TRUE(r.finding) << r.original.message;
  EXPECT_TRUE(r.complete);
  EXPECT_FALSE(r.steps.empty());
  EXPECT_EQ(seen_steps, static_cast<int>(r.steps.size()));
  EXPECT_GT(r.checks, static_cast<int64_t>(r.steps.size()));
  EXPECT_EQ(r.minimized.faults, start.faults);
  EXPECT_TRUE(CheckConfig(r.minimized, ResourceBudget{}).ok());
  EXPECT_EQ(SignatureOf(r.minimized, cache), r.signature);
  EXPECT_LT(r.minimized.model.layers * r.minimized.model.hidden,
            start.model.layers * start.model.hidden);
  ExpectOneMinimal(r.minimized, r.signature, cache);
}

TEST(Minimizer, GasOverwriteGradIsOneMinimal) {
  Config c = SmallConfig(2, 2);
  c.batch.accumulation_steps = 3;
  c.faults = {"gas.overwrite_grad"};
  ExpectMinimized(c, "gas.overwrite_grad");
}

TEST(Minimizer, ZeroUnevenLastShardIsOneMinimal) {
  Config c = SmallConfig(3, 3);
  c.faults = {"zero.uneven_last_shard"};
  ExpectMinimized(c, "zero.uneven_last_shard");
}

// A finding that shows only after a reload into another layout shrinks both layouts: from save
// dp 6 / reload dp 5 to at most 4 ranks on each side, saving at the first step.
TEST(Minimizer, ReloadOnlyFindingShrinksBothLayouts) {
  Config c = SmallConfig(6, 3);
  c.zero.stage = 1;
  c.batch.accumulation_steps = 5;
  c.steps = 3;
  c.checkpoint.save_at = 2;
  c.checkpoint.reload.dp = 5;
  c.checkpoint.reload.zero_stage = 1;
  c.faults = {"ckpt.reshard_drops_tail"};
  ASSERT_TRUE(CheckConfig(c, ResourceBudget{}).ok()) << CheckConfig(c, ResourceBudget{}).ToString();
  ReferenceCache cache;
  MinimizeOptions o;
  o.cache = &cache;
  const MinimizeResult r = Minimize(c, o);
  ASSERT_TRUE(r.finding) << r.original.message;
  const Config& m = r.minimized;
  EXPECT_EQ(SignatureOf(m, cache), r.signature);
  EXPECT_GT(m.checkpoint.save_at, 0) << "the finding needs the reload";
  EXPECT_LE(m.parallel.world, 4) << WriteConfig(m);
  const ReloadConfig& rl = m.checkpoint.reload;
  EXPECT_LE(rl.tp * rl.pp * rl.dp, 4) << WriteConfig(m);
  EXPECT_EQ(m.checkpoint.save_at, 1) << WriteConfig(m);
}

TEST(Minimizer, PassingConfigIsLeftAlone) {
  const Config c = SmallConfig(2, 1);
  const MinimizeResult r = Minimize(c, MinimizeOptions{});
  EXPECT_FALSE(r.finding);
  EXPECT_EQ(r.signature, "pass");
  EXPECT_EQ(r.checks, 1);
  EXPECT_TRUE(r.steps.empty());
  EXPECT_EQ(r.minimized, c);
}

TEST(Minimizer, BudgetStopsTheSearch) {
  Config c = SmallConfig(3, 3);
  c.faults = {"zero.uneven_last_shard"};
  MinimizeOptions o;
  o.budget_s = 1e-9;
  const MinimizeResult r = Minimize(c, o);
  EXPECT_TRUE(r.finding);
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(r.steps.empty());
  EXPECT_EQ(r.minimized, c);
}

TEST(Minimizer, DescribeChangeNamesEachField) {
  Config a = SmallConfig(4, 2);
  Config b = a;
  b.parallel.dp = 2;
  b.parallel.world = 2;
  EXPECT_EQ(DescribeChange(a, b), "parallel.dp 4->2, parallel.world 4->2");
  EXPECT_EQ(DescribeChange(a, a), "no change");
}

}  // namespace
}  // namespace paradiff
