// The rendezvous, mailboxes, abort and status table of the local backend (see Note [Local
// rendezvous]). The arithmetic of each collective lives in local_execute.cpp.
#include "comm/local_group.h"

#include <algorithm>
#include <sstream>

namespace paradiff {
namespace local {

namespace {

using Clock = std::chrono::steady_clock;

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

WorldState::WorldState(int size, std::chrono::milliseconds timeout)
    : size(size), timeout(timeout), status(size) {}

void WorldState::AbortLocked(const std::string& reason) {
  if (!aborted) {
    aborted = true;
    abort_reason = reason;
  }
  for (const auto& g : groups) g->NotifyAllLocked();
}

std::string WorldState::StatusReportLocked() const {
  std::ostringstream os;
  os << "per-rank states (world of " << size << "):";
  for (int r = 0; r < size; ++r) {
    const RankStatus& s = status[r];
    os << "\n  rank " << r << ": ";
    switch (s.state) {
      case RankState::kWaiting:
        os << "waiting in " << s.waiting_in.ToString();
        break;
      case RankState::kFinished:
        os << "finished";
        break;
      case RankState::kFailed:
        os << "failed: " << FirstLine(s.error);
        break;
      case RankState::kRunning:
        if (s.last_done) {
          os << "running (last completed: " << s.last_done->ToString() << ")";
        } else {
          os << "running (no call completed yet)";
        }
        break;
    }
  }
  return os.str();
}

void WorldState::SetWaitingLocked(int world_rank, const Fingerprint& fp) {
  status[world_rank].state = RankState::kWaiting;
  status[world_rank].waiting_in = fp;
}

void WorldState::SetDoneLocked(int world_rank, const Fingerprint& fp) {
  status[world_rank].state = RankState::kRunning;
  status[world_rank].last_done = fp;
}

void WorldState::SetRunningLocked(int world_rank) {
  status[world_rank].state = RankState::kRunning;
}

LocalGroup::LocalGroup(WorldState* world, std::string name, std::vector<int> members)
    : world_(world),
      name_(std::move(name)),
      members_(std::move(members)),
      slots_(members_.size(), nullptr) {}

void LocalGroup::ThrowIfFailedLocked(int rank, const Fingerprint& fp) const {
  if (failure_) {
    if (failure_->mismatch) throw CollectiveMismatch(failure_->message, failure_->a, failure_->b);
    throw std::runtime_error(failure_->message);
  }
  if (world_->aborted) {
    throw CollectiveAborted("collective aborted: world rank " + std::to_string(members_[rank]) +
                            " in " + fp.ToString() + ": " + world_->abort_reason);
  }
}

int LocalGroup::FinishedAbsentMemberLocked() const {
  for (size_t i = 0; i < members_.size(); ++i)
    if (slots_[i] == nullptr && world_->status[members_[i]].state == RankState::kFinished)
      return members_[i];
  return -1;
}

void LocalGroup::ThrowHangLocked(int rank, const Fingerprint& fp, int finished_peer) {
  const int wr = members_[rank];
  std::ostringstream os;
  os << "collective hang: world rank " << wr;
  if (finished_peer >= 0) {
    os << " waits in " << fp.ToString() << ", which can never complete: world rank "
       << finished_peer << " finished without it";
  } else {
    os << " waited more than " << world_->timeout.count() << " ms in " << fp.ToString();
  }
  os << "\n" << world_->StatusReportLocked();
  world_->AbortLocked(
      "world rank " + std::to_string(wr) +
      (finished_peer >= 0
           ? " cannot complete "
           : " timed out after " + std::to_string(world_->timeout.count()) + " ms in ") +
      fp.ToString());
  world_->SetRunningLocked(wr);
  throw CollectiveHang(os.str());
}

void LocalGroup::Collective(int rank, Slot& slot) {
  const int wr = members_[rank];
  std::unique_lock<std::mutex> lk(world_->mu);
  ThrowIfFailedLocked(rank, slot.fp);
  const int64_t gen = generation_;
  if (first_ < 0) {
    first_ = rank;
  } else {
    const Slot& first = *slots_[first_];
    bool same = first.fp.SameCall(slot.fp);
    if (same && first.counts != nullptr && slot.counts != nullptr)
      same = *first.counts == *slot.counts;
    if (!same) {
      GroupFailure f;
      f.mismatch = true;
      f.a = first.fp;
      f.b = slot.fp;
      f.message = "collective mismatch in group '" + name_ + "': rank " + std::to_string(first_) +
                  " called " + first.fp.ToString() + " but rank " + std::to_string(rank) +
                  " called " + slot.fp.ToString();
      failure_ = std::move(f);
      cv_.notify_all();
      world_->SetRunningLocked(wr);
      ThrowIfFailedLocked(rank, slot.fp);
    }
  }
  slots_[rank] = &slot;
  if (++arrived_ == size()) {
    executing_ = true;
    lk.unlock();
    std::vector<std::shared_ptr<LocalGroup>> created;
    std::string error;
    bool failed = false;
    try {
      created = Execute();
    } catch (const std::exception& e) {
      failed = true;
      error = e.what();
    }
    lk.lock();
    executing_ = false;
    if (failed) {
      GroupFailure f;
      f.message = "collective failed in group '" + name_ + "' executing " + slot.fp.ToString() +
                  ": " + FirstLine(error);
      failure_ = std::move(f);
      cv_.notify_all();
      world_->SetRunningLocked(wr);
      ThrowIfFailedLocked(rank, slot.fp);
    }
    for (auto& g : created) world_->groups.push_back(std::move(g));
    completed_ = gen;
    ++generation_;
    arrived_ = 0;
    first_ = -1;
    std::fill(slots_.begin(), slots_.end(), nullptr);
    world_->SetDoneLocked(wr, slot.fp);
    lk.unlock();  // woken waiters find the lock free (the world outlives every rank thread)
    cv_.notify_all();
    return;
  }
  world_->SetWaitingLocked(wr, slot.fp);
  const auto deadline = Clock::now() + world_->timeout;
  for (;;) {
    if (completed_ >= gen) {
      world_->SetDoneLocked(wr, slot.fp);
      return;
    }
    if (executing_) {  // bounded: execution never waits
      cv_.wait(lk);
      continue;
    }
    if (failure_ || world_->aborted) {
      world_->SetRunningLocked(wr);
      ThrowIfFailedLocked(rank, slot.fp);
    }
    if (const int gone = FinishedAbsentMemberLocked(); gone >= 0)
      ThrowHangLocked(rank, slot.fp, gone);
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && completed_ < gen &&
        !executing_ && !failure_ && !world_->aborted) {
      ThrowHangLocked(rank, slot.fp);
    }
  }
}

void LocalGroup::Send(int rank, int dst, const Fingerprint& fp, const at::Tensor& t) {
  Message m{fp, t.clone(at::MemoryFormat::Contiguous)};
  {
    std::lock_guard<std::mutex> lk(world_->mu);
    ThrowIfFailedLocked(rank, fp);
    mailboxes_[{rank, dst}].push_back(std::move(m));
    world_->SetDoneLocked(members_[rank], fp);
  }
  cv_.notify_all();
}

void LocalGroup::Recv(int rank, int src, const Fingerprint& fp, at::Tensor& t) {
  const int wr = members_[rank];
  std::unique_lock<std::mutex> lk(world_->mu);
  ThrowIfFailedLocked(rank, fp);
  std::deque<Message>& box = mailboxes_[{src, rank}];
  world_->SetWaitingLocked(wr, fp);
  const auto deadline = Clock::now() + world_->timeout;
  for (;;) {
    if (failure_ || world_->aborted) {
      world_->SetRunningLocked(wr);
      ThrowIfFailedLocked(rank, fp);
    }
    if (!box.empty()) break;
    if (world_->status[members_[src]].state == RankState::kFinished)
      ThrowHangLocked(rank, fp, members_[src]);  // nothing more will ever come from src
    if (cv_.wait_until(lk, deadline) == std::cv_status::timeout && box.empty() && !failure_ &&
        !world_->aborted) {
      ThrowHangLocked(rank, fp);
    }
  }
  Message m = std::move(box.front());
  box.pop_front();
  if (m.fp.numel != fp.numel || m.fp.dtype != fp.dtype) {
    world_->SetRunningLocked(wr);
    throw CollectiveMismatch("point-to-point mismatch in group '" + name_ + "': rank " +
                                 std::to_string(src) + " sent " + m.fp.ToString() + " but rank " +
                                 std::to_string(rank) + " receives " + fp.ToString(),
                             m.fp, fp);
  }
  world_->SetDoneLocked(wr, fp);
  lk.unlock();
  t.copy_(m.data.view(t.sizes()));
}

}  // namespace local
}  // namespace paradiff
