// aten::bmm on the CPU without three views and two conjugation checks per batch item (see Note
// [Batched products from pointers] in batched_gemm.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

namespace paradiff {

// The product ATen 1.13's CPU bmm computes, with the same gemm calls, from pointers and strides
// where ATen splits along the batch; anything else through ATen's own kernel (at::cpu::bmm).
at::Tensor BatchedGemm(const at::Tensor& batch1, const at::Tensor& batch2);

// Makes BatchedGemm this process's CPU kernel of aten::bmm (every caller, autograd's backward
// formulas and matmul included, reaches it through the dispatcher). Once per process; any thread.
void InstallBatchedGemm();

// How many bmm calls BatchedGemm has computed from pointers in this process (not the ones it
// passed to ATen's kernel).
int64_t BatchedGemmSplitCalls();

}  // namespace paradiff
