// Parity: the data-parallel / ZeRO engine agrees with the reference within the tolerance model
// across a matrix of layouts, and ZeRO stage k equals stage 0 bitwise at the same dp.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "core/watchdog.h"
#include "kernels/engine.h"
#include "oracles/assemble.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

using testing::Check;
using testing::SmallConfig;

std::string Describe(const Config& c) {
  return "dp=" + std::to_string(c.parallel.dp) + " zero=" + std::to_string(c.zero.stage) +
         " accum=" + std::to_string(c.batch.accumulation_steps) +
         " bucket=" + std::to_string(c.zero.bucket_elems) +
         " align=" + std::to_string(c.zero.align_elems) + " opt=" + Name(c.optimizer.kind) +
         " param=" + Name(c.precision.param) + " clip=" + std::to_string(c.clip_grad_norm) +
         " model=" + Name(c.model.kind);
}

// Every dp x stage, with the other dimensions cycled so each value of each appears many times.
// Each config must really be compared (not rejected, numeric comparisons made), and the cycle must
// reach every value of every dimension it claims to cover.
TEST(EngineParity, MatrixDpZeroAccumBucketsOptimizerPrecision) {
  ReferenceCache cache;
  const int64_t dps[] = {1, 2, 3, 4, 5, 7, 8};
  std::set<std::string> covered;
  int i = 0;
  for (int64_t dp : dps) {
    for (int64_t stage = 0; stage <= 3; ++stage, ++i) {
      Config c = SmallConfig(dp, stage);
      c.batch.accumulation_steps = 1 + i % 4;
      c.zero.bucket_elems = (i % 3 == 0)   ? 100
                            : (i % 3 == 1) ? 1000
                                           : 1 << 20;  // < / ~ / > a tensor
      c.zero.align_elems = (i % 5 == 4) ? 8 : 1;
      c.optimizer.kind = (i % 2 == 0) ? OptimizerKind::kAdamW : OptimizerKind::kSgd;
      c.optimizer.weight_decay = (i % 4 == 1) ? 0.1 : 0.0;
      c.model.tied_embeddings = (i % 3 != 2);
      c.model.activation = (i % 7 == 3) ? Activation::kSwiglu : Activation::kGelu;
      c.model.kv_heads = (i % 6 == 5) ? 2 : 4;  // GQA now and then
      c.clip_grad_norm = (i % 4 == 2) ? 0.05 : 0.0;
      if (i % 3 == 1) {
        c.precision.param = c.precision.compute = DType::kBf16;
        c.precision.master_weights = (i % 2 == 0);
      }
      CheckResult r = Check(c, &cache);
      EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(c) << "\n" << r.verdict.message;
      EXPECT_FALSE(r.rejected) << Describe(c);
      EXPECT_FALSE(r.comparisons.empty()) << Describe(c) << ": nothing was compared";
      for (const std::string& v :
           {"dp" + std::to_string(dp) + "stage" + std::to_string(stage),
            "accum" + std::to_string(c.batch.accumulation_steps),
            "bucket" + std::to_string(c.zero.bucket_elems),
            "align" + std::to_string(c.zero.align_elems),
            std::string("opt") + Name(c.optimizer.kind),
            std::string("wd") + (c.optimizer.weight_decay > 0 ? "1" : "0"),
            std::string("tied") + (c.model.tied_embeddings ? "1" : "0"),
            std::string("act") + Name(c.model.activation), "kv" + std::to_string(c.model.kv_heads),
            std::string("clip") + (c.clip_grad_norm > 0 ? "1" : "0"),
            std::string("param") + Name(c.precision.param) +
                (c.precision.keeps_master() ? "+master" : "")})
        covered.insert(v);
    }
  }
  std::vector<std::string> want;
  for (int64_t dp : dps)
    for (int64_t stage = 0; stage <= 3; ++stage)
      want.push_back("dp" + std::to_string(dp) + "stage" + std::to_string(stage));
  for (const char* v :
       {"accum1",        "accum2", "accum3", "accum4",    "bucket100", "bucket1000",
        "bucket1048576", "align1", "align8", "optsgd",    "optadamw",  "wd0",
        "wd1",           "tied0",  "tied1",  "actgelu",   "actswiglu", "kv2",
        "kv4",           "clip0",  "clip1",  "paramfp32", "parambf16", "parambf16+master"})
    want.push_back(v);
  for (const std::string& v : want)
    EXPECT_TRUE(covered.count(v)) << "the matrix never reaches " << v;
}

TEST(EngineParity, ExactLinearAcrossDp) {
  for (int64_t dp : {1, 2, 4, 8}) {
    Config c = SmallConfig(dp, dp % 4);
    c.model.kind = ModelKind::kExactLinear;
    c.optimizer.kind = OptimizerKind::kSgd;
    c.optimizer.lr = 0.0625;
    CheckResult r = Check(c);
    EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(c) << "\n" << r.verdict.message;
  }
}

// Uneven sizes: parameter counts that do not divide dp, with and without alignment padding.
TEST(EngineParity, UnevenShardsAllStages) {
  for (int64_t dp : {3, 7}) {
    for (int64_t stage = 1; stage <= 3; ++stage) {
      Config c = SmallConfig(dp, stage);
      c.batch.accumulation_steps = 2;
      c.zero.bucket_elems = 333;
      ASSERT_NE(ModelParameterCount(c.model) % dp, 0);
      CheckResult r = Check(c);
      EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(c) << "\n" << r.verdict.message;
    }
  }
}

Assembly Observe(const Config& c) {
  EngineOutcome e = RunEngine(c, kDefaultCollectiveTimeout);
  EXPECT_TRUE(e.ok) << e.failure;
  Assembly a = Assemble(c, e.obs);
  EXPECT_EQ(a.verdict.kind, VerdictKind::kPass) << a.verdict.message;
  return a;
}

// Bitwise equality on values (so -0.0 == 0.0, as IEEE comparison has it).
void ExpectBitwiseEqual(const Assembly& a, const Assembly& b, const std::string& what) {
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (size_t s = 0; s < a.steps.size(); ++s) {
    EXPECT_EQ(a.steps[s].loss, b.steps[s].loss) << what << " step " << s;
    EXPECT_EQ(a.steps[s].grad_norm, b.steps[s].grad_norm) << what << " step " << s;
    for (const auto& [key, t] : a.steps[s].tensors) {
      const at::Tensor& u = b.steps[s].tensors.at(key);
      EXPECT_TRUE(at::equal(t, u)) << what << " step " << s << " " << key << " max diff "
                                   << (t - u).abs().max().item<double>();
    }
  }
}

TEST(EngineMetamorphic, ZeroStageKEqualsStage0Bitwise) {
  for (int64_t dp : {1, 2, 3, 5}) {
    for (int variant = 0; variant < 2; ++variant) {
      Config base = SmallConfig(dp, 0);
      base.batch.accumulation_steps = variant == 0 ? 2 : 3;
      base.zero.bucket_elems = variant == 0 ? 500 : 1 << 20;
      base.clip_grad_norm = variant == 0 ? 0.05 : 0.0;
      if (variant == 1) {
        base.optimizer.kind = OptimizerKind::kSgd;
        base.precision.param = base.precision.compute = DType::kBf16;
      }
      const Assembly ref = Observe(base);
      for (int64_t stage = 1; stage <= 3; ++stage) {
        Config c = base;
        c.zero.stage = stage;
        ExpectBitwiseEqual(ref, Observe(c), Describe(c) + " vs stage 0");
      }
    }
  }
}

TEST(EngineMetamorphic, ZeroStageKEqualsStage0BitwiseWithTensorParallel) {
  for (bool sp : {false, true}) {
    Config base = SmallConfig(2, 0);
    base.parallel.tp = 2;
    base.parallel.world = 4;
    base.parallel.sp = sp;
    base.model.kv_heads = 1;  // MQA: kv heads shared across the tp group
    base.batch.accumulation_steps = 2;
    base.clip_grad_norm = 0.05;
    const Assembly ref = Observe(base);
    for (int64_t stage = 1; stage <= 3; ++stage) {
      Config c = base;
      c.zero.stage = stage;
      ExpectBitwiseEqual(ref, Observe(c),
                         Describe(c) + " tp=2 sp=" + std::to_string(sp) + " vs stage 0");
    }
  }
}

TEST(EngineDeterminism, SameConfigTwiceIsBitwiseIdentical) {
  Config c = SmallConfig(4, 2);
  c.batch.accumulation_steps = 2;
  ExpectBitwiseEqual(Observe(c), Observe(c), Describe(c) + " run twice");
}

}  // namespace
}  // namespace paradiff
