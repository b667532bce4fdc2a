// Views made by hand: the TensorImpl a view operator returns (ATen's alias_with_sizes_and_strides),
// made without the dispatcher. See Note [Views by hand].
//
// Note [Views by hand]: a view operator makes a TensorImpl that shares the storage with other
// sizes and strides, after two or three trips through the dispatcher (and, above autograd, its
// view tracking) that cost more than the TensorImpl; a check makes thousands (the hand-written
// units' forward and backward, the engine's per-parameter slices of its flat buffers, the
// reference's flat state). These make that TensorImpl themselves: the same sizes, strides and
// offset (at::detail::computeStride decides, as in view and reshape; a reshape it cannot express
// as a view is ATen's own, a copy), so every operator after them sees the same layout and computes
// the same bits. A view made here shares x's storage, not its version counter or autograd history:
// for tensors below autograd, tensors autograd never saves, or autograd leaves made from it
// (requires_grad_ on the view itself).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>

namespace paradiff {

// A view of x's storage with these sizes and strides, from `offset` elements past x's first.
at::Tensor AliasByHand(const at::Tensor& x, at::IntArrayRef sizes, at::IntArrayRef strides,
                       int64_t offset = 0);

// x.narrow(dim, start, length).
at::Tensor Narrow(const at::Tensor& x, int64_t dim, int64_t start, int64_t length);

// Elements [begin, begin + n) of a 1-D contiguous tensor: what `narrow(0, begin, n)` returns.
at::Tensor Slice(const at::Tensor& flat, int64_t begin, int64_t n);

// Elements [begin, begin + numel of `shape`) of a 1-D contiguous tensor, with that shape:
// flat.narrow(0, begin, n).view(shape).
at::Tensor SliceAs(const at::Tensor& flat, int64_t begin, at::IntArrayRef shape);

// x with `sizes` as a view where its strides allow one (as view and reshape decide), else none.
std::optional<at::Tensor> AsView(const at::Tensor& x, at::IntArrayRef sizes);

// x.reshape(sizes): a view made here where one exists, else ATen's copy.
at::Tensor Reshape(const at::Tensor& x, at::IntArrayRef sizes);

// x.view(sizes); throws c10::Error where the strides allow no view.
at::Tensor View(const at::Tensor& x, at::IntArrayRef sizes);

// x.expand(sizes): size-1 and new leading dimensions broadcast with stride 0.
at::Tensor Expand(const at::Tensor& x, at::IntArrayRef sizes);

// x.unsqueeze(dim).
at::Tensor Unsqueeze(const at::Tensor& x, int64_t dim);

// x.transpose(a, b) and, for a 2-D x, x.t().
at::Tensor Transpose(const at::Tensor& x, int64_t a, int64_t b);
at::Tensor T(const at::Tensor& x);

}  // namespace paradiff
