// AdamStepGpu (cuda_kernels.h): one Adam / AdamW step on flat fp32 shards, one thread per element
// (grid-stride). The arithmetic is see Note [Fused Adam arithmetic] (cpu_twins.h) with explicit
// round-to-nearest intrinsics: nvcc would otherwise contract a * b + c into one FMA (one rounding
// instead of two) and the result would differ from the twin and from kernels/optim.cpp.
#include <cstdint>

#include "core/cuda/cuda_support.h"
#include "kernels/cuda/cuda_kernels.h"

namespace paradiff {
namespace cuda {
namespace {

__global__ void AdamKernel(AdamScalars s, float* param, const float* grad, float* exp_avg,
                           float* exp_avg_sq, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float p = param[i];
    float g = grad[i];
    if (s.decoupled) {
      p = __fmul_rn(p, s.decay);
    } else if (s.use_l2) {
      g = __fadd_rn(g, __fmul_rn(p, s.l2));
    }
    const float m = __fadd_rn(__fmul_rn(exp_avg[i], s.beta1), __fmul_rn(g, s.one_minus_beta1));
    const float v =
        __fadd_rn(__fmul_rn(exp_avg_sq[i], s.beta2), __fmul_rn(__fmul_rn(g, g), s.one_minus_beta2));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.sqrt_bc2), s.eps);
    param[i] = __fsub_rn(p, __fmul_rn(__fdiv_rn(m, denom), s.step_size));
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

}  // namespace

void AdamStepGpu(const AdamStepParams& params, float* param, const float* grad, float* exp_avg,
                 float* exp_avg_sq, int64_t n, KernelTiming* timing) {
  CheckCount("AdamStepGpu", n);
  const AdamScalars scalars = MakeAdamScalars(params);
  if (timing != nullptr) timing->kernel_ms = 0.0;
  if (n == 0) return;
  SyncLegacyDefaultStream();
  Stream stream;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  const StagedBuffer p(param, bytes, /*copy_in=*/true, stream.get());
  const StagedBuffer g(const_cast<float*>(grad), bytes, /*copy_in=*/true, stream.get());
  const StagedBuffer m(exp_avg, bytes, /*copy_in=*/true, stream.get());
  const StagedBuffer v(exp_avg_sq, bytes, /*copy_in=*/true, stream.get());
  EventTimer timer(stream.get());
  timer.Start();
  AdamKernel<<<BlocksFor(n), kThreadsPerBlock, 0, stream.get()>>>(
      scalars, static_cast<float*>(p.device()), static_cast<const float*>(g.device()),
      static_cast<float*>(m.device()), static_cast<float*>(v.device()), n);
  PARADIFF_CUDA_CHECK(cudaGetLastError());
  timer.Stop();
  p.CopyOut(stream.get());
  m.CopyOut(stream.get());
  v.CopyOut(stream.get());
  stream.Synchronize();
  if (timing != nullptr) timing->kernel_ms = timer.Milliseconds();
}

}  // namespace cuda
}  // namespace paradiff
