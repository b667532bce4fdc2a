#include "comm/views.h"

#include <ATen/ExpandUtils.h>
#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <c10/core/WrapDimMinimal.h>
#include <c10/util/accumulate.h>

#include <utility>

namespace paradiff {

at::Tensor AliasByHand(const at::Tensor& x, at::IntArrayRef sizes, at::IntArrayRef strides,
                       int64_t offset) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::TensorImpl::VIEW, c10::Storage(x.storage()),
                                                   x.key_set(), x.dtype());
  impl->set_storage_offset(x.storage_offset() + offset);
  impl->set_sizes_and_strides(sizes, strides);
  return at::Tensor(std::move(impl));
}

at::Tensor Narrow(const at::Tensor& x, int64_t dim, int64_t start, int64_t length) {
  dim = c10::maybe_wrap_dim(dim, x.dim());
  TORCH_CHECK(start >= 0 && length >= 0 && start + length <= x.size(dim), "Narrow: [", start, ", ",
              start + length, ") of dim ", dim, " of a tensor of shape ", x.sizes());
  at::DimVector sizes(x.sizes().begin(), x.sizes().end());
  sizes[dim] = length;
  return AliasByHand(x, sizes, x.strides(), start * x.stride(dim));
}

at::Tensor Slice(const at::Tensor& flat, int64_t begin, int64_t n) {
  TORCH_CHECK(flat.dim() == 1 && flat.is_contiguous(),
              "Slice: a 1-D contiguous tensor, not one of shape ", flat.sizes(), " and strides ",
              flat.strides());
  return Narrow(flat, 0, begin, n);
}

at::Tensor SliceAs(const at::Tensor& flat, int64_t begin, at::IntArrayRef shape) {
  return View(Slice(flat, begin, c10::multiply_integers(shape)), shape);
}

std::optional<at::Tensor> AsView(const at::Tensor& x, at::IntArrayRef sizes) {
  const at::DimVector shape = at::infer_size_dv(sizes, x.numel());
  const auto strides = at::detail::computeStride(x.sizes(), x.strides(), shape);
  if (!strides) return std::nullopt;
  return AliasByHand(x, shape, *strides);
}

at::Tensor Reshape(const at::Tensor& x, at::IntArrayRef sizes) {
  std::optional<at::Tensor> view = AsView(x, sizes);
  return view ? *std::move(view) : x.reshape(sizes);
}

at::Tensor View(const at::Tensor& x, at::IntArrayRef sizes) {
  std::optional<at::Tensor> view = AsView(x, sizes);
  TORCH_CHECK(view.has_value(), "View: sizes ", sizes, " are not a view of ", x.sizes(),
              " with strides ", x.strides());
  return *std::move(view);
}

at::Tensor Expand(const at::Tensor& x, at::IntArrayRef sizes) {
  const auto geometry = at::inferExpandGeometry_dimvector(x.sizes(), x.strides(), sizes);
  return AliasByHand(x, geometry.sizes, geometry.strides);
}

at::Tensor Unsqueeze(const at::Tensor& x, int64_t dim) {
  dim = c10::maybe_wrap_dim(dim, x.dim() + 1);
  at::DimVector sizes(x.sizes().begin(), x.sizes().end());
  at::DimVector strides(x.strides().begin(), x.strides().end());
  const int64_t stride = dim >= x.dim() ? 1 : sizes[dim] * strides[dim];  // as ATen's unsqueeze
  sizes.insert(sizes.begin() + dim, 1);
  strides.insert(strides.begin() + dim, stride);
  return AliasByHand(x, sizes, strides);
}

at::Tensor Transpose(const at::Tensor& x, int64_t a, int64_t b) {
  a = c10::maybe_wrap_dim(a, x.dim());
  b = c10::maybe_wrap_dim(b, x.dim());
  at::DimVector sizes(x.sizes().begin(), x.sizes().end());
  at::DimVector strides(x.strides().begin(), x.strides().end());
  std::swap(sizes[a], sizes[b]);
  std::swap(strides[a], strides[b]);
  return AliasByHand(x, sizes, strides);
}

at::Tensor T(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 2, "T: a 2-D tensor, not ", x.dim(), "-D");
  return Transpose(x, 0, 1);
}

}  // namespace paradiff
