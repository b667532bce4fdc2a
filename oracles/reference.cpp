#include "oracles/reference.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "comm/fresh.h"
#include "comm/views.h"
#include "core/config_json.h"
#include "core/lr_schedule.h"
#include "core/model_spec.h"
#include "core/rng.h"
#include "kernels/aten_sum.h"
#include "kernels/data.h"
#include "kernels/engine.h"
#include "kernels/hand_backward.h"
#include "kernels/model.h"
#include "kernels/numerics.h"
#include "kernels/optim.h"
#include "kernels/param_init.h"

namespace paradiff {

namespace {

// Note [Reference snapshots]: a step's recorded tensors must be copies. In the truth run the live
// state is already float64, so `.to(at::kDouble)` would return the live tensor itself; recording it
// would alias the parameters / optimizer slots of later steps (and the gradient that clipping
// scales in place), so every earlier step would compare against the final state, with a bound
// inflated by the same amount as the error. Snapshot() always copies. Evidence: docs/EVIDENCE.md.
at::Tensor Snapshot(const at::Tensor& t) {
  return Reshape(t.to(at::kDouble, /*non_blocking=*/false, /*copy=*/true), {-1});
}

// Note [Independent loss scale schedule]: the reference follows the loss scale schedule of
// docs/CONFIG.md with its own few lines, not kernels/loss_scaler.cpp. The numeric oracle requires
// the run's scale sequence to equal the reference's bit for bit (see Note [Loss scale sequence]),
// which tests the engine's scaler only if the two are written separately. Dynamic: an overflow
// resets the run of clean steps and spends one unit of hysteresis; with none left (<= 1) the scale
// backs off (not below min). growth_interval clean steps in a row grow the scale and restore the
// hysteresis. Static: constant. None: 1, and overflows are not looked for.
class ScaleSchedule {
 public:
  explicit ScaleSchedule(const LossScaleConfig& c)
      : c_(c), scale_(c.mode == LossScaleMode::kNone ? 1.0 : c.init), spare_(c.hysteresis) {}
  double scale() const { return scale_; }
  bool looks_for_overflow() const { return c_.mode != LossScaleMode::kNone; }
  void After(bool overflow) {
    if (c_.mode != LossScaleMode::kDynamic) return;
    if (overflow) {
      clean_ = 0;
      if (spare_ > 1) {
        --spare_;
      } else {
        scale_ = std::max(scale_ * c_.backoff, c_.min);
      }
    } else if (++clean_ == c_.growth_interval) {
      clean_ = 0;
      spare_ = c_.hysteresis;
      scale_ *= c_.growth_factor;
    }
  }

 private:
  LossScaleConfig c_;
  double scale_;
  int64_t spare_, clean_ = 0;
};

// Note [Mirrored reduction order]: the twin adds its micro-batch gradients (each already in the
// accumulate dtype, as a rank's gradient buffer holds them) in the order the run declares
// (see Note [Declared reduction structure] in core/grad_reduction.h). Reduced every micro-step:
// each micro-step's gradients are summed over dp (in rank order, in the reduce dtype), averaged,
// and accumulated over the micro-steps (the built-in engine without pipelining,
// comm/local_communicator.h). Reduced once per step: each rank first accumulates all its
// micro-batches (in micro-step order, or with pipelining in its schedule's backward order,
// docs/CONFIG.md `parallel.schedule`) and one sum over dp follows (pipeline flushes, DDP under
// no_sync). The average multiplies the sum by 1/dp in the accumulate dtype, or multiplies each
// rank's part by 1/dp, or divides it by dp, in the reduce dtype before the sum, as declared. So
// its float32 sums round like the run's (the exact oracle relies on that: one exact order does
// not make another exact), and the float64 truth follows the same order at no cost. `passes` is in
// global micro-batch order, rank-major (rank r's micro-step m is r * accumulation_steps + m). The
// order a pipeline stage runs its micro-batches' backward passes in (docs/CONFIG.md
// `parallel.schedule`): GPipe last micro-batch first, 1F1B and interleaved 1F1B (per chunk) first
// micro-batch first; "none" without pipelining. Part of the reference's cache key.
const char* StageOrder(const Config& cfg) {
  if (cfg.parallel.pp == 1) return "none";
  return cfg.parallel.schedule == Schedule::kGpipe ? "last_first" : "first_first";
}

// `passes`: each global micro-batch's flat gradient (see Note [Flat reference state]).
at::Tensor CombinePasses(const std::vector<at::Tensor>& passes, const Config& cfg,
                         const GradReduction& red, at::ScalarType rdt, at::ScalarType adt) {
  const int64_t A = cfg.batch.accumulation_steps, dp = static_cast<int64_t>(passes.size()) / A;
  const double average = 1.0 / static_cast<double>(dp);
  const GradReduction::Average how = red.TwinAverage();
  const bool before = how != GradReduction::Average::kAfterSum;
  // Sum over ranks of part(r) in the reduce dtype, back in the accumulate dtype, averaged.
  auto reduce = [&](const std::function<at::Tensor(int64_t)>& part) {
    auto term = [&](int64_t r) {
      at::Tensor t = AsDType(part(r), rdt);
      if (how == GradReduction::Average::kBeforeSum) return t.mul(average);
      if (how == GradReduction::Average::kDivideBeforeSum) return t.div(dp);
      return t;
    };
    at::Tensor sum = term(0);
    for (int64_t r = 1; r < dp; ++r) sum = sum.add(term(r));
    return before ? AsDType(sum, adt) : AsDType(sum, adt).mul_(average);
  };
  if (red.TwinReducesOncePerStep(cfg)) {
    const bool reverse = std::string(StageOrder(cfg)) == "last_first";
    return reduce([&](int64_t r) {
      auto pass = [&](int64_t k) { return passes[r * A + (reverse ? A - 1 - k : k)]; };
      at::Tensor local = pass(0);
      for (int64_t k = 1; k < A; ++k) local = local.add(pass(k));
      return local;
    });
  }
  at::Tensor acc;
  for (int64_t m = 0; m < A; ++m) {
    at::Tensor step = reduce([&](int64_t r) { return passes[r * A + m]; });
    acc = m == 0 ? step : acc.add(step);
  }
  return acc;
}

// The seed of random twin k started after step `first` - 1 (0: from the initial parameters).
uint64_t RandomTwinSeed(const Config& cfg, int64_t first, size_t k) {
  return CounterStream(cfg.seed, "random_twin", static_cast<uint64_t>(first)).Bits(k);
}

// Note [Flat reference state]: the reference keeps each kind of state (parameters, master
// weights, each optimizer slot) and each pass's gradients as one flat tensor in model order, with
// a shaped view per parameter, and runs everything elementwise (the sums over passes and ranks,
// the unscaling and clipping, the optimizer update) once on the flat tensor instead of once per
// parameter: the same operations on the same elements, so the same bits, in a few calls instead
// of a few hundred per step. The per-tensor gradient norms stay per tensor (a sum's order is its
// length's business). Recorded steps are views of one snapshot per kind (see Note [Reference
// snapshots]).
struct FlatState {
  at::Tensor flat;                // every parameter's elements, in spec order
  std::vector<at::Tensor> views;  // one per parameter, with its shape
};

FlatState ZeroFlat(const ModelSpec& spec, const std::vector<int64_t>& begin, at::ScalarType dt) {
  FlatState f;
  f.flat = Zeros({begin.back()}, dt);
  for (size_t i = 0; i < spec.params.size(); ++i)
    f.views.push_back(SliceAs(f.flat, begin[i], spec.params[i].shape));
  return f;
}

struct RefState {
  FlatState params;              // param dtype (truth: double)
  FlatState master;              // float32 copies; flat undefined without master weights
  std::vector<FlatState> slots;  // one per optimizer slot
};

}  // namespace

RefRun RunReference(const Config& cfg, const GradReduction& red, bool truth,
                    const std::vector<bool>* skips, const RefOrigin* origin,
                    std::optional<uint64_t> random_rounding) {
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const std::vector<Unit> units = BuildUnits(spec, cfg.model);
  const Numerics num = random_rounding
                           ? MakeRandomRoundingNumerics(cfg.precision.compute, *random_rounding)
                           : MakeNumerics(truth ? DType::kFp64 : cfg.precision.compute);
  const auto pdt = truth ? at::kDouble : ToScalarType(cfg.precision.param);
  const auto adt = truth ? at::kDouble : ToScalarType(cfg.precision.accumulate);
  const auto rdt = truth ? at::kDouble : ToScalarType(cfg.precision.reduce);
  const auto sdt = truth ? at::kDouble : at::kFloat;  // optimizer state / master dtype
  const bool cfg_has_master = cfg.precision.keeps_master();
  const bool has_master = !truth && cfg_has_master;
  const auto slot_names = OptimizerSlotNames(cfg.optimizer.kind);

  std::vector<int64_t> begin{0};  // each parameter's first element in a flat tensor
  for (const auto& ps : spec.params) begin.push_back(begin.back() + ps.numel());
  RefState st;
  st.params = ZeroFlat(spec, begin, pdt);
  if (has_master) st.master = ZeroFlat(spec, begin, at::kFloat);
  for (size_t k = 0; k < slot_names.size(); ++k) st.slots.push_back(ZeroFlat(spec, begin, sdt));
  // A restart takes the run's state (copied into the flat tensors, converted as `to` converts).
  // The truth has no separate master copy, so it starts from the run's master weights where the
  // run keeps them.
  const bool restore = origin != nullptr && origin->state != nullptr;
  for (size_t i = 0; i < spec.params.size(); ++i) {
    const ParamSpec& ps = spec.params[i];
    auto restored = [&](const std::string& kind) {
      return Reshape(origin->state->at(kind + ":" + ps.name), ps.shape);
    };
    if (restore) {
      st.params.views[i].copy_(restored(truth && cfg_has_master ? "master" : "param"));
      if (has_master) st.master.views[i].copy_(restored("master"));
      for (size_t k = 0; k < slot_names.size(); ++k)
        st.slots[k].views[i].copy_(restored(slot_names[k]));
    } else {
      st.params.views[i].copy_(GenerateParam(ps, cfg.seed));
    }
  }
  if (has_master && !restore) st.master.flat.copy_(st.params.flat);

  const int64_t M = MicroBatchesPerStep(cfg);
  ScaleSchedule scaler(cfg.precision.loss_scale);
  int64_t updates = 0;  // optimizer updates applied (skipped steps do not count)
  const int64_t first = origin != nullptr ? origin->step + 1 : 0;
  const int64_t last = origin != nullptr && origin->steps >= 0
                           ? std::min(cfg.steps, first + origin->steps)
                           : cfg.steps;
  for (int64_t step = 0; step < first; ++step) {  // the loss scale and the update count so far
    const bool skipped = origin->skips.at(step);
    scaler.After(skipped);
    if (!skipped) ++updates;
  }
  // The parameters as autograd leaves, once: they alias st.params, which the updates below change
  // in place only.
  ParamMap leaves;
  for (size_t i = 0; i < spec.params.size(); ++i)
    leaves[spec.params[i].name] = st.params.views[i].detach().requires_grad_(true);
  RefRun run;
  for (int64_t step = first; step < last; ++step) {
    RefStep rs;
    const double scale =
        scaler.scale() * (origin != nullptr && step == first ? origin->scale_factor : 1.0);
    double loss_sum = 0;
    // Note [Batched truth]: the twin mirrors the run's micro-batches one by one (their rounding is
    // what it calibrates); the truth has no rounding worth mirroring, so it takes the step's M
    // micro-batches as one batch: every micro-batch has micro_batch x seq_len positions, so the
    // mean over the batch is the mean of the micro-batch means and its gradient their average,
    // up to float64 summation order (~1e-16, far below every tolerance floor). One forward and
    // backward instead of M. Not for exact_linear, whose truth must round exactly as the
    // micro-batch sums do wherever they are exact (oracles/exact_oracle.h).
    const bool batched = truth && cfg.model.kind != ModelKind::kExactLinear;
    const int64_t passes = batched ? 1 : M;
    // Note [Mirrored loss multiplier]: a run scales each micro-batch's loss by
    // scale / accumulation_steps and divides the data-parallel sum by dp afterwards; the twin does
    // the same (not scale / M), so that each micro-batch's 16-bit backward rounds exactly as a
    // rank's does. With 1 / M instead, a dp that is not a power of two puts every gradient at
    // another binade offset and makes the twin's error an independent sample, now and then too
    // small for a tensor of few elements. Evidence: docs/EVIDENCE.md. The dp average and the
    // summation order: See Note [Mirrored reduction order].
    // After a checkpoint's reload the run has the reload layout: its split into accumulation steps
    // and its pipeline order (the global batch is the same).
    const Config layout = LayoutAtStep(cfg, step);
    const double loss_mult =
        batched ? 1.0 : 1.0 / static_cast<double>(layout.batch.accumulation_steps);
    std::vector<at::Tensor> pass_grads(passes);  // [global micro-batch], flat
    for (int64_t g = 0; g < passes; ++g) {
      MicroBatch mb = MakeMicroBatch(cfg, step, g);
      if (batched && M > 1) {
        std::vector<at::Tensor> inputs{mb.inputs}, targets{mb.targets};
        for (int64_t k = 1; k < M; ++k) {
          MicroBatch more = MakeMicroBatch(cfg, step, k);
          inputs.push_back(more.inputs);
          targets.push_back(more.targets);
        }
        mb.inputs = at::cat(inputs, 0);
        mb.targets = at::cat(targets, 0);
      }
      loss_sum += OneDevicePass(units, cfg.model, num, leaves, mb, scale * loss_mult);
      std::vector<at::Tensor> parts;
      for (size_t i = 0; i < spec.params.size(); ++i) {
        at::Tensor gi = TakeGrad(leaves[spec.params[i].name]);
        if (!gi.defined()) gi = at::zeros_like(st.params.views[i]);
        parts.push_back(Reshape(AsDType(gi, adt), {-1}));
      }
      pass_grads[g] = at::cat(parts);
    }
    rs.loss = loss_sum / static_cast<double>(passes);
    at::Tensor acc = batched ? pass_grads[0] : CombinePasses(pass_grads, layout, red, rdt, adt);
    // Overflow: the twin decides from its own gradients; the truth (float64 never overflows)
    // follows the twin's decisions so both skip the same steps.
    bool overflow = false;
    if (skips != nullptr) {
      overflow = step < static_cast<int64_t>(skips->size()) && (*skips)[step];
    } else if (scaler.looks_for_overflow()) {
      overflow = !AllFinite(acc);
    }
    rs.skipped = overflow;
    rs.loss_scale = scale;
    double sq = 0;  // per tensor, in model order
    const at::Tensor acc64 = AsDType(acc, at::kDouble);
    for (size_t i = 0; i < spec.params.size(); ++i)
      sq += SumOfSquares(Slice(acc64, begin[i], begin[i + 1] - begin[i]));
    scaler.After(overflow);
    rs.grad_norm = overflow ? INFINITY : std::sqrt(sq) / scale;
    // Unscale (and below, clip) in the optimizer's dtype, never in a 16-bit accumulate dtype.
    acc = AsDType(acc, sdt);
    if (scale != 1.0) acc.mul_(1.0 / scale);
    const double coef = ClipCoefficient(cfg.clip_grad_norm, rs.grad_norm);
    auto record = [&](const std::string& kind, const at::Tensor& flat) {
      const at::Tensor copy = Snapshot(flat);
      for (size_t i = 0; i < spec.params.size(); ++i)
        rs.tensors[kind + ":" + spec.params[i].name] =
            Slice(copy, begin[i], begin[i + 1] - begin[i]);
    };
    record("grad", acc);
    if (coef < 1.0) acc.mul_(coef);
    if (!overflow) {
      at::Tensor target =
          has_master ? st.master.flat : (pdt == sdt ? st.params.flat : st.params.flat.to(sdt));
      std::vector<at::Tensor> slots;
      for (const auto& s : st.slots) slots.push_back(s.flat);
      OptimizerUpdate(AtUpdate(cfg.optimizer, updates), updates + 1, target, acc, slots);
      if (!target.is_same(st.params.flat)) st.params.flat.copy_(target);
    }
    record("param", st.params.flat);
    if (has_master) record("master", st.master.flat);
    // The truth has no separate master copy: its float64 parameters are the master weights.
    if (truth && cfg_has_master)
      for (const auto& ps : spec.params)
        rs.tensors["master:" + ps.name] = rs.tensors["param:" + ps.name];
    for (size_t k = 0; k < slot_names.size(); ++k) record(slot_names[k], st.slots[k].flat);
    if (!overflow) ++updates;
    run.steps.push_back(std::move(rs));
  }
  return run;
}

int64_t RandomTwinsFor(const Config& cfg, bool same_model_arithmetic) {
  const DType c = cfg.precision.compute;
  return !same_model_arithmetic && (c == DType::kBf16 || c == DType::kFp16) ? kRandomTwins : 0;
}

std::string ReferenceKey(const Config& cfg, const GradReduction& red, int64_t random_twins) {
  nlohmann::json j = ConfigToJson(cfg);
  nlohmann::json key;
  for (const char* k : {"seed", "steps", "model", "precision", "optimizer", "clip_grad_norm"})
    key[k] = j[k];
  key["micro_batch"] = cfg.batch.micro_batch;
  key["micro_batches_per_step"] = MicroBatchesPerStep(cfg);
  // The twin's loss multiplier and summation order follow the run's (see Note [Mirrored loss
  // multiplier], see Note [Mirrored reduction order]): accumulation steps (hence dp), and with
  // pipelining the order a stage's backward passes run in. A reference cached for one split of
  // the same micro-batches rounds like another split, not like this one.
  key["accumulation_steps"] = cfg.batch.accumulation_steps;
  key["stage_order"] = StageOrder(cfg);
  // ... and the declared reduction structure (see Note [Declared reduction structure]).
  key["reduction"] = {red.TwinReducesOncePerStep(cfg), Name(red.TwinAverage())};
  key["random_twins"] = random_twins;
  if (cfg.checkpoint.save_at > 0) {  // from the save on, the reload layout's (LayoutAtStep)
    const Config reload = LayoutAtStep(cfg, cfg.checkpoint.save_at);
    key["reload"] = {cfg.checkpoint.save_at, reload.batch.accumulation_steps, StageOrder(reload),
                     red.TwinReducesOncePerStep(reload)};
  }
  return key.dump();
}

// Note [Local restart]: from step 1 on, the run and the reference step from states that already
// differ by rounding, and the reference pair calibrates only its own trajectory's sensitivity to
// such differences. A model can be far more sensitive along the run's direction than along the
// twin's (a layer norm over two nearly equal numbers can turn an ulp-level state difference into
// a large gradient difference in one step, while the twin's own error stays small). The
// numeric oracle then asks a narrower question (numeric_oracle.cpp, see Note [Restarted
// comparison]): does the run's step follow from the run's own state? This restarts the pair from
// that state: the twin from the run's parameters, master weights and optimizer slots, the truth
// from the same values in float64 (from the master weights where the config keeps them), the loss
// scale and update count replayed from the overflow decisions so far. The state is the run's
// assembled observation (each rank's local shards), never the engine's own gather, and the
// reference code is the same that runs from the initial parameters. Evidence: docs/EVIDENCE.md.
RefPair RestartReferencePair(const Config& cfg, const RefPair& base, const RefOrigin& origin) {
  RefPair pair;
  pair.reduction = base.reduction;
  pair.same = RunReference(cfg, pair.reduction, false, nullptr, &origin);
  std::vector<bool> skips = origin.skips;
  skips.resize(static_cast<size_t>(origin.step) + 1);
  for (const bool s : SkippedSteps(pair.same)) skips.push_back(s);
  pair.truth = RunReference(cfg, pair.reduction, true, &skips, &origin);
  for (size_t k = 0; k < base.random.size(); ++k)
    pair.random.push_back(RunReference(cfg, pair.reduction, false, &skips, &origin,
                                       RandomTwinSeed(cfg, origin.step + 1, k)));
  const bool master = cfg.precision.keeps_master();
  auto splice = [&](const RefRun& before, RefRun& after, bool truth) {
    std::vector<RefStep> steps(before.steps.begin(), before.steps.begin() + origin.step + 1);
    steps.back().skipped = origin.skips.at(origin.step);  // the run's decision, where they differ
    for (auto& [key, value] : steps.back().tensors) {
      if (key.rfind("grad:", 0) == 0) continue;
      const bool param = key.rfind("param:", 0) == 0;
      const std::string from = truth && master && param ? "master:" + key.substr(6) : key;
      value = origin.state->at(from);
    }
    for (auto& s : after.steps) steps.push_back(std::move(s));
    after.steps = std::move(steps);
  };
  splice(base.same, pair.same, false);
  splice(base.truth, pair.truth, true);
  for (size_t k = 0; k < base.random.size(); ++k) splice(base.random[k], pair.random[k], false);
  return pair;
}

bool TwinOverflows(const Config& cfg, const GradReduction& red, RefOrigin origin) {
  origin.steps = 1;
  const RefRun run = RunReference(cfg, red, false, nullptr, &origin);
  return run.steps.at(0).skipped;
}

std::vector<bool> SkippedSteps(const RefRun& run) {
  std::vector<bool> out;
  for (const auto& s : run.steps) out.push_back(s.skipped);
  return out;
}

RefPair RunReferencePair(const Config& cfg, const GradReduction& red, int64_t random_twins) {
  RefPair pair;
  pair.reduction = red;
  pair.same = RunReference(cfg, red, false);
  const std::vector<bool> skips = SkippedSteps(pair.same);
  pair.truth = RunReference(cfg, red, true, &skips);
  for (int64_t k = 0; k < random_twins; ++k)
    pair.random.push_back(
        RunReference(cfg, red, false, &skips, nullptr, RandomTwinSeed(cfg, 0, k)));
  return pair;
}

std::shared_ptr<const RefPair> ReferenceCache::Get(const Config& cfg, const GradReduction& red,
                                                   int64_t random_twins) {
  const std::string key = ReferenceKey(cfg, red, random_twins);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      ++hits_;
      return it->second;
    }
    ++misses_;
  }
  auto pair = std::make_shared<RefPair>(RunReferencePair(cfg, red, random_twins));
  std::lock_guard<std::mutex> lock(mu_);
  map_[key] = pair;
  order_.push_back(key);
  while (order_.size() > capacity_) {
    map_.erase(order_.front());
    order_.erase(order_.begin());
  }
  return pair;
}

std::shared_ptr<const RefPair> GetReference(const Config& cfg, const GradReduction& red,
                                            ReferenceCache* cache, int64_t random_twins) {
  if (cache != nullptr) return cache->Get(cfg, red, random_twins);
  return std::make_shared<RefPair>(RunReferencePair(cfg, red, random_twins));
}

}  // namespace paradiff
