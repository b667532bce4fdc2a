#include "targets/warm_workers.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "core/child_process.h"

namespace paradiff {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kKillWait{5000};

// Reads one line from `fd` into `line` within `limit`. Returns 1 for a line, 0 at end of file,
// -1 when the time ran out.
int ReadLine(int fd, std::chrono::seconds limit, std::string* line) {
  const auto give_up = Clock::now() + limit;
  std::string buffer;
  for (;;) {
    const size_t nl = buffer.find('\n');
    if (nl != std::string::npos) {
      *line = buffer.substr(0, nl);
      return 1;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(give_up - Clock::now()).count();
    if (left <= 0) return -1;
    pollfd p{fd, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r < 0 && errno != EINTR) return 0;
    if (r <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    buffer.append(chunk, static_cast<size_t>(n));
  }
}

}  // namespace

LaunchEnd FromWaitStatus(int status) {
  LaunchEnd end;
  end.kind = WIFSIGNALED(status) ? LaunchEnd::kSignaled : LaunchEnd::kExited;
  end.code = WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status);
  return end;
}

WarmWorkers::WarmWorkers(TargetSpec target, std::string log_dir, bool keep_logs)
    : target_(std::move(target)), log_dir_(std::move(log_dir)), keep_logs_(keep_logs) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead worker must not kill paradiff through its pipe
}

WarmWorkers::~WarmWorkers() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& w : idle_) End(*w, false);
}

int64_t WarmWorkers::started() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_;
}

std::unique_ptr<WarmWorkers::Worker> WarmWorkers::Start() {
  std::error_code ec;
  const fs::path dir = log_dir_.empty() ? fs::temp_directory_path(ec) : fs::path(log_dir_);
  fs::create_directories(dir, ec);
  std::string log = (dir / "paradiff-worker-XXXXXX.log").string();
  const int log_fd = ::mkstemps(&log[0], 4);
  if (log_fd < 0)
    throw std::runtime_error("warm worker: cannot create a log " + log + ": " +
                             std::strerror(errno));
  ::close(log_fd);
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0) throw std::runtime_error("warm worker: pipe failed");
  if (::pipe2(from, O_CLOEXEC) != 0) {
    ::close(to[0]);
    ::close(to[1]);
    throw std::runtime_error("warm worker: pipe failed");
  }
  auto w = std::make_unique<Worker>();
  w->log = log;
  try {
    w->pid = SpawnSession(WorkerArgv(target_), log, "", nullptr, ChildIo{to[0], from[1]});
  } catch (...) {
    for (int fd : {to[0], to[1], from[0], from[1]}) ::close(fd);
    throw;
  }
  ::close(to[0]);
  ::close(from[1]);
  w->to = to[1];
  w->from = from[0];
  std::lock_guard<std::mutex> lock(mu_);
  ++started_;
  return w;
}

int WarmWorkers::End(Worker& w, bool keep_log) {
  ::close(w.to);  // end of its input: a healthy worker exits by itself
  KillSession(w.pid, kKillWait);
  int status = 0;
  ::waitpid(w.pid, &status, 0);
  ::close(w.from);
  std::error_code ec;
  if (!keep_log && !keep_logs_) fs::remove(w.log, ec);
  return status;
}

LaunchEnd WarmWorkers::Run(const std::string& run_dir) {
  std::unique_ptr<Worker> w;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      w = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!w) w = Start();
  LaunchEnd end;
  std::string line;
  const int got = WriteAll(w->to, run_dir + "\n")
                      ? ReadLine(w->from, std::chrono::seconds(target_.timeout_s), &line)
                      : 0;
  if (got < 0) {
    end.kind = LaunchEnd::kTimedOut;
    End(*w, false);
    return end;
  }
  if (got == 0) {  // the worker died: its own status is the run's
    end = FromWaitStatus(End(*w, true));
    end.worker_failure =
        std::string("its warm worker ") +
        (end.kind == LaunchEnd::kSignaled ? "killed by signal " : "exited with code ") +
        std::to_string(end.code) + " without answering (log " + w->log + " kept)";
    if (end.kind == LaunchEnd::kExited && end.code == 0) end.code = 1;  // it owed an answer
    return end;
  }
  const nlohmann::json a = nlohmann::json::parse(line, nullptr, false);
  const bool ok = a.is_object() && a.value("run_dir", "") == run_dir &&
                  (a.contains("exit") ? a["exit"].is_number_integer()
                                      : a.contains("signal") && a["signal"].is_number_integer());
  if (!ok) {
    end.code = 1;
    end.worker_failure = "its warm worker answered '" + line.substr(0, 200) +
                         "', not {\"run_dir\": RUN, \"exit\" | \"signal\": N} (log " + w->log +
                         " kept)";
    End(*w, true);
    return end;
  }
  end.kind = a.contains("exit") ? LaunchEnd::kExited : LaunchEnd::kSignaled;
  end.code = a.contains("exit") ? a["exit"].get<int>() : a["signal"].get<int>();
  if (end.kind == LaunchEnd::kExited && end.code == 0) {
    std::lock_guard<std::mutex> lock(mu_);
    idle_.push_back(std::move(w));
  } else {
    End(*w, false);  // replaced after a failed run (its log holds nothing of the run)
  }
  return end;
}

}  // namespace paradiff
