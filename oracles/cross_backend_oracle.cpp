#include "oracles/cross_backend_oracle.h"

#include "core/watchdog.h"
#include "kernels/engine.h"
#include "oracles/determinism_oracle.h"

namespace paradiff {

Verdict CrossBackendOracle::Check(const OracleInput& in) const {
  if (!in.outcome.ok || in.assembly == nullptr)
    return SkipVerdict(name(), "the engine failed; nothing to compare across backends");
  Config other = in.cfg;
  other.backend = in.cfg.backend == Backend::kMpi ? Backend::kLocal : Backend::kMpi;
  const std::string here = std::string("the ") + Name(in.cfg.backend) + " run";
  const std::string there = std::string("the ") + Name(other.backend) + " run";
  if (!other_) {
    const Status s = EngineSupports(other);
    if (!s.ok()) return SkipVerdict(name(), s.ToString());
  }
  const EngineOutcome again = other_ ? other_(other) : RunEngine(other, kDefaultCollectiveTimeout);
  return CompareSecondRun(in, again, name(), here, there);
}

}  // namespace paradiff
