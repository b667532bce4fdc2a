#include "core/verdict.h"

namespace paradiff {

const char* Name(VerdictKind k) {
  switch (k) {
    case VerdictKind::kPass:
      return "pass";
    case VerdictKind::kMismatch:
      return "mismatch";
    case VerdictKind::kInvariant:
      return "invariant";
    case VerdictKind::kCollective:
      return "collective";
    case VerdictKind::kHang:
      return "hang";
    case VerdictKind::kCrash:
      return "crash";
    case VerdictKind::kRejectedValid:
      return "rejected-valid";
    case VerdictKind::kAcceptedInvalid:
      return "accepted-invalid";
    case VerdictKind::kInconclusive:
      return "inconclusive";
  }
  return "?";
}

bool IsFinding(VerdictKind k) { return k != VerdictKind::kPass && k != VerdictKind::kInconclusive; }

std::string Verdict::Signature() const {
  if (kind == VerdictKind::kPass) return "pass";
  auto part = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  return std::string(Name(kind)) + "." + part(oracle) + "." + part(where.tensor_kind) + "." +
         part(where.layer) + "." + part(where.phase) +
         (where.detail.empty() ? "" : "." + where.detail);
}

}  // namespace paradiff
