#include "core/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace paradiff {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kKillPoll{20};

[[noreturn]] void Fail(const std::string& what) { throw std::runtime_error(what); }

}  // namespace

pid_t SpawnSession(const std::vector<std::string>& args, const std::string& log_path,
                   const std::string& cwd, const std::vector<std::string>* env, const ChildIo& io) {
  if (args.empty()) Fail("cannot execute an empty command");
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;  // built before fork: the child only execs
  if (env) {
    for (const auto& e : *env) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log < 0) Fail("cannot open " + log_path + ": " + std::strerror(errno));
  const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2];  // exec failure: the child writes errno; success closes it (O_CLOEXEC)
  if (devnull < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    ::close(log);
    Fail(std::string("pipe: ") + std::strerror(errno));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    for (int fd : {log, devnull, report[0], report[1]}) ::close(fd);
    Fail(std::string("fork: ") + std::strerror(err));
  }
  if (pid == 0) {  // only async-signal-safe calls from here
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(io.stdin_fd >= 0 ? io.stdin_fd : devnull, STDIN_FILENO);
    ::dup2(log, STDOUT_FILENO);
    ::dup2(log, STDERR_FILENO);
    if (io.fd3 >= 0) {  // dup2 onto itself keeps O_CLOEXEC: clear it then
      if (io.fd3 == 3 ? ::fcntl(3, F_SETFD, 0) != 0 : ::dup2(io.fd3, 3) != 3) ::_exit(127);
    }
    int err = 0;
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) {
      err = errno;
    } else {
      if (env) {
        ::execvpe(argv[0], argv.data(), envp.data());
      } else {
        ::execvp(argv[0], argv.data());
      }
      err = errno;
    }
    if (::write(report[1], &err, sizeof err) < 0) ::_exit(127);
    ::_exit(127);
  }
  ::close(report[1]);
  ::close(log);
  ::close(devnull);
  int err = 0;
  ssize_t n;
  do n = ::read(report[0], &err, sizeof err);
  while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof err)) {
    ::waitpid(pid, nullptr, 0);
    Fail("cannot execute '" + args[0] + "': " + std::strerror(err));
  }
  return pid;
}

bool WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::vector<ProcessInfo> ListProcesses() {
  std::vector<ProcessInfo> out;
  const double tick = static_cast<double>(::sysconf(_SC_CLK_TCK));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    std::ifstream f(e.path() / "stat");
    std::string stat;
    std::getline(f, stat);
    const size_t close = stat.rfind(')');
    if (close == std::string::npos || close + 2 > stat.size()) continue;
    // After the command: state(3) ppid pgrp session tty_nr tpgid flags minflt cminflt majflt
    // cmajflt utime(14) stime(15) ...
    std::istringstream fields(stat.substr(close + 2));
    ProcessInfo p;
    p.pid = static_cast<pid_t>(std::stol(name));
    long ppid = 0, pgrp = 0, session = 0;
    if (!(fields >> p.state >> ppid >> pgrp >> session)) continue;
    p.ppid = static_cast<pid_t>(ppid);
    p.pgrp = static_cast<pid_t>(pgrp);
    p.session = static_cast<pid_t>(session);
    std::string skip;
    for (int i = 7; i <= 13; ++i) fields >> skip;
    double utime = 0, stime = 0;
    if (fields >> utime >> stime) p.cpu_s = (utime + stime) / tick;
    out.push_back(p);
  }
  return out;
}

void KillSession(pid_t sid, std::chrono::milliseconds wait) {
  ::kill(-sid, SIGKILL);
  const auto give_up = Clock::now() + wait;
  for (;;) {
    bool alive = false;
    for (const ProcessInfo& p : ListProcesses()) {
      if (p.session != sid || p.state == 'Z' || p.pid == ::getpid()) continue;
      ::kill(p.pid, SIGKILL);
      alive = true;
    }
    if (!alive || Clock::now() > give_up) return;
    std::this_thread::sleep_for(kKillPoll);
  }
}

}  // namespace paradiff
