#include "core/verdict.h"

namespace paradiff {

Phase PhaseOf(const std::string& tensor_kind) {
  if (tensor_kind == "loss") return Phase::kForward;
  if (tensor_kind == "grad") return Phase::kGradient;
  if (tensor_kind == "grad_norm") return Phase::kReduction;
  return Phase::kOptimizer;
}

bool IsFinding(VerdictKind k) { return k != VerdictKind::kPass && k != VerdictKind::kInconclusive; }

std::string Verdict::Signature() const {
  if (kind == VerdictKind::kPass) return "pass";
  auto part = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  return std::string(Name(kind)) + "." + part(oracle) + "." + part(where.tensor_kind) + "." +
         part(where.layer) + "." + part(Name(where.phase)) +
         (where.detail.empty() ? "" : "." + where.detail);
}

}  // namespace paradiff
