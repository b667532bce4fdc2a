// Host API of the CUDA kernels in kernels/cuda/*.cu (library paradiff_cuda, built only where nvcc
// is found; its users get PARADIFF_HAVE_CUDA=1). Plain C++: no CUDA header leaks out of this file.
// Every kernel has a CPU twin in cpu_twins.h that computes the same bits; the gpu-labelled tests
// compare them (tests/gpu/cuda_kernels_gpu_test.cpp).
//
// Contract:
// - Pointers may be host memory (pageable or pinned) or device memory of the current CUDA device;
//   each pointer is classified with cudaPointerGetAttributes. Host buffers are staged through
//   device memory that the call allocates and frees; device buffers are used in place.
// - Every call is synchronous: it returns when the results are in the caller's buffers. Work runs
//   on a private non-blocking stream of the current device; device inputs must be ready on the
//   legacy default stream (the call synchronizes with it first), as with torch's default stream.
// - n >= 0 (n == 0 does nothing and launches nothing). Errors (no device, a failing CUDA call)
//   throw std::runtime_error naming file:line, the call and CUDA's error string; bad arguments
//   throw std::invalid_argument.
// - timing, when not null, receives the kernel's own time (CUDA events around the launch),
//   without the staging copies.
// Kernels are compiled for CMAKE_CUDA_ARCHITECTURES (90 unless set); arithmetic uses round-to-
// nearest intrinsics, never contracted, so results do not depend on the compiler's fusion choices.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/cuda/cpu_twins.h"

namespace paradiff {
namespace cuda {

struct KernelTiming {
  double kernel_ms = 0.0;
};

// Number of CUDA devices; 0 when there is none or the runtime cannot tell, and then `why` (if
// not null) receives the reason, e.g. "cudaGetDeviceCount: no CUDA-capable device is detected".
// Never throws.
int DeviceCount(std::string* why);

// The name and compute capability of the current device, e.g. "NVIDIA H200 (sm_90)".
std::string CurrentDeviceName();

// Kernel of CountNonFinite (cpu_twins.h).
int64_t CountNonFiniteGpu(const void* data, int64_t n, FlatDtype dtype,
                          KernelTiming* timing = nullptr);

// Kernels of CastToBFloat16 / CastToHalf: out[i] holds the 16-bit pattern.
void CastToBFloat16Gpu(const float* in, uint16_t* out, int64_t n, KernelTiming* timing = nullptr);
void CastToHalfGpu(const float* in, uint16_t* out, int64_t n, KernelTiming* timing = nullptr);

// Kernel of AdamStep: in place on param, exp_avg, exp_avg_sq; grad is read only.
void AdamStepGpu(const AdamStepParams& params, float* param, const float* grad, float* exp_avg,
                 float* exp_avg_sq, int64_t n, KernelTiming* timing = nullptr);

}  // namespace cuda
}  // namespace paradiff
