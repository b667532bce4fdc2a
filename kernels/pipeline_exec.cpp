// RankEngine::PipelineStep: one optimizer step of pipeline parallelism on this rank. Runs the
// schedule of kernels/pipeline_plan.h; activations and their gradients move between neighbouring
// stages with Send / Recv, each message preceded by a header {kind, global chunk, micro-batch} that
// the receiver checks (see Note [Tagged pipeline messages]). Local gradients accumulate over all
// micro-batches; after the flush the tied embedding's gradient is summed between the first and the
// last stage, then gradients are reduced across data parallelism once.
//
// Note [Tagged pipeline messages]: two activations of different (chunk, micro-batch) have the same
// shape and dtype, so a schedule that pairs sends and receives wrongly would silently train on the
// wrong data. The header turns that into an error naming both.
#include <ATen/ATen.h>

#include <map>
#include <stdexcept>
#include <string>

#include "comm/fresh.h"
#include "kernels/data.h"
#include "kernels/pipeline_plan.h"
#include "kernels/rank_engine.h"

namespace paradiff {

namespace {

constexpr int64_t kActivation = 1, kGradient = 2;

void SendTagged(Communicator& pp, int peer, const at::Tensor& t, int64_t kind, int64_t chunk,
                int64_t micro) {
  at::Tensor header = at::tensor({kind, chunk, micro}, at::kLong);
  pp.Send(header, peer);
  pp.Send(Contiguous(t), peer);
}

at::Tensor RecvTagged(Communicator& pp, int peer, at::IntArrayRef shape, at::ScalarType dtype,
                      int64_t kind, int64_t chunk, int64_t micro) {
  at::Tensor header = Empty({3}, at::kLong);
  pp.Recv(header, peer);
  const int64_t* h = header.data_ptr<int64_t>();
  if (h[0] != kind || h[1] != chunk || h[2] != micro)
    throw std::logic_error("pipeline: rank " + std::to_string(pp.rank()) + " expected " +
                           (kind == kActivation ? "activation" : "gradient") + " of chunk " +
                           std::to_string(chunk) + " micro-batch " + std::to_string(micro) +
                           " from stage " + std::to_string(peer) + " but received kind " +
                           std::to_string(h[0]) + " chunk " + std::to_string(h[1]) +
                           " micro-batch " + std::to_string(h[2]));
  at::Tensor t = Empty(shape, dtype);
  pp.Recv(t, peer);
  return t;
}

}  // namespace

void RankEngine::PipelineStep(int64_t step, RankStep& rs) {
  const int64_t pp = cfg_.parallel.pp, chunks = pp * cfg_.parallel.virtual_stages;
  const int64_t accum = cfg_.batch.accumulation_steps;
  const int prev = static_cast<int>((pp_rank_ + pp - 1) % pp),
            next = static_cast<int>((pp_rank_ + 1) % pp);
  const int64_t seq_local = tp_->sp() ? cfg_.model.seq_len / tp_->size() : cfg_.model.seq_len;
  const std::vector<int64_t> act_shape = {cfg_.batch.micro_batch, seq_local, cfg_.model.hidden};
  grad_micro_.zero_();
  std::map<std::pair<int64_t, int64_t>, std::vector<UnitTape>> saved;  // (chunk, micro) -> tapes
  std::map<std::pair<int64_t, int64_t>, int> runs;                     // exactly-once check
  double loss_sum = 0;
  for (const PipelineOp& op : PipelineSchedule(cfg_, pp_rank_)) {
    const int64_t g = op.chunk * pp + pp_rank_;  // global chunk
    const MicroBatch mb = MakeMicroBatch(cfg_, step, dp_rank_ * accum + op.micro);
    const auto key = std::make_pair(op.chunk, op.micro);
    if (++runs[std::make_pair(op.forward ? g : -g - 1, op.micro)] != 1)
      throw std::logic_error("pipeline: schedule ran (chunk " + std::to_string(g) +
                             ", micro-batch " + std::to_string(op.micro) +
                             ") twice in one direction");
    if (op.forward) {
      at::Tensor x;
      if (g > 0)
        x = RecvTagged(*pp_group_, prev, act_shape, num_.exec, kActivation, g - 1, op.micro);
      at::Tensor out = ForwardUnits(chunks_[op.chunk], x, mb, saved[key]);
      if (g == chunks - 1) {
        loss_sum += ReadScalar(out);
      } else {
        SendTagged(*pp_group_, next, out, kActivation, g, op.micro);
      }
    } else {
      at::Tensor grad_out;
      if (g < chunks - 1)
        grad_out = RecvTagged(*pp_group_, next, act_shape, num_.exec, kGradient, g + 1, op.micro);
      at::Tensor grad_in = BackwardUnits(chunks_[op.chunk], saved.at(key), grad_out, mb, op.micro);
      saved.erase(key);
      if (g > 0) SendTagged(*pp_group_, prev, grad_in, kGradient, g, op.micro);
    }
  }
  for (const auto& [k, n] : runs)
    if (n != 1) throw std::logic_error("pipeline: a pass ran more than once");
  if (static_cast<int64_t>(runs.size()) != 2 * accum * static_cast<int64_t>(chunks_.size()))
    throw std::logic_error("pipeline: the schedule skipped a (chunk, micro-batch) pass");
  // The loss lives on the last stage; the whole pipeline learns it (observed only where computed).
  at::Tensor loss = at::full({1}, loss_sum, at::kDouble);
  pp_group_->Broadcast(loss, static_cast<int>(pp - 1));
  if (pp_rank_ == pp - 1) {
    rs.loss_sum = loss_sum;
    rs.loss_count = accum;
  }
  const int wte = layout_.EntryIndex("embed.wte");
  if (wte >= 0 && cfg_.model.tied_embeddings && emb_group_->size() > 1 &&
      !faults_.pp_skip_tied_embedding_sync) {
    // BUG switch (zoo: pp.skip_tied_embedding_sync) skips this: the two copies then drift apart.
    const FlatEntry& fe = layout_.entries()[wte];
    at::Tensor g = grad_micro_.narrow(0, fe.offset, fe.numel).contiguous();
    emb_group_->AllReduce(g, ReduceOp::kSum);
    grad_micro_.narrow(0, fe.offset, fe.numel).copy_(g);
  }
  ReduceMicroStep(/*micro_step=*/0, /*boundary=*/true);
}

}  // namespace paradiff
