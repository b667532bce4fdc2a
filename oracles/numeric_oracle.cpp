#include "oracles/numeric_oracle.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "comm/fresh.h"
#include "core/model_spec.h"
#include "kernels/aten_sum.h"
#include "kernels/numerics.h"
#include "kernels/optim.h"
#include "kernels/param_init.h"
#include "oracles/bitwise.h"
#include "oracles/quantities.h"
#include "oracles/tolerance.h"
#include "sut/phases.h"

namespace paradiff {

namespace {

// Norms below this are treated as zero (switch to absolute error).
constexpr double kTinyNorm = 1e-30;
// Note [Adam sensitivity]: Adam moves an element by about lr * sign(g) whatever |g| is, so an
// element whose true gradient is within kNoiseMultiple times its rounding noise (the larger of the
// two runs' gradient errors there) may legitimately move the other way in the distributed run.
// Such elements are "ill-conditioned" from that step on: they leave the norm-based comparison of
// parameters and master weights, and must instead stay within AdamStepBound(...) * lr per step of
// the truth: two runs moving in opposite directions by at most R lr each, where R bounds
// |m_hat| / sqrt(v_hat) (AdamRatioBound), with a margin of 2 (R is at most 2 for the default
// betas over 64 steps, so the bound is 4 lr there).
constexpr double kNoiseMultiple = 8.0;
constexpr double kAdamMoveMargin = 2.0;

// Note [Adam ratio bound]: "about lr" holds only while beta1^2 < beta2. By Cauchy-Schwarz over
// m_t = sum_k (1-b1) b1^k g_(t-k) against v_t = sum_k (1-b2) b2^k g_(t-k)^2,
//   |m_t| / sqrt(v_t) <= (1-b1) / sqrt(1-b2) * sqrt(sum_(k<t) (b1^2/b2)^k),
// times sqrt(1 - b2^t) / (1 - b1^t) after bias correction (eps only lowers it). For the
// default betas it stays below 2 (1.8 at step 64); for beta2 = 0 (v is the last gradient
// squared) it is unbounded from the second step: a rounding-level change of a vanishing
// gradient then moves an element by any amount, and ill-conditioned elements are not bounded at
// all. The max over the run's steps. Evidence: docs/EVIDENCE.md.
double AdamRatioBound(double b1, double b2, int64_t steps) {
  double worst = 1.0;
  for (int64_t t = 2; t <= steps; ++t) {
    if (b1 == 0) {
      if (b2 > 0) worst = std::max(worst, std::sqrt((1 - std::pow(b2, t)) / (1 - b2)));
      continue;
    }
    if (b2 == 0) return INFINITY;
    double sum = 0;
    for (int64_t k = 0; k < t; ++k) sum += std::pow(b1 * b1 / b2, static_cast<double>(k));
    const double r = (1 - b1) / std::sqrt(1 - b2) * std::sqrt(sum) *
                     std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
    worst = std::max(worst, r);
  }
  return worst;
}

// The most an ill-conditioned element may move per step away from the truth, in units of lr.
double AdamStepBound(const OptimizerConfig& o, int64_t steps) {
  return kAdamMoveMargin * std::max(2.0, AdamRatioBound(o.beta1, o.beta2, steps));
}

// Note [Floor scale]: rounding errors scale with the magnitude of the summands, not of the result,
// so a tensor whose values nearly cancel (a norm bias's gradient) carries errors far above its own
// norm. The floor is therefore relative to the larger of the tensor's norm and the norm it would
// have at its kind's RMS (`kind_rms`, over every tensor of that kind and step). It also grows with
// the step: after step 0 the runs start from parameters that already differ by rounding.
// The comparison of n values held in float64 (see Note [Floor scale]): plain loops, since a check
// compares hundreds of small tensors and a torch operator costs its dispatch. The error is the
// 2-norm of d - t (a NaN / inf in the run where the truth is finite: infinite) relative to |t|;
// the index is the first largest difference (the first non-finite element of d if any; a NaN
// difference counts as the largest, as at::argmax counts it). `rs`: the twin first, then the
// random-rounding twins (see Note [Twin samples] in reference.h); the reference error is the
// largest of theirs, a random twin counting only where it is finite (it follows the twin's
// overflow decisions, and can overflow where the twin did not).
Comparison CompareValues(const double* d, const std::vector<const double*>& rs, const double* t,
                         int64_t n, Tolerance tol, double kind_rms, int64_t step) {
  Comparison c;
  double tt = 0, dd = 0;
  std::vector<double> rr(rs.size(), 0.0);
  bool finite = true;
  int64_t worst = 0, first_nonfinite = -1;
  double worst_diff = -INFINITY;
  bool worst_nan = false;
  for (int64_t i = 0; i < n; ++i) {
    tt += t[i] * t[i];
    const double diff = std::fabs(d[i] - t[i]);
    dd += diff * diff;
    for (size_t k = 0; k < rs.size(); ++k) {
      const double rdiff = rs[k][i] - t[i];
      rr[k] += rdiff * rdiff;
    }
    if (!std::isfinite(d[i]) && first_nonfinite < 0) {
      finite = false;
      first_nonfinite = i;
    }
    if (worst_nan) continue;
    if (std::isnan(diff) || diff > worst_diff) {
      worst = i;
      worst_diff = diff;
      worst_nan = std::isnan(diff);
    }
  }
  const double tn = std::sqrt(tt);
  const double scale = tn > kTinyNorm ? tn : 1.0;
  const double typical = kind_rms * std::sqrt(static_cast<double>(n));
  tol.floor *= static_cast<double>(step + 1) * std::max(1.0, typical / scale);
  c.error = finite ? std::sqrt(dd) / scale : INFINITY;
  c.ref_error = std::sqrt(rr[0]) / scale;
  for (size_t k = 1; k < rr.size(); ++k)
    if (std::isfinite(rr[k])) c.ref_error = std::max(c.ref_error, std::sqrt(rr[k]) / scale);
  c.bound = tol.factor * c.ref_error + tol.floor;
  c.index = finite ? worst : first_nonfinite;
  c.expected = n > 0 ? t[c.index] : 0;
  c.actual = n > 0 ? d[c.index] : 0;
  return c;
}

// `rs` as in CompareValues.
Comparison CompareTensor(const at::Tensor& d, const std::vector<at::Tensor>& rs,
                         const at::Tensor& t, Tolerance tol, double kind_rms = 0,
                         int64_t step = 0) {
  const at::Tensor fd = AsFloat64(d), ft = AsFloat64(t);
  std::vector<at::Tensor> fr;
  std::vector<const double*> ptrs;
  for (const auto& r : rs) ptrs.push_back(fr.emplace_back(AsFloat64(r)).data_ptr<double>());
  return CompareValues(fd.data_ptr<double>(), ptrs, ft.data_ptr<double>(), ft.numel(), tol,
                       kind_rms, step);
}

// CompareTensor with the truth's values in the run and in every twin where `mask` holds (those
// elements then compare equal): at::where's copies, made in one loop.
Comparison CompareOutside(const at::Tensor& mask, const at::Tensor& d,
                          const std::vector<at::Tensor>& rs, const at::Tensor& t, Tolerance tol,
                          double kind_rms, int64_t step) {
  const at::Tensor m = mask.contiguous(), ft = AsFloat64(t);
  const bool* mp = m.data_ptr<bool>();
  const double* tp = ft.data_ptr<double>();
  const int64_t n = ft.numel();
  std::vector<at::Tensor> sources{AsFloat64(d)};
  for (const auto& r : rs) sources.push_back(AsFloat64(r));
  std::vector<std::vector<double>> masked(sources.size(), std::vector<double>(n));
  for (size_t k = 0; k < sources.size(); ++k) {
    const double* sp = sources[k].data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) masked[k][i] = mp[i] ? tp[i] : sp[i];
  }
  std::vector<const double*> ptrs;
  for (size_t k = 1; k < masked.size(); ++k) ptrs.push_back(masked[k].data());
  return CompareValues(masked[0].data(), ptrs, tp, n, tol, kind_rms, step);
}

Comparison CompareScalar(double d, const std::vector<double>& rs, double t, const Tolerance& tol) {
  std::vector<const double*> ptrs;
  for (const double& r : rs) ptrs.push_back(&r);
  return CompareValues(&d, ptrs, &t, 1, tol, 0, 0);
}

// Elementwise: where |t| is within kNoiseMultiple of the gradient noise of the run or a twin (`rs`
// as in CompareValues, each random twin where it is finite). A run that does not report its
// gradients (docs/TARGETS.md "reports") passes `d` undefined: its noise is then taken as the most
// the gradient comparison would allow it, `factor` times the twins'.
//
// Note [Adam eps sensitivity]: with `adam_eps` > 0 an element is also ill-conditioned where the
// noise moves Adam's update by kEpsSensitivity of lr or more. The update g / (|g| + eps) (step 0;
// later steps alike with the moments) has slope eps / (|g| + eps)^2: where |g| is near eps it is
// linear in g with slope ~1/eps, and a gradient a little above the noise threshold moves by a
// visible fraction of lr. Where |g| >> eps the shift is eps * noise / g^2, negligible. The
// threshold is 0.1% of lr: the parameter bound of a tensor of a few dozen elements is of that
// order, so under a larger threshold such a move there would be flagged as a finding.
// The elements this exempts have |g| within a few eps; they keep the Adam step bound, and the
// update oracle checks their update from the run's own gradient to float32 rounding.
// Evidence: docs/EVIDENCE.md.
constexpr double kEpsSensitivity = 0.001;

// at::maximum of two values: NaN if either is.
double MaxOrNan(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
}

// In one loop over float64 values: the operations of the tensor expressions (|r - t|, the largest
// finite twin difference, NaN-propagating maxima, the two comparisons), element by element.
at::Tensor IllConditioned(const at::Tensor& d, const std::vector<at::Tensor>& rs,
                          const at::Tensor& t, double factor, double adam_eps) {
  const at::Tensor ft = AsFloat64(t), fd = d.defined() ? AsFloat64(d) : at::Tensor();
  std::vector<at::Tensor> fr;
  std::vector<const double*> rp;
  for (const auto& r : rs) rp.push_back(fr.emplace_back(AsFloat64(r)).data_ptr<double>());
  const int64_t n = ft.numel();
  at::Tensor ill = Empty({n}, at::kBool);
  bool* out = ill.data_ptr<bool>();
  const double* tp = ft.data_ptr<double>();
  const double* dp = fd.defined() ? fd.data_ptr<double>() : nullptr;
  const double unreported = std::max(1.0, factor), eps_noise = kNoiseMultiple * adam_eps;
  for (int64_t i = 0; i < n; ++i) {
    const double ti = tp[i];
    double twins = std::fabs(rp[0][i] - ti);
    for (size_t k = 1; k < rp.size(); ++k) {
      const double e = std::fabs(rp[k][i] - ti);
      if (std::isfinite(e)) twins = MaxOrNan(twins, e);
    }
    const double noise =
        dp != nullptr ? MaxOrNan(twins, std::fabs(dp[i] - ti)) : twins * unreported;
    bool is_ill = std::fabs(ti) <= noise * kNoiseMultiple;
    if (adam_eps > 0) {
      const double denom = std::fabs(ti) + adam_eps;
      const double sensitivity = denom * denom;
      is_ill = is_ill || noise * eps_noise >= sensitivity * kEpsSensitivity;
    }
    out[i] = is_ill;
  }
  return ill;
}

// Note [Effective Adam gradient]: Adam with L2 weight decay (not AdamW) steps on
// g' = coef * g + wd * p, the clipped gradient plus the decay of the parameter before the step.
// Where the two terms nearly cancel, g' is at rounding level even though g is not, and its sign —
// hence Adam's +-lr move — is noise. So the ill-conditioned test looks at g' of each run: its own
// clip coefficient and its own previous parameters (master weights when it keeps them; the
// initial parameters at step 0). Without decay g' = coef * g, whose sign is g's.
class EffectiveGradient {
 public:
  EffectiveGradient(const Config& cfg, const ParamSpec& ps) : cfg(cfg), ps(ps) {}
  bool decays() const {
    return cfg.optimizer.kind == OptimizerKind::kAdam && cfg.optimizer.weight_decay != 0;
  }
  // `prev`: the tensors of the run's previous step (nullptr at step 0); `masters`: whether its
  // master weights there are reported (else they are zeros and the parameters are used).
  // Undefined `g` stays so.
  at::Tensor operator()(const at::Tensor& g, double grad_norm,
                        const std::map<std::string, at::Tensor>* prev, bool masters = true) const {
    if (!g.defined() || !decays()) return g;
    const double coef =
        std::isfinite(grad_norm) ? ClipCoefficient(cfg.clip_grad_norm, grad_norm) : 1.0;
    at::Tensor p;
    if (prev == nullptr) {
      if (!initial_.defined()) initial_ = GenerateParam(ps, cfg.seed).reshape({-1});
      p = initial_;
    } else {
      auto it = masters ? prev->find("master:" + ps.name) : prev->end();
      p = it != prev->end() ? it->second : prev->at("param:" + ps.name);
    }
    return g * coef + p * cfg.optimizer.weight_decay;
  }

 private:
  const Config& cfg;
  const ParamSpec& ps;
  mutable at::Tensor initial_;  // step 0's parameters, the same for every run
};

// Compares parameters of an Adam run outside the ill-conditioned elements, and checks those
// against the per-step movement bound.
// Note [Stored rounding of a flipped element]: the movement bound is about the update (lr per
// step), but the run's value is also rounded to the dtype it is held in (`held`) once per step,
// while the truth is not: at a small learning rate that rounding is the larger of the two (bf16
// parameters at 0.04 round by up to 1.2e-4, 4 lr at lr 3e-5). So each element may also be off by
// one ulp of `held` per step taken; `held` is the parameter dtype for master weights too, whose
// initial values are the parameters' rounded initial values (the truth starts from the unrounded
// ones). Evidence: docs/EVIDENCE.md.
Comparison CompareAdamParam(const at::Tensor& d, const std::vector<at::Tensor>& rs,
                            const at::Tensor& t, const at::Tensor& ill, const Tolerance& tol,
                            double max_move, DType held, double kind_rms, int64_t step) {
  Comparison c = CompareOutside(ill, d, rs, t, tol, kind_rms, step);
  const at::Tensor m = ill.contiguous();
  const bool* mp = m.data_ptr<bool>();
  const int64_t n = m.numel();
  if (std::none_of(mp, mp + n, [](bool b) { return b; })) return c;
  // In loops over float64 values, element by element as the tensor expressions
  //   diff = where(ill, |d - t|, 0), allowed = max_move + (step + 1) * UlpOf(maximum(|t|, |d|)),
  //   excess = diff / allowed, worst = argmax(excess) (the first largest; a NaN counts as the
  //   largest, as at::argmax counts it)
  // compute them: each is one correctly rounded operation per element.
  const at::Tensor fd = AsFloat64(d), ft = AsFloat64(t);
  const double *dp = fd.data_ptr<double>(), *tp = ft.data_ptr<double>();
  at::Tensor magnitude = Empty({n}, at::kDouble);
  double* mag = magnitude.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) {
    const double a = std::fabs(tp[i]), b = std::fabs(dp[i]);
    mag[i] = MaxOrNan(a, b);
  }
  const at::Tensor ulps = UlpOf(magnitude, held);
  const double* ulp = ulps.data_ptr<double>();
  const double per_ulp = static_cast<double>(step + 1);
  auto diff = [&](int64_t i) { return mp[i] ? std::fabs(dp[i] - tp[i]) : 0.0; };
  auto allowed = [&](int64_t i) { return max_move + per_ulp * ulp[i]; };
  int64_t worst = 0;
  double worst_excess = diff(0) / allowed(0);
  for (int64_t i = 1; i < n && !std::isnan(worst_excess); ++i) {
    const double e = diff(i) / allowed(i);
    if (std::isnan(e) || e > worst_excess) {
      worst = i;
      worst_excess = e;
    }
  }
  const bool finite = AllFinite(fd);
  if (worst_excess > 1 || !finite) {
    c.index = worst;
    if (!finite)  // the first non-finite element of d
      for (c.index = 0; std::isfinite(dp[c.index]);) ++c.index;
    c.expected = tp[c.index];
    c.actual = dp[c.index];
    c.error = diff(c.index);
    c.bound = allowed(c.index);
  }
  return c;
}

// Note [Gradient norm consistency]: the engine reports the global gradient norm it computed (and
// clipped with) and, separately, the reduced gradients themselves. Both must describe the same
// vector: sqrt(sum of the reported gradients squared) equals the reported norm up to the rounding
// of the precision the norm was computed in (float64 for the built-in engine; a target declares
// its own, see Note [Reported norm precision] in tolerance.cpp). A norm that counts a replicated
// tensor once per replica, misses a shard, or was reduced over the wrong group breaks this even
// when the truth is far away, so it is checked before the truth comparison and localizes to the
// reduction. A run that does not report its gradients has nothing to check this against.
Comparison NormConsistency(const AssembledStep& d, const ModelSpec& spec,
                           const ToleranceContext& ctx) {
  double sq = 0;
  for (const auto& ps : spec.params) sq += SumOfSquares(d.tensors.at("grad:" + ps.name));
  Comparison c;
  c.expected = std::sqrt(sq);
  c.actual = d.grad_norm;
  const double diff = c.actual == c.expected ? 0.0 : std::fabs(c.actual - c.expected);
  c.error = std::isnan(diff) ? INFINITY : diff / std::max(std::fabs(c.expected), kTinyNorm);
  c.bound = LookupTolerance("grad_norm_consistency", ctx.grad_norm_dtype, ctx).floor;
  c.index = 0;
  return c;
}

// Note [Scaled gradients]: a gradient d that misses the truth t but equals alpha * t within the
// bound, for one alpha != 1, was scaled as a whole: averaged over the wrong number of ranks or
// micro-steps, or summed where it should be averaged. The local backward cannot do that (it is
// the reference's own math on the same micro-batch), so such a finding is attributed to the
// reduction, with detail "scale". Tensors with fewer than kMinScaleFitElems elements are always
// proportional to something and keep the plain "gradient" phase.
constexpr int64_t kMinScaleFitElems = 8;

void AttributeScaledGradient(Verdict& v, const Comparison& c, const Assembly& dist,
                             const RefPair& ref) {
  if (c.tensor_kind != "grad") return;
  const at::Tensor& d = dist.steps[c.step].tensors.at("grad:" + c.tensor);
  const at::Tensor& t = ref.truth.steps[c.step].tensors.at("grad:" + c.tensor);
  const double tt = SumOfSquares(t);
  if (t.numel() < kMinScaleFitElems || !(tt > kTinyNorm * kTinyNorm)) return;
  const double alpha = (d * t).sum().item<double>() / tt;
  const double residual = (d - t * alpha).norm().item<double>() / std::sqrt(tt);
  if (!(residual <= c.bound) || std::fabs(alpha - 1.0) <= c.bound) return;
  v.where.phase = Phase::kReduction;
  v.where.detail = "scale";
  std::ostringstream msg;
  msg.precision(6);
  msg << "; the gradient is the truth scaled by " << alpha << " (residual " << residual
      << " <= bound " << c.bound << "): a reduction averaged or summed over the wrong count";
  v.message += msg.str();
}

// Whether the reference can restart from the run's state: it must report all of it.
bool CanRestart(const Config& cfg, const Reporting& reported) {
  return reported.optimizer ||
         (OptimizerSlotNames(cfg.optimizer.kind).empty() && !cfg.precision.keeps_master());
}

// A finding about step s's overflow handling: one discrete decision or scale that differs, so
// error 1 against the discrete bound (see Note [Discrete bounds]).
Verdict OverflowFinding(int64_t s, const std::string& tensor_kind, const std::string& detail,
                        double expected, double actual) {
  Verdict v;
  v.kind = VerdictKind::kMismatch;
  v.oracle = "numeric";
  v.where.step = s;
  v.where.phase = Phase::kOverflow;
  v.where.tensor_kind = tensor_kind;
  v.where.detail = detail;
  v.where.expected = expected;
  v.where.actual = actual;
  v.where.error = 1;
  v.where.bound = kDiscreteBound;
  return v;
}

// The numeric comparison cannot judge step s or the steps after it (`phase`: "overflow" for a
// borderline decision, "divergence" for a reference that diverged); the message says why.
Verdict InconclusiveAt(int64_t s, Phase phase) {
  Verdict v;
  v.kind = VerdictKind::kInconclusive;
  v.oracle = "numeric";
  v.where.step = s;
  v.where.phase = phase;
  return v;
}

// Note [Overflow margin]: the run and the same-precision twin disagree on whether step s
// overflowed. Near the edge of the dtype's range that is rounding (a value a few ulps below the
// largest finite number in one run, above it in the other): not a finding by itself. A decision
// that is not borderline is a bug (gradients not cleared after a skipped step, an overflow check
// that misses inf, or reads stale padding), and must not pass as "inconclusive". So the
// twin runs step s once more, from the run's own state after step s - 1 (see Note [Local restart]
// in reference.cpp; the initial state at step 0, the twin's own where the run does not report its
// optimizer state), at OverflowMargin times the loss scale when the run skipped (the twin still
// finite: the run's overflow was not near the range's edge) or at 1 / OverflowMargin when the
// run took the step (the twin still overflowing: the run missed an overflow that was not near
// the edge either). Rounding moves a step's values by far less than a factor of 4 (two binades);
// the loss scale multiplies every gradient and activation gradient of the step alike. One thing
// the twin does not mirror moves them more: with tensor parallelism in a 16-bit compute dtype a
// rank's partial sums (row-parallel outputs, column-parallel input gradients) are rounded, and
// can overflow, before they are added; under cancellation a partial sum can exceed the total by
// any factor, so there the margin is 16 (four binades). What else scales a micro-batch's
// gradients (a reload's split into accumulation steps included) the twin mirrors.
// Evidence: docs/EVIDENCE.md.
double OverflowMargin(const Config& cfg) {
  return cfg.parallel.tp > 1 && cfg.precision.compute != DType::kFp32 ? 16.0 : 4.0;
}

Verdict OverflowDecision(const Config& cfg, const Assembly& dist, const RefPair& ref, int64_t s) {
  const bool run_skipped = dist.steps[s].skipped;
  RefOrigin from;
  from.step = s - 1;
  if (s > 0)
    from.state = CanRestart(cfg, dist.reporting) ? &dist.steps[s - 1].tensors
                                                 : &ref.same.steps[s - 1].tensors;
  from.skips = SkippedSteps(ref.same);
  const double margin = OverflowMargin(LayoutAtStep(cfg, s));
  from.scale_factor = run_skipped ? margin : 1.0 / margin;
  const bool twin_at_margin = TwinOverflows(cfg, ref.reduction, from);
  const bool borderline = twin_at_margin == run_skipped;  // the twin agrees within the margin
  Verdict v = borderline
                  ? InconclusiveAt(s, Phase::kOverflow)
                  : OverflowFinding(s, "skip", "margin", run_skipped ? 0 : 1, run_skipped ? 1 : 0);
  std::ostringstream msg;
  msg << "step " << s << ": the run " << (run_skipped ? "skipped" : "took")
      << " the step for overflow, the same-precision reference "
      << (run_skipped ? "took" : "skipped") << " it";
  std::ostringstream at;
  at << (run_skipped ? "" : "1/") << margin << (run_skipped ? "x" : "");
  if (borderline) {
    msg << " (borderline: at " << at.str() << " the loss scale the reference "
        << (run_skipped ? "overflows" : "does not overflow") << " too)";
  } else {
    msg << ", and " << (run_skipped ? "stays finite" : "overflows") << " even at " << at.str()
        << " the loss scale from the run's own state: not a borderline overflow (see Note "
           "[Overflow "
           "margin])";
  }
  msg << " (seed " << cfg.seed << ")";
  v.message = msg.str();
  return v;
}

// Note [Overflow consistency]: with loss scaling on, a run that takes a step must have found its
// gradients finite; the gradients it reports (unscaled, before clipping: docs/TARGETS.md) are
// those it checked, so one that is not finite on a step taken means the overflow check missed it
// (looked for NaN only, read one shard, or one stage). Needs no reference: judged first.
std::optional<Verdict> NonFiniteStep(const Config& cfg, const Assembly& dist, int64_t s) {
  const AssembledStep& d = dist.steps[s];
  if (d.skipped || !dist.reporting.grad || cfg.precision.loss_scale.mode == LossScaleMode::kNone)
    return std::nullopt;
  for (const auto& [key, value] : d.tensors) {
    if (key.rfind("grad:", 0) != 0 || AllFinite(value)) continue;
    Verdict v = OverflowFinding(s, "skip", "consistency", /*expected=*/1, /*actual=*/0);
    v.where.tensor = key.substr(5);
    v.message = "step " + std::to_string(s) +
                ": the run took the step although its reported gradient " + key.substr(5) +
                " is not finite: the overflow check missed it (see Note [Overflow "
                "consistency]; seed " +
                std::to_string(cfg.seed) + ")";
    return v;
  }
  return std::nullopt;
}

// Note [Diverged reference]: a config can train unstably in its own precision (SGD at lr 30, Adam
// at lr 1 in fp16): the same-precision reference's loss or parameters stop being finite. The
// run's then are too, or are as meaningless; there is nothing left to compare them with, so the
// check ends inconclusive at the step the reference diverged (the steps before it were compared:
// an earlier disagreement is still the finding). A run that goes non-finite while the reference
// stays finite is compared as usual and fails. Compared as usual, a diverged reference would
// give a loss "mismatch" with bound NaN. Evidence: docs/EVIDENCE.md.
std::optional<Verdict> DivergedReference(const Config& cfg, const RefPair& ref, int64_t s) {
  for (const RefStep* step : {&ref.same.steps[s], &ref.truth.steps[s]}) {
    bool finite = std::isfinite(step->loss);
    for (const auto& [key, value] : step->tensors)
      if (finite && (key.rfind("param:", 0) == 0 || key.rfind("master:", 0) == 0))
        finite = AllFinite(value);
    if (finite) continue;
    Verdict v = InconclusiveAt(s, Phase::kDivergence);
    std::ostringstream msg;
    msg << "step " << s << ": the " << (step == &ref.same.steps[s] ? "same-precision" : "float64")
        << " reference diverged (its loss or parameters are not finite): the config trains "
           "unstably (optimizer.lr="
        << cfg.optimizer.lr
        << "); steps from here are not judged "
           "(see Note [Diverged reference]; seed "
        << cfg.seed << ")";
    v.message = msg.str();
    return v;
  }
  return std::nullopt;
}

// Compares the run's steps with a reference pair, one step at a time, carrying what earlier steps
// found (Adam's ill-conditioned elements). `age` is the number of steps the pair and the run
// have each taken since they last started from the same state: the step itself from the initial
// parameters, 0 right after a restart (see Note [Restarted comparison]); the bounds that grow with
// the steps taken grow with it.
class StepComparer {
 public:
  StepComparer(const Config& cfg, const Assembly& dist)
      : cfg_(&cfg),
        dist_(&dist),
        spec_(BuildModelSpec(cfg.model)),
        kinds_(ExpectedKinds(cfg, dist.reporting)) {
    for (const auto& ps : spec_.params) grad_elems_ += ps.numel();  // the squares a norm sums
  }

  // Appends step s's comparisons to `out`; a verdict that ends the check early (the loss scale
  // sequence, an overflow decision) is returned instead.
  std::optional<Verdict> Step(int64_t s, const RefPair& ref, int64_t age,
                              std::vector<Comparison>& out);

 private:
  const Config* cfg_;
  const Assembly* dist_;
  ModelSpec spec_;
  std::vector<std::string> kinds_;
  int64_t grad_elems_ = 0;
  std::map<std::string, at::Tensor> ill_;  // per parameter: ill-conditioned elements so far
};

std::optional<Verdict> StepComparer::Step(int64_t s, const RefPair& ref, int64_t age,
                                          std::vector<Comparison>& out) {
  const Config& cfg = *cfg_;
  const Assembly& dist = *dist_;
  const ModelSpec& spec = spec_;
  const Reporting& reported = dist.reporting;  // judge only what the run reports
  auto add = [&](Comparison c, int64_t step, Phase phase, const std::string& kind,
                 const std::string& tensor, const std::string& layer) {
    static_cast<Location&>(c) = Location{step, phase, kind, tensor, layer};
    out.push_back(c);
  };
  const AssembledStep& d = dist.steps[s];
  const RefStep& t = ref.truth.steps[s];
  const RefStep& r = ref.same.steps[s];
  // The twin, then the random twins (see Note [Twin samples] in reference.h): their values of a
  // tensor or a scalar at step s.
  std::vector<const RefRun*> runs{&ref.same};
  for (const RefRun& run : ref.random) runs.push_back(&run);
  auto twins = [&](const std::string& key) {
    std::vector<at::Tensor> out;
    for (const RefRun* run : runs) out.push_back(run->steps[s].tensors.at(key));
    return out;
  };
  auto twin_scalars = [&](double RefStep::*field) {
    std::vector<double> out;
    for (const RefRun* run : runs) out.push_back(run->steps[s].*field);
    return out;
  };
  if (reported.loss_scale && d.loss_scale != r.loss_scale) {
    // Note [Loss scale sequence]: the scale a step uses is a function of the config and the
    // overflow decisions of the steps before it, computed by the same scaler arithmetic in both
    // runs; those decisions agreed so far (else the check stopped there), so the scales must be
    // equal bit for bit. A difference is lost or corrupted scaler state (not restored from a
    // checkpoint, updated twice, updated from one rank's decision), never rounding — and it
    // comes before any skip it causes, which would otherwise pass as a borderline overflow.
    Verdict v = OverflowFinding(s, "loss_scale", "", r.loss_scale, d.loss_scale);
    std::ostringstream msg;
    msg.precision(17);
    msg << "step " << s << ": the run used loss scale " << d.loss_scale << ", the reference "
        << r.loss_scale << " after the same overflow decisions (seed " << cfg.seed << ")";
    v.message = msg.str();
    return v;
  }
  if (auto v = DivergedReference(cfg, ref, s)) return v;
  if (auto v = NonFiniteStep(cfg, dist, s)) return v;
  if (d.skipped != r.skipped) return OverflowDecision(cfg, dist, ref, s);
  std::map<std::string, double> rms;  // kind -> RMS of the truth over all its tensors
  {
    std::map<std::string, std::pair<double, double>> acc;  // kind -> (sum of squares, count)
    for (const auto& [key, v] : t.tensors) {
      auto& a = acc[key.substr(0, key.find(':'))];
      a.first += SumOfSquares(v);
      a.second += static_cast<double>(v.numel());
    }
    for (const auto& [kind, a] : acc) rms[kind] = a.second > 0 ? std::sqrt(a.first / a.second) : 0;
  }
  ToleranceContext ctx = MakeToleranceContext(cfg);
  ctx.grad_norm_dtype = reported.grad_norm_dtype;
  ctx.grad_norm_terms = grad_elems_;
  if (cfg.precision.loss_scale.mode != LossScaleMode::kNone) {
    int exponent = 0;
    ctx.inexact_unscale = !reported.loss_scale || std::frexp(d.loss_scale, &exponent) != 0.5;
  }
  auto tol = [&](const std::string& q) { return LookupTolerance(q, ToleranceDType(cfg), ctx); };
  Tolerance loss_tol = tol("loss"), norm_tol = tol("grad_norm");
  loss_tol.floor *= static_cast<double>(age + 1);
  norm_tol.floor *= static_cast<double>(age + 1);
  add(CompareScalar(d.loss, twin_scalars(&RefStep::loss), t.loss, loss_tol), s, Phase::kForward,
      "loss", "", "");
  for (const auto& ps : spec.params) {
    // Overflowed gradients are not compared (the step changed nothing), nor unreported ones.
    if (r.skipped || !reported.grad) break;
    const std::string key = "grad:" + ps.name;
    add(CompareTensor(d.tensors.at(key), twins(key), t.tensors.at(key), tol("grad"), rms["grad"],
                      age),
        s, Phase::kGradient, "grad", ps.name, Name(ps.layer));
  }
  if (!r.skipped) {
    if (reported.grad) {
      add(NormConsistency(d, spec, ctx), s, Phase::kReduction, "grad_norm", "", "");
      out.back().detail = "consistency";
    }
    add(CompareScalar(d.grad_norm, twin_scalars(&RefStep::grad_norm), t.grad_norm, norm_tol), s,
        Phase::kReduction, "grad_norm", "", "");
  }
  const bool adam = cfg.optimizer.kind != OptimizerKind::kSgd;
  for (const auto& ps : spec.params) {
    if (r.skipped) break;
    const std::string g = "grad:" + ps.name;
    const EffectiveGradient eff(cfg, ps);
    std::vector<at::Tensor> twin_grads;
    for (const RefRun* run : runs)
      twin_grads.push_back(eff(run->steps[s].tensors.at(g), run->steps[s].grad_norm,
                               s == 0 ? nullptr : &run->steps[s - 1].tensors));
    // The master weights a run keeps are reported with the optimizer state.
    at::Tensor now = IllConditioned(
        eff(reported.grad ? d.tensors.at(g) : at::Tensor(), d.grad_norm,
            s == 0 ? nullptr : &dist.steps[s - 1].tensors, reported.optimizer),
        twin_grads,
        eff(t.tensors.at(g), t.grad_norm, s == 0 ? nullptr : &ref.truth.steps[s - 1].tensors),
        tol("grad").factor, adam ? cfg.optimizer.eps : 0.0);
    auto it = ill_.find(ps.name);
    ill_[ps.name] = it == ill_.end() ? now : it->second.logical_or(now);
  }
  // The peak rate (a schedule's ratios are <= 1); lr 0 moves nothing, whatever the ratio (inf x 0).
  const double lr = cfg.optimizer.lr;
  const double max_move =
      lr == 0 ? 0.0 : AdamStepBound(cfg.optimizer, cfg.steps) * lr * static_cast<double>(age + 1);
  for (const auto& kind : kinds_) {
    if (kind == "grad") continue;
    for (const auto& ps : spec.params) {
      const std::string key = kind + ":" + ps.name;
      const at::Tensor &dv = d.tensors.at(key), &tv = t.tensors.at(key);
      const std::vector<at::Tensor> rv = twins(key);
      auto found = ill_.find(ps.name);
      const at::Tensor mask = found != ill_.end() ? found->second : Zeros({ps.numel()}, at::kBool);
      Comparison c;
      if (adam && (kind == "param" || kind == "master")) {
        c = CompareAdamParam(dv, rv, tv, mask, tol(kind), max_move, cfg.precision.param, rms[kind],
                             age);
      } else if (adam && kind == "exp_avg") {
        // An ill-conditioned element's first moment is its gradient's noise, averaged: compared
        // it would compare two roundings (its sign and size decide nothing but its own step,
        // which CompareAdamParam bounds). The rest is compared as usual.
        c = CompareOutside(mask, dv, rv, tv, tol(kind), rms[kind], age);
      } else {
        c = CompareTensor(dv, rv, tv, tol(kind), rms[kind], age);
      }
      add(c, s, Phase::kOptimizer, kind, ps.name, Name(ps.layer));
    }
  }
  return std::nullopt;
}

bool AnyFails(const std::vector<Comparison>& cs) {
  return std::any_of(cs.begin(), cs.end(), [](const Comparison& c) { return !c.ok(); });
}

}  // namespace

// Note [Restarted comparison]: steps are compared against the reference pair from the initial
// parameters, as long as they agree. When step s >= 1 first disagrees, the pair is restarted from
// the run's own state after step s - 1 (see Note [Local restart] in reference.cpp) and step s is
// compared again, with the bounds of a first step (age 0: no state gap, no growth with the step).
// If it passes there, the run's step followed from its own state: the disagreement was the model
// amplifying rounding differences that every earlier step accepted, and the comparison goes on
// against the restarted pair (restarting again where needed). If it fails there too, the finding
// is the first one, against the pair from the initial parameters. What this gives up: a bug
// whose effect per step stays within a first step's bound and only adds up over steps; a first
// step's bound is the sharpest the oracle has, and the update oracle checks every optimizer step
// from the run's own state to float32 rounding anyway. Once a step fails from the run's own state
// too, nothing later is retried; a run that does not report its optimizer state is not restarted.
//
// Note [Following the run's decision]: a borderline overflow decision the twin did not share
// (see Note [Overflow margin]) does not end the comparison: the run's decision stands. The pair
// restarts from the run's state after that step, with the run's decision in the overflow history
// (the loss scale sequence follows it), and the steps after it are compared as usual; a later
// skip the twin does not share is judged by the margin again, at a loss scale that has backed
// off further each time. The verdict stays inconclusive unless a later step is a finding. Ending
// the comparison there would leave whatever the run does after it unchecked: a run that keeps
// skipping because its gradients were not cleared after an overflow skips a borderline step
// first. Evidence: docs/EVIDENCE.md.
NumericResult CheckNumerics(const Config& cfg, const Assembly& dist, const RefPair& ref) {
  NumericResult out;
  StepComparer comparer(cfg, dist);
  const RefPair* pair = &ref;
  int64_t origin = -1;  // the step whose state `pair` last started from (-1: initial parameters)
  bool failed = false;
  Verdict borderline;  // the first borderline overflow decision (kPass: none)
  // The pair restarted from the run's state after step k, the run's decision there standing (at a
  // step that agreed it is the twin's too).
  auto restart_after = [&](int64_t k) {
    RefOrigin from;
    from.step = k;
    from.state = &dist.steps[k].tensors;
    from.skips = SkippedSteps(pair->same);
    from.skips.at(k) = dist.steps[k].skipped;
    return std::make_shared<RefPair>(RestartReferencePair(cfg, *pair, from));
  };
  auto adopt = [&](std::shared_ptr<RefPair> restarted, int64_t k) {
    out.restarted = restarted;
    out.restarts.push_back(k + 1);
    pair = restarted.get();
    origin = k;
  };
  for (int64_t s = 0; s < cfg.steps; ++s) {
    const StepComparer before = comparer;
    std::vector<Comparison> step;
    if (auto v = comparer.Step(s, *pair, s - origin - 1, step)) {
      if (failed) break;  // an earlier step diverged first: that is the finding
      if (v->kind != VerdictKind::kInconclusive || v->where.phase != Phase::kOverflow ||
          !CanRestart(cfg, dist.reporting)) {
        out.verdict = *v;
        return out;
      }
      // A borderline overflow decision (see Note [Overflow margin]): the run's decision stands and
      // the comparison goes on from the run's own state after this step (see Note [Following the
      // run's decision]); the verdict stays inconclusive unless a later step is a finding.
      if (borderline.kind == VerdictKind::kPass) borderline = *v;
      if (s + 1 == cfg.steps) break;  // the last step: nothing after it to compare
      adopt(restart_after(s), s);
      continue;
    }
    if (!failed && s > 0 && AnyFails(step) && CanRestart(cfg, dist.reporting)) {
      auto restarted = restart_after(s - 1);
      StepComparer again = before;
      std::vector<Comparison> local;
      if (!again.Step(s, *restarted, 0, local) && !AnyFails(local)) {
        comparer = again;
        step = std::move(local);
        adopt(restarted, s - 1);
      }
    }
    failed = failed || AnyFails(step);
    for (auto& c : step) out.comparisons.push_back(std::move(c));
  }
  for (const auto& c : out.comparisons) {
    if (c.ok()) continue;
    Verdict& v = out.verdict;
    v.kind = VerdictKind::kMismatch;
    v.oracle = "numeric";
    LocalizeComparison(v, c);
    std::ostringstream msg;
    msg.precision(6);
    msg << "step " << c.step << " " << Name(c.phase) << ": " << c.tensor_kind
        << (c.tensor.empty() ? "" : " of " + c.tensor)
        << (c.detail == "consistency"
                ? " reported by the engine differs from the norm of the gradients it reports"
                : " differs from the reference")
        << ": relative error " << c.error << " > bound " << c.bound << " (ratio " << c.ratio()
        << "); worst index " << c.index << " expected " << c.expected << " actual " << c.actual
        << " (seed " << cfg.seed << ")";
    if (!out.restarts.empty())
      msg << "; compared from the run's own state since step " << out.restarts.back() - 1
          << " (see Note [Restarted comparison])";
    v.message = msg.str();
    AttributeScaledGradient(v, c, dist, *pair);
    break;
  }
  if (out.verdict.kind == VerdictKind::kPass) out.verdict = borderline;
  return out;
}

void LocalizeComparison(Verdict& v, const Comparison& c) {
  Localize(v, c);
  v.where.index = c.index;
  v.where.expected = c.expected;
  v.where.actual = c.actual;
  v.where.error = c.error;
  v.where.bound = c.bound;
  v.where.detail = c.detail;
}

Verdict NumericOracle::Check(const OracleInput& in) const {
  if (in.numeric == nullptr) return SkipVerdict(name(), "the engine failed; nothing to compare");
  return in.numeric->verdict;
}

}  // namespace paradiff
