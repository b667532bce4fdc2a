#include "core/self_exe.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <mutex>

namespace paradiff {
namespace {

// Function-local, so a static initializer of another file may set it (no initialization order).
struct Registered {
  std::mutex mu;
  std::string path;  // guarded by mu
};
Registered& Exe() {
  static Registered r;
  return r;
}

}  // namespace

std::string SelfExecutablePath() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

void SetParadiffExecutable(const std::string& path) {
  Registered& r = Exe();
  std::lock_guard<std::mutex> lk(r.mu);
  r.path = path;
}

std::string ParadiffExecutable() {
  {
    Registered& r = Exe();
    std::lock_guard<std::mutex> lk(r.mu);
    if (!r.path.empty()) return r.path;
  }
  const char* env = std::getenv("PARADIFF_EXE");
  return env != nullptr ? std::string(env) : std::string();
}

}  // namespace paradiff
