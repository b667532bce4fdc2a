// CountNonFiniteGpu (cuda_kernels.h): the number of inf / nan elements of a flat float / half /
// bf16 buffer, decided on the bit pattern (exponent all ones) exactly like the CPU twin
// CountNonFinite (cpu_twins.h). Grid-stride loop, a warp-shuffle sum per warp, one 64-bit atomic
// add per warp that saw any.
#include <cstdint>

#include "core/cuda/cuda_support.h"
#include "kernels/cuda/cuda_kernels.h"

namespace paradiff {
namespace cuda {
namespace {

constexpr unsigned kFullWarp = 0xFFFFFFFFu;

template <typename Bits, Bits kExponentMask>
__global__ void CountExponentAllOnes(const Bits* data, int64_t n, unsigned long long* count) {
  unsigned long long local = 0;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    local += (data[i] & kExponentMask) == kExponentMask ? 1ull : 0ull;
  for (int offset = 16; offset > 0; offset >>= 1)
    local += __shfl_down_sync(kFullWarp, local, offset);
  if ((threadIdx.x & 31) == 0 && local != 0) atomicAdd(count, local);
}

}  // namespace

int64_t CountNonFiniteGpu(const void* data, int64_t n, FlatDtype dtype, KernelTiming* timing) {
  CheckCount("CountNonFiniteGpu", n);
  if (timing != nullptr) timing->kernel_ms = 0.0;
  if (n == 0) return 0;
  SyncLegacyDefaultStream();
  Stream stream;
  const size_t bytes = static_cast<size_t>(n) * ElementBytes(dtype);
  const StagedBuffer in(const_cast<void*>(data), bytes, /*copy_in=*/true, stream.get());
  DeviceBuffer counter(sizeof(unsigned long long));
  auto* count = static_cast<unsigned long long*>(counter.get());
  PARADIFF_CUDA_CHECK(cudaMemsetAsync(count, 0, sizeof(unsigned long long), stream.get()));
  EventTimer timer(stream.get());
  timer.Start();
  const int blocks = BlocksFor(n);
  switch (dtype) {
    case FlatDtype::kFloat32:
      CountExponentAllOnes<uint32_t, 0x7F800000u><<<blocks, kThreadsPerBlock, 0, stream.get()>>>(
          static_cast<const uint32_t*>(in.device()), n, count);
      break;
    case FlatDtype::kFloat16:
      CountExponentAllOnes<uint16_t, 0x7C00u><<<blocks, kThreadsPerBlock, 0, stream.get()>>>(
          static_cast<const uint16_t*>(in.device()), n, count);
      break;
    case FlatDtype::kBFloat16:
      CountExponentAllOnes<uint16_t, 0x7F80u><<<blocks, kThreadsPerBlock, 0, stream.get()>>>(
          static_cast<const uint16_t*>(in.device()), n, count);
      break;
  }
  PARADIFF_CUDA_CHECK(cudaGetLastError());
  timer.Stop();
  unsigned long long result = 0;
  PARADIFF_CUDA_CHECK(
      cudaMemcpyAsync(&result, count, sizeof result, cudaMemcpyDeviceToHost, stream.get()));
  stream.Synchronize();
  if (timing != nullptr) timing->kernel_ms = timer.Milliseconds();
  return static_cast<int64_t>(result);
}

}  // namespace cuda
}  // namespace paradiff
