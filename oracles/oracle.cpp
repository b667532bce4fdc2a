#include "oracles/oracle.h"

namespace paradiff {

namespace {

constexpr char kSkipPrefix[] = "skipped: ";

}  // namespace

Verdict SkipVerdict(const std::string& oracle, const std::string& why) {
  Verdict v;
  v.oracle = oracle;
  v.message = kSkipPrefix + why;
  return v;
}

bool IsSkip(const Verdict& v) {
  return v.kind == VerdictKind::kPass && v.message.rfind(kSkipPrefix, 0) == 0;
}

}  // namespace paradiff
