// Helpers shared by the communicator tests: deterministic per-rank inputs, a serial reference
// reduction in rank order, bitwise comparison and a check that every rank succeeded.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "comm/local_communicator.h"
#include "core/watchdog.h"

namespace paradiff {
namespace testing_util {

constexpr auto kTimeout = kDefaultCollectiveTimeout;  // never reached by passing tests
constexpr int kLargeWorld = 37;                       // prime, > 32

inline std::vector<int> WorldSizes() { return {1, 2, 3, 4, 5, 6, 7, 8, kLargeWorld}; }

// Rank r's input: standard normal (floating) or integers in [-50, 50), from seed and rank.
inline std::vector<at::Tensor> RankInputs(int world, at::IntArrayRef shape, at::ScalarType dtype,
                                          uint64_t seed) {
  std::vector<at::Tensor> in;
  for (int r = 0; r < world; ++r) {
    at::Generator gen = at::detail::createCPUGenerator(seed * 1000003 + r);
    if (at::isFloatingType(dtype)) {
      in.push_back(at::randn(shape, gen, at::kFloat).to(dtype));
    } else {
      in.push_back(at::randint(-50, 50, shape, gen, at::TensorOptions().dtype(dtype)));
    }
  }
  return in;
}

// in0 op in1 op ... left to right in the inputs' dtype; avg divides by n at the end.
inline at::Tensor SerialReduce(const std::vector<at::Tensor>& in, ReduceOp op) {
  at::Tensor acc = in[0].clone();
  for (size_t r = 1; r < in.size(); ++r) {
    acc = op == ReduceOp::kMax ? at::maximum(acc, in[r]) : acc + in[r];
  }
  if (op == ReduceOp::kAvg) acc = acc / static_cast<int64_t>(in.size());
  return acc;
}

inline ::testing::AssertionResult BitEqual(const at::Tensor& actual, const at::Tensor& expected) {
  if (actual.scalar_type() != expected.scalar_type() || actual.sizes() != expected.sizes()) {
    return ::testing::AssertionFailure()
           << "dtype/shape differ: " << actual.scalar_type() << actual.sizes() << " vs "
           << expected.scalar_type() << expected.sizes();
  }
  const at::Tensor a = actual.contiguous(), e = expected.contiguous();
  if (a.nbytes() > 0 && std::memcmp(a.data_ptr(), e.data_ptr(), a.nbytes()) != 0) {
    return ::testing::AssertionFailure()
           << "values differ bitwise; max abs diff "
           << (a.to(at::kDouble) - e.to(at::kDouble)).abs().max().item<double>();
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult AllOk(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    if (!results[r].ok) {
      return ::testing::AssertionFailure()
             << "rank " << r << " failed (" << results[r].error_kind << "): " << results[r].error;
    }
  }
  return ::testing::AssertionSuccess();
}

// Counts patterns for gather-v ops: even, uneven with zeros, a single non-empty rank.
inline std::vector<std::vector<int64_t>> CountPatterns(int world) {
  std::vector<int64_t> even(world, 5), uneven(world), single(world, 0);
  for (int r = 0; r < world; ++r) uneven[r] = (r * 7 + 3) % 4;  // 3, 2, 1, 0, 3, ...
  single[world - 1] = 9;
  return {even, uneven, single};
}

inline int64_t Sum(const std::vector<int64_t>& v) {
  int64_t s = 0;
  for (int64_t x : v) s += x;
  return s;
}

}  // namespace testing_util
}  // namespace paradiff
