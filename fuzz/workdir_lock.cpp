#include "fuzz/workdir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/json_text.h"

namespace paradiff {

namespace {

std::string ReadAll(int fd) {
  std::string out;
  char buf[512];
  ssize_t n;
  ::lseek(fd, 0, SEEK_SET);
  while ((n = ::read(fd, buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

// "pid P on host H since T" from the lock file's JSON, or what the file says when it is not ours.
std::string Holder(const std::string& text) {
  const nlohmann::json j = ParseJsonText(text);
  if (j.is_discarded() || !j.is_object() || !j.contains("pid"))
    return text.empty() ? "an unknown process (the lock file is empty)" : "an unknown process";
  return "pid " + j.value("pid", nlohmann::json(0)).dump() + " on host " + j.value("host", "?") +
         " since " + j.value("started", "?");
}

std::string Now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

StatusOr<std::shared_ptr<WorkDirLock>> WorkDirLock::Acquire(const std::string& dir,
                                                            std::string* took_over) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/lock";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return Status::Error(
        "--workdir", "--workdir " + dir + ": cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = Holder(ReadAll(fd));
    ::close(fd);
    if (err != EWOULDBLOCK)
      return Status::Error(
          "--workdir", "--workdir " + dir + ": cannot lock " + path + ": " + std::strerror(err));
    return Status::Error("--workdir", "--workdir " + dir + " is in use by " + holder + " (" + path +
                                          "); wait for it to finish or choose another --workdir");
  }
  // Locked: whoever the file names is gone (the kernel released its lock when it exited).
  const std::string previous = ReadAll(fd);
  if (took_over != nullptr) *took_over = previous.empty() ? "" : Holder(previous);
  char host[256] = "?";
  ::gethostname(host, sizeof host - 1);
  const std::string me =
      nlohmann::json{{"pid", static_cast<int64_t>(::getpid())}, {"host", host}, {"started", Now()}}
          .dump() +
      "\n";
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size())) {
    const int err = errno;
    ::close(fd);
    return Status::Error("--workdir",
                         "--workdir " + dir + ": cannot write " + path + ": " + std::strerror(err));
  }
  return std::shared_ptr<WorkDirLock>(new WorkDirLock(fd));
}

WorkDirLock::~WorkDirLock() {
  // Empty the file first: a lock file that names nobody is one that was released, not one whose
  // holder was killed.
  if (::ftruncate(fd_, 0) != 0) {
    // Nothing to do: the lock is released by close() all the same; the next holder reports this
    // one as stale, which is harmless.
  }
  ::close(fd_);
}

}  // namespace paradiff
