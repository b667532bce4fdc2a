// CastToBFloat16Gpu / CastToHalfGpu (cuda_kernels.h): fp32 -> bf16 / fp16 with round-to-nearest-
// even through the hardware conversions (cvt.rn.bf16.f32 / cvt.rn.f16.f32: IEEE rounding,
// subnormals kept, overflow to inf). NaN becomes c10's pattern (see Note [Cast NaN bits],
// cpu_twins.h) instead of CUDA's canonical 0x7FFF, so the result equals the CPU twins and
// c10::BFloat16(float) / c10::Half(float) bit for bit.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "core/cuda/cuda_support.h"
#include "kernels/cuda/cuda_kernels.h"

namespace paradiff {
namespace cuda {
namespace {

enum class Format { kBFloat16, kHalf };

__device__ __forceinline__ uint16_t ToBFloat16Bits(float x) {
  if (x != x) return 0x7FC0u;
  return __bfloat16_as_ushort(__float2bfloat16_rn(x));
}

__device__ __forceinline__ uint16_t ToHalfBits(float x) {
  if (x != x) return static_cast<uint16_t>(((__float_as_uint(x) >> 16) & 0x8000u) | 0x7E00u);
  return __half_as_ushort(__float2half_rn(x));
}

template <Format kFormat>
__global__ void CastKernel(const float* in, uint16_t* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = kFormat == Format::kBFloat16 ? ToBFloat16Bits(in[i]) : ToHalfBits(in[i]);
}

template <Format kFormat>
void Cast(const char* what, const float* in, uint16_t* out, int64_t n, KernelTiming* timing) {
  CheckCount(what, n);
  if (timing != nullptr) timing->kernel_ms = 0.0;
  if (n == 0) return;
  SyncLegacyDefaultStream();
  Stream stream;
  const size_t count = static_cast<size_t>(n);
  const StagedBuffer src(const_cast<float*>(in), count * sizeof(float), /*copy_in=*/true,
                         stream.get());
  const StagedBuffer dst(out, count * sizeof(uint16_t), /*copy_in=*/false, stream.get());
  EventTimer timer(stream.get());
  timer.Start();
  CastKernel<kFormat><<<BlocksFor(n), kThreadsPerBlock, 0, stream.get()>>>(
      static_cast<const float*>(src.device()), static_cast<uint16_t*>(dst.device()), n);
  PARADIFF_CUDA_CHECK(cudaGetLastError());
  timer.Stop();
  dst.CopyOut(stream.get());
  stream.Synchronize();
  if (timing != nullptr) timing->kernel_ms = timer.Milliseconds();
}

}  // namespace

void CastToBFloat16Gpu(const float* in, uint16_t* out, int64_t n, KernelTiming* timing) {
  Cast<Format::kBFloat16>("CastToBFloat16Gpu", in, out, n, timing);
}

void CastToHalfGpu(const float* in, uint16_t* out, int64_t n, KernelTiming* timing) {
  Cast<Format::kHalf>("CastToHalfGpu", in, out, n, timing);
}

}  // namespace cuda
}  // namespace paradiff
