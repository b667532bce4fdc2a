// Mixed precision: parity for fp32 / bf16 / fp16 x master weights x static / dynamic loss scaling x
// clipping x tp / pp / dp / ZeRO; a config that overflows at a known step skips exactly that step
// on every rank; the precision switches caught where they trigger and silent elsewhere.
#include <ATen/Context.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/watchdog.h"
#include "kernels/engine.h"
#include "kernels/loss_scaler.h"
#include "kernels/numerics.h"
#include "oracles/reference.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

using testing::Check;
using testing::ExpectCaught;
using testing::ExpectSilent;
using testing::SmallConfig;

std::string Describe(const Config& c) {
  return std::string("param=") + Name(c.precision.param) + " compute=" + Name(c.precision.compute) +
         " master=" + std::to_string(c.precision.master_weights) +
         " scale=" + Name(c.precision.loss_scale.mode) +
         " init=" + std::to_string(c.precision.loss_scale.init) +
         " clip=" + std::to_string(c.clip_grad_norm) + " tp=" + std::to_string(c.parallel.tp) +
         " pp=" + std::to_string(c.parallel.pp) + " dp=" + std::to_string(c.parallel.dp) +
         " zero=" + std::to_string(c.zero.stage);
}

Config Layout(int i) {
  // Cycle through dp / tp / pp layouts with ZeRO stages.
  const int64_t tp = (i % 3 == 1) ? 2 : 1, pp = (i % 4 == 3) ? 2 : 1, dp = (i % 2 == 0) ? 2 : 1;
  Config c = SmallConfig(dp, pp > 1 ? i % 3 : i % 4);
  c.parallel.tp = tp;
  c.parallel.pp = pp;
  c.parallel.world = tp * pp * dp;
  c.batch.accumulation_steps = 2;
  return c;
}

TEST(PrecisionParity, DtypesMasterScalingClippingLayouts) {
  ReferenceCache cache;
  int i = 0;
  for (DType d : {DType::kFp32, DType::kBf16, DType::kFp16}) {
    for (bool master : {true, false}) {
      for (LossScaleMode mode :
           {LossScaleMode::kNone, LossScaleMode::kStatic, LossScaleMode::kDynamic}) {
        Config c = Layout(i++);
        c.precision.param = c.precision.compute = d;
        c.precision.master_weights = master;
        c.precision.loss_scale.mode = mode;
        c.precision.loss_scale.init = 1024;
        c.precision.loss_scale.growth_interval = 1;
        c.clip_grad_norm = (i % 2) ? 0.05 : 0.0;
        c.steps = 3;
        CheckResult r = Check(c, &cache);
        EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(c) << "\n" << r.verdict.message;
      }
    }
  }
}

// A scale so large that the first step's fp16 gradients overflow, backing off far enough that the
// next steps do not: exactly step 0 is skipped, on every rank, in the run and the reference.
Config OverflowAtStep0(int64_t dp, int64_t stage) {
  Config c = SmallConfig(dp, stage);
  c.precision.param = c.precision.compute = DType::kFp16;
  c.precision.loss_scale.mode = LossScaleMode::kDynamic;
  c.precision.loss_scale.init = std::ldexp(1.0, 40);
  c.precision.loss_scale.backoff = std::ldexp(1.0, -30);
  c.precision.loss_scale.hysteresis = 1;
  c.steps = 3;
  return c;
}

TEST(PrecisionOverflow, KnownStepSkippedOnEveryRank) {
  for (int64_t stage : {0, 2}) {
    Config c = OverflowAtStep0(3, stage);
    EngineOutcome e = RunEngine(c, kDefaultCollectiveTimeout);
    ASSERT_TRUE(e.ok) << e.failure;
    for (const auto& rank : e.obs.ranks) {
      ASSERT_EQ(rank.steps.size(), 3u);
      EXPECT_TRUE(rank.steps[0].skipped) << "rank " << rank.rank;
      EXPECT_FALSE(rank.steps[1].skipped) << "rank " << rank.rank;
      EXPECT_FALSE(rank.steps[2].skipped) << "rank " << rank.rank;
      EXPECT_EQ(rank.steps[1].loss_scale, std::ldexp(1.0, 10));
    }
    CheckResult r = Check(c);
    EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << r.verdict.message;
  }
}

// See Note [No oneDNN] (kernels/numerics.cpp): the arithmetic factory turns LibTorch's oneDNN path
// off for the whole process, so no bf16 matmul JIT-compiles a oneDNN kernel (a long-lived worker
// died compiling one after a few hundred configs).
TEST(Numerics, FactoryTurnsOneDnnOff) {
  MakeNumerics(DType::kBf16);
  EXPECT_FALSE(at::globalContext().userEnabledMkldnn());
}

// See Note [Single-threaded BLAS] (kernels/numerics.cpp): OpenBLAS's own thread pool is off, so
// gemms called from several rank threads at once cannot deadlock in it.
TEST(Numerics, FactoryTurnsOpenBlasThreadingOff) {
  using GetThreads = int (*)();
  auto get = reinterpret_cast<GetThreads>(::dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  if (get == nullptr) GTEST_SKIP() << "LibTorch is not linked against OpenBLAS here";
  MakeNumerics(DType::kFp32);
  EXPECT_EQ(get(), 1);
}

TEST(LossScaler, DynamicBackoffHysteresisGrowth) {
  LossScaleConfig cfg;
  cfg.mode = LossScaleMode::kDynamic;
  cfg.init = 1024;
  cfg.hysteresis = 2;
  cfg.growth_interval = 2;
  LossScaler s(cfg);
  EXPECT_FALSE(s.Update(true));  // first overflow spends hysteresis
  EXPECT_TRUE(s.Update(true));   // second backs off
  EXPECT_EQ(s.scale(), 512);
  EXPECT_FALSE(s.Update(false));
  EXPECT_TRUE(s.Update(false));  // growth after 2 good steps
  EXPECT_EQ(s.scale(), 1024);
  cfg.min = 1024;
  LossScaler floor(cfg);
  floor.Update(true);
  floor.Update(true);
  EXPECT_EQ(floor.scale(), 1024);  // never below min
}

// The reference follows the loss scale schedule with its own implementation (see Note [Independent
// loss scale schedule] in oracles/reference.cpp), so the numeric oracle's scale-sequence check
// tests the engine's LossScaler. The two must agree on every schedule and overflow pattern.
TEST(LossScaler, ReferenceScheduleWrittenApartAgrees) {
  Config c = SmallConfig(1, 0);
  c.model.kind = ModelKind::kExactLinear;
  c.model.layers = 1;
  c.model.hidden = 4;
  c.model.seq_len = 2;
  c.batch.micro_batch = 1;
  c.steps = 10;
  c.precision.loss_scale.mode = LossScaleMode::kDynamic;
  std::mt19937 rng(20261130);
  for (int k = 0; k < 24; ++k) {
    LossScaleConfig& ls = c.precision.loss_scale;
    ls.init = 1 << (4 + rng() % 8);
    ls.hysteresis = 1 + rng() % 3;
    ls.growth_interval = 1 + rng() % 4;
    ls.min = rng() % 2 ? 1.0 : ls.init / 4;
    ls.backoff = rng() % 2 ? 0.5 : 0.25;
    ls.growth_factor = rng() % 2 ? 2.0 : 4.0;
    std::vector<bool> skips;
    for (int64_t s = 0; s < c.steps; ++s) skips.push_back(rng() % 3 == 0);
    const RefRun ref = RunReference(c, BuiltInReduction(), /*truth=*/true, &skips);
    LossScaler engine(ls);
    for (int64_t s = 0; s < c.steps; ++s) {
      EXPECT_EQ(ref.steps[s].loss_scale, engine.scale()) << "case " << k << " step " << s;
      engine.Update(skips[s]);
    }
  }
}

TEST(PrecisionFaults, LocalOverflowDecision) {
  // Scales where only some ZeRO shards overflow: the ranks then decide differently.
  const std::string f = "fp16.local_overflow_decision";
  int caught = 0;
  for (double k = 16; k <= 20; k += 0.5) {  // around where the first gradients overflow
    Config c = OverflowAtStep0(4, 1);
    c.precision.loss_scale.init = std::pow(2.0, k);
    c.faults = {f};
    if (IsFinding(Check(c).verdict.kind)) ++caught;
  }
  EXPECT_GT(caught, 0) << f << " never caught";
  Config quiet = OverflowAtStep0(2, 1);
  quiet.precision.loss_scale.init = 8;  // no overflow anywhere
  quiet.faults = {f};
  ExpectSilent(quiet, f + " without overflow");
  Config replicated = OverflowAtStep0(2, 0);  // ZeRO 0: every rank sees every gradient
  replicated.faults = {f};
  ExpectSilent(replicated, f + " when every rank sees the same gradients");
}

TEST(PrecisionFaults, UnscaleWithNewScale) {
  const std::string f = "fp16.unscale_with_new_scale";
  Config c = SmallConfig(2, 1);
  c.precision.param = c.precision.compute = DType::kFp16;
  c.precision.loss_scale.mode = LossScaleMode::kDynamic;
  c.precision.loss_scale.init = 256;
  c.precision.loss_scale.growth_interval = 1;  // the scale changes every step
  c.clip_grad_norm = 0.05;
  c.faults = {f};
  ExpectCaught(c, f, "mismatch.numeric.grad_norm.-.reduction.");
  c.clip_grad_norm = 0;
  CheckResult r = Check(c);
  EXPECT_NE(r.verdict.where.tensor_kind, "param")
      << "without clipping only the reported norm may differ";
  c.clip_grad_norm = 0.05;
  c.precision.loss_scale.mode = LossScaleMode::kStatic;
  ExpectSilent(c, f + " with a static scale");
}

TEST(PrecisionFaults, AccumulateInBf16) {
  const std::string f = "bf16.accumulate_in_bf16";
  Config c = SmallConfig(1, 0);
  c.precision.param = DType::kFp32;
  c.precision.compute = DType::kBf16;
  c.batch.accumulation_steps = 32;
  c.batch.micro_batch = 1;
  c.optimizer.kind = OptimizerKind::kSgd;
  c.steps = 1;
  c.faults = {f};
  ExpectCaught(c, f, "invariant.memory.grads.");
  c.batch.accumulation_steps = 1;
  ExpectSilent(c, f + " without accumulation");
}

}  // namespace
}  // namespace paradiff
