// BatchedGemm (kernels/batched_gemm.h) writes ATen's bits: against ATen's own CPU kernel on random
// batches, dtypes, shapes and strides (transposed and expanded items), and installed, through
// matmul and autograd's backward.
#include "kernels/batched_gemm.h"

#include <ATen/ATen.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "kernels/numerics.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

using testing::Bits;

// A [bs, r, c] operand of dtype `d` laid out one of four ways: contiguous, its items transposed,
// the batch expanded from one item, or a slice of a wider tensor.
at::Tensor Operand(int64_t bs, int64_t r, int64_t c, at::ScalarType d, int layout) {
  const auto opt = at::TensorOptions().dtype(d);
  switch (layout) {
    case 1:
      return at::randn({bs, c, r}, opt).transpose(1, 2);
    case 2:
      return at::randn({1, r, c}, opt).expand({bs, r, c});
    case 3:
      return at::randn({bs, r, c + 3}, opt).narrow(2, 1, c);
    default:
      return at::randn({bs, r, c}, opt);
  }
}

TEST(BatchedGemm, WritesAtensBitsOnRandomBatches) {
  MakeNumerics(DType::kFp32);  // oneDNN off, as every run has it
  at::manual_seed(5);
  std::mt19937 rng(5);
  std::uniform_int_distribution<int64_t> dim(1, 24), batch(1, 7);
  const at::ScalarType dtypes[] = {at::kFloat, at::kDouble, at::kBFloat16};
  const int64_t before = BatchedGemmSplitCalls();
  int split = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const at::ScalarType d = dtypes[trial % 3];
    const int64_t bs = batch(rng), rows = dim(rng), inner = dim(rng), cols = dim(rng);
    const at::Tensor a = Operand(bs, rows, inner, d, int(rng() % 4));
    const at::Tensor b = Operand(bs, inner, cols, d, int(rng() % 4));
    const at::Tensor want = at::cpu::bmm(a, b), got = BatchedGemm(a, b);
    ASSERT_EQ(got.sizes(), want.sizes());
    ASSERT_TRUE(at::equal(Bits(got), Bits(want)))
        << "trial " << trial << " " << c10::toString(d) << " bs " << bs << " " << rows << "x"
        << inner << "x" << cols << " strides " << a.strides() << " " << b.strides();
    split += inner * rows * cols >= 400;
  }
  // The cases at or above ATen's 400 multiply-adds per item are the ones computed from pointers.
  EXPECT_GT(split, 50);
  EXPECT_GE(BatchedGemmSplitCalls() - before, split / 2);
}

TEST(BatchedGemm, InstalledForMatmulAndBackward) {
  MakeNumerics(DType::kFp32);  // installs it
  at::manual_seed(9);
  for (const at::ScalarType d : {at::kFloat, at::kBFloat16}) {
    const auto opt = at::TensorOptions().dtype(d);
    at::Tensor q = at::randn({2, 3, 9, 16}, opt).requires_grad_(true);
    at::Tensor k = at::randn({2, 3, 9, 16}, opt).requires_grad_(true);
    const int64_t before = BatchedGemmSplitCalls();
    at::Tensor s = at::matmul(q, k.transpose(-2, -1));
    at::Tensor o = at::matmul(at::softmax(s, -1), k);
    o.to(at::kFloat).pow(2).sum().backward();
    EXPECT_GE(BatchedGemmSplitCalls() - before, 4) << c10::toString(d);
    // The forward products through ATen's own kernel (which autograd does not see). Gradients:
    // torch.targets.torch_bitwise_world1* compare the reference's (this kernel) with torch's own.
    const auto aten = [](const at::Tensor& x, const at::Tensor& y) {
      const auto xs = x.sizes(), ys = y.sizes();
      return at::cpu::bmm(x.reshape({-1, xs[2], xs[3]}), y.reshape({-1, ys[2], ys[3]}))
          .view({xs[0], xs[1], xs[2], ys[3]});
    };
    const at::Tensor qd = q.detach(), kd = k.detach();
    const at::Tensor s2 = aten(qd, kd.transpose(-2, -1));
    EXPECT_TRUE(at::equal(Bits(s.detach()), Bits(s2))) << c10::toString(d);
    EXPECT_TRUE(at::equal(Bits(o.detach()), Bits(aten(at::softmax(s2, -1), kd))))
        << c10::toString(d);
  }
}

}  // namespace
}  // namespace paradiff
