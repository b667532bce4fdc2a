// WorkDirLock: a second holder is refused with the first one's pid, host and start time; a lock
// whose holder is gone (here: a file naming a holder, with no flock held) is taken over and
// reported; releasing lets the next process in. flock(2) locks belong to open file descriptions,
// so two Acquire calls in one process contend exactly as two processes do.
#include "fuzz/workdir_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace paradiff {
namespace {

std::string FreshDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "/workdir_lock_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

TEST(WorkDirLock, ASecondHolderIsRefusedNamingTheFirst) {
  const std::string dir = FreshDir("second");
  std::string stale = "unset";
  auto first = WorkDirLock::Acquire(dir, &stale);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(stale, "") << "a new work dir has no previous holder";
  auto second = WorkDirLock::Acquire(dir);
  ASSERT_FALSE(second.ok());
  const std::string msg = second.status().ToString();
  EXPECT_NE(msg.find("is in use by pid " + std::to_string(::getpid()) + " on host "),
            std::string::npos)
      << msg;
  EXPECT_NE(msg.find(" since 20"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--workdir"), std::string::npos) << msg;
  first.value().reset();  // released
  auto third = WorkDirLock::Acquire(dir, &stale);
  ASSERT_TRUE(third.ok()) << third.status().ToString();
  EXPECT_EQ(stale, "") << "a released lock is not stale";
}

TEST(WorkDirLock, AStaleLockIsTakenOverAndReported) {
  const std::string dir = FreshDir("stale");
  std::filesystem::create_directories(dir);
  // What a SIGKILLed holder leaves: its description, and no flock (the kernel dropped it).
  std::ofstream(dir + "/lock")
      << R"({"pid": 999999, "host": "gone", "started": "2026-01-01T00:00:00Z"})";
  std::string stale;
  auto lock = WorkDirLock::Acquire(dir, &stale);
  ASSERT_TRUE(lock.ok()) << lock.status().ToString();
  EXPECT_EQ(stale, "pid 999999 on host gone since 2026-01-01T00:00:00Z");
  auto again = WorkDirLock::Acquire(dir);
  EXPECT_FALSE(again.ok()) << "the new holder holds it";
}

TEST(WorkDirLock, AnUnusableDirectoryIsAClearError) {
  const std::string file = FreshDir("file");
  std::ofstream(file) << "not a directory";
  auto lock = WorkDirLock::Acquire(file);
  ASSERT_FALSE(lock.ok());
  EXPECT_NE(lock.status().ToString().find("cannot open"), std::string::npos)
      << lock.status().ToString();
}

}  // namespace
}  // namespace paradiff
