// LocalCommunicator (one rank's handle on one local group: argument checks (arg_checks.h) and
// fingerprints, then the group's rendezvous), LocalWorld and RunLocalRanks.
#include "comm/local_communicator.h"

#include <numeric>
#include <stdexcept>
#include <thread>
#include <utility>

#include "comm/arg_checks.h"
#include "comm/local_group.h"

namespace paradiff {

namespace {

using local::LocalGroup;
using local::Slot;
using local::WorldState;

constexpr comm_args::ArgRules kRules{"local"};

class LocalCommunicator : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<WorldState> world, std::shared_ptr<LocalGroup> group, int rank)
      : world_(std::move(world)),
        group_(std::move(group)),
        rank_(rank),
        sequencer_(group_->name(), rank, group_->size()) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  const std::string& name() const override { return group_->name(); }

  void AllReduce(at::Tensor& t, ReduceOp op) override {
    comm_args::CheckAllReduce(kRules, t, op);
    Slot slot;
    slot.fp = sequencer_.Collective(CollOp::kAllReduce, t.numel(), DtypeName(t),
                                    static_cast<int64_t>(op));
    slot.in = &t;
    slot.out = &t;
    slot.reduce = op;
    group_->Collective(rank_, slot);
  }

  void AllGather(const at::Tensor& in, at::Tensor& out,
                 const std::vector<int64_t>& counts) override {
    const CollOp kOp = CollOp::kAllGather;
    comm_args::CheckAllGather(kRules, in, out, counts, rank_, size());
    Slot slot;
    slot.fp = sequencer_.Collective(kOp, in.numel(), DtypeName(in), -1, CountsHash(counts));
    slot.in = &in;
    slot.out = &out;
    slot.counts = &counts;
    group_->Collective(rank_, slot);
  }

  void ReduceScatter(const at::Tensor& in, at::Tensor& out, const std::vector<int64_t>& counts,
                     ReduceOp op) override {
    const CollOp kOp = CollOp::kReduceScatter;
    comm_args::CheckReduceScatter(kRules, in, out, counts, op, rank_, size());
    Slot slot;
    slot.fp = sequencer_.Collective(kOp, in.numel(), DtypeName(in), static_cast<int64_t>(op),
                                    CountsHash(counts));
    slot.in = &in;
    slot.out = &out;
    slot.counts = &counts;
    slot.reduce = op;
    group_->Collective(rank_, slot);
  }

  void Broadcast(at::Tensor& t, int root) override {
    comm_args::CheckBroadcast(kRules, t, root, size());
    Slot slot;
    slot.fp = sequencer_.Collective(CollOp::kBroadcast, t.numel(), DtypeName(t), root);
    slot.in = &t;
    slot.out = &t;
    group_->Collective(rank_, slot);
  }

  void Send(const at::Tensor& t, int dst) override {
    comm_args::CheckPointToPoint(kRules, CollOp::kSend, t, dst, rank_, size());
    group_->Send(rank_, dst, sequencer_.PointToPoint(CollOp::kSend, t.numel(), DtypeName(t), dst),
                 t);
  }

  void Recv(at::Tensor& t, int src) override {
    comm_args::CheckPointToPoint(kRules, CollOp::kRecv, t, src, rank_, size());
    group_->Recv(rank_, src, sequencer_.PointToPoint(CollOp::kRecv, t.numel(), DtypeName(t), src),
                 t);
  }

  void Barrier() override {
    Slot slot;
    slot.fp = sequencer_.Collective(CollOp::kBarrier, 0, "", -1);
    group_->Collective(rank_, slot);
  }

  std::unique_ptr<Communicator> Split(int color, int key) override {
    Slot slot;
    slot.fp = sequencer_.Collective(CollOp::kSplit, 0, "", -1);
    slot.color = color;
    slot.key = key;
    group_->Collective(rank_, slot);
    return std::make_unique<LocalCommunicator>(world_, std::move(slot.new_group), slot.new_rank);
  }

 private:
  std::shared_ptr<WorldState> world_;  // keeps the group's world alive
  std::shared_ptr<LocalGroup> group_;
  int rank_;
  FingerprintSequencer sequencer_;
};

std::string FirstLine(const std::string& s) { return s.substr(0, s.find('\n')); }

}  // namespace

LocalWorld::LocalWorld(int size, std::chrono::milliseconds timeout) {
  if (size < 1) throw std::invalid_argument("LocalWorld: size=" + std::to_string(size) + " < 1");
  if (timeout.count() <= 0) {
    throw std::invalid_argument("LocalWorld: timeout=" + std::to_string(timeout.count()) +
                                " ms must be positive");
  }
  state_ = std::make_shared<WorldState>(size, timeout);
  std::vector<int> members(size);
  std::iota(members.begin(), members.end(), 0);
  state_->groups.push_back(std::make_shared<LocalGroup>(state_.get(), "world", std::move(members)));
  handed_out_.assign(size, false);
}

LocalWorld::~LocalWorld() = default;

int LocalWorld::size() const { return state_->size; }

std::chrono::milliseconds LocalWorld::timeout() const { return state_->timeout; }

std::unique_ptr<Communicator> LocalWorld::Rank(int r) {
  std::lock_guard<std::mutex> lk(state_->mu);
  if (r < 0 || r >= state_->size) {
    throw std::invalid_argument("LocalWorld::Rank: r=" + std::to_string(r) + " out of range [0, " +
                                std::to_string(state_->size) + ")");
  }
  if (handed_out_[r]) {
    throw std::invalid_argument("LocalWorld::Rank: rank " + std::to_string(r) +
                                " was already handed out");
  }
  handed_out_[r] = true;
  return std::make_unique<LocalCommunicator>(state_, state_->groups.front(), r);
}

void LocalWorld::MarkFinished(int r) {
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->status.at(r).state = local::RankState::kFinished;
  for (const auto& g : state_->groups) g->NotifyAllLocked();  // waiters on r re-check: a hang
}

void LocalWorld::MarkFailed(int r, const std::string& error) {
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->status.at(r).state = local::RankState::kFailed;
  state_->status.at(r).error = error;
}

void LocalWorld::Abort(const std::string& reason) {
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->AbortLocked(reason);
}

bool LocalWorld::aborted() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->aborted;
}

std::vector<RankResult> RunLocalRanks(int world, std::chrono::milliseconds timeout,
                                      const std::function<void(Communicator&)>& fn) {
  LocalWorld w(world, timeout);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < world; ++r) comms.push_back(w.Rank(r));
  std::vector<RankResult> results(world);
  auto body = [&](int r) {
    RankResult& res = results[r];
    try {
      fn(*comms[r]);
      res.ok = true;
    } catch (const CollectiveMismatch& e) {
      res = {false, e.what(), "mismatch"};
    } catch (const CollectiveHang& e) {
      res = {false, e.what(), "hang"};
    } catch (const CollectiveAborted& e) {
      res = {false, e.what(), "aborted"};
    } catch (const std::exception& e) {
      res = {false, e.what(), "exception"};
    } catch (...) {
      res = {false, "unknown exception (not derived from std::exception)", "exception"};
    }
    if (res.ok) {
      w.MarkFinished(r);
    } else {
      w.MarkFailed(r, res.error);
      w.Abort("world rank " + std::to_string(r) + " failed (" + res.error_kind +
              "): " + FirstLine(res.error));
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(world);
  try {
    for (int r = 0; r < world; ++r) threads.emplace_back(body, r);
  } catch (...) {
    w.Abort("could not start the rank threads");
    for (auto& t : threads) t.join();
    throw;
  }
  for (auto& t : threads) t.join();
  return results;
}

int PrimaryErrorRank(const std::vector<RankResult>& results) {
  int first_failure = -1;
  for (size_t r = 0; r < results.size(); ++r) {
    if (results[r].ok) continue;
    if (results[r].error_kind != "aborted") return static_cast<int>(r);
    if (first_failure < 0) first_failure = static_cast<int>(r);
  }
  return first_failure;
}

}  // namespace paradiff
