// MpiJob and the process-wide pool of persistent mpi jobs (mpi_job.h, see Note [Persistent mpi
// jobs]).
#include "kernels/mpi_job.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "core/child_process.h"

namespace paradiff {

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kKillWait{5000};

[[noreturn]] void EnvError(const std::string& what) {
  throw std::runtime_error("mpi executor: " + what);
}

// Runs spawns on one thread that lives as long as the process (PR_SET_PDEATHSIG fires when the
// spawning thread ends). Never destroyed: the thread may still wait on it during exit.
class Spawner {
 public:
  Spawner() {
    std::thread([this] { Loop(); }).detach();
  }
  pid_t Run(std::function<pid_t()> spawn) {
    std::packaged_task<pid_t()> task(std::move(spawn));
    std::future<pid_t> result = task.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return result.get();  // rethrows what the spawn threw
  }

 private:
  void Loop() {
    for (;;) {
      std::packaged_task<pid_t()> task;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return !queue_.empty(); });
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<pid_t()>> queue_;
};

// JOBDIR is TMP/paradiff-mpijob-<owner pid>-XXXXXX. An owner killed outright (a campaign stops
// its workers with SIGKILL) leaves its job dirs behind, FIFOs and mpirun's log; the first job of
// every process removes those whose owner is gone.
const std::string kJobDirPrefix = "paradiff-mpijob-";

void RemoveStaleJobDirs() {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path(ec), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(kJobDirPrefix, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + kJobDirPrefix.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      fs::remove_all(e.path(), ec);
  }
}

Spawner& TheSpawner() {
  static Spawner* spawner = new Spawner;  // leaked on purpose, see above
  return *spawner;
}

struct Pool {
  std::mutex mu;
  std::vector<std::unique_ptr<MpiJob>> idle;
  int largest = 0;  // the largest job started so far
  ~Pool() {         // every job's ranks see the end of their input first, then each is awaited
    for (auto& job : idle) job->CloseInputs();
  }
};

Pool& ThePool() {
  static Pool pool;  // its destructor shuts the idle jobs down at exit
  return pool;
}

}  // namespace

MpiJob::MpiJob(const MpiJobKey& key, int size, const MpiSpawn& spawn)
    : key_(key), size_(size), owner_(::getpid()) {
  std::error_code ec;
  static std::once_flag swept;
  std::call_once(swept, RemoveStaleJobDirs);
  std::string tmpl =
      (fs::temp_directory_path(ec) / (kJobDirPrefix + std::to_string(owner_) + "-XXXXXX")).string();
  if (ec || ::mkdtemp(&tmpl[0]) == nullptr)
    EnvError("cannot create a job dir " + tmpl + ": " + std::strerror(errno));
  dir_ = tmpl;
  log_ = dir_ + "/mpirun.log";
  // The executor holds both ends of each FIFO open (O_RDWR), so the ranks' opens never block and a
  // rank reads the end of its input only when this process closes it or dies.
  auto fifo = [&](const std::string& path, int flags) {
    if (::mkfifo(path.c_str(), 0600) != 0) EnvError("mkfifo " + path + ": " + std::strerror(errno));
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | flags);
    if (fd < 0) EnvError("open " + path + ": " + std::strerror(errno));
    return fd;
  };
  try {
    for (int r = 0; r < size; ++r) in_.push_back(fifo(dir_ + "/in" + std::to_string(r), 0));
    out_ = fifo(dir_ + "/out", O_NONBLOCK);
    const std::vector<std::string> program = {key.exe, "rank", "--serve", dir_};
    pid_ = TheSpawner().Run([&] { return spawn(size, program, log_); });
  } catch (...) {
    for (int fd : in_) ::close(fd);
    if (out_ >= 0) ::close(out_);
    fs::remove_all(dir_, ec);
    throw;
  }
}

void MpiJob::CloseInputs() {
  for (int fd : in_) ::close(fd);  // the ranks read the end of their input: finalize and exit
  in_.clear();
}

bool MpiJob::Reap() {
  int status = 0;
  if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) pid_ = -1;
  return pid_ > 0;
}

MpiJob::~MpiJob() {
  CloseInputs();
  if (pid_ > 0 && ::getpid() == owner_) {
    const auto give_up = Clock::now() + kGrace;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0 && Clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    KillSession(pid_, kKillWait);
    ::waitpid(pid_, &status, WNOHANG);
  }
  if (out_ >= 0) ::close(out_);
  if (::getpid() == owner_) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
}

bool MpiJob::Send(const std::vector<std::string>& rank_args, int world) {
  struct stat st;
  log_offset_ = ::stat(log_.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  answers_ = 0;
  pending_.clear();
  nlohmann::json line = rank_args;
  const std::string text = line.dump() + "\n";
  for (int r = 0; r < world && r < size_; ++r)
    if (!WriteAll(in_[r], text)) return false;
  return world <= size_;
}

int MpiJob::Answers(std::chrono::milliseconds wait) {
  pollfd p{out_, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>(wait.count())) > 0) {
    char buf[256];
    for (ssize_t n; (n = ::read(out_, buf, sizeof buf)) > 0;) pending_.append(buf, n);
    for (size_t nl; (nl = pending_.find('\n')) != std::string::npos;) {
      ++answers_;
      pending_.erase(0, nl + 1);
    }
  }
  return answers_;
}

std::unique_ptr<MpiJob> AcquireMpiJob(const MpiJobKey& key, int world, const MpiSpawn& spawn) {
  Pool& pool = ThePool();
  std::unique_ptr<MpiJob> dropped;  // shut down outside the lock
  int size = world;
  {
    std::lock_guard<std::mutex> lock(pool.mu);
    auto& idle = pool.idle;
    idle.erase(std::remove_if(idle.begin(), idle.end(),
                              [](const std::unique_ptr<MpiJob>& j) { return !j->Reap(); }),
               idle.end());
    for (auto it = idle.begin(); it != idle.end(); ++it)
      if ((*it)->key() == key && (*it)->size() >= world) {
        std::unique_ptr<MpiJob> job = std::move(*it);
        idle.erase(it);
        return job;
      }
    size = world > MpiJob::kMaxKeptRanks ? world : std::max(world, pool.largest);
    pool.largest = std::max(pool.largest, std::min(size, MpiJob::kMaxKeptRanks));
    auto smaller = std::find_if(idle.begin(), idle.end(),
                                [&](const std::unique_ptr<MpiJob>& j) { return j->key() == key; });
    if (smaller != idle.end()) {
      dropped = std::move(*smaller);
      idle.erase(smaller);
    }
  }
  dropped.reset();
  return std::make_unique<MpiJob>(key, size, spawn);
}

void ReleaseMpiJob(std::unique_ptr<MpiJob> job) {
  if (!job || !job->alive() || job->size() > MpiJob::kMaxKeptRanks) return;  // ~MpiJob ends it
  Pool& pool = ThePool();
  std::lock_guard<std::mutex> lock(pool.mu);
  pool.idle.push_back(std::move(job));
}

}  // namespace paradiff
