// The CPU twins of the CUDA kernels (kernels/cuda/cpu_twins.h) against the semantics they stand
// for: c10's scalar conversions and at::Tensor::to() for the casts, kernels/optim.cpp's
// OptimizerUpdate for the fused Adam step (bit for bit), ATen's isfinite for the overflow count.
// Runs on every build (label unit); tests/gpu/cuda_kernels_gpu_test.cpp compares kernels to twins.
#include "kernels/cuda/cpu_twins.h"

#include <ATen/ATen.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/optim.h"

namespace paradiff {
namespace {

constexpr uint64_t kSeed = 20240612;

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Float bit patterns that exercise every rounding boundary of both 16-bit formats: for each of
// the 2^19 top bit patterns (sign, exponent, 10 mantissa bits) the low 13 bits take values around
// the bf16 and fp16 halfway points, plus uniformly random patterns (subnormal fp16 results).
std::vector<float> BoundaryFloats() {
  std::vector<float> out;
  const uint32_t lows[] = {0x0000, 0x0001, 0x0FFF, 0x1000, 0x1001, 0x1FFF};
  for (uint32_t hi = 0; hi < (1u << 19); ++hi)
    for (uint32_t low : lows) out.push_back(FromBits((hi << 13) | low));
  for (uint32_t hi16 = 0; hi16 < (1u << 16); hi16 += 3)  // bf16 halfway points (bit 15)
    for (uint32_t low : {0x7FFFu, 0x8000u, 0x8001u}) out.push_back(FromBits((hi16 << 16) | low));
  std::mt19937 rng(kSeed);
  for (int i = 0; i < (1 << 20); ++i) out.push_back(FromBits(static_cast<uint32_t>(rng())));
  return out;
}

bool BothNan16(uint16_t a, uint16_t b, uint16_t exp_mask) {
  auto nan = [&](uint16_t v) {
    return (v & exp_mask) == exp_mask && (v & static_cast<uint16_t>(~exp_mask & 0x7FFF)) != 0;
  };
  return nan(a) && nan(b);
}

// The boundary floats whose `twin` cast differs from c10's scalar conversion T(f).x; the first
// five are reported.
template <typename T>
int64_t CastMismatches(const char* type, uint16_t (*twin)(float)) {
  int64_t bad = 0;
  for (float f : BoundaryFloats()) {
    const uint16_t want = T(f).x;
    if (twin(f) != want && ++bad <= 5)
      ADD_FAILURE() << type << " of bits 0x" << std::hex << Bits(f) << ": twin 0x" << twin(f)
                    << " c10 0x" << want;
  }
  return bad;
}

TEST(CastTwinTest, BFloat16EqualsC10ScalarConversion) {
  EXPECT_EQ(CastMismatches<c10::BFloat16>("bf16", &cuda::FloatToBFloat16Bits), 0);
}

TEST(CastTwinTest, HalfEqualsC10ScalarConversion) {
  EXPECT_EQ(CastMismatches<c10::Half>("fp16", &cuda::FloatToHalfBits), 0);
}

// at::Tensor::to() may take a vectorized path: equal bits, except that any two NaNs are equal
// (see Note [Cast NaN bits]).
TEST(CastTwinTest, BothCastsEqualTensorTo) {
  const std::vector<float> in = BoundaryFloats();
  const int64_t n = static_cast<int64_t>(in.size());
  const at::Tensor t = at::from_blob(const_cast<float*>(in.data()), {n}, at::kFloat);
  std::vector<uint16_t> twin(in.size());
  for (const bool bf16 : {true, false}) {
    const at::Tensor want = t.to(bf16 ? at::kBFloat16 : at::kHalf).contiguous();
    const auto* w = static_cast<const uint16_t*>(want.data_ptr());
    (bf16 ? cuda::CastToBFloat16 : cuda::CastToHalf)(in.data(), twin.data(), n);
    const uint16_t exp_mask = bf16 ? 0x7F80 : 0x7C00;
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i)
      if (twin[i] != w[i] && !BothNan16(twin[i], w[i], exp_mask) && ++bad <= 5)
        ADD_FAILURE() << (bf16 ? "bf16" : "fp16") << " element " << i << ": twin 0x" << std::hex
                      << twin[i] << " aten 0x" << w[i];
    EXPECT_EQ(bad, 0) << (bf16 ? "bf16" : "fp16");
  }
}

TEST(OverflowTwinTest, CountsInfAndNanLikeIsfinite) {
  std::mt19937 rng(kSeed);
  at::Tensor x = at::randn({100003}, at::TensorOptions().dtype(at::kFloat)) * 1e3;
  float* p = x.data_ptr<float>();
  const float specials[] = {std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            FromBits(0x7F800001u),
                            70000.0f /* fp16 overflow */,
                            1e-40f};
  for (int k = 0; k < 300; ++k) p[rng() % x.numel()] = specials[k % 7];
  for (at::ScalarType st : {at::kFloat, at::kHalf, at::kBFloat16}) {
    const at::Tensor y = x.to(st).contiguous();
    const int64_t want = (~at::isfinite(y.to(at::kFloat))).sum().item<int64_t>();
    const cuda::FlatDtype dt = st == at::kFloat  ? cuda::FlatDtype::kFloat32
                               : st == at::kHalf ? cuda::FlatDtype::kFloat16
                                                 : cuda::FlatDtype::kBFloat16;
    EXPECT_EQ(cuda::CountNonFinite(y.data_ptr(), y.numel(), dt), want) << c10::toString(st);
    EXPECT_GT(want, 0);
  }
  EXPECT_EQ(cuda::CountNonFinite(nullptr, 0, cuda::FlatDtype::kFloat32), 0);
}

// Values of mixed magnitude and sign, zeros and tiny gradients (where Adam amplifies noise).
at::Tensor Mixed(int64_t n, int salt, bool non_negative) {
  at::Tensor t = at::randn({n}, at::kDouble) * at::pow(10.0, at::randint(-6, 3, {n}, at::kDouble));
  t.index_put_({at::arange(salt % 7, n, 97)}, 0.0);
  if (non_negative) t = t * t;
  return t.to(at::kFloat);
}

void ExpectAdamEqualsOptimizerUpdate(OptimizerKind kind, double wd, double lr) {
  at::manual_seed(kSeed);
  const int64_t n = 4099;
  OptimizerConfig opt;
  opt.kind = kind;
  opt.lr = lr;
  opt.weight_decay = wd;
  opt.beta1 = 0.85;
  opt.beta2 = 0.995;
  opt.eps = 1e-7;
  at::Tensor param = Mixed(n, 1, false), m = Mixed(n, 2, false) * 0.1, v = Mixed(n, 3, true);
  std::vector<at::Tensor> slots = {m.clone(), v.clone()};
  at::Tensor ref_param = param.clone();
  for (int64_t step = 1; step <= 4; ++step) {
    const at::Tensor grad = Mixed(n, static_cast<int>(step) + 4, false);
    OptimizerUpdate(opt, step, ref_param, grad, slots);
    cuda::AdamStepParams p;
    p.lr = opt.lr;
    p.beta1 = opt.beta1;
    p.beta2 = opt.beta2;
    p.eps = opt.eps;
    p.weight_decay = opt.weight_decay;
    p.step = step;
    p.decoupled = kind == OptimizerKind::kAdamW;
    cuda::AdamStep(p, param.data_ptr<float>(), grad.data_ptr<float>(), m.data_ptr<float>(),
                   v.data_ptr<float>(), n);
    ASSERT_TRUE(at::equal(param, ref_param)) << "param differs after step " << step << ", max diff "
                                             << (param - ref_param).abs().max().item<float>();
    ASSERT_TRUE(at::equal(m, slots[0])) << "exp_avg differs after step " << step;
    ASSERT_TRUE(at::equal(v, slots[1])) << "exp_avg_sq differs after step " << step;
  }
}

TEST(FusedAdamTwinTest, AdamWEqualsOptimizerUpdateBitwise) {
  ExpectAdamEqualsOptimizerUpdate(OptimizerKind::kAdamW, 0.01, 3e-3);
  ExpectAdamEqualsOptimizerUpdate(OptimizerKind::kAdamW, 0.0, 1e-2);
}

TEST(FusedAdamTwinTest, AdamWithL2EqualsOptimizerUpdateBitwise) {
  ExpectAdamEqualsOptimizerUpdate(OptimizerKind::kAdam, 0.05, 1e-3);
  ExpectAdamEqualsOptimizerUpdate(OptimizerKind::kAdam, 0.0, 2e-2);
}

TEST(FusedAdamTwinTest, RejectsStepZero) {
  cuda::AdamStepParams p;
  p.step = 0;
  EXPECT_THROW(cuda::MakeAdamScalars(p), std::invalid_argument);
}

}  // namespace
}  // namespace paradiff
