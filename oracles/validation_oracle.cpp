#include "oracles/validation_oracle.h"

#include <algorithm>
#include <cctype>
#include <regex>

#include "kernels/engine.h"
#include "oracles/tolerance.h"

namespace paradiff {

namespace {

// Note [Refusal markers]: how an engine says "I do not run this config" (lower-cased substrings of
// its failure message). A crash that contains none of them is a crash, not a refusal.
const char* const kRefusalMarkers[] = {"not implemented", "not supported", "unsupported", "refuse"};

bool IsRefusal(const std::string& message) {
  std::string m = message;
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* marker : kRefusalMarkers)
    if (m.find(marker) != std::string::npos) return true;
  return false;
}

// The config field a message names ("parallel.tp=2: ..."), "" if none.
std::string FieldOf(const std::string& message) {
  static const std::regex field(R"(\b([a-z_]+(?:\.[a-z_]+)+)=)");
  std::smatch m;
  return std::regex_search(message, m, field) ? m[1].str() : "";
}

}  // namespace

Status ValidationGate(const Config& cfg, const ResourceBudget& budget) {
  Status s = CheckConfig(cfg, budget);
  if (s.ok()) s = EngineSupports(cfg);
  return s;
}

Verdict GateRejection(const Config& cfg, const Status& why) {
  Verdict v;
  v.kind = VerdictKind::kInconclusive;
  v.oracle = "validation";
  v.where.phase = Phase::kValidation;
  v.where.detail = why.errors().empty() ? "" : why.errors().front().field;
  v.message = "config rejected before any rank started: " + why.ToString() + " (seed " +
              std::to_string(cfg.seed) + ")";
  return v;
}

Verdict ValidationOracle::Check(const OracleInput& in) const {
  const EngineOutcome& e = in.outcome;
  if (e.ok || e.failure_kind != FailureKind::kCrash || !IsRefusal(e.failure)) return Verdict{};
  Verdict v;
  v.kind = VerdictKind::kRejectedValid;
  v.oracle = "validation";
  v.where.phase = Phase::kValidation;
  v.where.rank = e.failure_rank;
  v.where.detail = FieldOf(e.failure);
  v.where.error = 1;
  v.where.bound = kDiscreteBound;
  v.message = "the validator accepts this config but the engine refused it: " + e.failure +
              " (seed " + std::to_string(in.cfg.seed) + ")";
  return v;
}

}  // namespace paradiff
