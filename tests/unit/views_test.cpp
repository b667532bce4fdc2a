// comm/views.h builds views without the dispatcher; each must be what ATen's own view operator
// returns: the same sizes, strides, storage and first element, so that every operator after it
// computes the same bits.
#include "comm/views.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace paradiff {
namespace {

void ExpectSameView(const at::Tensor& ours, const at::Tensor& aten) {
  EXPECT_EQ(ours.sizes(), aten.sizes());
  EXPECT_EQ(ours.strides(), aten.strides());
  EXPECT_EQ(ours.scalar_type(), aten.scalar_type());
  EXPECT_EQ(ours.data_ptr(), aten.data_ptr());
  EXPECT_TRUE(ours.is_same_size(aten) && at::equal(ours, aten));
}

TEST(Views, SliceIsWhatNarrowReturns) {
  for (auto dtype : {at::kDouble, at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::Tensor flat = at::arange(40, at::kDouble).to(dtype).narrow(0, 3, 30);
    for (const auto& [begin, n] : {std::pair<int64_t, int64_t>{0, 30}, {7, 5}, {29, 1}, {4, 0}})
      ExpectSameView(Slice(flat, begin, n), flat.narrow(0, begin, n));
    at::Tensor base = at::zeros({6}, dtype);
    const at::Tensor slice = Slice(base, 2, 3);
    base.fill_(5);
    EXPECT_TRUE(at::equal(slice, at::full({3}, 5, dtype))) << "not the base's storage";
    EXPECT_THROW(Slice(flat, 25, 6), c10::Error);
    EXPECT_THROW(Slice(flat, -1, 2), c10::Error);
    EXPECT_THROW(Slice(at::zeros({2, 3}, dtype), 0, 2), c10::Error);
  }
}

TEST(Views, NarrowIsAtens) {
  const at::Tensor x = at::arange(3 * 4 * 5, at::kFloat).view({3, 4, 5});
  for (const auto& t : {x, x.transpose(0, 2), x.narrow(1, 1, 2)})
    for (int64_t dim = -3; dim < 3; ++dim)
      for (int64_t start = 0; start < t.size(dim); ++start)
        for (int64_t len = 0; start + len <= t.size(dim); ++len)
          ExpectSameView(Narrow(t, dim, start, len), t.narrow(dim, start, len));
  EXPECT_THROW(Narrow(x, 2, 3, 3), c10::Error);
  EXPECT_THROW(Narrow(x, 0, -1, 1), c10::Error);
  EXPECT_THROW(Narrow(x, 3, 0, 1), c10::Error);
}

TEST(Views, SliceAsIsNarrowThenView) {
  const at::Tensor flat = at::arange(60, at::kFloat);
  ExpectSameView(SliceAs(flat, 6, {3, 4, 2}), flat.narrow(0, 6, 24).view({3, 4, 2}));
  ExpectSameView(SliceAs(flat, 59, {1}), flat.narrow(0, 59, 1).view({1}));
  // A write through the view reaches the flat tensor.
  SliceAs(flat, 10, {2, 5}).fill_(-1);
  EXPECT_TRUE(at::equal(flat.narrow(0, 10, 10), at::full({10}, -1.0f)));
  EXPECT_THROW(SliceAs(flat, 50, {3, 4}), c10::Error);
}

TEST(Views, ReshapeViewAndTransposeAreAtens) {
  const at::Tensor x = at::arange(2 * 3 * 4, at::kDouble).view({2, 3, 4});
  const at::Tensor t = x.transpose(0, 1);  // not contiguous
  ExpectSameView(View(x, {6, 4}), x.view({6, 4}));
  ExpectSameView(View(x, {-1}), x.view({-1}));
  ExpectSameView(Reshape(x, {4, -1}), x.reshape({4, -1}));
  ExpectSameView(Reshape(t, {3, 2, 2, 2}), t.reshape({3, 2, 2, 2}));  // still a view
  ExpectSameView(Transpose(x, 0, 2), x.transpose(0, 2));
  ExpectSameView(Transpose(x, -1, 1), x.transpose(-1, 1));
  ExpectSameView(T(x[0]), x[0].t());
  ExpectSameView(Expand(x, {2, 3, 4}), x.expand({2, 3, 4}));
  ExpectSameView(Expand(x.narrow(1, 1, 1), {5, 2, 3, 4}), x.narrow(1, 1, 1).expand({5, 2, 3, 4}));
  ExpectSameView(Expand(t, {-1, 2, -1}), t.expand({-1, 2, -1}));
  EXPECT_THROW(Expand(x, {2, 5, 4}), c10::Error);
  for (const auto& v : {x, t, x[1], x.sum()})
    for (int64_t dim = -v.dim() - 1; dim <= v.dim(); ++dim)
      ExpectSameView(Unsqueeze(v, dim), v.unsqueeze(dim));
  // No view of t flattens it: Reshape copies as ATen does, View refuses.
  const at::Tensor flat = Reshape(t, {-1});
  EXPECT_TRUE(at::equal(flat, t.reshape({-1})));
  EXPECT_NE(flat.data_ptr(), t.data_ptr());
  EXPECT_FALSE(AsView(t, {-1}).has_value());
  EXPECT_THROW(View(t, {-1}), c10::Error);
  EXPECT_THROW(T(x), c10::Error);
}

}  // namespace
}  // namespace paradiff
