#include "kernels/rank_engine.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "comm/fresh.h"
#include "comm/views.h"
#include "core/lr_schedule.h"
#include "kernels/data.h"
#include "kernels/optim.h"
#include "kernels/param_init.h"
#include "kernels/pipeline_plan.h"

namespace paradiff {

namespace {

int64_t Bytes(const at::Tensor& t) {
  return t.defined() ? t.numel() * static_cast<int64_t>(t.element_size()) : 0;
}

}  // namespace

namespace {

// The parameters this rank holds (those its pipeline stage's units read), with local shapes.
ModelSpec LocalSpec(const std::vector<TpShard>& shards) {
  ModelSpec local;
  for (const auto& s : shards) {
    local.params.push_back(*s.spec);
    local.params.back().shape = s.local_shape;
  }
  return local;
}

std::vector<TpShard> HeldShards(std::vector<TpShard> all, const std::vector<Unit>& units,
                                const std::vector<std::vector<size_t>>& chunks) {
  std::set<std::string> held;
  for (const auto& chunk : chunks)
    for (size_t u : chunk) held.insert(units[u].params.begin(), units[u].params.end());
  std::vector<TpShard> out;
  for (auto& s : all)
    if (held.count(s.spec->name)) out.push_back(std::move(s));
  return out;
}

// Local chunk j of pipeline rank r holds global chunk j * pp + r: its unit indices, in order.
std::vector<std::vector<size_t>> LocalChunks(const Config& c, const ModelSpec& spec,
                                             const FaultSet& faults, int64_t pp_rank) {
  const std::vector<int64_t> layers = PartitionLayers(c, spec, faults);
  const int64_t chunks = static_cast<int64_t>(layers.size()), pp = c.parallel.pp;
  const size_t head = 1 + static_cast<size_t>(c.model.layers);  // units: embed, blocks..., head
  std::vector<std::vector<size_t>> out;
  size_t next_block = 0;
  for (int64_t g = 0; g < chunks; ++g) {
    std::vector<size_t> units;
    if (g == 0) units.push_back(0);
    for (int64_t l = 0; l < layers[g]; ++l) units.push_back(1 + next_block++);
    if (g == chunks - 1) units.push_back(head);
    if (g % pp == pp_rank) out.push_back(units);
  }
  return out;
}

int64_t PpRankOf(const Config& c, int world_rank) {
  return world_rank / (c.parallel.tp * c.parallel.dp);
}

int64_t TpRankOf(const Config& c, int world_rank) { return world_rank % c.parallel.tp; }
int64_t DpRankOf(const Config& c, int world_rank) {
  return (world_rank / c.parallel.tp) % c.parallel.dp;
}

}  // namespace

RankEngine::RankEngine(const Config& cfg, const FaultSet& faults, Communicator& world)
    : cfg_(cfg),
      faults_(faults),
      world_(world),
      // Group colors: ranks of one tp group share (pp, dp) rank; of one dp group, (pp, tp) rank.
      tp_group_(world.Split(static_cast<int>(world.rank() / cfg.parallel.tp),
                            static_cast<int>(TpRankOf(cfg, world.rank())))),
      dp_group_(world.Split(
          static_cast<int>((world.rank() / (cfg.parallel.tp * cfg.parallel.dp)) * cfg.parallel.tp +
                           TpRankOf(cfg, world.rank())),
          static_cast<int>(DpRankOf(cfg, world.rank())))),
      spec_(BuildModelSpec(cfg.model)),
      units_(BuildUnits(spec_, cfg.model)),
      chunks_(LocalChunks(cfg, spec_, faults, PpRankOf(cfg, world.rank()))),
      shards_(
          HeldShards(BuildTpShards(spec_, cfg.model, cfg.parallel.tp, TpRankOf(cfg, world.rank())),
                     units_, chunks_)),
      local_spec_(LocalSpec(shards_)),
      layout_(local_spec_, cfg.zero.align_elems, cfg.parallel.dp, faults),
      num_(MakeNumerics(cfg.precision.compute)),
      stage_(cfg.zero.stage),
      keep_graphs_(stage_ <= 2 &&
                   (cfg.parallel.pp == 1 || cfg.parallel.schedule == Schedule::k1F1B)),
      dp_rank_(dp_group_->rank()),
      tp_rank_(tp_group_->rank()),
      pp_rank_(PpRankOf(cfg, world.rank())),
      scaler_(cfg.precision.loss_scale) {
  // Pipeline group: same (dp, tp) rank. Embedding group: first and last stage of that pipeline,
  // which both hold the tied embedding (every other rank alone in its own group).
  const int pipe = static_cast<int>(dp_rank_ * cfg.parallel.tp + tp_rank_);
  pp_group_ = world.Split(pipe, static_cast<int>(pp_rank_));
  const bool ends = pp_rank_ == 0 || pp_rank_ == cfg.parallel.pp - 1;
  emb_group_ = world.Split(ends ? pipe : static_cast<int>(world.size() + world.rank()),
                           static_cast<int>(pp_rank_));
  // kv heads shared by tp / kv_heads ranks (kv_heads < tp): their gradients are summed in that
  // group.
  const int64_t share = KvShareGroup(cfg.model, cfg.parallel.tp, tp_rank_);
  kv_group_ = tp_group_->Split(static_cast<int>(share < 0 ? tp_rank_ : share), tp_rank_);
  tp_ = std::make_unique<TensorParallel>(*tp_group_, cfg.model, cfg.parallel.sp, faults);
  reducer_ = std::make_unique<GradReducer>(cfg, layout_, faults, *dp_group_, world.size());
  leaves_.resize(units_.size());
  shard_begin_ = stage_ == 0 ? 0 : layout_.ShardBegin(dp_rank_);
  shard_size_ = stage_ == 0 ? layout_.padded() : layout_.ShardSize(dp_rank_);
  last_use_.assign(layout_.entries().size(), static_cast<int64_t>(units_.size()));
  for (size_t u = 0; u < units_.size(); ++u) {
    std::vector<int> entries;
    for (const auto& name : units_[u].params) {
      const int e = layout_.EntryIndex(name);
      if (e < 0) continue;  // a unit of another pipeline stage
      entries.push_back(e);
      last_use_[e] = std::min<int64_t>(last_use_[e], static_cast<int64_t>(u));
    }
    gather_plans_.push_back(MakePackPlan(layout_, entries));
  }
  for (size_t u = 0; u < units_.size(); ++u) {
    std::vector<int> ready;
    for (int e : gather_plans_[u].entries)
      if (last_use_[e] == static_cast<int64_t>(u)) ready.push_back(e);
    ready_plans_.push_back(MakePackPlan(layout_, ready));
  }
  InitState();
}

RankEngine::~RankEngine() = default;

void RankEngine::InitState() {
  const auto pdt = ToScalarType(cfg_.precision.param);
  const auto adt = AccumulateDType();
  // Each rank generates exactly the elements it holds (see Note [Sharded generation]): in float64,
  // one piece at a time (a column slice row by row, in plain loops), converted by one copy_ per
  // piece. Elements of a piece no logical run covers (a vocabulary shard's padded rows) stay 0.
  const int64_t held_begin = stage_ == 3 ? shard_begin_ : 0;
  const int64_t held_size = stage_ == 3 ? shard_size_ : layout_.padded();
  params_ = Zeros({held_size}, pdt);
  for (const auto& p : layout_.Pieces(held_begin, held_begin + held_size)) {
    const TpShard& sh = shards_[p.entry];
    const at::Tensor values = Zeros({p.count}, at::kDouble);
    double* v = values.data_ptr<double>();
    sh.ForEachLogicalRun(p.param_offset, p.count, [&](int64_t local, int64_t logical, int64_t n) {
      GenerateParamValues(*sh.spec, cfg_.seed, logical, n, v + (local - p.param_offset));
    });
    Slice(params_, p.flat_offset - held_begin, p.count).copy_(values);
  }
  at::Tensor owned = params_.narrow(0, shard_begin_ - held_begin, shard_size_);
  if (cfg_.precision.master_weights && pdt != at::kFloat) master_ = owned.to(at::kFloat);
  for (size_t i = 0; i < OptimizerSlotNames(cfg_.optimizer.kind).size(); ++i)
    slots_.push_back(Zeros({shard_size_}, at::kFloat));
  if (stage_ <= 2) grad_micro_ = Zeros({layout_.padded()}, adt);
  grad_acc_ = Zeros({stage_ <= 1 ? layout_.padded() : shard_size_}, adt);
}

const ParamMap& RankEngine::Materialize(size_t unit, bool requires_grad, ParamMap& scratch) {
  const PackPlan& plan = gather_plans_[unit];
  if (stage_ <= 2) {
    // params_ is never reallocated and a leaf only aliases it, so one set of leaves per unit
    // serves every pass; without autograd (NoGradGuard) a leaf is read as a plain tensor.
    ParamMap& map = leaves_[unit];
    if (map.empty()) {
      for (int e : plan.entries) {
        const FlatEntry& fe = layout_.entries()[e];
        map[fe.name] = SliceAs(params_, fe.offset, fe.shape).requires_grad_(true);
      }
    }
    return map;
  }
  at::Tensor run = Empty({plan.counts[dp_rank_]}, params_.options());
  PackShard(layout_, plan, dp_rank_, params_, run);
  at::Tensor gathered = Zeros({plan.numel}, params_.options());
  at::Tensor owned = gathered.narrow(0, 0, plan.owned);
  dp_group_->AllGather(run, owned, plan.counts);
  gathered_peak_ = std::max(gathered_peak_, Bytes(gathered));
  scratch.clear();
  int64_t pos = 0;
  for (int e : plan.entries) {
    const FlatEntry& fe = layout_.entries()[e];
    at::Tensor t = SliceAs(gathered, pos, fe.shape);  // a fresh view: a leaf of its own
    pos += fe.numel;
    scratch[fe.name] = requires_grad ? t.requires_grad_(true) : t;
  }
  return scratch;
}

void RankEngine::SinkGrads(size_t unit, const ParamMap& leaves, int64_t micro_step) {
  const auto adt = AccumulateDType();
  // A gradient as a flat tensor of the accumulate dtype, summed over its tensor-parallel group
  // where TpSyncGrad sums it (zeros for a parameter backward did not reach).
  auto flat = [&](int e, const at::Tensor& g) {
    const FlatEntry& fe = layout_.entries()[e];
    return TpSyncGrad(e, g.defined() ? AsDType(Reshape(g, {-1}), adt) : Zeros({fe.numel}, adt));
  };
  if (stage_ <= 2) {
    for (int e : gather_plans_[unit].entries) {
      const FlatEntry& fe = layout_.entries()[e];
      const at::Tensor g = TakeGrad(leaves.at(fe.name));
      if (g.defined() && !TpSyncs(e)) {
        AddRange(grad_micro_, fe.offset, Contiguous(g), 0, fe.numel);
      } else {
        Slice(grad_micro_, fe.offset, fe.numel).add_(flat(e, g));
      }
    }
    return;
  }
  // Stage 3: a gradient is reduce-scattered once it is complete (at its last use in backward);
  // partial gradients of parameters used again further down (tied embeddings) wait in pending_.
  for (int e : gather_plans_[unit].entries) {
    const FlatEntry& fe = layout_.entries()[e];
    auto it = pending_.find(fe.name);
    const at::Tensor part = flat(e, TakeGrad(leaves.at(fe.name)));
    at::Tensor g = it == pending_.end() ? part : it->second.add(part);
    pending_[fe.name] = g;
  }
  const PackPlan& plan = ready_plans_[unit];
  if (plan.entries.empty()) return;
  at::Tensor pack = Empty({plan.numel}, adt);
  int64_t pos = 0;
  for (int e : plan.entries) {
    const FlatEntry& fe = layout_.entries()[e];
    Slice(pack, pos, fe.numel).copy_(pending_.at(fe.name));
    pending_.erase(fe.name);
    pos += fe.numel;
  }
  reducer_->ReduceScatterPack(plan, pack, grad_acc_, /*copy=*/micro_step == 0);
}

bool RankEngine::ByHand() const { return HandBackwardApplies(cfg_.model, num_); }

TensorParallel* RankEngine::HandTp() const {
  return tp_ != nullptr && tp_->size() > 1 ? tp_.get() : nullptr;
}

bool RankEngine::TpSyncs(int entry) const {
  const TpReplication rep = shards_[entry].rep;
  return rep == TpReplication::kShared || (rep == TpReplication::kReplicated && tp_->sp());
}

at::Tensor RankEngine::TpSyncGrad(int entry, at::Tensor grad) {
  // Under sequence parallelism a replicated parameter saw only this rank's positions; a kv head
  // shared by several tp ranks saw only their query heads: sum the partial gradients.
  if (!TpSyncs(entry)) return grad;
  Communicator& group = shards_[entry].rep == TpReplication::kShared ? *kv_group_ : *tp_group_;
  group.AllReduce(grad, ReduceOp::kSum);
  return grad;
}

at::ScalarType RankEngine::AccumulateDType() const {
  const PrecisionConfig& p = cfg_.precision;
  // BUG (zoo: bf16.accumulate_in_bf16): with bf16 training the gradient accumulation buffers take
  // the training dtype instead of the configured accumulate dtype; only visible when several
  // micro-steps are summed.
  if (faults_.bf16_accumulate_in_bf16 && cfg_.batch.accumulation_steps > 1 &&
      (p.param == DType::kBf16 || p.compute == DType::kBf16))
    return at::kBFloat16;
  return ToScalarType(p.accumulate);
}

bool RankEngine::CountsInNorm(int entry) const {
  // The last stage's copy of a tied embedding is counted by the first stage.
  if (pp_rank_ > 0 && layout_.entries()[entry].name == "embed.wte") return false;
  switch (shards_[entry].rep) {
    case TpReplication::kSharded:
      return true;
    case TpReplication::kShared:
      return kv_group_->rank() == 0;
    case TpReplication::kReplicated:
      // BUG (zoo: clip.count_replicated_per_tp_rank): parameters replicated across tensor-parallel
      // ranks (norms, row-parallel biases) are counted once per tp rank in the global norm.
      return tp_rank_ == 0 || faults_.clip_count_replicated_per_tp_rank;
  }
  return true;
}

at::Tensor RankEngine::ForwardUnits(const std::vector<size_t>& units, at::Tensor x,
                                    const MicroBatch& mb, std::vector<UnitTape>& tapes) {
  tapes.clear();
  ParamMap scratch;
  if (!keep_graphs_) {
    at::NoGradGuard no_grad;
    HandTape unkept;
    for (size_t u : units) {
      tapes.push_back({x, at::Tensor(), {}});
      const ParamMap& params = Materialize(u, false, scratch);
      x = ByHand() ? HandForward(units_[u], cfg_.model, num_, params, x, mb, unkept, HandTp())
                   : UnitForward(units_[u], cfg_.model, num_, params, x, mb, tp_.get());
    }
    return x;
  }
  for (size_t u : units) {
    UnitTape t;
    if (ByHand()) {
      t.input = x;
      x = HandForward(units_[u], cfg_.model, num_, Materialize(u, true, scratch), x, mb, t.hand,
                      HandTp());
      tapes.push_back(std::move(t));
      continue;
    }
    if (units_[u].kind != UnitKind::kEmbed) t.input = x.detach().requires_grad_(true);
    t.output = UnitForward(units_[u], cfg_.model, num_, Materialize(u, true, scratch), t.input, mb,
                           tp_.get());
    x = t.output.detach();
    tapes.push_back(std::move(t));
  }
  return x;
}

at::Tensor RankEngine::BackwardUnits(const std::vector<size_t>& units,
                                     const std::vector<UnitTape>& tapes, at::Tensor grad_out,
                                     const MicroBatch& mb, int64_t micro_step) {
  const double loss_mult = scaler_.scale() / static_cast<double>(cfg_.batch.accumulation_steps);
  ParamMap scratch;
  for (size_t k = units.size(); k-- > 0;) {
    const size_t u = units[k];
    if (ByHand()) {
      const ParamMap& leaves = Materialize(u, true, scratch);
      HandTape recomputed;
      if (!keep_graphs_)
        HandForward(units_[u], cfg_.model, num_, leaves, tapes[k].input, mb, recomputed, HandTp());
      grad_out = HandBackward(keep_graphs_ ? tapes[k].hand : recomputed, grad_out, loss_mult);
      SinkGrads(u, leaves, micro_step);
      continue;
    }
    const bool embed = units_[u].kind == UnitKind::kEmbed;
    const ParamMap& leaves = Materialize(u, true, scratch);
    at::Tensor xin = tapes[k].input, out = tapes[k].output;
    if (!keep_graphs_) {  // recompute the unit's forward, with autograd
      if (!embed) xin = xin.detach().requires_grad_(true);
      out = UnitForward(units_[u], cfg_.model, num_, leaves, xin, mb, tp_.get());
    }
    if (units_[u].kind == UnitKind::kHead) {
      (out * loss_mult).backward();
    } else {
      out.backward(grad_out);
    }
    grad_out = embed ? at::Tensor() : xin.grad();
    SinkGrads(u, leaves, micro_step);
  }
  return grad_out;
}

void RankEngine::ReduceMicroStep(int64_t micro_step, bool boundary) {
  if (stage_ <= 1) {
    reducer_->AllReduceBuckets(grad_micro_);
    if (micro_step == 0) {
      grad_acc_.copy_(grad_micro_);
    } else {
      grad_acc_.add_(grad_micro_);
    }
  } else if (stage_ == 2) {
    reducer_->ReduceScatterBuckets(grad_micro_, grad_acc_, micro_step, boundary);
  }
}

double RankEngine::ForwardBackward(const MicroBatch& mb, int64_t micro_step, bool boundary) {
  std::vector<UnitTape> tapes;
  const double loss = ReadScalar(ForwardUnits(chunks_[0], at::Tensor(), mb, tapes));
  if (stage_ <= 2) grad_micro_.zero_();
  BackwardUnits(chunks_[0], tapes, at::Tensor(), mb, micro_step);
  ReduceMicroStep(micro_step, boundary);
  return loss;
}

double RankEngine::GlobalGradNorm(const at::Tensor& owned_grads) {
  // Each rank sums the squares of its dp shard (the same partition in every stage, so all stages
  // round alike), over the parameters it counts (replicas once); the partial sums are added across
  // the data-parallel and then the tensor-parallel group.
  // Stage 0 holds everything and splits the sum by the even partition (the shards of stages >= 1
  // are the same unless a fault resizes them).
  const int64_t size = stage_ == 0 ? layout_.EvenShardSize() : layout_.ShardSize(dp_rank_);
  const int64_t begin = stage_ == 0 ? dp_rank_ * size : layout_.ShardBegin(dp_rank_);
  // The squares in float64, summed in element order (a loop: one piece per tensor).
  const at::Tensor grads = owned_grads.to(at::kDouble).contiguous();
  const double* g = grads.data_ptr<double>();
  double sum = 0;
  for (const auto& p : layout_.Pieces(begin, begin + size)) {
    if (!CountsInNorm(p.entry)) continue;
    const double* x = g + (p.flat_offset - shard_begin_);
    for (int64_t i = 0; i < p.count; ++i) sum += x[i] * x[i];
  }
  at::Tensor sq = at::full({1}, sum, at::kDouble);
  dp_group_->AllReduce(sq, ReduceOp::kSum);
  tp_group_->AllReduce(sq, ReduceOp::kSum);
  pp_group_->AllReduce(sq, ReduceOp::kSum);
  return std::sqrt(ReadScalar(sq));
}

void RankEngine::OptimizerStep(int64_t update, int64_t schedule_at, const at::Tensor& grads) {
  const auto pdt = ToScalarType(cfg_.precision.param);
  at::Tensor held = stage_ == 3 ? params_ : params_.narrow(0, shard_begin_, shard_size_);
  at::Tensor target =
      master_.defined() ? master_ : (pdt == at::kFloat ? held : held.to(at::kFloat));
  at::Tensor g = grads.to(at::kFloat);
  OptimizerUpdate(AtUpdate(cfg_.optimizer, schedule_at), update + 1, target, g, slots_);
  if (!target.is_same(held)) held.copy_(target);
  if (stage_ == 1 || stage_ == 2) {
    std::vector<int64_t> counts;
    int64_t total = 0;
    for (int64_t r = 0; r < layout_.dp(); ++r) {
      counts.push_back(layout_.ShardSize(r));
      total += counts.back();
    }
    at::Tensor mine = held.clone();
    at::Tensor all = params_.narrow(0, 0, total);
    dp_group_->AllGather(mine, all, counts);
  }
}

void RankEngine::AddPieces(std::vector<TensorPiece>& out, const char* kind, const at::Tensor& buf,
                           int64_t buf_begin, int64_t begin, int64_t end) const {
  // Local shard elements -> logical tensor offsets (see Note [Independent observation]). One copy
  // of the range, each piece a view of it: a tensor-parallel column slice is one piece per row.
  if (end <= begin) return;
  const at::Tensor copy = buf.narrow(0, begin - buf_begin, end - begin).clone();
  for (const auto& p : layout_.Pieces(begin, end)) {
    shards_[p.entry].ForEachLogicalRun(
        p.param_offset, p.count, [&](int64_t local, int64_t logical, int64_t n) {
          out.push_back({kind, layout_.entries()[p.entry].name, logical,
                         Slice(copy, p.flat_offset - begin + (local - p.param_offset), n)});
        });
  }
}

MemoryAccount RankEngine::Memory() const {
  MemoryAccount m;
  m.bytes["params"] = Bytes(params_);
  m.bytes["master"] = Bytes(master_);
  int64_t opt = 0;
  for (const auto& s : slots_) opt += Bytes(s);
  m.bytes["optimizer"] = opt;
  m.bytes["grads"] = Bytes(grad_micro_) + Bytes(grad_acc_);
  // Elements of the held parameter buffer that belong to no parameter (alignment and dp padding).
  const int64_t held_begin = stage_ == 3 ? shard_begin_ : 0;
  int64_t data = 0;
  for (const auto& p : layout_.Pieces(held_begin, held_begin + params_.numel())) data += p.count;
  m.bytes["padding"] = (params_.numel() - data) * static_cast<int64_t>(params_.element_size());
  m.bytes["buffers_peak"] = std::max(gathered_peak_, reducer_->peak_buffer_bytes());
  return m;
}

double RankEngine::PaddingMaxAbs(const at::Tensor& buf, int64_t buf_begin) const {
  // Logical elements are data; a vocabulary shard's padded rows stay padding. Plain loops: a
  // tensor-parallel column slice is one run per row.
  std::vector<char> data(static_cast<size_t>(buf.numel()), 0);
  for (const auto& p : layout_.Pieces(buf_begin, buf_begin + buf.numel())) {
    shards_[p.entry].ForEachLogicalRun(
        p.param_offset, p.count, [&](int64_t local, int64_t, int64_t n) {
          const int64_t at = p.flat_offset - buf_begin + (local - p.param_offset);
          std::fill(data.begin() + at, data.begin() + at + n, 1);
        });
  }
  const at::Tensor v = buf.contiguous();
  double worst = 0;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, v.scalar_type(), "PaddingMaxAbs", [&] {
    const scalar_t* x = v.data_ptr<scalar_t>();
    for (size_t i = 0; i < data.size(); ++i) {
      if (data[i]) continue;
      const double xi = static_cast<double>(x[i]);  // exact: every dtype here widens to float64
      if (std::isnan(xi)) {                         // as at::max: a NaN anywhere is the maximum
        worst = xi;
        return;
      }
      worst = std::max(worst, std::fabs(xi));
    }
  });
  return worst;
}

void RankEngine::ReportState(RankStep& rs) const {
  const int64_t held_begin = stage_ == 3 ? shard_begin_ : 0;
  rs.padding_max_abs = PaddingMaxAbs(params_, held_begin);
  if (master_.defined())
    rs.padding_max_abs = std::max(rs.padding_max_abs, PaddingMaxAbs(master_, shard_begin_));
  for (const auto& slot : slots_)
    rs.padding_max_abs = std::max(rs.padding_max_abs, PaddingMaxAbs(slot, shard_begin_));
  AddPieces(rs.pieces, "param", params_, held_begin, held_begin, held_begin + params_.numel());
  if (master_.defined())
    AddPieces(rs.pieces, "master", master_, shard_begin_, shard_begin_, shard_begin_ + shard_size_);
  const auto names = OptimizerSlotNames(cfg_.optimizer.kind);
  for (size_t i = 0; i < names.size(); ++i)
    AddPieces(rs.pieces, names[i].c_str(), slots_[i], shard_begin_, shard_begin_,
              shard_begin_ + shard_size_);
}

bool RankEngine::AgreeOverflow(bool local) {
  // BUG (zoo: fp16.local_overflow_decision): each rank keeps its own decision; ranks whose shard
  // overflowed skip the step while the others step (and call different collectives).
  if (faults_.fp16_local_overflow_decision) return local;
  at::Tensor flag = at::full({1}, local ? 1.0 : 0.0, at::kDouble);
  dp_group_->AllReduce(flag, ReduceOp::kMax);
  tp_group_->AllReduce(flag, ReduceOp::kMax);
  pp_group_->AllReduce(flag, ReduceOp::kMax);
  return flag.item<double>() > 0;
}

RankObservations RankEngine::Run() {
  RankObservations obs;
  obs.rank = world_.rank();
  RunSteps(0, cfg_.steps, obs);
  return obs;
}

void RankEngine::RunSteps(int64_t first, int64_t last, RankObservations& obs,
                          const std::vector<Fingerprint>* log) {
  const int64_t accum = cfg_.batch.accumulation_steps;
  for (int64_t step = first; step < last; ++step) {
    RankStep rs;
    if (cfg_.parallel.pp > 1) {
      PipelineStep(step, rs);
    } else {
      for (int64_t m = 0; m < accum; ++m) {
        MicroBatch mb = MakeMicroBatch(cfg_, step, dp_rank_ * accum + m);
        rs.loss_sum += ForwardBackward(mb, m, m == accum - 1);
        rs.loss_count += 1;
      }
    }
    const int64_t acc_begin = stage_ <= 1 ? 0 : shard_begin_;
    at::Tensor owned = grad_acc_.narrow(0, shard_begin_ - acc_begin, shard_size_);
    rs.loss_scale = scaler_.scale();
    rs.skipped = scaler_.enabled() && AgreeOverflow(!owned.isfinite().all().item<bool>());
    const double old_scale = scaler_.scale();
    double norm_scaled = 0;
    if (!rs.skipped) norm_scaled = GlobalGradNorm(owned);  // before the scaler moves
    scaler_.Update(rs.skipped);
    // BUG (zoo: fp16.unscale_with_new_scale): the norm is unscaled with the scale the update just
    // produced; wrong exactly on steps where the scale changed, and it matters only with clipping.
    const double unscale_by = faults_.fp16_unscale_with_new_scale ? scaler_.scale() : old_scale;
    rs.grad_norm = rs.skipped ? INFINITY : norm_scaled / unscale_by;
    // Unscaling and clipping happen on an fp32 copy (as fp16 optimizers do): in a 16-bit
    // accumulate dtype they would underflow.
    at::Tensor grads32 = AsDType(grad_acc_, at::kFloat);
    if (old_scale != 1.0) grads32.mul_(1.0 / old_scale);
    if (stage_ <= 1) {
      AddPieces(rs.pieces, "grad", grads32, 0, 0, layout_.padded());
    } else {
      AddPieces(rs.pieces, "grad", grads32, shard_begin_, shard_begin_, shard_begin_ + shard_size_);
    }
    owned = grads32.narrow(0, shard_begin_ - acc_begin, shard_size_);
    if (!rs.skipped) {  // an overflow agreed by every rank changes nothing this step
      const double coef = ClipCoefficient(cfg_.clip_grad_norm, rs.grad_norm);
      if (coef < 1.0) owned.mul_(coef);
      // BUG (zoo: sched.counts_skipped_steps): the learning-rate schedule advances on the steps
      // an overflow skipped too (the step index instead of the count of applied updates).
      const int64_t schedule_at = faults_.sched_counts_skipped_steps ? step : updates_;
      OptimizerStep(updates_++, schedule_at, owned);  // Adam counts applied updates, not steps
    }
    ReportState(rs);
    obs.steps.push_back(std::move(rs));
    obs.memory.push_back(Memory());
    if (log) obs.collective_marks.push_back(static_cast<int64_t>(log->size()));
  }
}

}  // namespace paradiff
