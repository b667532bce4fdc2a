// The device queries of cuda_kernels.h. Host code only (compiled by the host compiler with the
// CUDA include path), part of paradiff_cuda.
#include <string>

#include "core/cuda/cuda_support.h"
#include "kernels/cuda/cuda_kernels.h"

namespace paradiff {
namespace cuda {

void SyncLegacyDefaultStream() { PARADIFF_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy)); }

int DeviceCount(std::string* why) {
  int count = 0;
  const cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    if (why != nullptr)
      *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(rc) + ": " +
             cudaGetErrorString(rc);
    (void)cudaGetLastError();  // reset the runtime's last-error slot for later callers
    return 0;
  }
  if (count == 0 && why != nullptr) *why = "cudaGetDeviceCount: 0 devices";
  return count;
}

std::string CurrentDeviceName() {
  int device = 0;
  PARADIFF_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  PARADIFF_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) +
         std::to_string(prop.minor) + ")";
}

}  // namespace cuda
}  // namespace paradiff
