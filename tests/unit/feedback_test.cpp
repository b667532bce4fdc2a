// Behaviour feedback: loss-scale features from a run's steps, and the generation schedule that
// keeps a seed reproducible whatever order results arrive in.
#include "fuzz/feedback.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "core/config_json.h"
#include "oracles/behaviour.h"

namespace paradiff {
namespace {

std::vector<RankStep> Steps(const std::vector<std::pair<double, bool>>& scale_skipped) {
  std::vector<RankStep> out;
  for (const auto& [scale, skipped] : scale_skipped) {
    RankStep s;
    s.loss_scale = scale;
    s.skipped = skipped;
    out.push_back(s);
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& f) {
  return std::find(v.begin(), v.end(), f) != v.end();
}

TEST(Behaviour, AnOverflowInsideAGrowthIntervalIsItsOwnFeature) {
  // Grows after step 1, one clean step at the new scale, then an overflow that backs off.
  const auto edge = LossScaleFeatures(Steps({{8, false}, {16, false}, {16, true}, {8, false}}));
  EXPECT_TRUE(Has(edge, "scale.overflow_after_clean=1")) << ::testing::PrintToString(edge);
  EXPECT_TRUE(Has(edge, "scale.growths=1"));
  EXPECT_TRUE(Has(edge, "scale.backoffs=1"));
  EXPECT_TRUE(Has(edge, "scale.skip_streak=1"));
  // An overflow right after a growth, held by hysteresis, then another that backs off.
  const auto early = LossScaleFeatures(Steps({{8, false}, {16, true}, {16, true}, {8, false}}));
  EXPECT_TRUE(Has(early, "scale.overflow_after_clean=0")) << ::testing::PrintToString(early);
  EXPECT_FALSE(Has(early, "scale.overflow_after_clean=1"));
  EXPECT_TRUE(Has(early, "scale.skip_held"));
  EXPECT_TRUE(Has(early, "scale.skip_streak=2"));
  EXPECT_TRUE(LossScaleFeatures(Steps({{8, false}, {8, false}})).empty());
}

Config Numbered(int64_t i) {
  Config c;
  c.seed = static_cast<uint64_t>(1000 + i);
  return c;
}

nlohmann::json Shows(std::vector<std::string> features, double margin = 0) {
  return {{"features", features}, {"margin", margin}};
}

// Results of two generations, recorded in `order`; returns the parents' seeds.
std::vector<uint64_t> ParentsAfter(const std::vector<int64_t>& order) {
  const int64_t G = Feedback::kGenerationSize;
  Feedback fb;
  std::set<int64_t> done;
  int64_t done_below = 0;
  for (int64_t i : order) {
    EXPECT_TRUE(fb.Ready(i)) << "execution " << i << " drawn before its generation could be";
    std::vector<std::string> f = {"common"};
    if (i % 7 == 3) f.push_back("rare" + std::to_string(i % 21));
    fb.Record(i, Numbered(i), Shows(f, i == G + 5 ? 0.7 : 0.1));
    done.insert(i);
    while (done.count(done_below)) ++done_below;
    fb.Fold(done_below);
  }
  EXPECT_TRUE(fb.Ready(2 * G));
  std::vector<uint64_t> seeds;
  for (const Config& c : fb.parents()) seeds.push_back(c.seed);
  return seeds;
}

TEST(Feedback, ParentsDependOnResultsNotOnTheOrderTheyArrive) {
  const int64_t G = Feedback::kGenerationSize;
  std::vector<int64_t> forward, shuffled;
  for (int64_t i = 0; i < 2 * G; ++i) forward.push_back(i);
  for (int64_t g = 0; g < 2; ++g)  // within a generation, any order (two jobs finish out of order)
    for (int64_t k = G - 1; k >= 0; --k) shuffled.push_back(g * G + k);
  const std::vector<uint64_t> a = ParentsAfter(forward), b = ParentsAfter(shuffled);
  EXPECT_EQ(a, b);
  // The first run with "common", each first "rareN", and the one near a bound: in index order.
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a.front(), 1000u);
  EXPECT_TRUE(std::find(a.begin(), a.end(), 1000u + G + 5) != a.end()) << "near-bound run kept";
  EXPECT_TRUE(std::is_sorted(a.begin(), a.end()));
  EXPECT_EQ(a.size(), 1 + 3 + 1);  // common, rare3, rare10, rare17, the margin
}

TEST(Feedback, AGenerationWaitsForTheOneBefore) {
  const int64_t G = Feedback::kGenerationSize;
  Feedback fb;
  EXPECT_TRUE(fb.Ready(G - 1));
  EXPECT_FALSE(fb.Ready(G));
  for (int64_t i = 0; i < G - 1; ++i) fb.Record(i, Numbered(i), Shows({"x"}));
  fb.Fold(G - 1);
  EXPECT_FALSE(fb.Ready(G)) << "one execution of generation 0 is still running";
  fb.Fold(G);
  EXPECT_TRUE(fb.Ready(G));
  EXPECT_FALSE(fb.Ready(2 * G));
  fb.Record(3, Numbered(3), Shows({"late"}));  // an earlier generation's result: already folded
  fb.Fold(2 * G);
  EXPECT_EQ(fb.parents().size(), 1u);
}

TEST(Feedback, SurvivesTheWorkDirRoundTrip) {
  const int64_t G = Feedback::kGenerationSize;
  Feedback fb;
  for (int64_t i = 0; i < G + 3; ++i)
    fb.Record(i, Numbered(i), Shows({"f" + std::to_string(i % 5)}));
  fb.Fold(G + 3);
  Feedback back;
  ASSERT_TRUE(back.FromJson(nlohmann::json::parse(fb.ToJson().dump())).ok());
  EXPECT_EQ(back.ToJson(), fb.ToJson());
  // The pending results of generation 1 fold alike in both.
  for (int64_t i = G + 3; i < 2 * G; ++i) {
    fb.Record(i, Numbered(i), Shows({"g" + std::to_string(i % 3)}));
    back.Record(i, Numbered(i), Shows({"g" + std::to_string(i % 3)}));
  }
  fb.Fold(2 * G);
  back.Fold(2 * G);
  EXPECT_EQ(back.ToJson(), fb.ToJson());
  EXPECT_EQ(fb.parents().size(), 5u + 3u);
  const nlohmann::json bad = {
      {"parents", nlohmann::json::array({nlohmann::json{{"steps", "not a number"}}})}};
  EXPECT_FALSE(back.FromJson(bad).ok());
}

}  // namespace
}  // namespace paradiff
