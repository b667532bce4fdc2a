// WorkDirLock: one process at a time uses a campaign, gate or zoo work dir. Acquire takes an
// exclusive flock(2) on DIR/lock and writes the holder (pid, host, start time) into it; a second
// process is refused with an error naming the holder. The kernel drops the lock when its holder
// exits or is killed, so a lock left by a killed process is stale: the next Acquire takes it over
// and says whose it was. Released when the object is destroyed. The file descriptor is close-on-
// exec, so programs the campaign executes (targets, mpirun) never hold it.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace paradiff {

class WorkDirLock {
 public:
  // Creates `dir` if needed and locks it. Error (field --workdir) when another process holds it.
  // `took_over` (optional): set to the stale holder's description when one was taken over.
  static StatusOr<std::shared_ptr<WorkDirLock>> Acquire(const std::string& dir,
                                                        std::string* took_over = nullptr);
  ~WorkDirLock();
  WorkDirLock(const WorkDirLock&) = delete;
  WorkDirLock& operator=(const WorkDirLock&) = delete;

 private:
  explicit WorkDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace paradiff
