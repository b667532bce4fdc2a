// The oracle registry and CheckRun's orchestration: names and sets resolve in canonical order,
// unknown names are errors naming the known ones, CheckRun applies exactly the selected oracles,
// stops at the first finding, and reports what each said. Localization: findings of planted bugs
// keep their signature across seeds and sizes (see Note [Localization] in oracles/oracle.h).
#include "oracles/oracle_registry.h"

#include <gtest/gtest.h>

#include "oracles/report.h"
#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::FindPiece;
using testing::NudgeOneUlp;
using testing::SmallConfig;

TEST(OracleRegistry, NamesAndSets) {
  const std::vector<std::string> all = {"validation", "collective",  "tiling",     "replica",
                                        "memory",     "numeric",     "update",     "exact",
                                        "mirror",     "determinism", "metamorphic"};
  std::vector<std::string> every = all;
  every.push_back("cross_backend");
  EXPECT_EQ(AllOracleNames(), every);
  EXPECT_EQ(ThoroughOracleNames(), all) << "cross_backend is opt-in";
  EXPECT_EQ(ResolveOracleNames({"all,cross_backend"}).value(), every);
  const std::vector<std::string> def = {"validation", "collective", "tiling", "replica", "memory",
                                        "numeric",    "update",     "exact",  "mirror"};
  EXPECT_EQ(DefaultOracleNames(), def);
  EXPECT_EQ(ResolveOracleNames({}).value(), def);
  EXPECT_EQ(ResolveOracleNames({"all"}).value(), all);
  const std::vector<std::string> some = {"tiling", "numeric", "determinism"};
  EXPECT_EQ(ResolveOracleNames({"numeric, tiling", "determinism", "numeric"}).value(), some);
  const auto bad = ResolveOracleNames({"numeric,nope"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().errors()[0].field, "oracles");
  EXPECT_NE(bad.status().ToString().find("nope"), std::string::npos);
  EXPECT_NE(bad.status().ToString().find("metamorphic"), std::string::npos);
  EXPECT_THROW(MakeOracles({"nope"}), std::invalid_argument);
  EXPECT_EQ(MakeOracles({"default", "metamorphic"}).size(), def.size() + 1);
}

TEST(OracleRegistry, CheckRunAppliesTheSelectionAndReportsIt) {
  Config c = SmallConfig(2, 1);
  const CheckResult r = testing::CheckWith(c, {"numeric", "tiling"});
  EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << r.verdict.message;
  ASSERT_EQ(r.oracles.size(), 2u);
  EXPECT_EQ(r.oracles[0].name, "tiling");
  EXPECT_EQ(r.oracles[1].name, "numeric");
  EXPECT_FALSE(r.comparisons.empty());
  EXPECT_EQ(r.rows.size(), 2u);
  const nlohmann::json j = ReportJson(c, r);
  EXPECT_EQ(j["oracles"].size(), 2u);
  EXPECT_EQ(j["oracles"][0]["status"], "pass");
  EXPECT_EQ(j["rejected"], false);
}

TEST(OracleRegistry, DefaultSetIsCleanAndStopsAtTheFirstFinding) {
  Config c = SmallConfig(3, 2);
  const CheckResult clean = testing::CheckWith(c, {});
  EXPECT_EQ(clean.verdict.kind, VerdictKind::kPass) << clean.verdict.message;
  EXPECT_EQ(clean.oracles.size(), DefaultOracleNames().size());
  auto corrupt = [](const Config& x) {
    EngineOutcome e = RunEngine(x, testing::kTestTimeout);
    for (auto& m : e.obs.ranks[0].memory) m.bytes["params"] += 2;
    return e;
  };
  const CheckResult r = testing::CheckWith(c, {"all"}, corrupt);
  EXPECT_EQ(r.verdict.oracle, "memory");
  EXPECT_EQ(r.oracles.back().name, "memory") << "oracles after the first finding do not run";
  EXPECT_EQ(r.oracles.back().status, OracleStatus::kFinding);
}

// A planted bug and the config it is planted into.
struct Planted {
  const char* what;
  Config (*config)(int64_t size, uint64_t seed);
  void (*plant)(EngineOutcome&);
};

Config Gpt(int64_t size, uint64_t seed) {
  Config c = SmallConfig(size == 0 ? 2 : 3, 2);
  c.model.layers = size == 0 ? 2 : 3;
  c.model.hidden = size == 0 ? 32 : 48;
  c.seed = seed;
  return c;
}

TEST(OracleLocalization, SignaturesAreStableAcrossSeedsAndSizes) {
  const Planted planted[] = {
      {"replica param", Gpt,
       [](EngineOutcome& e) { NudgeOneUlp(*FindPiece(e, 1, 0, "param", "head.ln_f.weight"), 0); }},
      {"dropped grad piece", Gpt,
       [](EngineOutcome& e) {
         auto& ps = e.obs.ranks[1].steps[0].pieces;
         for (size_t i = 0; i < ps.size(); ++i)
           if (ps[i].kind == "grad" && ps[i].tensor.find("mlp.fc2.weight") != std::string::npos) {
             ps.erase(ps.begin() + i);
             return;
           }
       }},
      {"inflated optimizer bytes", Gpt,
       [](EngineOutcome& e) { e.obs.ranks[1].memory[0].bytes["optimizer"] += 4; }},
      {"scaled gradients", Gpt,
       [](EngineOutcome& e) {
         for (auto& r : e.obs.ranks)
           for (auto& p : r.steps[0].pieces)
             if (p.kind == "grad") p.values.mul_(0.5);
       }},
      {"wrong grad norm", Gpt, [](EngineOutcome& e) { e.obs.ranks[0].steps[0].grad_norm *= 1.01; }},
  };
  for (const Planted& p : planted) {
    std::string sig;
    for (int64_t size : {0, 1}) {
      for (uint64_t seed : {1234ULL, 77ULL}) {
        const Config c = p.config(size, seed);
        auto plant = p.plant;
        const CheckResult r = testing::CheckWith(c, {}, [plant](const Config& x) {
          EngineOutcome e = RunEngine(x, testing::kTestTimeout);
          plant(e);
          return e;
        });
        testing::ExpectLocalized(r.verdict);
        if (sig.empty()) sig = r.verdict.Signature();
        EXPECT_EQ(r.verdict.Signature(), sig) << p.what << " size " << size << " seed " << seed;
      }
    }
  }
}

}  // namespace
}  // namespace paradiff
