// Benchmark: the fast bfloat16 gemm (see Note [Fast bf16 gemm] in kernels/bf16_gemm.cpp) against
// ATen's own kernel, side by side in one process, in alternating rounds:
// - kernel: nanoseconds per gemm for the shapes of the small list's models (hidden <= 64, a few
//   tokens), each variant ATen uses (A and B not transposed, B transposed, A transposed);
// - checks: process CPU per check of the small list (uncached), with the fast kernel installed and
//   with ATen's kernel back in place (ScopedAtenBf16Gemm); the verdicts of both must agree.
// Prints one JSON object. Usage: bench_bf16_gemm [rounds=3]
#include "kernels/bf16_gemm.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "bench/bench_common.h"
#include "kernels/numerics.h"
#include "oracles/check.h"

namespace {

using paradiff::Bf16Gemm;
using paradiff::GemmTrans;

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

struct Shape {
  int64_t m, n, k;
  GemmTrans ta, tb;
};

// Nanoseconds per call of `run` over `calls` calls.
template <typename F>
double NsPerCall(int calls, F run) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < calls; ++i) run();
  return 1e9 * Seconds(std::chrono::steady_clock::now() - t0) / calls;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::max(1, std::atoi(argv[1])) : 3;
  at::set_num_threads(1);
  paradiff::MakeNumerics(paradiff::DType::kBf16);  // oneDNN off, the fast kernel installed
  if (!paradiff::InstallFastBf16Gemm()) {
    std::fprintf(stderr, "bench_bf16_gemm: the fast kernel is not installed on this machine\n");
    return 1;
  }
  const GemmTrans N = GemmTrans::kNo, T = GemmTrans::kYes;
  const std::vector<Shape> shapes = {{48, 16, 16, T, N},  {16, 16, 48, N, N},  {16, 48, 16, N, T},
                                     {64, 16, 64, T, N},  {64, 16, 64, N, N},  {64, 64, 16, N, T},
                                     {192, 16, 64, T, N}, {64, 16, 192, N, N}, {8, 8, 16, N, N},
                                     {8, 8, 16, T, N}};
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  nlohmann::json kernel = nlohmann::json::array();
  for (const Shape& s : shapes) {
    Bf16Gemm g;
    g.ta = s.ta, g.tb = s.tb, g.m = s.m, g.n = s.n, g.k = s.k, g.beta = 1.0f;
    g.lda = s.ta == T ? s.k : s.m, g.ldb = s.tb == T ? s.n : s.k, g.ldc = s.m;
    std::vector<uint16_t> a(size_t(s.m * s.k)), b(size_t(s.k * s.n)), c(size_t(s.m * s.n));
    for (auto* v : {&a, &b, &c})
      for (auto& x : *v) x = at::BFloat16(normal(rng)).x;
    g.a = a.data(), g.b = b.data(), g.c = c.data();
    const int calls = int(std::max<int64_t>(20, 4000000 / (s.m * s.n * s.k)));
    double aten_ns = 1e300, fast_ns = 1e300;  // best of the rounds
    for (int r = 0; r < rounds; ++r) {
      aten_ns = std::min(aten_ns, NsPerCall(calls, [&] { paradiff::AtenBf16Gemm(g); }));
      fast_ns = std::min(fast_ns, NsPerCall(calls, [&] { paradiff::FastBf16Gemm(g); }));
    }
    kernel.push_back({{"m", s.m},
                      {"n", s.n},
                      {"k", s.k},
                      {"ta", s.ta == T ? "T" : "N"},
                      {"tb", s.tb == T ? "T" : "N"},
                      {"aten_ns", aten_ns},
                      {"fast_ns", fast_ns},
                      {"aten_over_fast", aten_ns / fast_ns}});
  }

  const auto list = paradiff::bench::SmallList();
  auto pass = [&](std::vector<std::string>* verdicts) {
    const double cpu0 = paradiff::bench::ProcessCpuS() + paradiff::bench::DescendantsCpuS();
    for (const auto& cfg : list)
      verdicts->push_back(
          paradiff::Name(paradiff::CheckRun(cfg, paradiff::CheckOptions{}).verdict.kind));
    return paradiff::bench::ProcessCpuS() + paradiff::bench::DescendantsCpuS() - cpu0;
  };
  std::vector<std::string> warm;
  pass(&warm);  // warm-up: first-touch allocations, lazy torch initialisation, mpi jobs
  double fast_cpu = 0, aten_cpu = 0;
  bool same_verdicts = true;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::string> fast_v, aten_v;
    fast_cpu += pass(&fast_v);
    {
      paradiff::ScopedAtenBf16Gemm aten;
      aten_cpu += pass(&aten_v);
    }
    same_verdicts = same_verdicts && fast_v == aten_v && fast_v == warm;
  }
  const double checks = double(rounds) * double(list.size());
  const nlohmann::json out = {{"rounds", rounds},
                              {"kernel", kernel},
                              {"checks",
                               {{"configs", list.size()},
                                {"aten_cpu_ms_per_check", 1e3 * aten_cpu / checks},
                                {"fast_cpu_ms_per_check", 1e3 * fast_cpu / checks},
                                {"aten_over_fast", aten_cpu / fast_cpu},
                                {"same_verdicts", same_verdicts}}},
                              {"load_average_1m", paradiff::bench::LoadAverage1()}};
  std::printf("%s\n", out.dump(2).c_str());
  return same_verdicts ? 0 : 1;
}
