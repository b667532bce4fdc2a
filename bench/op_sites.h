// Which of paradiff's functions issue the torch operator calls a check makes (bench_time_split
// --op-sites): the diagnostic behind docs/PERFORMANCE.md's table of operator sources.
//
// Record() runs inside a RecordFunction callback for an outermost operator: it takes the call
// stack (backtrace), skips the callback's own frames and torch's (its shared libraries), and keeps
// the next few return addresses, which lie in this executable: the code that called the operator.
// Report() resolves them once, at the end, with binutils' addr2line on /proc/self/exe, and
// attributes each call to the first frame that is not ATen's, c10's or the standard library's
// inline code compiled into this binary (at::operator+, std::function glue): the paradiff function
// that made the call. Without addr2line the sites are printed as addresses, and the report says so.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

namespace paradiff::bench {

class OpSites {
 public:
  // Thread-safe; cheap enough for one instrumented pass, not for timing.
  void Record(int phase, const char* op);
  // Per phase (index into `phases`), the `top` sites with the most calls, each with its three most
  // frequent operators; counts divided by `per` (calls per check). Printed to stderr.
  void Report(const std::vector<std::string>& phases, size_t top, double per) const;

 private:
  static constexpr size_t kFrames = 4;           // this executable's innermost frames kept per call
  using Stack = std::array<uintptr_t, kFrames>;  // offsets in the executable, 0 past the end
  mutable std::mutex mu_;
  std::map<std::tuple<int, std::string, Stack>, int64_t> calls_;  // (phase, operator, stack)
};

}  // namespace paradiff::bench
