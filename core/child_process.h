// Child programs in their own session: fork + setsid + execvp (never a shell), stdin from
// /dev/null (or a pipe), stdout and stderr into a log file, and PR_SET_PDEATHSIG so that a child
// dies with its caller (a campaign worker killed by its pool takes its child job along). Used by
// the mpirun executor (kernels/engine_mpi.cpp), the external-target runner
// (targets/target_runner.cpp) and its warm workers (targets/warm_workers.cpp). PR_SET_PDEATHSIG
// fires when the *thread* that spawned the child ends: spawn long-lived children from a thread that
// lives as long as they do.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace paradiff {

// Starts argv[0] (looked up in PATH unless it contains a '/') with `args` in a new session whose
// id is the returned pid; `cwd` ("" = the caller's) is its working directory. Throws
// std::runtime_error "cannot execute 'PROG': REASON" when the program cannot be executed, and
// other std::runtime_error messages for fork / pipe / log-file failures.
// `env` ("NAME=value" entries; nullptr = the caller's environment) is the child's environment.
// `io`: descriptors the child gets as its stdin and as its file descriptor 3 (-1: /dev/null and
// none); the caller keeps its own copies and closes them.
struct ChildIo {
  int stdin_fd = -1;
  int fd3 = -1;
};
pid_t SpawnSession(const std::vector<std::string>& args, const std::string& log_path,
                   const std::string& cwd = "", const std::vector<std::string>* env = nullptr,
                   const ChildIo& io = {});

// Writes all of `s` to `fd` (a pipe to a child), retrying interrupted and partial writes; false
// when the reader is gone.
bool WriteAll(int fd, const std::string& s);

// One line of /proc/<pid>/stat: every process of the machine (as far as /proc shows them).
struct ProcessInfo {
  pid_t pid = 0, ppid = 0, pgrp = 0, session = 0;
  char state = 0;    // 'R', 'S', 'Z', ...
  double cpu_s = 0;  // utime + stime, in seconds
};
std::vector<ProcessInfo> ListProcesses();

// SIGKILLs the process group `sid` and every process of session `sid` (children may leave the
// group, not the session), and waits up to `wait` until none of them is alive.
void KillSession(pid_t sid, std::chrono::milliseconds wait);

}  // namespace paradiff
