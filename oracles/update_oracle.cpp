#include "oracles/update_oracle.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/model_spec.h"
#include "kernels/numerics.h"
#include "kernels/optim.h"  // OptimizerSlotNames
#include "kernels/param_init.h"
#include "oracles/assemble.h"
#include "oracles/numeric_oracle.h"
#include "oracles/tolerance.h"

namespace paradiff {

namespace {

constexpr double kUpdateRoundings = 16;  // Note [Update bound]
constexpr double kFp32Unit = 0x1p-24;
// Below 2^-126 float32 rounds to a fixed spacing of 2^-149 instead of u relative (Adam's second
// moment of a tiny gradient lives there): the same number of roundings, absolute.
constexpr double kSubnormalFloor = kUpdateRoundings * 0x1p-149;

// An expected value and the magnitude its rounding error scales with (Note [Update bound]).
struct Expect {
  at::Tensor value;
  at::Tensor mag;
};

// One tensor's state as the run holds it, in float64.
struct State {
  at::Tensor param, master;          // master undefined without master weights
  std::map<std::string, at::Tensor> slots;
};

bool IsSixteenBit(DType d) { return d == DType::kBf16 || d == DType::kFp16; }

// One ulp of a 16-bit dtype at |x| (the spacing just above |x|, normals and subnormals alike).
at::Tensor UlpOf(const at::Tensor& x, DType d) {
  const int mantissa = d == DType::kBf16 ? 7 : 10;
  const int min_exp = d == DType::kBf16 ? -126 : -14;
  at::Tensor e = at::floor(at::log2(x.abs().clamp_min(std::ldexp(1.0, min_exp))));
  return at::pow(2.0, e - mantissa);
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
// (master weights, or the parameters themselves).
Expect Step(const OptimizerConfig& o, int64_t t, const at::Tensor& target, const at::Tensor& g,
            const std::map<std::string, at::Tensor>& slots, std::map<std::string, Expect>& out) {
  at::Tensor p = target, gp = g, gmag = g.abs();
  if (o.kind == OptimizerKind::kAdamW) {
    p = target * (1.0 - o.lr * o.weight_decay);
  } else if (o.weight_decay != 0) {  // L2 decay folded into the gradient (SGD, Adam)
    gp = g + target * o.weight_decay;
    gmag = gmag + target.abs() * o.weight_decay;
  }
  if (o.kind == OptimizerKind::kSgd) {
    const at::Tensor& buf = slots.at("momentum");
    Expect b = t == 1 ? Expect{gp, gmag} : Expect{buf * o.momentum + gp, buf.abs() * o.momentum + gmag};
    out["momentum"] = b;
    return {p - b.value * o.lr, p.abs() + b.mag * o.lr};
  }
  const at::Tensor &m0 = slots.at("exp_avg"), &v0 = slots.at("exp_avg_sq");
  Expect m{m0 * o.beta1 + gp * (1.0 - o.beta1), m0.abs() * o.beta1 + gmag * (1.0 - o.beta1)};
  Expect v{v0 * o.beta2 + gp * gp * (1.0 - o.beta2), v0 * o.beta2 + gmag * gmag * (1.0 - o.beta2)};
  out["exp_avg"] = m;
  out["exp_avg_sq"] = v;
  const double bc1 = 1.0 - std::pow(o.beta1, static_cast<double>(t));
  const double bc2 = 1.0 - std::pow(o.beta2, static_cast<double>(t));
  at::Tensor denom = v.value.sqrt() / std::sqrt(bc2) + o.eps;
  return {p - m.value / denom * (o.lr / bc1), p.abs() + m.mag / denom * (o.lr / bc1)};
}

// The worst element of |actual - expected| against `bound` (elements with a non-finite
// expectation are not judged).
Comparison Worst(const at::Tensor& actual, const at::Tensor& expected, const at::Tensor& bound) {
  Comparison w;
  const at::Tensor judged = expected.isfinite();
  at::Tensor diff = (actual - expected).abs();
  diff = at::where(actual.isfinite(), diff, at::full_like(diff, INFINITY));
  at::Tensor ratio = at::where(judged, diff / bound.clamp_min(1e-300), at::zeros_like(diff));
  ratio = at::where(diff.eq(0), at::zeros_like(ratio), ratio);
  if (ratio.numel() == 0) return w;
  const int64_t worst = ratio.argmax().item<int64_t>();
  if (!(ratio[worst].item<double>() > 0)) return w;  // nothing judged differs
  w.index = worst;
  w.expected = expected[w.index].item<double>();
  w.actual = actual[w.index].item<double>();
  w.error = diff[w.index].item<double>();
  w.bound = bound[w.index].item<double>();
  if (w.bound == 0 && w.error > 0) {  // must be equal: the error in float32 units (Note [Discrete bounds])
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
  if (!a.reporting.optimizer) return SkipVerdict(name(), "the run does not report its optimizer state");
  const Config& cfg = in.cfg;
  const PrecisionConfig& pr = cfg.precision;
  const bool has_master = pr.master_weights && pr.param != DType::kFp32;
  const bool param16 = IsSixteenBit(pr.param);
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const auto slot_names = OptimizerSlotNames(cfg.optimizer.kind);
  int64_t grad_elems = 0;
  for (const auto& ps : spec.params) grad_elems += ps.numel();

  std::map<std::string, State> prev;  // the run's state before the step, per tensor
  for (const auto& ps : spec.params) {
    State& s = prev[ps.name];
    s.param = RoundTo(GenerateParam(ps, cfg.seed).to(at::kDouble), pr.param).reshape({-1});
    if (has_master) s.master = s.param.clone();
    for (const auto& n : slot_names) s.slots[n] = at::zeros({ps.numel()}, at::kDouble);
  }
  int64_t applied = 0;
  for (int64_t step = 0; step < static_cast<int64_t>(a.steps.size()); ++step) {
    const AssembledStep& as = a.steps[step];
    const double coef = as.skipped ? 1.0 : Clip(cfg.clip_grad_norm, as.grad_norm);
    const double norm_rel =
        coef < 1.0 ? NormRoundingBound(a.reporting.grad_norm_dtype, grad_elems) : 0.0;
    const double unit = kUpdateRoundings * kFp32Unit + 2 * norm_rel;
    if (!as.skipped) ++applied;
    std::map<std::string, std::map<std::string, Expect>> expect;  // tensor -> kind -> expectation
    for (const auto& ps : spec.params) {
      const State& s = prev.at(ps.name);
      std::map<std::string, Expect>& e = expect[ps.name];
      if (as.skipped) {  // bit for bit unchanged
        e["param"] = {s.param, at::zeros_like(s.param)};
        if (has_master) e["master"] = {s.master, at::zeros_like(s.master)};
        for (const auto& [n, v] : s.slots) e[n] = {v, at::zeros_like(v)};
        continue;
      }
      at::Tensor g = as.tensors.at("grad:" + ps.name);
      if (coef < 1.0) g = g * coef;
      Expect next = Step(cfg.optimizer, applied, has_master ? s.master : s.param, g, s.slots, e);
      next.mag = next.mag * unit + kSubnormalFloor;
      for (const auto& n : slot_names) e[n].mag = e[n].mag * unit + kSubnormalFloor;
      if (has_master) {
        e["master"] = next;
        const at::Tensor& run_master = as.tensors.at("master:" + ps.name);
        e["param"] = {RoundTo(run_master, pr.param), UlpOf(run_master, pr.param)};
      } else if (param16) {
        e["param"] = {RoundTo(next.value, pr.param), next.mag + UlpOf(next.value, pr.param)};
      } else {
        e["param"] = next;
      }
    }
    // Localization order (oracles/quantities.h): each kind over the tensors in model order.
    for (const auto& kind : ExpectedKinds(cfg, a.reporting)) {
      if (kind == "grad") continue;
      for (const auto& ps : spec.params) {
        const Expect& e = expect.at(ps.name).at(kind);
        Comparison w = Worst(as.tensors.at(kind + ":" + ps.name), e.value, e.mag);
        if (w.ok()) continue;
        w.step = step;
        w.phase = "optimizer";
        w.kind = kind;
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
            << w.error << " > bound " << w.bound << " (ratio " << w.ratio() << ") at index " << w.index
            << ": expected " << w.expected << " actual " << w.actual << " (" << Name(cfg.optimizer.kind)
            << " update " << applied << ", reported gradient norm " << as.grad_norm
            << ", clip coefficient " << coef << "; seed " << cfg.seed << ")";
        v.message = msg.str();
        return v;
      }
    }
    // The next step starts from the run's own state, not from the expectation.
    for (const auto& ps : spec.params) {
      State& s = prev.at(ps.name);
      s.param = as.tensors.at("param:" + ps.name);
      if (has_master) s.master = as.tensors.at("master:" + ps.name);
      for (const auto& n : slot_names) s.slots[n] = as.tensors.at(n + ":" + ps.name);
    }
  }
  return Verdict{};
}

}  // namespace paradiff
