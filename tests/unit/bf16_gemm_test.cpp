// The fast bfloat16 gemm computes ATen's bits: kernel against kernel on random shapes, strides,
// scalars and special values, and whole matmuls (forward and backward) with it installed against
// ATen's own kernel.
#include "kernels/bf16_gemm.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/numerics.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

uint16_t ToBf16(float f) { return at::BFloat16(f).x; }

std::string Describe(const Bf16Gemm& g) {
  return std::string("ta=") + (g.ta == GemmTrans::kYes ? "T" : "N") +
         " tb=" + (g.tb == GemmTrans::kYes ? "T" : "N") + " m=" + std::to_string(g.m) +
         " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
         " lda=" + std::to_string(g.lda) + " ldb=" + std::to_string(g.ldb) +
         " ldc=" + std::to_string(g.ldc) + " alpha=" + std::to_string(g.alpha) +
         " beta=" + std::to_string(g.beta);
}

TEST(Bf16Gemm, FastKernelWritesAtensBitsOnRandomCases) {
  if (!FastBf16GemmSupported())
    GTEST_SKIP() << "this CPU has no AVX2 / FMA: the fast kernel is off";
  MakeNumerics(DType::kBf16);  // oneDNN off, so that ATen's own kernel is the one to compare with
  std::mt19937 rng(7);
  std::uniform_int_distribution<int64_t> dim(0, 70), pad(0, 5), pick(0, 99);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float scalars[] = {1.0f, 0.0f, -1.0f, 0.5f, 0.3f, 2.0f, -0.0f};
  const float specials[] = {INFINITY, -INFINITY, NAN, 1e-39f, -0.0f, 3e38f, 1e-30f};
  int cases = 0;
  for (int trial = 0; trial < 600; ++trial) {
    Bf16Gemm g;
    g.ta = rng() % 2 ? GemmTrans::kYes : GemmTrans::kNo;
    g.tb = rng() % 2 ? GemmTrans::kYes : GemmTrans::kNo;
    g.m = dim(rng) % (trial % 3 == 0 ? 9 : 71), g.n = dim(rng), g.k = dim(rng);
    g.alpha = rng() % 4 ? 1.0f : scalars[rng() % 7];
    g.beta = scalars[rng() % 7];
    const bool ta = g.ta == GemmTrans::kYes, tb = g.tb == GemmTrans::kYes;
    g.lda = std::max<int64_t>(1, (ta ? g.k : g.m) + pad(rng));
    g.ldb = std::max<int64_t>(1, (tb ? g.n : g.k) + pad(rng));
    g.ldc = std::max<int64_t>(1, g.m + pad(rng));
    const float scale = std::ldexp(1.0f, int(pick(rng) % 40) - 20);
    auto fill = [&](int64_t n) {
      std::vector<uint16_t> v(size_t(std::max<int64_t>(n, 1)));
      for (auto& x : v) x = ToBf16(pick(rng) < 3 ? specials[rng() % 7] : normal(rng) * scale);
      return v;
    };
    const std::vector<uint16_t> a = fill(g.lda * (ta ? g.m : g.k));
    const std::vector<uint16_t> b = fill(g.ldb * (tb ? g.k : g.n));
    std::vector<uint16_t> want = fill(g.ldc * g.n), got = want;
    g.a = a.data(), g.b = b.data(), g.c = want.data();
    AtenBf16Gemm(g);
    g.c = got.data();
    FastBf16Gemm(g);
    ASSERT_EQ(want, got) << Describe(g);
    ++cases;
  }
  EXPECT_EQ(cases, 600);
}

// Finite inputs whose terms overflow: infinities of both signs meet and make NaNs (x86's default
// NaN is negative, ATen's rounding writes 0x7FC0), beside blocks of columns that stay small.
TEST(Bf16Gemm, FiniteInputsThatOverflowKeepAtensNaNs) {
  if (!FastBf16GemmSupported())
    GTEST_SKIP() << "this CPU has no AVX2 / FMA: the fast kernel is off";
  MakeNumerics(DType::kBf16);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int64_t> dim(1, 40);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  int nans = 0;
  for (int trial = 0; trial < 200; ++trial) {
    Bf16Gemm g;
    g.ta = GemmTrans::kNo;
    g.tb = rng() % 2 ? GemmTrans::kYes : GemmTrans::kNo;
    g.m = dim(rng), g.n = dim(rng), g.k = dim(rng);
    g.alpha = 1.0f;
    g.beta = trial % 2 ? 0.0f : 1.0f;
    g.lda = g.m, g.ldb = g.tb == GemmTrans::kYes ? g.n : g.k, g.ldc = g.m;
    // Large rows of A times large columns of B overflow; the other columns of B stay small.
    std::vector<uint16_t> a(size_t(g.m * g.k)), b(size_t(g.k * g.n));
    for (auto& x : a) x = ToBf16(normal(rng) * 1e30f);
    for (int64_t l = 0; l < g.k; ++l)
      for (int64_t j = 0; j < g.n; ++j) {
        const float big = j % 8 < 4 ? 1e10f : 1e-3f;
        b[size_t(g.tb == GemmTrans::kYes ? l * g.ldb + j : j * g.ldb + l)] =
            ToBf16(normal(rng) * big);
      }
    std::vector<uint16_t> want(size_t(g.m * g.n));
    for (auto& x : want) x = ToBf16(normal(rng));
    std::vector<uint16_t> got = want;
    g.a = a.data(), g.b = b.data(), g.c = want.data();
    AtenBf16Gemm(g);
    g.c = got.data();
    FastBf16Gemm(g);
    ASSERT_EQ(want, got) << Describe(g);
    for (uint16_t x : want) nans += (x & 0x7F80) == 0x7F80 && (x & 0x7F) != 0;
  }
  EXPECT_GT(nans, 0) << "no case made a NaN: the test no longer tests what it says";
}

using testing::Bits;  // bits of a tensor, NaNs included

struct Results {
  std::vector<at::Tensor> values;
};

// Linear layers (3-d input with bias, 2-d input with and without), batched attention products and
// an addmm with beta other than one, forward and backward, in bfloat16.
Results RunMatmuls() {
  at::manual_seed(11);
  const auto bf = at::TensorOptions().dtype(at::kBFloat16);
  Results r;
  at::Tensor x = at::randn({2, 5, 24}, bf).requires_grad_(true);
  at::Tensor w = at::randn({40, 24}, bf).requires_grad_(true);
  at::Tensor bias = at::randn({40}, bf).requires_grad_(true);
  at::Tensor h = at::linear(x, w, bias);
  at::Tensor x2 = at::randn({7, 40}, bf).requires_grad_(true);
  at::Tensor w2 = at::randn({9, 40}, bf).requires_grad_(true);
  at::Tensor h2 = at::linear(x2, w2);
  at::Tensor q = at::randn({2, 3, 9, 16}, bf).requires_grad_(true);
  at::Tensor k = at::randn({2, 3, 9, 16}, bf).requires_grad_(true);
  at::Tensor s = at::matmul(q, k.transpose(-2, -1));
  at::Tensor o = at::matmul(at::softmax(s, -1), k);
  at::Tensor base = at::randn({7, 9}, bf);
  at::Tensor am = at::addmm(base, x2, w2.t(), /*beta=*/0.5, /*alpha=*/2.0);
  at::Tensor loss = h.to(at::kFloat).pow(2).sum() + h2.to(at::kFloat).sum() +
                    o.to(at::kFloat).sum() + am.to(at::kFloat).sum();
  loss.backward();
  for (const at::Tensor& t :
       {h, h2, s, o, am, x.grad(), w.grad(), bias.grad(), x2.grad(), w2.grad(), q.grad(), k.grad()})
    r.values.push_back(Bits(t.detach()));
  return r;
}

TEST(Bf16Gemm, InstalledKernelServesMatmulsWithAtensBits) {
  MakeNumerics(DType::kBf16);  // oneDNN off and the fast kernel installed, as every run does
  if (!InstallFastBf16Gemm())
    GTEST_SKIP() << "the fast kernel is not installed here (no AVX2 / FMA, or ATen's kernel on "
                    "this CPU rounds differently): ATen's kernel runs";
  const int64_t before = InstalledBf16GemmCalls();
  const Results fast = RunMatmuls();
  EXPECT_GT(InstalledBf16GemmCalls(), before + 10) << "bf16 matmuls did not reach the fast kernel";
  Results aten;
  {
    ScopedAtenBf16Gemm guard;
    const int64_t during = InstalledBf16GemmCalls();
    aten = RunMatmuls();
    EXPECT_EQ(InstalledBf16GemmCalls(), during);
  }
  ASSERT_EQ(fast.values.size(), aten.values.size());
  for (size_t i = 0; i < fast.values.size(); ++i)
    EXPECT_TRUE(at::equal(fast.values[i], aten.values[i])) << "result " << i;
}

}  // namespace
}  // namespace paradiff
