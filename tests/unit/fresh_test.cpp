// comm/fresh.h makes fresh CPU tensors without the dispatcher; each must be what ATen's operator
// returns (sizes, strides, dtype, values), with no operator call on the way.
#include "comm/fresh.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/operator_calls.h"

namespace paradiff {
namespace {

using testing::OperatorCalls;

TEST(Fresh, EmptyAndZerosAreAtensWithoutOperatorCalls) {
  for (auto dtype : {at::kDouble, at::kFloat, at::kBFloat16, at::kHalf, at::kLong, at::kBool}) {
    for (const std::vector<int64_t>& sizes :
         {std::vector<int64_t>{5}, {3, 4}, {2, 0, 3}, {2, 3, 4}, {}}) {
      at::Tensor e, z;
      EXPECT_EQ(OperatorCalls([&] {
                  e = Empty(sizes, dtype);
                  z = Zeros(sizes, dtype);
                }),
                0);
      const at::Tensor aten = at::zeros(sizes, dtype);
      for (const at::Tensor& t : {e, z}) {
        EXPECT_EQ(t.sizes(), aten.sizes());
        EXPECT_EQ(t.strides(), aten.strides());
        EXPECT_EQ(t.scalar_type(), dtype);
        EXPECT_FALSE(t.requires_grad());
      }
      EXPECT_TRUE(at::equal(z, aten));
    }
  }
}

TEST(Fresh, ContiguousCopiesWhatContiguousCopies) {
  for (auto dtype : {at::kDouble, at::kFloat, at::kBFloat16, at::kHalf, at::kLong}) {
    const at::Tensor x = at::arange(2 * 3 * 4 * 5, at::kDouble).to(dtype).view({2, 3, 4, 5});
    for (const at::Tensor& t :
         {x.transpose(0, 1), x.transpose(1, 3), x.permute({3, 2, 1, 0}), x.narrow(2, 1, 2),
          x.select(3, 2), x.select(0, 0).select(0, 1).t(),
          at::arange(6, at::kDouble).to(dtype).view({1, 6}).expand({4, 6}),
          at::arange(8, at::kDouble).to(dtype).narrow(0, 1, 4).as_strided({2, 2}, {1, 2})}) {
      ASSERT_FALSE(t.is_contiguous());
      at::Tensor ours;
      EXPECT_EQ(OperatorCalls([&] { ours = Contiguous(t); }), 0);
      const at::Tensor aten = t.contiguous();
      EXPECT_TRUE(ours.is_contiguous());
      EXPECT_EQ(ours.sizes(), aten.sizes());
      EXPECT_EQ(ours.scalar_type(), dtype);
      EXPECT_TRUE(at::equal(ours, aten)) << t.sizes() << " " << t.strides();
      EXPECT_NE(ours.data_ptr(), t.data_ptr());
    }
    EXPECT_EQ(Contiguous(x).data_ptr(), x.data_ptr()) << "a contiguous tensor is not copied";
  }
  // A copy autograd records goes through contiguous(), which records it.
  const at::Tensor leaf = at::ones({2, 3}, at::kFloat).requires_grad_();
  EXPECT_TRUE(Contiguous(leaf.t()).requires_grad());
  EXPECT_NE(Contiguous(leaf.t()).grad_fn(), nullptr);
}

}  // namespace
}  // namespace paradiff
