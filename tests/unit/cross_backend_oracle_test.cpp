// Self-test of the cross-backend oracle with the other backend's runner injected (the real mpirun
// comparison runs in the mpi-labelled tests, tests/mpi): silent when the other backend agrees
// bitwise (a NaN equal to any NaN, a zero not equal to a zero of the other sign); catches one ulp
// in one element of the other backend's run (localized), a run that fails only there, and a
// collective log that differs; opt-in, never in "all".
#include "oracles/cross_backend_oracle.h"

#include <gtest/gtest.h>

#include <cstring>

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

// "The other backend": the local engine run of the config, with `plant` applied, checking that
// the oracle asked for the mpi backend.
EngineRunner OtherBackend(std::function<void(EngineOutcome&)> plant) {
  return [plant](const Config& c) {
    EXPECT_EQ(c.backend, Backend::kMpi);
    Config local = c;
    local.backend = Backend::kLocal;
    EngineOutcome e = RunEngine(local, testing::kTestTimeout);
    plant(e);
    return e;
  };
}

Verdict CheckAgainst(const Config& c, std::function<void(EngineOutcome&)> plant) {
  const auto h = MakeHarness(c, RunClean(c));
  return CrossBackendOracle(OtherBackend(std::move(plant))).Check(h.Input());
}

TEST(CrossBackendOracle, OptInOnly) {
  const auto& all = ThoroughOracleNames();
  EXPECT_EQ(std::count(all.begin(), all.end(), "cross_backend"), 0);
  const auto& every = AllOracleNames();
  EXPECT_EQ(std::count(every.begin(), every.end(), "cross_backend"), 1);
}

TEST(CrossBackendOracle, SilentWhenTheBackendsAgree) {
  const Verdict v = CheckAgainst(SmallConfig(3, 2), [](EngineOutcome&) {});
  EXPECT_EQ(v.kind, VerdictKind::kPass) << v.message;
}

TEST(CrossBackendOracle, CatchesOneUlpOnTheOtherBackend) {
  Config c = SmallConfig(2, 1);
  std::string tensor;
  const Verdict v = CheckAgainst(c, [&](EngineOutcome& e) {
    TensorPiece* p = FindPiece(e, 1, 0, "grad");
    tensor = p->tensor;
    NudgeOneUlp(*p, 0);
  });
  ExpectLocalized(v);
  EXPECT_EQ(v.oracle, "cross_backend");
  EXPECT_EQ(v.where.step, 0);
  EXPECT_EQ(v.where.tensor, tensor);
  EXPECT_NE(v.message.find("the mpi run"), std::string::npos) << v.message;
  EXPECT_EQ(v.Signature().rfind("mismatch.cross_backend.grad.", 0), 0u) << v.Signature();
  EXPECT_EQ(v.where.detail, "replica_copy")
      << "rank 1's copy is a replica the assembly does not read";
  // The copy the assembly reads: found through the assembled quantities.
  const Verdict w =
      CheckAgainst(c, [&](EngineOutcome& e) { NudgeOneUlp(*FindPiece(e, 0, 1, "param"), 0); });
  ExpectLocalized(w);
  EXPECT_EQ(w.where.step, 1);
  EXPECT_EQ(w.where.detail, "");
  EXPECT_EQ(w.where.tensor_kind, "param");
}

// Sets element 0 of a float piece to the float with bit pattern `bits`.
void SetBits(TensorPiece& p, uint32_t bits) {
  ASSERT_EQ(p.values.scalar_type(), at::kFloat);
  std::memcpy(p.values.data_ptr<float>(), &bits, sizeof bits);
}

// Regression (a 30-minute cross-backend campaign, seed 9696, docs/FINDINGS.md): an overflowed
// bf16 reduction gave NaN 0xffff on one backend and 0x7fc0 on the other at the same element (see
// Note [A NaN is any NaN] in oracles/determinism_oracle.cpp).
TEST(CrossBackendOracle, ANanEqualsAnyNanAndAZeroKeepsItsSign) {
  const Config c = SmallConfig(2, 1);
  EngineOutcome first = RunClean(c);
  SetBits(*FindPiece(first, 1, 0, "grad"), 0x7fc00000u);  // +NaN, as a scalar loop rounds it
  auto h = MakeHarness(c, first);
  Verdict v = CrossBackendOracle(OtherBackend([](EngineOutcome& e) {
                SetBits(*FindPiece(e, 1, 0, "grad"), 0xffff0000u);  // -NaN with a payload
              })).Check(h.Input());
  EXPECT_EQ(v.kind, VerdictKind::kPass) << v.message;

  SetBits(*FindPiece(first, 1, 0, "grad"), 0x00000000u);  // +0.0
  h = MakeHarness(c, first);
  v = CrossBackendOracle(OtherBackend([](EngineOutcome& e) {
        SetBits(*FindPiece(e, 1, 0, "grad"), 0x80000000u);  // -0.0
      })).Check(h.Input());
  EXPECT_EQ(v.kind, VerdictKind::kMismatch) << v.message;
  EXPECT_EQ(v.where.detail, "replica_copy");
}

TEST(CrossBackendOracle, CatchesAFailureOrALogOnlyOnTheOtherBackend) {
  Config c = SmallConfig(2, 1);
  Verdict v = CheckAgainst(c, [](EngineOutcome& e) {
    e = EngineOutcome{};
    e.ok = false;
    e.failure_kind = FailureKind::kCrash;
    e.failure = "rank 1: killed by signal 9";
    e.failure_rank = 1;
  });
  EXPECT_EQ(v.kind, VerdictKind::kMismatch);
  EXPECT_EQ(v.where.detail, "failure");
  EXPECT_EQ(v.where.rank, 1);
  v = CheckAgainst(c, [](EngineOutcome& e) { e.obs.ranks[0].collectives.pop_back(); });
  EXPECT_EQ(v.where.detail, "collective_log") << v.message;
  EXPECT_EQ(v.where.rank, 0);
}

}  // namespace
}  // namespace paradiff
