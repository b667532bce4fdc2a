// RecordingCommunicator: a decorator that appends the fingerprint of every call one rank makes
// ({group, seq, op, numel, dtype, root/peer, rank, counts hash}, numbered as in see Note
// [Fingerprint numbering]) to that rank's collective log, then forwards the call to the wrapped
// communicator.
//
// Owns the wrapped communicator (or borrows it: the second constructor, for the communicator that
// RunLocalRanks lends each rank; it must outlive this). Does not own the log, which must outlive
// this and every communicator its Split returns (they record into the same log). A call is recorded
// before it is forwarded, so a call that fails or hangs is the last entry of the log; a call the
// backend rejects with std::invalid_argument is taken back out (it never happened there). Not
// thread-safe: one log per rank, used by that rank's thread only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace paradiff {

class RecordingCommunicator : public Communicator {
 public:
  // Throws std::invalid_argument if inner or log is null.
  RecordingCommunicator(std::unique_ptr<Communicator> inner, std::vector<Fingerprint>* log);
  RecordingCommunicator(Communicator& inner, std::vector<Fingerprint>* log);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& name() const override { return inner_->name(); }

  void AllReduce(at::Tensor& t, ReduceOp op) override;
  void AllGather(const at::Tensor& in, at::Tensor& out,
                 const std::vector<int64_t>& counts) override;
  void ReduceScatter(const at::Tensor& in, at::Tensor& out, const std::vector<int64_t>& counts,
                     ReduceOp op) override;
  void Broadcast(at::Tensor& t, int root) override;
  void Send(const at::Tensor& t, int dst) override;
  void Recv(at::Tensor& t, int src) override;
  void Barrier() override;
  // The child is a RecordingCommunicator writing to the same log.
  std::unique_ptr<Communicator> Split(int color, int key) override;

  Communicator& inner() { return *inner_; }

 private:
  std::unique_ptr<Communicator> owned_;  // null when borrowed
  Communicator* inner_;
  std::vector<Fingerprint>* log_;
  FingerprintSequencer sequencer_;
};

}  // namespace paradiff
