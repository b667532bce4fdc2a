// The paradiff executable that ranks and workers are started from (core/self_exe.h): a program
// that links the engine but is not paradiff (this test, a benchmark) must never start copies of
// itself as mpi ranks; without a known paradiff it gets an environment error that says what to set.
#include "core/self_exe.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "core/config.h"
#include "kernels/engine.h"

namespace paradiff {
namespace {

class SelfExeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("PARADIFF_EXE");
    saved_env_ = env != nullptr ? env : "";
    had_env_ = env != nullptr;
    ::unsetenv("PARADIFF_EXE");
    SetParadiffExecutable("");
  }
  void TearDown() override {
    SetParadiffExecutable("");
    if (had_env_) ::setenv("PARADIFF_EXE", saved_env_.c_str(), 1);
  }
  std::string saved_env_;
  bool had_env_ = false;
};

TEST_F(SelfExeTest, SetThenEnvironmentThenNothing) {
  EXPECT_EQ(ParadiffExecutable(), "");
  ::setenv("PARADIFF_EXE", "/opt/x/paradiff", 1);
  EXPECT_EQ(ParadiffExecutable(), "/opt/x/paradiff");
  SetParadiffExecutable("/usr/bin/paradiff");
  EXPECT_EQ(ParadiffExecutable(), "/usr/bin/paradiff");  // an explicit setting wins
  EXPECT_FALSE(SelfExecutablePath().empty());
}

#ifdef PARADIFF_HAVE_MPI
TEST_F(SelfExeTest, MpiBackendWithoutParadiffIsAnEnvironmentError) {
  Config c;
  c.backend = Backend::kMpi;
  c.parallel.dp = 2;
  c.parallel.world = 2;
  try {
    RunEngine(c, EngineOptions{});
    FAIL() << "expected an environment error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("PARADIFF_EXE"), std::string::npos) << e.what();
  }
}
#endif

}  // namespace
}  // namespace paradiff
