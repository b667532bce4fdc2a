// The CUDA kernels (kernels/cuda/cuda_kernels.h) against their CPU twins (cpu_twins.h): every
// output bit for bit, for host and device buffers, sizes from 0 to 2^24 + 3, inputs with inf, nan,
// subnormals and rounding ties. Label gpu: exits 77 ("SKIP: no CUDA device ...") where
// cudaGetDeviceCount fails or finds none. KernelTable.* prints one "TABLE kernel=... n=...
// max_abs_diff=... bitwise=yes|no kernel_ms=..." line per kernel for scripts/gpu-check.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"

namespace paradiff {
namespace cuda {
namespace {

constexpr uint64_t kSeed = 7;
constexpr int64_t kTableSize = (int64_t{1} << 24) + 3;
const int64_t kSizes[] = {0, 1, 31, 257, 100003};

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

// Mixed magnitudes, plus every 101st element a special (inf, nan, subnormal, rounding tie).
std::vector<float> Inputs(int64_t n, uint32_t salt, bool non_negative = false) {
  std::mt19937 rng(kSeed + salt);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> exponent(-30, 12);
  const float specials[] = {std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::quiet_NaN(),
                            FromBits(0x00000003u),
                            FromBits(0x3F808000u),
                            FromBits(0x33000001u),
                            65520.0f,
                            -0.0f};
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    float x = normal(rng) * std::ldexp(1.0f, exponent(rng));
    if (i % 101 == 100) x = specials[(i / 101) % 7];
    v[i] = non_negative ? std::fabs(x) : x;
  }
  return v;
}

// Max |a - b| over elements where both are finite; bitwise compares the raw patterns.
struct Diff {
  double max_abs = 0;
  bool bitwise = true;
};
template <typename T>
Diff Compare(const std::vector<T>& a, const std::vector<T>& b,
             const std::function<double(T)>& value) {
  Diff d;
  d.bitwise = a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double x = value(a[i]), y = value(b[i]);
    if (std::isfinite(x) && std::isfinite(y)) d.max_abs = std::max(d.max_abs, std::fabs(x - y));
  }
  return d;
}

double Bf16Value(uint16_t h) { return FromBits(static_cast<uint32_t>(h) << 16); }
double HalfValue(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double mag = e == 0    ? std::ldexp(m, -24)
                     : e == 31 ? (m ? NAN : INFINITY)
                               : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

void PrintRow(const char* kernel, int64_t n, const Diff& d, double ms) {
  std::printf("TABLE kernel=%s n=%lld max_abs_diff=%.3g bitwise=%s kernel_ms=%.4f\n", kernel,
              static_cast<long long>(n), d.max_abs, d.bitwise ? "yes" : "no", ms);
}

Diff CheckCast(bool bf16, int64_t n, KernelTiming* t) {
  const std::vector<float> in = Inputs(n, 1);
  std::vector<uint16_t> gpu(in.size(), 0xAAAA), twin(in.size());
  (bf16 ? CastToBFloat16Gpu : CastToHalfGpu)(in.data(), gpu.data(), n, t);
  (bf16 ? CastToBFloat16 : CastToHalf)(in.data(), twin.data(), n);
  return Compare<uint16_t>(gpu, twin, bf16 ? Bf16Value : HalfValue);
}

Diff CheckOverflow(FlatDtype dtype, int64_t n, KernelTiming* t) {
  const std::vector<float> f = Inputs(n, 2);
  std::vector<uint16_t> h(f.size());
  if (dtype == FlatDtype::kFloat16) CastToHalf(f.data(), h.data(), n);
  if (dtype == FlatDtype::kBFloat16) CastToBFloat16(f.data(), h.data(), n);
  const void* data = dtype == FlatDtype::kFloat32 ? static_cast<const void*>(f.data()) : h.data();
  const int64_t gpu = CountNonFiniteGpu(data, n, dtype, t), twin = CountNonFinite(data, n, dtype);
  Diff d;
  d.max_abs = std::fabs(static_cast<double>(gpu - twin));
  d.bitwise = gpu == twin;
  return d;
}

Diff CheckAdam(bool decoupled, int64_t n, KernelTiming* t) {
  AdamStepParams p;
  p.lr = 3e-3;
  p.weight_decay = 0.02;
  p.decoupled = decoupled;
  p.step = 3;
  const std::vector<float> grad = Inputs(n, 3);
  std::vector<float> param = Inputs(n, 4), m = Inputs(n, 5), v = Inputs(n, 6, true);
  std::vector<float> param2 = param, m2 = m, v2 = v;
  AdamStepGpu(p, param.data(), grad.data(), m.data(), v.data(), n, t);
  AdamStep(p, param2.data(), grad.data(), m2.data(), v2.data(), n);
  auto value = [](float x) { return static_cast<double>(x); };
  Diff d = Compare<float>(param, param2, value);
  const Diff dm = Compare<float>(m, m2, value), dv = Compare<float>(v, v2, value);
  d.bitwise = d.bitwise && dm.bitwise && dv.bitwise;
  d.max_abs = std::max({d.max_abs, dm.max_abs, dv.max_abs});
  return d;
}

TEST(CudaKernelsGpuTest, CastsEqualTwinsBitwise) {
  for (int64_t n : kSizes)
    for (bool bf16 : {true, false}) {
      const Diff d = CheckCast(bf16, n, nullptr);
      EXPECT_TRUE(d.bitwise) << (bf16 ? "bf16" : "fp16") << " n=" << n << " max diff " << d.max_abs;
    }
}

TEST(CudaKernelsGpuTest, OverflowCountEqualsTwin) {
  for (int64_t n : kSizes)
    for (FlatDtype dt : {FlatDtype::kFloat32, FlatDtype::kFloat16, FlatDtype::kBFloat16})
      EXPECT_TRUE(CheckOverflow(dt, n, nullptr).bitwise) << Name(dt) << " n=" << n;
}

TEST(CudaKernelsGpuTest, FusedAdamEqualsTwinBitwise) {
  for (int64_t n : kSizes)
    for (bool decoupled : {true, false}) {
      const Diff d = CheckAdam(decoupled, n, nullptr);
      EXPECT_TRUE(d.bitwise) << (decoupled ? "adamw" : "adam") << " n=" << n << " max diff "
                             << d.max_abs;
    }
}

// Device pointers are used in place (no staging).
TEST(CudaKernelsGpuTest, DevicePointersWorkInPlace) {
  const int64_t n = 100003;
  const std::vector<float> in = Inputs(n, 9);
  float* d_in = nullptr;
  uint16_t* d_out = nullptr;
  ASSERT_EQ(cudaMalloc(&d_in, n * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d_out, n * sizeof(uint16_t)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(d_in, in.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  CastToBFloat16Gpu(d_in, d_out, n);
  std::vector<uint16_t> gpu(n), twin(n);
  ASSERT_EQ(cudaMemcpy(gpu.data(), d_out, n * sizeof(uint16_t), cudaMemcpyDeviceToHost),
            cudaSuccess);
  CastToBFloat16(in.data(), twin.data(), n);
  EXPECT_EQ(gpu, twin);
  EXPECT_EQ(CountNonFiniteGpu(d_in, n, FlatDtype::kFloat32),
            CountNonFinite(in.data(), n, FlatDtype::kFloat32));
  cudaFree(d_in);
  cudaFree(d_out);
}

TEST(CudaKernelsGpuTest, RejectsNegativeCount) {
  EXPECT_THROW(CountNonFiniteGpu(nullptr, -1, FlatDtype::kFloat32), std::invalid_argument);
  AdamStepParams p;
  p.step = 0;
  float x = 0;
  EXPECT_THROW(AdamStepGpu(p, &x, &x, &x, &x, 1), std::invalid_argument);
}

TEST(KernelTable, PrintRows) {
  KernelTiming t;
  Diff d = CheckOverflow(FlatDtype::kFloat32, kTableSize, &t);
  PrintRow("overflow_check_fp32", kTableSize, d, t.kernel_ms);
  d = CheckOverflow(FlatDtype::kBFloat16, kTableSize, &t);
  PrintRow("overflow_check_bf16", kTableSize, d, t.kernel_ms);
  d = CheckCast(true, kTableSize, &t);
  PrintRow("cast_fp32_to_bf16", kTableSize, d, t.kernel_ms);
  d = CheckCast(false, kTableSize, &t);
  PrintRow("cast_fp32_to_fp16", kTableSize, d, t.kernel_ms);
  d = CheckAdam(true, kTableSize, &t);
  PrintRow("fused_adamw", kTableSize, d, t.kernel_ms);
  d = CheckAdam(false, kTableSize, &t);
  PrintRow("fused_adam_l2", kTableSize, d, t.kernel_ms);
  std::fflush(stdout);
}

}  // namespace
}  // namespace cuda
}  // namespace paradiff

int main(int argc, char** argv) {
  std::string why;
  if (paradiff::cuda::DeviceCount(&why) == 0) {
    std::cout << "SKIP: no CUDA device (" << why << ")" << std::endl;
    return 77;
  }
  std::cout << "INFO: device " << paradiff::cuda::CurrentDeviceName() << std::endl;
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
