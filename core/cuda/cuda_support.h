// CUDA runtime helpers shared by the kernels' host code (kernels/cuda/*.cu) and the nccl backend
// (comm/nccl_communicator.cpp); in core/ so that comm/ includes nothing above it. Internal:
// includes <cuda_runtime.h>, so only CUDA-aware files of paradiff_cuda / paradiff_nccl include it;
// the kernels' public API is kernels/cuda/cuda_kernels.h.
//
// - PARADIFF_CUDA_CHECK(call): throws std::runtime_error "CUDA error at file:line: call: <CUDA's
//   error name and string>" when call does not return cudaSuccess.
// - Stream, DeviceBuffer, AsyncBuffer, DeviceGuard, EventTimer: RAII owners (destructors never
//   throw; they ignore errors of a device that is already broken).
// - StagedBuffer: a caller's buffer as a kernel sees it (cuda_kernels.h contract): the caller's
//   device pointer itself, or a device copy of a host buffer that CopyOut writes back.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#define PARADIFF_CUDA_CHECK(call) ::paradiff::cuda::CheckCuda((call), #call, __FILE__, __LINE__)

namespace paradiff {
namespace cuda {

void CheckCuda(cudaError_t rc, const char* call, const char* file, int line);

// Threads per block and the cap on blocks of the grid-stride kernels (enough to fill an H200:
// 132 SMs x 16 resident blocks of 256 threads).
constexpr int kThreadsPerBlock = 256;
constexpr int64_t kMaxBlocks = 2048;
int BlocksFor(int64_t n);

// Throws std::invalid_argument "<what>: n=<n> must be >= 0" for negative n.
void CheckCount(const char* what, int64_t n);

// True for device or managed memory of the current device; false for host memory (pageable or
// pinned). Throws std::invalid_argument for device memory of another device.
bool IsDevicePointer(const void* p);

class Stream {
 public:
  Stream();  // cudaStreamNonBlocking on the current device
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void Synchronize() const;
  // Destroys the stream now (with its device current); the object is empty afterwards.
  void Reset();

 private:
  cudaStream_t stream_ = nullptr;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) { Reserve(bytes); }
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // Grows (never shrinks) to at least `bytes`; the old contents are lost when it grows.
  void Reserve(size_t bytes);
  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

class StagedBuffer {
 public:
  // copy_in: a host buffer's contents are copied to the device (ordered on `stream`).
  StagedBuffer(void* user, size_t bytes, bool copy_in, cudaStream_t stream);
  void* device() const { return device_; }
  // Host buffers: copies the device contents back (ordered on the stream; the caller syncs).
  void CopyOut(cudaStream_t stream) const;

 private:
  void* user_;
  size_t bytes_;
  DeviceBuffer staging_;
  void* device_;
};

// Stream-ordered device memory (cudaMallocAsync / cudaFreeAsync): unlike cudaFree, releasing it
// never synchronizes the device, so it never waits for kernels of other streams (e.g. NCCL sends
// that wait for their receiver).
class AsyncBuffer {
 public:
  AsyncBuffer(size_t bytes, cudaStream_t stream);  // at least one byte
  ~AsyncBuffer();
  AsyncBuffer(const AsyncBuffer&) = delete;
  AsyncBuffer& operator=(const AsyncBuffer&) = delete;
  char* get() const { return static_cast<char*>(ptr_); }
  // Hands the memory over; the caller frees it with cudaFreeAsync.
  void* release();

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

// Makes `device` current for a scope and restores the previous device.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// Kernel time between Start() and Stop() on one stream.
class EventTimer {
 public:
  explicit EventTimer(cudaStream_t stream);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void Start();
  void Stop();
  double Milliseconds() const;  // after the stream was synchronized

 private:
  cudaStream_t stream_;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Waits for the legacy default stream (where device inputs are produced, cuda_kernels.h).
void SyncLegacyDefaultStream();

}  // namespace cuda
}  // namespace paradiff
