// The hand-written backward (kernels/hand_backward.h) gives autograd's bits: OneDevicePass against
// the whole model through autograd, on random models, dtypes and batches, and the engine's ranks
// with it on and off.
#include "kernels/hand_backward.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

#include "core/config.h"
#include "core/model_spec.h"
#include "core/watchdog.h"
#include "kernels/data.h"
#include "kernels/engine.h"
#include "kernels/param_init.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

using testing::Bits;

ParamMap Leaves(const ModelSpec& spec, at::ScalarType dtype, uint64_t seed) {
  ParamMap leaves;
  for (const auto& p : spec.params)
    leaves[p.name] = GenerateParam(p, seed).to(dtype).mul_(7.0).requires_grad_(true);
  return leaves;
}

// Autograd over every unit: what OneDevicePass must reproduce.
double AutogradPass(const std::vector<Unit>& units, const ModelConfig& m, const Numerics& n,
                    const ParamMap& leaves, const MicroBatch& mb, double mult) {
  at::Tensor x;
  for (const auto& u : units) x = UnitForward(u, m, n, leaves, x, mb);
  const double loss = x.item<double>();
  (x * mult).backward();
  return loss;
}

TEST(HandBackward, GivesAutogradsBitsOnRandomModels) {
  std::mt19937 rng(11);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  const DType dtypes[] = {DType::kFp32, DType::kFp64, DType::kBf16, DType::kFp16};
  int grouped = 0, swiglu = 0;
  for (int trial = 0; trial < 120; ++trial) {
    Config c;
    c.model.layers = pick(1, 3);
    c.model.heads = std::vector<int64_t>{1, 2, 4, 8}[pick(0, 3)];
    c.model.kv_heads = c.model.heads / std::vector<int64_t>{1, std::min<int64_t>(2, c.model.heads),
                                                            c.model.heads}[pick(0, 2)];
    c.model.hidden = c.model.heads * pick(1, 16);
    c.model.ffn = pick(3, 70);
    c.model.vocab = pick(5, 90);
    c.model.seq_len = pick(1, 12);
    c.model.tied_embeddings = pick(0, 1);
    c.model.position_embeddings = pick(0, 1);
    c.model.activation = pick(0, 1) ? Activation::kSwiglu : Activation::kGelu;
    c.batch.micro_batch = pick(1, 3);
    c.seed = static_cast<uint64_t>(trial);
    grouped += c.model.kv_heads < c.model.heads;
    swiglu += c.model.activation == Activation::kSwiglu;
    const DType compute = dtypes[trial % 4];
    const Numerics n = MakeNumerics(compute);
    ASSERT_TRUE(HandBackwardApplies(c.model, n));
    // Parameters in float32, or in the compute dtype itself (every 8 trials, 16-bit ones).
    const at::ScalarType param_dtype =
        compute == DType::kFp64                           ? at::kDouble
        : (trial / 4) % 2 == 1 && compute == DType::kBf16 ? at::kBFloat16
        : (trial / 4) % 2 == 1 && compute == DType::kFp16 ? at::kHalf
                                                          : at::kFloat;
    const ModelSpec spec = BuildModelSpec(c.model);
    const std::vector<Unit> units = BuildUnits(spec, c.model);
    const ParamMap want = Leaves(spec, param_dtype, c.seed),
                   got = Leaves(spec, param_dtype, c.seed);
    const MicroBatch mb = MakeMicroBatch(c, 0, 0);
    const double mult = 0.75;
    const double want_loss = AutogradPass(units, c.model, n, want, mb, mult);
    const double got_loss = OneDevicePass(units, c.model, n, got, mb, mult);
    const std::string what =
        "trial " + std::to_string(trial) + " " + Name(compute) + " layers " +
        std::to_string(c.model.layers) + " heads " + std::to_string(c.model.heads) + "/" +
        std::to_string(c.model.kv_heads) + " hidden " + std::to_string(c.model.hidden);
    EXPECT_EQ(want_loss, got_loss) << what;
    for (const auto& p : spec.params) {
      const at::Tensor& w = want.at(p.name).grad();
      const at::Tensor& g = got.at(p.name).grad();
      ASSERT_TRUE(w.defined()) << what << " " << p.name;
      ASSERT_TRUE(g.defined()) << what << " " << p.name;
      ASSERT_EQ(w.sizes(), g.sizes()) << what << " " << p.name;
      EXPECT_EQ(w.strides(), g.strides()) << what << " " << p.name;
      EXPECT_TRUE(at::equal(Bits(w), Bits(g))) << what << " " << p.name;
    }
  }
  EXPECT_GT(grouped, 0);
  EXPECT_GT(swiglu, 0);
}

// Every observation of every rank, bit for bit.
void ExpectSameObservations(const Observations& want, const Observations& got,
                            const std::string& what) {
  ASSERT_EQ(want.ranks.size(), got.ranks.size()) << what;
  for (size_t r = 0; r < want.ranks.size(); ++r) {
    const auto &ws = want.ranks[r].steps, &gs = got.ranks[r].steps;
    ASSERT_EQ(ws.size(), gs.size()) << what;
    for (size_t s = 0; s < ws.size(); ++s) {
      const std::string at = what + " rank " + std::to_string(r) + " step " + std::to_string(s);
      EXPECT_EQ(ws[s].loss_sum, gs[s].loss_sum) << at;
      EXPECT_EQ(ws[s].grad_norm, gs[s].grad_norm) << at;
      ASSERT_EQ(ws[s].pieces.size(), gs[s].pieces.size()) << at;
      for (size_t k = 0; k < ws[s].pieces.size(); ++k) {
        const TensorPiece &w = ws[s].pieces[k], &g = gs[s].pieces[k];
        ASSERT_EQ(w.kind + w.tensor, g.kind + g.tensor) << at;
        EXPECT_TRUE(at::equal(Bits(w.values), Bits(g.values)))
            << at << " " << w.kind << " " << w.tensor << " @" << w.offset;
      }
    }
  }
}

// The engine's ranks with the hand-written backward give what they give through autograd:
// kept unit graphs (ZeRO 0-2, 1F1B) and recomputed ones (ZeRO 3, gpipe), accumulation, bf16,
// fp16 emulated, grouped kv heads, swiglu, untied tables, no position table, tensor and sequence
// parallelism.
TEST(HandBackward, EngineRanksGiveAutogradsBits) {
  std::vector<Config> configs;
  for (int64_t stage = 0; stage <= 3; ++stage) {
    Config c;
    c.steps = 2;
    c.model.layers = 3;
    c.model.heads = 4;
    c.model.kv_heads = stage % 2 == 0 ? 2 : 4;
    c.model.hidden = 24;
    c.model.ffn = 40;
    c.model.activation = stage == 1 ? Activation::kSwiglu : Activation::kGelu;
    c.parallel.dp = c.parallel.world = 3;
    c.zero.stage = stage;
    c.batch.accumulation_steps = 2;
    if (stage == 2) c.precision.param = c.precision.compute = DType::kBf16;
    if (stage == 3) c.precision.compute = DType::kFp16;
    c.model.tied_embeddings = stage != 3;
    c.model.position_embeddings = stage != 2;
    configs.push_back(c);
  }
  for (Schedule schedule : {Schedule::k1F1B, Schedule::kGpipe}) {
    Config c = configs[0];
    c.parallel.pp = 2;
    c.parallel.world = 6;
    c.parallel.schedule = schedule;
    configs.push_back(c);
  }
  // Tensor parallelism: tp 2 and 4 (a padded vocabulary), with and without sp, a kv head shared
  // by two tp ranks, ZeRO 3's recomputation, bf16, fp16 and swiglu, beside dp and pp.
  for (int i = 0; i < 5; ++i) {
    Config c = configs[i % 4];
    c.parallel.tp = i == 4 ? 4 : 2;
    c.parallel.sp = i % 2 == 1;
    c.model.seq_len = 8;
    c.parallel.dp = i == 2 ? 2 : 1;
    if (i == 0) {
      c.parallel.pp = 2;
      c.parallel.schedule = Schedule::k1F1B;
    }
    if (i == 4) c.batch.micro_batch = 1;
    c.parallel.world = c.parallel.tp * c.parallel.dp * c.parallel.pp;
    configs.push_back(c);
  }
  for (const Config& c : configs) {
    const std::string what = "zero " + std::to_string(c.zero.stage) + " tp " +
                             std::to_string(c.parallel.tp) + (c.parallel.sp ? " sp" : "") + " pp " +
                             std::to_string(c.parallel.pp) + " " + Name(c.parallel.schedule);
    SetHandBackward(false);
    const EngineOutcome want = RunEngine(c, kDefaultCollectiveTimeout);
    SetHandBackward(true);
    const EngineOutcome got = RunEngine(c, kDefaultCollectiveTimeout);
    ASSERT_TRUE(want.ok) << what << ": " << want.failure;
    ASSERT_TRUE(got.ok) << what << ": " << got.failure;
    ExpectSameObservations(want.obs, got.obs, what);
  }
}

TEST(HandBackward, LeavesRandomRoundingAndTheExactModelToAutograd) {
  ModelConfig m;
  EXPECT_TRUE(HandBackwardApplies(m, MakeNumerics(DType::kBf16)));
  EXPECT_TRUE(HandBackwardApplies(m, MakeNumerics(DType::kFp16)));
  EXPECT_FALSE(HandBackwardApplies(m, MakeRandomRoundingNumerics(DType::kBf16, 3)));
  m.kind = ModelKind::kExactLinear;
  EXPECT_FALSE(HandBackwardApplies(m, MakeNumerics(DType::kFp32)));
  m.kind = ModelKind::kGpt;
  SetHandBackward(false);
  EXPECT_FALSE(HandBackwardApplies(m, MakeNumerics(DType::kFp32)));
  SetHandBackward(true);
}

}  // namespace
}  // namespace paradiff
