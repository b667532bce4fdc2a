// CUDA runtime helpers (cuda_support.h). Host code only (compiled by the C++ compiler against the
// CUDA runtime headers), part of paradiff_cuda.
#include "core/cuda/cuda_support.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace paradiff {
namespace cuda {

void CheckCuda(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc == cudaSuccess) return;
  throw std::runtime_error(std::string("CUDA error at ") + file + ":" + std::to_string(line) +
                           ": " + call + ": " + cudaGetErrorName(rc) + ": " +
                           cudaGetErrorString(rc));
}

int BlocksFor(int64_t n) {
  const int64_t blocks = (n + kThreadsPerBlock - 1) / kThreadsPerBlock;
  return static_cast<int>(std::max<int64_t>(1, std::min(blocks, kMaxBlocks)));
}

void CheckCount(const char* what, int64_t n) {
  if (n < 0)
    throw std::invalid_argument(std::string(what) + ": n=" + std::to_string(n) + " must be >= 0");
}

bool IsDevicePointer(const void* p) {
  cudaPointerAttributes attr{};
  PARADIFF_CUDA_CHECK(cudaPointerGetAttributes(&attr, p));
  if (attr.type != cudaMemoryTypeDevice && attr.type != cudaMemoryTypeManaged) return false;
  int current = -1;
  PARADIFF_CUDA_CHECK(cudaGetDevice(&current));
  if (attr.type == cudaMemoryTypeDevice && attr.device != current)
    throw std::invalid_argument("device pointer of device " + std::to_string(attr.device) +
                                " passed while device " + std::to_string(current) + " is current");
  return true;
}

Stream::Stream() {
  PARADIFF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}
Stream::~Stream() { Reset(); }
void Stream::Reset() {
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  stream_ = nullptr;
}
void Stream::Synchronize() const { PARADIFF_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) (void)cudaFree(ptr_);
}

void DeviceBuffer::Reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  if (ptr_ != nullptr) PARADIFF_CUDA_CHECK(cudaFree(ptr_));
  ptr_ = nullptr;
  bytes_ = 0;
  PARADIFF_CUDA_CHECK(cudaMalloc(&ptr_, bytes));
  bytes_ = bytes;
}

StagedBuffer::StagedBuffer(void* user, size_t bytes, bool copy_in, cudaStream_t stream)
    : user_(user), bytes_(bytes), device_(user) {
  if (bytes == 0 || IsDevicePointer(user)) return;
  staging_.Reserve(bytes);
  device_ = staging_.get();
  if (copy_in)
    PARADIFF_CUDA_CHECK(cudaMemcpyAsync(device_, user_, bytes_, cudaMemcpyHostToDevice, stream));
}

void StagedBuffer::CopyOut(cudaStream_t stream) const {
  if (device_ == user_ || bytes_ == 0) return;
  PARADIFF_CUDA_CHECK(cudaMemcpyAsync(user_, device_, bytes_, cudaMemcpyDeviceToHost, stream));
}

AsyncBuffer::AsyncBuffer(size_t bytes, cudaStream_t stream) : stream_(stream) {
  PARADIFF_CUDA_CHECK(cudaMallocAsync(&ptr_, std::max<size_t>(bytes, 1), stream));
}
AsyncBuffer::~AsyncBuffer() {
  if (ptr_ != nullptr) (void)cudaFreeAsync(ptr_, stream_);
}
void* AsyncBuffer::release() {
  void* p = ptr_;
  ptr_ = nullptr;
  return p;
}

DeviceGuard::DeviceGuard(int device) {
  PARADIFF_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) PARADIFF_CUDA_CHECK(cudaSetDevice(device));
}
DeviceGuard::~DeviceGuard() { (void)cudaSetDevice(previous_); }

EventTimer::EventTimer(cudaStream_t stream) : stream_(stream) {
  PARADIFF_CUDA_CHECK(cudaEventCreate(&start_));
  PARADIFF_CUDA_CHECK(cudaEventCreate(&stop_));
}
EventTimer::~EventTimer() {
  if (start_ != nullptr) (void)cudaEventDestroy(start_);
  if (stop_ != nullptr) (void)cudaEventDestroy(stop_);
}
void EventTimer::Start() { PARADIFF_CUDA_CHECK(cudaEventRecord(start_, stream_)); }
void EventTimer::Stop() { PARADIFF_CUDA_CHECK(cudaEventRecord(stop_, stream_)); }
double EventTimer::Milliseconds() const {
  float ms = 0.0f;
  PARADIFF_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms;
}

}  // namespace cuda
}  // namespace paradiff
