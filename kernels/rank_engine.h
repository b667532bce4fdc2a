// RankEngine: one rank of the distributed training engine under test (data parallel with ZeRO
// stages 0-3, composed with tensor / sequence parallelism). Ranks are laid out tensor-parallel
// fastest, then data-parallel, then pipeline: rank = (pp_rank * dp + dp_rank) * tp + tp_rank.
// It owns that rank's flat buffers over its tensor-parallel shards (kernels/tp_layout.h), runs the
// model unit by unit (see Note [Layer-wise execution]), reduces gradients through GradReducer,
// updates its shard, and reports observations (sut/observations.h).
//
// Note [Layer-wise execution]: the model runs unit by unit, each unit's input a leaf of its own, so
// backward walks the units in reverse, back-propagating the incoming gradient through one unit at
// a time. Without ZeRO 3, and with no pipeline or a 1F1B one, a rank keeps each unit's graph from
// forward until that micro-batch's backward: it holds one micro-batch at a time, or under 1F1B at
// most pp of them over its layers / pp layers, which is what the budget's activation term counts
// (see Note [Bytes per rank]). ZeRO 3, GPipe (every micro-batch in flight) and interleaved 1F1B
// run forward without autograd, keeping each unit's input, and in backward re-materialize each
// unit's parameters (ZeRO 3 gathers them again) and recompute the unit's forward with autograd:
// activation checkpointing per layer, the way ZeRO 3 frees parameters between uses. The two paths
// run the same kernels on the same values, so stage k and stage 0 compute bitwise the same values.
// A unit of a gpt model keeps a HandTape instead of a graph, and backward runs its hand-written
// backward (see Note [Hand-written backward]); autograd's bits either way.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "core/config.h"
#include "core/model_spec.h"
#include "kernels/checkpoint.h"
#include "kernels/faults.h"
#include "kernels/flat_layout.h"
#include "kernels/flat_pack.h"
#include "kernels/grad_reducer.h"
#include "kernels/hand_backward.h"
#include "kernels/loss_scaler.h"
#include "kernels/model.h"
#include "kernels/tensor_parallel.h"
#include "kernels/tp_layout.h"
#include "sut/observations.h"

namespace paradiff {

class RankEngine {
 public:
  // `world` is this rank's communicator over all ranks; process groups are split from it.
  RankEngine(const Config& cfg, const FaultSet& faults, Communicator& world);
  ~RankEngine();
  RankObservations Run();
  // Steps [first, last) (global step indices), appended to `obs`.
  // `log`: the recording of this rank's calls (comm/recording_communicator.h); when given, its
  // size after each step goes to obs.collective_marks.
  void RunSteps(int64_t first, int64_t last, RankObservations& obs,
                const std::vector<Fingerprint>* log = nullptr);
  // Checkpoints (kernels/rank_checkpoint.cpp): the state this rank owns as logical pieces, and
  // restoring this rank's state from a checkpoint written by any layout of the same model.
  CheckpointShard SaveShard() const;
  void LoadShard(const CheckpointReader& reader);
  LossScaler::State scaler_state() const { return scaler_.state(); }
  int64_t updates() const { return updates_; }

 private:
  void InitState();
  double ForwardBackward(const MicroBatch& mb, int64_t micro_step, bool boundary);
  // What backward needs of one unit's forward (see Note [Layer-wise execution]): its input, and
  // when the graph is kept, the input as the leaf it was and the unit's output; for a unit run
  // by hand (ByHand), its input and, when kept, its HandTape.
  struct UnitTape {
    at::Tensor input, output;
    HandTape hand;
  };
  // True where the units' backward is written out by hand (kernels/hand_backward.h): every unit
  // of a gpt model, in numerics that do not round at random.
  bool ByHand() const;
  // The tensor-parallel collectives a unit run by hand goes through: tp_ at tp > 1, else none.
  TensorParallel* HandTp() const;
  // Forward of `units` from x, one tape per unit; returns the output without its graph.
  at::Tensor ForwardUnits(const std::vector<size_t>& units, at::Tensor x, const MicroBatch& mb,
                          std::vector<UnitTape>& tapes);
  // Backward of `units` from their tapes; returns the gradient of their input (undefined when
  // they start with the embedding).
  at::Tensor BackwardUnits(const std::vector<size_t>& units, const std::vector<UnitTape>& tapes,
                           at::Tensor grad_out, const MicroBatch& mb, int64_t micro_step);
  // Reduces the local gradients of a micro-step across dp into grad_acc_ (per stage).
  void ReduceMicroStep(int64_t micro_step, bool boundary);
  // One step of the pipeline schedule (kernels/pipeline_exec.cpp).
  void PipelineStep(int64_t step, RankStep& rs);
  // Adds the parameters, master weights and optimizer state this rank holds to `rs`.
  void ReportState(RankStep& rs) const;
  // Largest |value| of the padding elements of a held buffer starting at flat index buf_begin.
  double PaddingMaxAbs(const at::Tensor& buf, int64_t buf_begin) const;
  // The overflow decision every rank of the model agrees on (max over dp, tp and pp).
  bool AgreeOverflow(bool local);
  // A unit's parameters with their local shapes. Stages 0-2: the unit's leaves, views of params_
  // made once, for every pass (SinkGrads takes their gradients off them); stage 3: gathered anew
  // into `scratch` (leaves when `requires_grad`), valid until the next call with it.
  const ParamMap& Materialize(size_t unit, bool requires_grad, ParamMap& scratch);
  // Adds the unit's parameter gradients to this micro-step's local gradients and clears them.
  void SinkGrads(size_t unit, const ParamMap& leaves, int64_t micro_step);
  double GlobalGradNorm(const at::Tensor& grads);
  // `update`: applied updates before this one (Adam's count); `schedule_at`: the count the
  // learning-rate schedule is read at (the same, but for a zoo switch).
  void OptimizerStep(int64_t update, int64_t schedule_at, const at::Tensor& grads);
  void AddPieces(std::vector<TensorPiece>& out, const char* kind, const at::Tensor& buf,
                 int64_t buf_begin, int64_t begin, int64_t end) const;
  MemoryAccount Memory() const;

  const Config& cfg_;
  const FaultSet& faults_;
  Communicator& world_;
  std::unique_ptr<Communicator> tp_group_, dp_group_, kv_group_, pp_group_, emb_group_;
  ModelSpec spec_;                           // the logical model
  std::vector<Unit> units_;                  // every unit of the model (embed, blocks, head)
  std::vector<std::vector<size_t>> chunks_;  // this pipeline rank's chunks: unit indices
  std::vector<TpShard> shards_;  // this rank's piece of each parameter it holds (spec_ order)
  ModelSpec local_spec_;         // the same parameters with their local shapes
  FlatLayout layout_;
  std::unique_ptr<TensorParallel> tp_;
  std::vector<PackPlan> gather_plans_;  // stage 3: per unit, all its parameters
  std::vector<PackPlan>
      ready_plans_;  // stage 3: per unit, parameters whose gradient completes there
  std::vector<int64_t>
      last_use_;                  // per entry: the unit where its gradient completes (lowest index)
  ParamMap pending_;              // stage 3: partial gradients of parameters used again below
  std::vector<ParamMap> leaves_;  // stages 0-2: per unit, its parameter leaves (Materialize)
  Numerics num_;
  std::unique_ptr<GradReducer> reducer_;
  int64_t stage_;
  bool keep_graphs_;  // forward keeps each unit's graph (no recomputation in backward)
  int dp_rank_, tp_rank_;
  int64_t pp_rank_;
  at::Tensor TpSyncGrad(int entry, at::Tensor grad);
  bool TpSyncs(int entry) const;  // whether TpSyncGrad sums the entry's gradient over a group
  bool CountsInNorm(int entry) const;
  at::ScalarType AccumulateDType() const;
  int64_t shard_begin_, shard_size_;

  at::Tensor params_;  // param dtype: full flat (stages 0-2) or this rank's shard (stage 3)
  at::Tensor master_;  // fp32 master copy of the owned region, undefined without master weights
  std::vector<at::Tensor> slots_;  // fp32 optimizer state of the owned region
  at::Tensor grad_micro_;  // accumulate dtype, full: this micro-step's local gradients (stages 0-2)
  at::Tensor grad_acc_;    // accumulate dtype: reduced gradients summed over micro-steps; full for
                           // stages 0/1, this rank's shard for stages 2/3
  int64_t gathered_peak_ = 0;
  LossScaler scaler_;
  int64_t updates_ = 0;  // optimizer updates applied (overflow-skipped steps excluded)
};

}  // namespace paradiff
