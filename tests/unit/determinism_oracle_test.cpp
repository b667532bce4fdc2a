// Self-test of the determinism oracle: silent when the engine is deterministic; catches a second
// run that differs by one ulp in one element (localized to that quantity), a second run that
// fails, and a second run whose collective log differs. Not in the default set.
#include "oracles/determinism_oracle.h"

#include <gtest/gtest.h>

#include <atomic>

#include "oracles/oracle_registry.h"
#include "tests/unit/oracle_test_util.h"

namespace paradiff {
namespace {

using testing::ExpectLocalized;
using testing::FindPiece;
using testing::MakeHarness;
using testing::NudgeOneUlp;
using testing::RunClean;
using testing::SmallConfig;

// The engine, with `plant` applied to every run after the first.
EngineRunner FlakyAfterFirst(std::function<void(EngineOutcome&)> plant) {
  auto runs = std::make_shared<std::atomic<int>>(0);
  return [runs, plant](const Config& c) {
    EngineOutcome e = RunEngine(c, testing::kTestTimeout);
    if ((*runs)++ > 0) plant(e);
    return e;
  };
}

TEST(DeterminismOracle, OffByDefaultOnByName) {
  const auto& d = DefaultOracleNames();
  EXPECT_EQ(std::count(d.begin(), d.end(), "determinism"), 0);
  const CheckResult r = testing::CheckWith(SmallConfig(2, 1), {"determinism"});
  ASSERT_EQ(r.oracles.size(), 1u);
  EXPECT_EQ(r.oracles[0].status, OracleStatus::kPass) << r.oracles[0].note;
}

TEST(DeterminismOracle, CatchesOneUlpInTheSecondRun) {
  Config c = SmallConfig(3, 2);
  c.batch.accumulation_steps = 2;
  std::string tensor;
  int64_t offset = -1;
  auto plant = [&](EngineOutcome& e) {
    TensorPiece* p = FindPiece(e, 2, 1, "exp_avg");
    tensor = p->tensor;
    offset = p->offset;
    NudgeOneUlp(*p, 0);
  };
  const CheckResult r = testing::CheckWith(c, {"determinism"}, FlakyAfterFirst(plant));
  ExpectLocalized(r.verdict);
  EXPECT_EQ(r.verdict.oracle, "determinism");
  EXPECT_EQ(r.verdict.where.step, 1);
  EXPECT_EQ(r.verdict.where.tensor_kind, "exp_avg");
  EXPECT_EQ(r.verdict.where.tensor, tensor);
  EXPECT_EQ(r.verdict.where.index, offset);
  EXPECT_DOUBLE_EQ(r.verdict.where.error, 1.0);
  EXPECT_EQ(r.verdict.Signature().rfind("mismatch.determinism.exp_avg.", 0), 0u)
      << r.verdict.Signature();
}

TEST(DeterminismOracle, CatchesAFailingOrDifferentlyCommunicatingSecondRun) {
  Config c = SmallConfig(2, 1);
  const testing::Harness fails = MakeHarness(c, RunClean(c), [](const Config&) {
    EngineOutcome e;
    e.ok = false;
    e.failure_kind = FailureKind::kCrash;
    e.failure = "rank 0: boom";
    e.failure_rank = 0;
    return e;
  });
  Verdict v = DeterminismOracle().Check(fails.Input());
  ExpectLocalized(v, /*needs_step=*/false);
  EXPECT_EQ(v.where.detail, "failure");

  const testing::Harness log = MakeHarness(c, RunClean(c), [](const Config& x) {
    EngineOutcome e = RunEngine(x, testing::kTestTimeout);
    e.obs.ranks[1].collectives.pop_back();
    return e;
  });
  v = DeterminismOracle().Check(log.Input());
  EXPECT_EQ(v.kind, VerdictKind::kMismatch);
  EXPECT_EQ(v.where.detail, "collective_log");
  EXPECT_EQ(v.where.rank, 1);
}

}  // namespace
}  // namespace paradiff
