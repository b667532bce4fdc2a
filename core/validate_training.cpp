// Validate (validate.h), second half: the rules of ZeRO, precision and loss scaling, the
// optimizer, checkpoint / reload layouts and fault names. Helpers are in validate.cpp.
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "core/fault_names.h"
#include "core/validate_rules.h"

namespace paradiff::validate_internal {
namespace {

constexpr int64_t kMaxZeroStage = 3;
constexpr double kMinLossScale =
    0x1p-24;  // precision.loss_scale.init / min: 1 / scale is a float32

// Adds "field=value must be > 0"; non-finite values get the "must be finite" message instead.
void Positive(Status& st, const std::string& field, double v) {
  if (Finite(st, field, v) && !(v > 0)) st.Add(field, field + "=" + Str(v) + " must be > 0");
}

// 0 <= v < 1 (momentum, betas).
void UnitInterval(Status& st, const std::string& field, double v) {
  if (Finite(st, field, v) && !(v >= 0 && v < 1))
    st.Add(field, field + "=" + Str(v) + " must be in [0, 1)");
}

bool IsPowerOfTwo(int64_t v) { return v >= 1 && (v & (v - 1)) == 0; }

// zero.shard_group: 0 (every dp rank), or groups of that many dp ranks that tile dp, under a stage
// that shards something. `at` names the layout ("" or "checkpoint.reload.").
void CheckShardGroup(Status& st, const std::string& at, int64_t group, int64_t stage, int64_t dp) {
  const std::string is = "zero.shard_group=" + Str(group);
  if (group < 0) {
    st.Add("zero.shard_group", is + " must be >= 0 (0: every dp rank)");
  } else if (group > 0 && stage == 0) {
    st.Add("zero.shard_group", is + " needs a ZeRO stage that shards (" + at + "zero_stage >= 1)");
  } else if (group > 0 && dp >= 1 && dp % group != 0) {
    st.Add("zero.shard_group", is + " must divide " + at + (at.empty() ? "parallel." : "") +
                                   "dp=" + Str(dp) + " (its groups tile the dp ranks)");
  }
}

// ZeRO-3 gathers each layer's parameters within one pipeline stage; it is not combined with pp.
void CheckZeroStagePipeline(Status& st, const std::string& stage_field, int64_t stage,
                            const std::string& pp_field, int64_t pp) {
  if (stage == 3 && pp > 1)
    st.Add(stage_field, stage_field + "=3 is not supported with " + pp_field +
                            ">1 (parameters are gathered per layer within one stage only)");
}

}  // namespace

void CheckZero(const Config& c, Status& st) {
  const ZeroConfig& z = c.zero;
  if (InRange(st, "zero.stage", z.stage, 0, kMaxZeroStage))
    CheckZeroStagePipeline(st, "zero.stage", z.stage, "parallel.pp", c.parallel.pp);
  AtLeast(st, "zero.bucket_elems", z.bucket_elems, 1);
  if (!IsPowerOfTwo(z.align_elems))
    st.Add("zero.align_elems", "zero.align_elems=" + Str(z.align_elems) +
                                   " must be a power of two >= 1 (shard boundaries are padded"
                                   " to a multiple of it)");
  CheckShardGroup(st, "", z.shard_group, z.stage, c.parallel.dp);
}

// Loss scaling only acts on fp16; a static or dynamic mode without any fp16 is allowed (it has no
// effect). Its parameters are range-checked whatever the mode.
void CheckPrecision(const Config& c, Status& st) {
  const LossScaleConfig& l = c.precision.loss_scale;
  const std::string p = "precision.loss_scale.";
  Positive(st, p + "init", l.init);
  if (Finite(st, p + "growth_factor", l.growth_factor) && !(l.growth_factor > 1))
    st.Add(p + "growth_factor", p + "growth_factor=" + Str(l.growth_factor) + " must be > 1");
  if (Finite(st, p + "backoff", l.backoff) && !(l.backoff > 0 && l.backoff < 1))
    st.Add(p + "backoff", p + "backoff=" + Str(l.backoff) + " must be in (0, 1)");
  AtLeast(st, p + "growth_interval", l.growth_interval, 1);
  AtLeast(st, p + "hysteresis", l.hysteresis, 1);
  Positive(st, p + "min", l.min);
  // Gradients are unscaled by multiplying with 1 / scale in float32 (kernels/rank_engine.cpp), so
  // the reciprocal must be a normal float32 value; 2^-24 leaves far more room than any real scale
  // needs (a scale of 1e-39 made the reciprocal infinite and 0 * inf a NaN gradient).
  for (const auto& [field, value] : {std::pair{p + "init", l.init}, std::pair{p + "min", l.min}})
    if (std::isfinite(value) && value > 0 && value < kMinLossScale)
      st.Add(field, field + "=" + Str(value) + " must be >= 2^-24 (" + Str(kMinLossScale) +
                        "; gradients are unscaled by 1 / scale in float32)");
  if (std::isfinite(l.init) && std::isfinite(l.min) && l.min > 0 && l.init > 0 && l.init < l.min)
    st.Add(p + "init", p + "init=" + Str(l.init) + " must be >= " + p + "min=" + Str(l.min));
}

// Each field is checked where the kind reads it and must keep its default where it does not: a
// field that changes nothing is an error, not a silent default.
static void CheckLrSchedule(const LrScheduleConfig& s, Status& st) {
  const std::string p = "optimizer.schedule.";
  const bool warmup = s.kind != LrScheduleKind::kConstant;
  const bool decay =
      s.kind == LrScheduleKind::kWarmupLinear || s.kind == LrScheduleKind::kWarmupCosine;
  const std::string kind = std::string(" (kind=") + Name(s.kind) + ")";
  // DeepSpeed's warmups take max(2, warmup_num_steps) steps; 2 keeps every declared value exact.
  if (warmup)
    AtLeast(st, p + "warmup_steps", s.warmup_steps, 2);
  else if (s.warmup_steps != 0)
    st.Add(p + "warmup_steps",
           p + "warmup_steps=" + Str(s.warmup_steps) + " must be 0: no warmup" + kind);
  if (decay && s.total_steps <= s.warmup_steps)
    st.Add(p + "total_steps", p + "total_steps=" + Str(s.total_steps) +
                                  " must be > warmup_steps=" + Str(s.warmup_steps) + kind);
  if (!decay && s.total_steps != 0)
    st.Add(p + "total_steps",
           p + "total_steps=" + Str(s.total_steps) + " must be 0: no decay" + kind);
  const bool cosine = s.kind == LrScheduleKind::kWarmupCosine;
  if (Finite(st, p + "min_ratio", s.min_ratio) && cosine && !(s.min_ratio >= 0 && s.min_ratio < 1))
    st.Add(p + "min_ratio", p + "min_ratio=" + Str(s.min_ratio) + " must be in [0, 1)");
  if (!cosine && s.min_ratio != 0)
    st.Add(p + "min_ratio", p + "min_ratio=" + Str(s.min_ratio) +
                                " must be 0: only warmup_cosine decays to a floor" + kind);
}

void CheckOptimizer(const Config& c, Status& st) {
  const OptimizerConfig& o = c.optimizer;
  Positive(st, "optimizer.lr", o.lr);
  UnitInterval(st, "optimizer.momentum", o.momentum);
  UnitInterval(st, "optimizer.betas[0]", o.beta1);
  UnitInterval(st, "optimizer.betas[1]", o.beta2);
  Positive(st, "optimizer.eps", o.eps);
  if (Finite(st, "optimizer.weight_decay", o.weight_decay) && o.weight_decay < 0)
    st.Add("optimizer.weight_decay",
           "optimizer.weight_decay=" + Str(o.weight_decay) + " must be >= 0");
  CheckLrSchedule(o.schedule, st);
}

// A checkpoint saved after step save_at is reloaded into the reload layout, which must itself be
// a layout the engine can run (the same tp and pp rules as parallel.*).
void CheckCheckpoint(const Config& c, Status& st) {
  const CheckpointConfig& k = c.checkpoint;
  if (AtLeast(st, "checkpoint.save_at", k.save_at, 0) && k.save_at > 0 && k.save_at >= c.steps)
    st.Add("checkpoint.save_at", "checkpoint.save_at=" + Str(k.save_at) + " must be < steps=" +
                                     Str(c.steps) + " (at least one step runs after the reload)");
  const ReloadConfig& r = k.reload;
  const bool tp_ok = AtLeast(st, "checkpoint.reload.tp", r.tp, 1);
  const bool pp_ok = AtLeast(st, "checkpoint.reload.pp", r.pp, 1);
  AtLeast(st, "checkpoint.reload.dp", r.dp, 1);
  const bool stage_ok = InRange(st, "checkpoint.reload.zero_stage", r.zero_stage, 0, kMaxZeroStage);
  if (k.save_at <= 0) return;
  if (tp_ok) CheckTensorParallel(c.model, r.tp, "checkpoint.reload.tp", st);
  if (pp_ok && c.model.layers >= 1 && c.model.layers < r.pp)
    st.Add("checkpoint.reload.pp", "checkpoint.reload.pp=" + Str(r.pp) +
                                       " exceeds model.layers=" + Str(c.model.layers) +
                                       " (every pipeline stage needs at least one layer)");
  if (stage_ok && pp_ok)
    CheckZeroStagePipeline(st, "checkpoint.reload.zero_stage", r.zero_stage, "checkpoint.reload.pp",
                           r.pp);
  if (c.zero.shard_group > 0)  // the reload keeps the shard groups' size
    CheckShardGroup(st, "checkpoint.reload.", c.zero.shard_group, r.zero_stage, r.dp);
}

void CheckFaults(const Config& c, Status& st) {
  std::string known;
  for (auto name : kFaultNames) known += (known.empty() ? "" : ", ") + std::string(name);
  for (size_t i = 0; i < c.faults.size(); ++i) {
    const std::string field = "faults[" + std::to_string(i) + "]";
    const std::string is = field + "=\"" + c.faults[i] + "\"";
    if (!IsKnownFault(c.faults[i])) {
      st.Add(field, is + " is not a known fault (known: " + known + ")");
      continue;
    }
    for (size_t j = 0; j < i; ++j) {
      if (c.faults[j] == c.faults[i]) {
        st.Add(field, is + " duplicates faults[" + std::to_string(j) + "]");
        break;
      }
    }
  }
}

}  // namespace paradiff::validate_internal
