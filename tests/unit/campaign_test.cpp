// Campaign pieces: the deterministic schedule, pair coverage, and idempotent finding records.
#include "fuzz/campaign.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/config_json.h"
#include "fuzz/coverage.h"
#include "fuzz/workdir.h"
#include "kernels/engine.h"

namespace paradiff {
namespace {

DomainOptions Domain() {
  DomainOptions d;
  d.accept = [](const Config& c) { return EngineSupports(c).ok(); };
  return d;
}

TEST(CampaignSchedule, SameSeedSameConfigsAnyOrder) {
  CampaignOptions o;
  o.seed = 42;
  std::vector<std::string> forward, backward(40);
  for (int64_t i = 0; i < 40; ++i) forward.push_back(WriteConfig(ConfigAt(o, {}, Domain(), i)));
  for (int64_t i = 39; i >= 0; --i) backward[i] = WriteConfig(ConfigAt(o, {}, Domain(), i));
  EXPECT_EQ(forward, backward);
  o.seed = 43;
  int differ = 0;
  for (int64_t i = 0; i < 40; ++i)
    differ += WriteConfig(ConfigAt(o, {}, Domain(), i)) != forward[i];
  EXPECT_GT(differ, 30);
}

TEST(CampaignSchedule, InjectedFaultsReachEveryConfig) {
  CampaignOptions o;
  o.inject = {"gas.overwrite_grad"};
  DomainOptions d = Domain();
  d.faults = o.inject;
  for (int64_t i = 0; i < 20; ++i) {
    Config c = ConfigAt(o, {}, d, i);
    EXPECT_EQ(c.faults, o.inject) << "execution " << i;
  }
}

TEST(PairCoverage, CountsNewPairsOnlyOnce) {
  PairCoverage cov;
  EXPECT_TRUE(cov.Add({"a=1", "b=1"}));
  EXPECT_FALSE(cov.Add({"b=1", "a=1"}));
  EXPECT_TRUE(cov.Add({"a=2", "b=1", "c=x"}));
  EXPECT_EQ(cov.covered(), 4);                       // a1b1, a2b1, a2cx, b1cx
  EXPECT_EQ(cov.possible(), 2 * 1 + 2 * 1 + 1 * 1);  // a{1,2} x b{1}, a x c{x}, b x c
  PairCoverage copy;
  copy.FromJson(cov.ToJson());
  EXPECT_EQ(copy.covered(), cov.covered());
  EXPECT_EQ(copy.possible(), cov.possible());
}

TEST(WorkDir, RecordingTheSameExecutionTwiceCountsOnce) {
  const std::string root = ::testing::TempDir() + "/paradiff_wd_test";
  std::filesystem::remove_all(root);
  WorkDir wd(root);
  Config c;
  nlohmann::json v = {{"signature", "mismatch.numeric.grad.mlp.gradient"},
                      {"kind", "mismatch"},
                      {"oracle", "numeric"},
                      {"message", "boom"}};
  EXPECT_TRUE(wd.RecordFinding(v, c, {{"x", 1}}, 5, 1.0).value());
  EXPECT_FALSE(wd.RecordFinding(v, c, {{"x", 1}}, 5, 2.0).value());  // a resumed re-run
  EXPECT_FALSE(wd.RecordFinding(v, c, {{"x", 1}}, 9, 3.0).value());
  std::ifstream in(wd.FindingDir("mismatch.numeric.grad.mlp.gradient") + "/meta.json");
  nlohmann::json meta = nlohmann::json::parse(in);
  EXPECT_EQ(meta["count"], 2);
  EXPECT_EQ(meta["first_seen_index"], 5);
  EXPECT_EQ(meta["last_seen_index"], 9);
  StatusOr<Config> back =
      LoadConfigFile(wd.FindingDir("mismatch.numeric.grad.mlp.gradient") + "/config.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back.value(), c);
  std::filesystem::remove_all(root);
}

TEST(WorkDir, CorruptStatsIsAnErrorNotAReset) {
  const std::string root = ::testing::TempDir() + "/paradiff_wd_corrupt";
  std::filesystem::create_directories(root);
  std::ofstream(root + "/stats.json") << "{ not json";
  WorkDir wd(root);
  StatusOr<nlohmann::json> s = wd.LoadStats();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.status().ToString().find("stats.json"), std::string::npos);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace paradiff
