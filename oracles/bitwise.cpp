#include "oracles/bitwise.h"

#include <ATen/ATen.h>

#include <cmath>
#include <sstream>

#include "comm/fresh.h"
#include "kernels/numerics.h"
#include "oracles/tolerance.h"

namespace paradiff {

namespace {

struct Format {
  int precision_bits;  // significand bits including the implicit one
  int min_exponent;    // exponent of the smallest normal number
};

Format FormatOf(DType d) {
  switch (d) {
    case DType::kBf16:
      return {8, -126};
    case DType::kFp16:
      return {11, -14};
    case DType::kFp64:
      return {53, -1022};
    case DType::kFp32:
      break;
  }
  return {24, -126};
}

// The spacing of format f at magnitude m: 2^(max(exp - 1, min_exponent) - (precision_bits - 1))
// with m = m' 2^exp, m' in [0.5, 1) (std::frexp; its exponent of 0, inf and NaN included).
double Ulp(double m, const Format& f) {
  int exp = 0;
  std::frexp(m, &exp);
  return std::ldexp(1.0, std::max(exp - 1, f.min_exponent) - (f.precision_bits - 1));
}

}  // namespace

double UlpDistance(double a, double b, DType held) {
  if (a == b || (std::isnan(a) && std::isnan(b))) return 0;
  if (!std::isfinite(a) || !std::isfinite(b)) return INFINITY;
  return std::fabs(a - b) / Ulp(std::max(std::fabs(a), std::fabs(b)), FormatOf(held));
}

int PrecisionBits(DType held) { return FormatOf(held).precision_bits; }

at::Tensor UlpOf(const at::Tensor& x, DType held) {  // one loop: a check asks for thousands
  const Format f = FormatOf(held);
  const at::Tensor v = AsFloat64(x);  // exact: the same exponents
  at::Tensor out = Empty(x.sizes(), at::kDouble);
  const double* in = v.data_ptr<double>();
  double* o = out.data_ptr<double>();
  for (int64_t i = 0; i < v.numel(); ++i) o[i] = Ulp(std::fabs(in[i]), f);
  return out;
}

void TallyUnequal(BitwiseDiff& d, int64_t i, double actual, double expected, DType held) {
  if (std::isnan(actual) && std::isnan(expected)) return;
  ++d.count;
  const double u = UlpDistance(actual, expected, held);
  if (d.index < 0 || u > d.ulps) {
    d.index = i;
    d.ulps = u;
    d.expected = expected;
    d.actual = actual;
  }
}

void PlaceBitwise(Localization& where, const BitwiseDiff& d, int64_t offset) {
  where.index = offset + d.index;
  where.expected = d.expected;
  where.actual = d.actual;
  where.error = d.ulps;
  where.bound = kDiscreteBound;
}

BitwiseDiff CompareBitwise(const at::Tensor& actual, const at::Tensor& expected, DType held) {
  BitwiseDiff d;
  if (actual.numel() != expected.numel()) {
    d.count = std::max(actual.numel(), expected.numel());
    d.ulps = INFINITY;
    return d;
  }
  // In one loop over the values (a check compares a hundred tensors or more this way).
  const at::Tensor a = AsFloat64(actual), e = AsFloat64(expected);
  const double* ap = a.data_ptr<double>();
  const double* ep = e.data_ptr<double>();
  for (int64_t i = 0; i < a.numel(); ++i) TallyBitwise(d, i, ap[i], ep[i], held);
  return d;
}

Verdict BitwiseFinding(const Config& cfg, const std::string& oracle, const std::string& detail,
                       const Quantity& q, const BitwiseDiff& d, const std::string& actual_name,
                       const std::string& expected_name) {
  Verdict v;
  v.kind = VerdictKind::kMismatch;
  v.oracle = oracle;
  Localize(v, q);
  v.where.detail = detail;
  PlaceBitwise(v.where, d);
  std::ostringstream msg;
  msg.precision(17);
  msg << "step " << q.step << " " << Name(q.phase) << ": " << q.tensor_kind
      << (q.tensor.empty() ? "" : " of " + q.tensor) << " differs bitwise between " << actual_name
      << " and " << expected_name << " in " << d.count << " element(s); worst index " << d.index
      << ": " << d.actual << " vs " << d.expected << " (" << d.ulps << " ulp of "
      << Name(HeldDType(cfg, q.tensor_kind)) << ", bound " << kDiscreteBound << ") (seed "
      << cfg.seed << ")";
  v.message = msg.str();
  return v;
}

Verdict FirstBitwiseDifference(const Config& cfg, const std::string& oracle,
                               const std::string& detail, const QuantityValue& actual,
                               const QuantityValue& expected, const std::string& actual_name,
                               const std::string& expected_name,
                               const std::function<bool(const Quantity&)>& include) {
  for (const Quantity& q : QuantitiesInOrder(cfg)) {
    if (include && !include(q)) continue;
    const BitwiseDiff d = CompareBitwise(actual(q), expected(q), HeldDType(cfg, q.tensor_kind));
    if (!d.equal()) return BitwiseFinding(cfg, oracle, detail, q, d, actual_name, expected_name);
  }
  return Verdict{};
}

}  // namespace paradiff
