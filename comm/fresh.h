// Fresh CPU tensors without the dispatcher: at::empty and at::zeros for a contiguous CPU tensor
// call at::detail::empty_cpu (and, for zeros, fill it with zero bytes) after one trip through the
// dispatcher (three for zeros: zeros, empty, zero_); a check makes a few thousand, for buffers of a
// few hundred elements. These call empty_cpu themselves: the same tensor, the same allocator.
// Options on another device (the nccl backend's CUDA tensors) go through at::empty / at::zeros.
// Contiguous copies the same way (a strided tensor's rows, copied byte for byte).
#pragma once

#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>

#include <cstring>

namespace paradiff {

// at::empty(sizes, options): uninitialized, contiguous.
inline at::Tensor Empty(at::IntArrayRef sizes, const at::TensorOptions& options) {
  if (options.device().type() != c10::DeviceType::CPU) return at::empty(sizes, options);
  return at::detail::empty_cpu(sizes, options);
}

// at::zeros(sizes, options): every element's bits zero (0, 0.0, false).
inline at::Tensor Zeros(at::IntArrayRef sizes, const at::TensorOptions& options) {
  if (options.device().type() != c10::DeviceType::CPU) return at::zeros(sizes, options);
  at::Tensor t = at::detail::empty_cpu(sizes, options);
  if (t.numel() > 0) std::memset(t.data_ptr(), 0, t.numel() * t.element_size());
  return t;
}

// Whether autograd would record an operator on t: it requires a gradient, gradients are on, and
// autograd's dispatch keys are not excluded (the hand-written units run below autograd).
bool AutogradRecords(const at::Tensor& t);

// t.contiguous(): t itself when it is contiguous; else a contiguous copy, made by hand (each
// innermost run copied as bytes) for a CPU tensor whose copy autograd would not record, else by
// contiguous().
at::Tensor Contiguous(const at::Tensor& t);

}  // namespace paradiff
