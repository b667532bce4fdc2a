#include "fuzz/worker_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "core/child_process.h"

namespace paradiff {

WorkerPool::WorkerPool(std::string exe, int jobs, int64_t mem_mb,
                       std::chrono::milliseconds task_timeout)
    : exe_(std::move(exe)), mem_mb_(mem_mb), task_timeout_(task_timeout), workers_(jobs) {
  ::signal(SIGPIPE, SIG_IGN);  // a dead worker must not kill the campaign through its pipe
  for (auto& w : workers_) Start(w);
}

WorkerPool::~WorkerPool() {
  for (auto& w : workers_) Stop(w, /*kill=*/true);
}

// Note [Job scratch]: every worker runs with TMPDIR set to a directory of its own, removed once the
// worker has ended however it ended. What a worker and the processes it starts leave in the temp
// dir (run dirs, warm workers' logs, a persistent mpi job's files, Open MPI's session dir) goes
// with it, also when the pool kills it mid-run: at a task's timeout, or when the campaign ends.
// The worker knows the dir too (kJobScratchEnv) and removes it when its input ends: a campaign
// killed outright reaps nothing, and its workers then end by themselves.
void WorkerPool::Start(Worker& w) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string scratch = (fs::temp_directory_path(ec) / "paradiff-job-XXXXXX").string();
  if (::mkdtemp(&scratch[0]) == nullptr)
    throw std::runtime_error("worker pool: cannot create " + scratch + ": " + std::strerror(errno));
  const std::string scratch_env = std::string(kJobScratchEnv) + "=";
  std::vector<std::string> env_text = {"TMPDIR=" + scratch, scratch_env + scratch};
  for (char** e = environ; *e != nullptr; ++e)
    if (std::strncmp(*e, "TMPDIR=", 7) != 0 &&
        std::strncmp(*e, scratch_env.c_str(), scratch_env.size()) != 0)
      env_text.push_back(*e);
  std::vector<char*> env;
  for (auto& e : env_text) env.push_back(&e[0]);
  env.push_back(nullptr);
  const std::string verb = "worker";
  char* const argv[] = {const_cast<char*>(exe_.c_str()), const_cast<char*>(verb.c_str()), nullptr};
  auto failed = [&](const std::string& call) {  // no worker: no scratch either
    const std::string why = std::strerror(errno);
    fs::remove_all(scratch, ec);
    return std::runtime_error("worker pool: " + call + " failed: " + why);
  };
  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0) throw failed("pipe");
  const pid_t pid = ::fork();
  if (pid < 0) throw failed("fork");
  if (pid == 0) {
    ::dup2(to[0], STDIN_FILENO);
    ::dup2(from[1], STDOUT_FILENO);
    if (mem_mb_ > 0) {
      struct rlimit lim;
      lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(mem_mb_) << 20;
      ::setrlimit(RLIMIT_AS, &lim);
    }
    ::execve(exe_.c_str(), argv, env.data());
    ::_exit(127);
  }
  ::close(to[0]);
  ::close(from[1]);
  w = Worker();
  w.scratch = scratch;
  w.pid = pid;
  w.to = to[1];
  w.from = from[0];
}

std::string WorkerPool::Reap(Worker& w, int* signal) {
  int status = 0;
  std::string how = "ended";
  if (signal != nullptr) *signal = 0;
  if (::waitpid(w.pid, &status, 0) == w.pid) {
    if (WIFSIGNALED(status)) {
      if (signal != nullptr) *signal = WTERMSIG(status);
      how = std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
            strsignal(WTERMSIG(status)) + ")";
    } else if (WIFEXITED(status)) {
      how = "exited with code " + std::to_string(WEXITSTATUS(status));
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(w.scratch, ec);  // see Note [Job scratch]
  return how;
}

void WorkerPool::Stop(Worker& w, bool kill) {
  if (w.pid <= 0) return;
  if (w.to >= 0) ::close(w.to);
  if (w.from >= 0) ::close(w.from);
  if (kill) ::kill(w.pid, SIGKILL);
  Reap(w);
  w = Worker();
}

bool WorkerPool::HasIdle() const {
  for (const auto& w : workers_)
    if (w.task < 0) return true;
  return false;
}

int WorkerPool::Busy() const {
  int n = 0;
  for (const auto& w : workers_) n += w.task >= 0;
  return n;
}

bool WorkerPool::Submit(const nlohmann::json& task) {
  for (auto& w : workers_) {
    if (w.task >= 0) continue;
    const std::string line = task.dump() + "\n";
    w.task = task.at("index").get<int64_t>();
    w.started = std::chrono::steady_clock::now();
    WriteAll(w.to, line);  // false: the worker is dead; Poll reports it as a crash of this task
    return true;
  }
  return false;
}

std::vector<PoolEvent> WorkerPool::Poll(std::chrono::milliseconds wait) {
  std::vector<PoolEvent> events;
  std::vector<pollfd> fds;
  for (const auto& w : workers_) fds.push_back({w.from, POLLIN, 0});
  ::poll(fds.data(), fds.size(), static_cast<int>(wait.count()));
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < workers_.size(); ++i) {
    Worker& w = workers_[i];
    bool dead = false;
    if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
      char buf[65536];
      const ssize_t n = ::read(w.from, buf, sizeof buf);
      if (n > 0) {
        w.buffer.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
        dead = true;
      }
    }
    size_t nl;
    while ((nl = w.buffer.find('\n')) != std::string::npos) {
      nlohmann::json line = nlohmann::json::parse(w.buffer.substr(0, nl), nullptr, false);
      w.buffer.erase(0, nl + 1);
      if (line.is_discarded() || !line.contains("index")) continue;
      PoolEvent e;
      e.kind = PoolEvent::kResult;
      e.index = line["index"].get<int64_t>();
      e.result = std::move(line);
      if (e.index == w.task) w.task = -1;
      events.push_back(std::move(e));
    }
    if (dead) {
      const int64_t task = w.task;
      w.task = -1;
      int signal = 0;
      const std::string how = Reap(w, &signal);
      ::close(w.to);
      ::close(w.from);
      w = Worker();
      const bool outside = signal == SIGINT || signal == SIGTERM || signal == SIGHUP;
      if (task >= 0)
        events.push_back(
            {outside ? PoolEvent::kInterrupted : PoolEvent::kCrash, task, {}, "worker " + how});
      Start(w);
      ++restarts_;
    } else if (w.task >= 0 && now - w.started > task_timeout_) {
      const int64_t task = w.task;
      Stop(w, /*kill=*/true);
      events.push_back({PoolEvent::kTimeout,
                        task,
                        {},
                        "no result within " + std::to_string(task_timeout_.count()) + " ms"});
      Start(w);
      ++restarts_;
    }
  }
  return events;
}

}  // namespace paradiff
