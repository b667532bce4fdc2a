// RecordingCommunicator: record the fingerprint, then forward (or take it back, see below).
#include "comm/recording_communicator.h"

#include <stdexcept>
#include <utility>

namespace paradiff {

namespace {

Communicator* NonNull(Communicator* inner, const std::vector<Fingerprint>* log) {
  if (inner == nullptr) throw std::invalid_argument("RecordingCommunicator: inner is null");
  if (log == nullptr) throw std::invalid_argument("RecordingCommunicator: log is null");
  return inner;
}

// Logs the fingerprint `build` makes (advancing *seq), then runs `call`. A call the backend rejects
// with std::invalid_argument never took place there and consumed no number, so its entry and its
// number are taken back, keeping the log's numbering equal to the backend's.
template <typename Build, typename Call>
void RecordThenForward(std::vector<Fingerprint>* log, FingerprintSequencer* seq, Build build,
                       Call call) {
  const FingerprintSequencer saved = *seq;
  log->push_back(build(*seq));
  try {
    call();
  } catch (const std::invalid_argument&) {
    log->pop_back();
    *seq = saved;
    throw;
  }
}

}  // namespace

RecordingCommunicator::RecordingCommunicator(std::unique_ptr<Communicator> inner,
                                             std::vector<Fingerprint>* log)
    : owned_(std::move(inner)),
      inner_(NonNull(owned_.get(), log)),
      log_(log),
      sequencer_(inner_->name(), inner_->rank(), inner_->size()) {}

RecordingCommunicator::RecordingCommunicator(Communicator& inner, std::vector<Fingerprint>* log)
    : inner_(NonNull(&inner, log)),
      log_(log),
      sequencer_(inner_->name(), inner_->rank(), inner_->size()) {}

void RecordingCommunicator::AllReduce(at::Tensor& t, ReduceOp op) {
  RecordThenForward(
      log_, &sequencer_,
      [&](FingerprintSequencer& s) {
        return s.Collective(CollOp::kAllReduce, t.numel(), DtypeName(t), static_cast<int64_t>(op));
      },
      [&] { inner_->AllReduce(t, op); });
}

void RecordingCommunicator::AllGather(const at::Tensor& in, at::Tensor& out,
                                      const std::vector<int64_t>& counts) {
  RecordThenForward(
      log_, &sequencer_,
      [&](FingerprintSequencer& s) {
        return s.Collective(CollOp::kAllGather, in.numel(), DtypeName(in), -1, CountsHash(counts));
      },
      [&] { inner_->AllGather(in, out, counts); });
}

void RecordingCommunicator::ReduceScatter(const at::Tensor& in, at::Tensor& out,
                                          const std::vector<int64_t>& counts, ReduceOp op) {
  RecordThenForward(
      log_, &sequencer_,
      [&](FingerprintSequencer& s) {
        return s.Collective(CollOp::kReduceScatter, in.numel(), DtypeName(in),
                            static_cast<int64_t>(op), CountsHash(counts));
      },
      [&] { inner_->ReduceScatter(in, out, counts, op); });
}

void RecordingCommunicator::Broadcast(at::Tensor& t, int root) {
  RecordThenForward(
      log_, &sequencer_,
      [&](FingerprintSequencer& s) {
        return s.Collective(CollOp::kBroadcast, t.numel(), DtypeName(t), root);
      },
      [&] { inner_->Broadcast(t, root); });
}

void RecordingCommunicator::Send(const at::Tensor& t, int dst) {
  RecordThenForward(
      log_, &sequencer_,
      [&](FingerprintSequencer& s) {
        return s.PointToPoint(CollOp::kSend, t.numel(), DtypeName(t), dst);
      },
      [&] { inner_->Send(t, dst); });
}

void RecordingCommunicator::Recv(at::Tensor& t, int src) {
  RecordThenForward(
      log_, &sequencer_,
      [&](FingerprintSequencer& s) {
        return s.PointToPoint(CollOp::kRecv, t.numel(), DtypeName(t), src);
      },
      [&] { inner_->Recv(t, src); });
}

void RecordingCommunicator::Barrier() {
  RecordThenForward(
      log_, &sequencer_,
      [](FingerprintSequencer& s) { return s.Collective(CollOp::kBarrier, 0, "", -1); },
      [&] { inner_->Barrier(); });
}

std::unique_ptr<Communicator> RecordingCommunicator::Split(int color, int key) {
  std::unique_ptr<Communicator> child;
  RecordThenForward(
      log_, &sequencer_,
      [](FingerprintSequencer& s) { return s.Collective(CollOp::kSplit, 0, "", -1); },
      [&] { child = inner_->Split(color, key); });
  return std::make_unique<RecordingCommunicator>(std::move(child), log_);
}

}  // namespace paradiff
