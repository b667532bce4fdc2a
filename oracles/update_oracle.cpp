#include "oracles/update_oracle.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "comm/fresh.h"
#include "core/lr_schedule.h"
#include "core/model_spec.h"
#include "kernels/numerics.h"
#include "kernels/optim.h"  // OptimizerSlotNames
#include "kernels/param_init.h"
#include "oracles/assemble.h"
#include "oracles/bitwise.h"
#include "oracles/numeric_oracle.h"
#include "oracles/tolerance.h"

namespace paradiff {

namespace {

constexpr double kUpdateRoundings = 16;  // see Note [Update bound]
constexpr double kFp32Unit = 0x1p-24;
// Below 2^-126 float32 rounds to a fixed spacing of 2^-149 instead of u relative (Adam's second
// moment of a tiny gradient lives there): the same number of roundings, absolute.
constexpr double kSubnormalFloor = kUpdateRoundings * 0x1p-149;

// The largest finite value of the dtype the run's optimizer computes in.
double MaxFinite(DType d) {
  switch (d) {
    case DType::kFp16:
      return static_cast<double>(std::numeric_limits<c10::Half>::max());
    case DType::kBf16:
      return static_cast<double>(std::numeric_limits<c10::BFloat16>::max());
    case DType::kFp32:
      return std::numeric_limits<float>::max();
    default:
      return std::numeric_limits<double>::max();
  }
}

// An expected value and the magnitude its rounding error scales with (see Note [Update bound]).
struct Expect {
  at::Tensor value;
  at::Tensor mag;
};

// The run's state, every tensor of a kind flattened into one vector in model order (one set of
// operators per step instead of one per tensor), in float64.
struct State {
  at::Tensor param, master;  // master undefined without master weights
  std::map<std::string, at::Tensor> slots;
  std::map<std::string, at::Tensor> slot_mags;  // what each slot rounds at (Magnitudes)
};

// Every tensor of `kind` at one step, concatenated in model order.
at::Tensor Flat(const AssembledStep& as, const ModelSpec& spec, const std::string& kind) {
  std::vector<at::Tensor> parts;
  for (const auto& ps : spec.params) parts.push_back(as.tensors.at(kind + ":" + ps.name));
  return at::cat(parts);
}

// Note [Partial state rounds at its addends]: a framework that keeps a value as a tensor-parallel
// group's unreduced addends (see Note [Partial pieces] in targets/run_dir.h) computes on each
// addend: DTensor's SGD adds the decay term, split into tp parts, to each rank's Partial gradient
// and scales each rank's Partial momentum, then reduces. Each of those roundings is within u of
// its addend, and the addends can cancel in their sum, so the update bound scales the gradient
// and the previous state by the sum of their addends' magnitudes where they were partial
// (AssembledStep::addend_abs; |x| elsewhere). The new state's own addends are bounded by the same
// sum (triangle inequality), so the terms that follow keep the bound, and so is the difference
// between paradiff's sum of the addends and the framework's in another order ((tp - 1) u of the
// magnitudes: within kUpdateRoundings for any tp paradiff draws). Evidence: docs/FINDINGS.md
// (torch2_tp_sp.json, seed 846: ratios 2.4 - 3.3 on SGD directions at momentum 0 without it).
//
// What each element of `flat` (Flat(as, spec, kind)) rounds at: |flat|, or its addends'
// magnitudes where they were partial.
at::Tensor FlatMagnitude(const AssembledStep& as, const ModelSpec& spec, const std::string& kind,
                         const at::Tensor& flat) {
  at::Tensor mag = flat.abs();
  int64_t begin = 0;
  for (const auto& ps : spec.params) {
    auto it = as.addend_abs.find(kind + ":" + ps.name);
    if (it != as.addend_abs.end()) {
      at::Tensor part = mag.narrow(0, begin, ps.numel());
      part.copy_(at::maximum(part, it->second));
    }
    begin += ps.numel();
  }
  return mag;
}

// x rounded to the parameter dtype and back (round to nearest even, as the run's copies are).
at::Tensor RoundTo(const at::Tensor& x, DType d) {
  return x.to(at::kFloat).to(ToScalarType(d)).to(at::kDouble);
}

// The clip coefficient of docs/CONFIG.md (as torch's clip_grad_norm_), written here rather than
// taken from kernels/optim.h, for the same reason as the optimizer below.
double Clip(double max_norm, double norm) {
  if (max_norm <= 0) return 1.0;
  return std::min(1.0, max_norm / (norm + 1e-6));
}

// The optimizer of docs/CONFIG.md on float64, with magnitudes. `g` is the clipped gradient, `t`
// the 1-based count of applied updates. Fills the expected slots; returns the new target
// (master weights, or the parameters themselves). `unit`: the relative rounding the returned
// magnitudes are scaled by; kSubnormalFloor / unit is added to every gradient element's magnitude
// (see Note [Subnormal gradients]). `gerr`: each gradient element's absolute error beyond that
// (see Note [Clip in the accumulation dtype]); undefined where there is none.
// `held_max`: the largest finite value of the dtype the run computes the update in (see Note
// [Quotient overflow]).
// Note [Float32 optimizer hyperparameters]: an optimizer that holds beta in float32 (DeepSpeed's
// CPU Adam, ops/csrc/includes/cpu_adam.h) uses b = fl(beta), |b - beta| <= u beta, u = 2^-24. Then
// b m0 + (1 - b) g differs from beta m0 + (1 - beta) g by |b - beta| (|m0| + |g|) <= u beta
// (|m0| + |g|) (and the second moment by u beta2 (v0 + g^2)): for beta2 = 0.999 that is 1.3e-5
// relative, 200 float32 roundings, all of it the cancellation in 1 - b. Its powers b^t (std::pow
// or a running product, then stored in float32) are within 2 t u beta^t of beta^t, so each bias
// correction 1 - b^t is within 2 t u beta^t / (1 - beta^t) relative, and the update
// q lr / (1 - b1^t) with q = m / (sqrt(v) / sqrt(1 - b2^t) + eps) moves by |q| lr / bc1 times
// d(beta1) + d(beta2) / 2. Declared by the target file ("optimizer_arithmetic"), never assumed.
struct HyperDrift {
  bool on = false;
  double Beta(double beta) const { return on ? kFp32Unit * beta : 0.0; }
  double Correction(double beta, int64_t t) const {
    if (!on) return 0.0;
    const double bt = std::pow(beta, static_cast<double>(t));
    return bt < 1.0 ? 2.0 * static_cast<double>(t) * kFp32Unit * bt / (1.0 - bt) : 0.0;
  }
};

Expect Step(const OptimizerConfig& o, int64_t t, const at::Tensor& target, const at::Tensor& g,
            const at::Tensor& g_mag, double unit, double held_max, const State& prev,
            const HyperDrift& drift, const at::Tensor& gerr, std::map<std::string, Expect>& out) {
  // One loop over the elements, each the float64 expression written below in order (no fused
  // multiply-adds: this file compiles with -ffp-contract=off).
  const int64_t n = target.numel();
  std::vector<at::Tensor> held;  // the contiguous inputs, alive through the loops
  auto in = [&held](const at::Tensor& x) {
    return held.emplace_back(AsFloat64(x)).data_ptr<double>();
  };
  auto fresh = [n] { return Empty({n}, at::kDouble); };
  const double *tp = in(target), *gv = in(g), *gm = in(g_mag);
  const double* ge = gerr.defined() ? in(gerr) : nullptr;
  const double floor = kSubnormalFloor / unit;
  // The error a gradient error e (`gerr`) adds: e to the momentum or first moment's new term, and
  // (g + e)^2 - g^2 <= 2 |g| e + e^2 to the second moment's (divided by unit, as the caller scales
  // magnitudes back).
  // Element i's parameter after AdamW's decoupled decay, its gradient with L2 decay folded in
  // (SGD, Adam), and the gradient's magnitude.
  struct Decayed {
    double p, gp, gmag;
  };
  auto decayed = [&](int64_t i) {
    Decayed d{tp[i], gv[i], gm[i] + floor};
    if (o.kind == OptimizerKind::kAdamW) {
      d.p = tp[i] * (1.0 - o.lr * o.weight_decay);
    } else if (o.weight_decay != 0) {
      d.gp = gv[i] + tp[i] * o.weight_decay;
      d.gmag = d.gmag + std::fabs(tp[i]) * o.weight_decay;
    }
    return d;
  };
  Expect next{fresh(), fresh()};
  double *nv = next.value.data_ptr<double>(), *nm = next.mag.data_ptr<double>();
  if (o.kind == OptimizerKind::kSgd) {
    const double *buf = in(prev.slots.at("momentum")), *bmag = in(prev.slot_mags.at("momentum"));
    Expect b{fresh(), fresh()};
    double *bv = b.value.data_ptr<double>(), *bm = b.mag.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) {
      const auto [p, gp, gmag] = decayed(i);
      double value = gp, mag = gmag;
      if (t != 1) {
        value = buf[i] * o.momentum + gp;
        mag = bmag[i] * o.momentum + gmag;
      }
      if (ge != nullptr) mag = mag + ge[i] / unit;
      bv[i] = value;
      bm[i] = mag;
      nv[i] = p - value * o.lr;
      nm[i] = std::fabs(p) + mag * o.lr;
    }
    out["momentum"] = b;
    return next;
  }
  const double *m0 = in(prev.slots.at("exp_avg")), *v0 = in(prev.slots.at("exp_avg_sq"));
  const double* m0mag = in(prev.slot_mags.at("exp_avg"));
  Expect m{fresh(), fresh()}, v{fresh(), fresh()};
  double *mv = m.value.data_ptr<double>(), *mm = m.mag.data_ptr<double>();
  double *vv = v.value.data_ptr<double>(), *vm = v.mag.data_ptr<double>();
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
  const double sqrt_bc2 = std::sqrt(bc2), step_lr = o.lr / bc1;
  const double drift1 = drift.Beta(o.beta1) / unit, drift2 = drift.Beta(o.beta2) / unit;
  const double gerr1 = (1.0 - o.beta1) / unit, gerr2 = (1.0 - o.beta2) / unit;
  const double corrections =
      (drift.Correction(o.beta1, t) + drift.Correction(o.beta2, t) / 2) / unit;
  for (int64_t i = 0; i < n; ++i) {
    const auto [p, gp, gmag] = decayed(i);
    const double m_value = m0[i] * o.beta1 + gp * (1.0 - o.beta1);
    double m_mag = m0mag[i] * o.beta1 + gmag * (1.0 - o.beta1) + (m0mag[i] + gmag) * drift1;
    const double v_value = v0[i] * o.beta2 + gp * gp * (1.0 - o.beta2);
    double v_mag = v0[i] * o.beta2 + gmag * gmag * (1.0 - o.beta2) + (v0[i] + gmag * gmag) * drift2;
    if (ge != nullptr) {
      m_mag = m_mag + ge[i] * gerr1;
      v_mag = v_mag + (std::fabs(gp) * ge[i] * 2.0 + ge[i] * ge[i]) * gerr2;
    }
    mv[i] = m_value, mm[i] = m_mag, vv[i] = v_value, vm[i] = v_mag;
    const double denom = std::sqrt(v_value) / sqrt_bc2 + o.eps;
    // Note [Quotient overflow]: the run forms m / denom before scaling it by lr; where that
    // quotient exceeds its dtype's range (a second moment near 0 with an eps as small as 1e-45, or
    // beta2 = 0 and a vanishing gradient) the run holds inf from there on: its arithmetic, not a
    // finding. Such elements are expected inf, which is not judged (Ratio).
    // Evidence: docs/EVIDENCE.md.
    double q = m_value / denom;
    if (std::fabs(q) > held_max) q = INFINITY;
    // Note [Rounded second moment]: the bound above treats denom as exact, but the run's second
    // moment carries its own rounding (v.mag * unit, absolute kSubnormalFloor where it is
    // subnormal), and sqrt turns a subnormal v's absolute error into a large relative one; the sum
    // sqrt(v) + eps rounds absolutely in the subnormal range as well (an eps of 1e-45 is 2^-149 in
    // float32, 1.4 times larger). With a denominator that small the quotient m / denom can move
    // by orders of magnitude. The smallest denominator those roundings allow bounds the quotient's
    // error (none where it can reach 0: not judged); an absolute term, so divided by unit here as
    // the caller scales it back. Evidence: docs/EVIDENCE.md.
    const double v_err = v_mag * unit + kSubnormalFloor;
    // std::max(x, 0.0) keeps a NaN x, as clamp_min does.
    const double denom_lo = std::max(
        std::sqrt(std::max(v_value - v_err, 0.0)) / sqrt_bc2 + (o.eps - kSubnormalFloor), 0.0);
    const double q_err =
        m_value == 0 ? 0.0 : std::fabs(m_value) * (1.0 / denom_lo - 1.0 / denom) / unit;
    nv[i] = p - q * step_lr;
    nm[i] = std::fabs(p) + (m_mag / denom + q_err + std::fabs(q) * corrections) * step_lr;
  }
  out["exp_avg"] = m;
  out["exp_avg_sq"] = v;
  return next;
}

// |actual - expected| / bound for one element; 0 where the expectation is not finite (not
// judged) or the two are equal, inf where only the actual value is not finite; NaN where the
// bound is.
double Ratio(double actual, double expected, double bound) {
  const double diff = std::isfinite(actual) ? std::fabs(actual - expected) : INFINITY;
  if (!std::isfinite(expected) || diff == 0) return 0;
  return diff / (std::isnan(bound) ? bound : std::max(bound, 1e-300));
}

// The three float64 vectors of one kind's check, read in plain loops (one pass per step and kind
// instead of a dozen tensor calls on the whole state).
struct Judged {
  at::Tensor actual, expected, bound;  // contiguous float64
  const double* a() const { return actual.data_ptr<double>(); }
  const double* e() const { return expected.data_ptr<double>(); }
  const double* b() const { return bound.data_ptr<double>(); }
};

Judged Judge(const at::Tensor& actual, const Expect& e) {
  return {AsFloat64(actual), AsFloat64(e.value), AsFloat64(e.mag)};
}

// The first element whose ratio exceeds 1, or -1.
int64_t FirstViolation(const Judged& j) {
  const double *a = j.a(), *e = j.e(), *b = j.b();
  for (int64_t i = 0; i < j.actual.numel(); ++i)
    if (Ratio(a[i], e[i], b[i]) > 1.0) return i;
  return -1;
}

// The worst element of elements [begin, begin + n), as a Comparison (index relative to begin):
// the first largest ratio, a NaN ratio counting as the largest (as at::argmax counts it).
Comparison Worst(const Judged& j, int64_t begin, int64_t n) {
  const double *a = j.a() + begin, *e = j.e() + begin, *b = j.b() + begin;
  int64_t worst = 0;
  double worst_ratio = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    const double r = Ratio(a[i], e[i], b[i]);
    if (std::isnan(worst_ratio)) break;
    if (std::isnan(r) || r > worst_ratio) {
      worst = i;
      worst_ratio = r;
    }
  }
  Comparison w;
  w.index = worst;
  w.expected = e[worst];
  w.actual = a[worst];
  w.error = std::isfinite(w.actual) ? std::fabs(w.actual - w.expected) : INFINITY;
  w.bound = b[worst];
  if (w.bound == 0 &&
      w.error > 0) {  // must be equal: the error in float32 units (see Note [Discrete bounds])
    w.error /= kFp32Unit * std::max(std::fabs(w.expected), 0x1p-126);
    w.bound = kDiscreteBound;
  }
  return w;
}

}  // namespace

Verdict UpdateOracle::Check(const OracleInput& in) const {
  if (in.assembly == nullptr) return SkipVerdict(name(), "the engine failed; nothing to compare");
  const Assembly& a = *in.assembly;
  if (!a.reporting.grad) return SkipVerdict(name(), "the run does not report its gradients");
  if (!a.reporting.optimizer)
    return SkipVerdict(name(), "the run does not report its optimizer state");
  const Config& cfg = in.cfg;
  const PrecisionConfig& pr = cfg.precision;
  const bool has_master = pr.keeps_master();
  const bool param16 = PrecisionBits(pr.param) < PrecisionBits(DType::kFp32);
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const auto slot_names = OptimizerSlotNames(cfg.optimizer.kind);
  int64_t grad_elems = 0;
  for (const auto& ps : spec.params) grad_elems += ps.numel();

  std::vector<int64_t> ends;  // end offset of each tensor in the flat vectors
  State prev;                 // the run's state before the step
  {
    std::vector<at::Tensor> init;
    for (const auto& ps : spec.params) {
      init.push_back(GenerateParam(ps, cfg.seed).to(at::kDouble).reshape({-1}));
      ends.push_back((ends.empty() ? 0 : ends.back()) + ps.numel());
    }
    prev.param = RoundTo(at::cat(init), pr.param);
    if (has_master) prev.master = prev.param.clone();
    for (const auto& n : slot_names) {
      prev.slots[n] = Zeros({grad_elems}, at::kDouble);
      prev.slot_mags[n] = prev.slots[n];
    }
  }
  int64_t applied = 0;
  for (int64_t step = 0; step < static_cast<int64_t>(a.steps.size()); ++step) {
    const AssembledStep& as = a.steps[step];
    const double coef = as.skipped ? 1.0 : Clip(cfg.clip_grad_norm, as.grad_norm);
    const double norm_rel =
        coef < 1.0 ? NormRoundingBound(a.reporting.grad_norm_dtype, grad_elems) : 0.0;
    const double unit = kUpdateRoundings * kFp32Unit + 2 * norm_rel;
    if (!as.skipped) ++applied;
    std::map<std::string, Expect> e;  // kind -> expectation
    std::map<std::string, at::Tensor> actual;
    for (const auto& kind : ExpectedKinds(cfg, a.reporting))
      if (kind != "grad") actual[kind] = Flat(as, spec, kind);
    if (as.skipped) {  // bit for bit unchanged
      e["param"] = {prev.param, at::zeros_like(prev.param)};
      if (has_master) e["master"] = {prev.master, at::zeros_like(prev.master)};
      for (const auto& [n, v] : prev.slots) e[n] = {v, at::zeros_like(v)};
    } else {
      at::Tensor g = Flat(as, spec, "grad"), g_mag = FlatMagnitude(as, spec, "grad", g);
      if (coef < 1.0) {
        g = g * coef;
        g_mag = g_mag * coef;
      }
      // Note [Clip in the accumulation dtype]: an optimizer that clips its gradient accumulation
      // buffers in place (DeepSpeed's BF16_Optimizer multiplies its grad_acc_dtype buffers by the
      // coefficient, then casts them to float32 for the step) rounds each clipped element
      // x' = g c' (c' the run's coefficient) to that dtype: to within half x''s spacing there
      // (its subnormal spacing below the normal range). c' is within norm_rel << 1 of c, so
      // |x'| <= 2 |g c| and that half spacing is at most the spacing at g c: UlpOf(g c) absolute
      // per element, on top of the float32 terms. Declared by the target file, never assumed.
      // Evidence: docs/EVIDENCE.md.
      const DType clip_dtype = a.reporting.clips_in_accumulate ? pr.accumulate : DType::kFp32;
      at::Tensor gerr;
      if (coef < 1.0 && PrecisionBits(clip_dtype) < PrecisionBits(DType::kFp32))
        gerr = UlpOf(g, clip_dtype);
      // Note [Subnormal gradients]: the run clips in float32, so a clipped gradient in float32's
      // subnormal range carries an absolute rounding of up to 2^-150 instead of u relative, and
      // Adam divides it by sqrt(v) + eps (as small as eps): a parameter near 0 then moves by that
      // rounding times lr / eps. Each gradient's magnitude carries kSubnormalFloor's worth of
      // absolute rounding, so the bound follows it through the update.
      // Evidence: docs/EVIDENCE.md.
      Expect next =
          Step(AtUpdate(cfg.optimizer, applied - 1), applied, has_master ? prev.master : prev.param,
               g, g_mag, unit, MaxFinite(has_master ? DType::kFp32 : pr.param), prev,
               HyperDrift{a.reporting.optimizer_hyperparameters == DType::kFp32}, gerr, e);
      next.mag = next.mag * unit + kSubnormalFloor;
      for (const auto& n : slot_names) e[n].mag = e[n].mag * unit + kSubnormalFloor;
      if (has_master) {
        e["master"] = next;
        e["param"] = {RoundTo(actual.at("master"), pr.param), UlpOf(actual.at("master"), pr.param)};
      } else if (param16) {
        e["param"] = {RoundTo(next.value, pr.param), next.mag + UlpOf(next.value, pr.param)};
      } else {
        e["param"] = next;
      }
    }
    // Localization order (oracles/quantities.h): each kind over the tensors in model order; the
    // flat vectors are in model order, so the first violating element names the tensor.
    for (const auto& kind : ExpectedKinds(cfg, a.reporting)) {
      if (kind == "grad") continue;
      const Judged j = Judge(actual.at(kind), e.at(kind));
      const int64_t first = FirstViolation(j);
      if (first < 0) continue;
      const size_t t =
          static_cast<size_t>(std::upper_bound(ends.begin(), ends.end(), first) - ends.begin());
      const ParamSpec& ps = spec.params[t];
      Comparison w = Worst(j, ends[t] - ps.numel(), ps.numel());
      w.step = step;
      w.phase = Phase::kOptimizer;
      w.tensor_kind = kind;
      w.tensor = ps.name;
      w.layer = Name(ps.layer);
      Verdict v;
      v.kind = VerdictKind::kMismatch;
      v.oracle = name();
      LocalizeComparison(v, w);
      std::ostringstream msg;
      msg.precision(9);
      msg << "step " << step << " optimizer: " << kind << " of " << ps.name
          << " does not follow from the run's own gradient and state"
          << (as.skipped ? " (a skipped step must change nothing)" : "") << ": |actual - expected| "
          << w.error << " > bound " << w.bound << " (ratio " << w.ratio() << ") at index "
          << w.index << ": expected " << w.expected << " actual " << w.actual << " ("
          << Name(cfg.optimizer.kind) << " update " << applied << ", reported gradient norm "
          << as.grad_norm << ", clip coefficient " << coef << "; seed " << cfg.seed << ")";
      v.message = msg.str();
      return v;
    }
    // The next step starts from the run's own state, not from the expectation.
    prev.param = actual.at("param");
    if (has_master) prev.master = actual.at("master");
    for (const auto& n : slot_names) {
      prev.slots[n] = actual.at(n);
      prev.slot_mags[n] = FlatMagnitude(as, spec, n, prev.slots[n]);
    }
  }
  return Verdict{};
}

}  // namespace paradiff
