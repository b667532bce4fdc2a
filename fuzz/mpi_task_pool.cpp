#include "fuzz/mpi_task_pool.h"

#include <mpi.h>
#include <signal.h>

#include <stdexcept>
#include <thread>

namespace paradiff {

namespace {

constexpr int kTagTask = 701, kTagEvent = 702, kTagStop = 703;
constexpr auto kSlice = std::chrono::milliseconds(5);  // local poll slice while waiting

void SendText(const std::string& s, int dest, int tag) {
  if (MPI_Send(s.data(), static_cast<int>(s.size()), MPI_CHAR, dest, tag, MPI_COMM_WORLD) !=
      MPI_SUCCESS)
    throw std::runtime_error("distributed campaign: MPI_Send to rank " + std::to_string(dest) +
                             " failed");
}

// Receives one pending message of `tag` from `source` (MPI_ANY_SOURCE allowed) if there is one.
bool TryRecvText(int source, int tag, std::string& text, int& from) {
  int flag = 0;
  MPI_Status st;
  MPI_Iprobe(source, tag, MPI_COMM_WORLD, &flag, &st);
  if (!flag) return false;
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  text.assign(static_cast<size_t>(n), '\0');
  MPI_Recv(text.data(), n, MPI_CHAR, st.MPI_SOURCE, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  from = st.MPI_SOURCE;
  return true;
}

nlohmann::json EventJson(const PoolEvent& e) {
  return {{"kind", static_cast<int>(e.kind)},
          {"index", e.index},
          {"result", e.result},
          {"detail", e.detail}};
}

PoolEvent EventFrom(const nlohmann::json& j, int host) {
  PoolEvent e;
  e.kind = static_cast<PoolEvent::Kind>(j.at("kind").get<int>());
  e.index = j.at("index").get<int64_t>();
  e.result = j.at("result");
  e.detail = j.at("detail").get<std::string>();
  e.host = host;
  return e;
}

}  // namespace

MpiTaskPool::MpiTaskPool(const RemoteWorkers& w, int world_size)
    : local_(w.exe, w.jobs, w.mem_mb, w.task_timeout), jobs_(w.jobs) {
  for (int r = 1; r < world_size; ++r) remote_busy_[r] = 0;
}

void StopRemoteTasks(int world_size) {
  for (int r = 1; r < world_size; ++r) SendText("", r, kTagStop);
}

bool MpiTaskPool::HasIdle() const {
  if (local_.HasIdle()) return true;
  for (const auto& [rank, busy] : remote_busy_)
    if (busy < jobs_) return true;
  return false;
}

int MpiTaskPool::Busy() const {
  int n = local_.Busy();
  for (const auto& [rank, busy] : remote_busy_) n += busy;
  return n;
}

bool MpiTaskPool::Submit(const nlohmann::json& task) {
  // The least busy host; rank 0 (local) first among equals.
  int best = local_.HasIdle() ? 0 : -1, best_busy = local_.Busy();
  for (const auto& [rank, busy] : remote_busy_)
    if (busy < jobs_ && (best < 0 || busy < best_busy)) best = rank, best_busy = busy;
  if (best < 0) return false;
  if (best == 0) return local_.Submit(task);
  SendText(task.dump(), best, kTagTask);
  ++remote_busy_[best];
  return true;
}

std::vector<PoolEvent> MpiTaskPool::Poll(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  std::vector<PoolEvent> out;
  for (;;) {
    std::string text;
    int from = -1;
    while (TryRecvText(MPI_ANY_SOURCE, kTagEvent, text, from)) {
      out.push_back(EventFrom(nlohmann::json::parse(text), from));
      --remote_busy_[from];
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    for (PoolEvent& e : local_.Poll(std::max(std::chrono::milliseconds(0), std::min(left, kSlice))))
      out.push_back(std::move(e));
    if (!out.empty() || std::chrono::steady_clock::now() >= deadline) return out;
  }
}

int ServeRemoteTasks(const RemoteWorkers& w) {
  ::signal(SIGINT, SIG_IGN);  // rank 0 decides when the campaign stops (and stops this rank)
  WorkerPool pool(w.exe, w.jobs, w.mem_mb, w.task_timeout);
  for (;;) {
    std::string text;
    int from = -1;
    if (TryRecvText(0, kTagStop, text, from)) return 0;
    while (TryRecvText(0, kTagTask, text, from)) pool.Submit(nlohmann::json::parse(text));
    for (const PoolEvent& e : pool.Poll(std::chrono::milliseconds(20)))
      SendText(EventJson(e).dump(), 0, kTagEvent);
  }
}

}  // namespace paradiff
