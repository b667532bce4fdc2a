// Oracle: one way of deciding whether a run is wrong. Each oracle is a class behind this interface
// (one per file in oracles/), selectable by name (oracles/oracle_registry.h), and each has a
// self-test that plants the bug it must catch (tests/unit/*oracle*_test.cpp, docs/ORACLES.md).
//
// Contract: Check() never throws for anything the target did; it returns
// - a finding (IsFinding(kind)) localized as see Note [Localization] says,
// - kPass when the property holds, or
// - a skip: kPass with oracle = name() and a message starting "skipped: " (SkipVerdict), when the
//   oracle does not apply to this config or run (e.g. the exact oracle on a gpt model).
// An oracle may run more engine executions through OracleInput::run_engine (determinism,
// metamorphic); it must not keep state between calls.
//
// Note [Localization]: every finding names the first divergent step (-1 only where the evidence
// has no step: a collective failure or hang reported by the communicator), the phase (forward |
// gradient | reduction | optimizer for values; collective, memory, validation, observation for the
// rest), the tensor kind, the layer type and the tensor, with error, bound and ratio. Its signature
// (core/verdict.h) uses only layout- and seed-independent parts: kind, oracle, tensor kind, layer
// type, phase and detail, never a size, a rank, an index or a tensor name with a block number.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "core/budget.h"
#include "core/config.h"
#include "core/verdict.h"
#include "oracles/assemble.h"
#include "oracles/reference.h"
#include "sut/outcome.h"

namespace paradiff {

struct NumericResult;  // oracles/numeric_oracle.h

// Runs one more engine execution of a config (same backend and watchdog as the checked run).
using EngineRunner = std::function<EngineOutcome(const Config&)>;

struct OracleInput {
  OracleInput(const Config& c, const EngineOutcome& o) : cfg(c), outcome(o) {}
  const Config& cfg;                       // the checked config (valid and supported)
  const EngineOutcome& outcome;            // the engine's run: observations or its failure
  const Assembly* assembly = nullptr;      // assembled observations; null when the engine failed
  const RefPair* ref = nullptr;            // the reference pair of cfg
  const NumericResult* numeric = nullptr;  // CheckNumerics of the assembly; null when it failed
  EngineRunner run_engine;                 // more executions (determinism, metamorphic)
  ReferenceCache* cache = nullptr;         // references of variant configs (optional)
  ResourceBudget budget;                   // what a variant config must fit (metamorphic)
};

class Oracle {
 public:
  virtual ~Oracle() = default;
  virtual const char* name() const = 0;
  virtual Verdict Check(const OracleInput& in) const = 0;
};

// A skip verdict of `oracle`: kPass, message "skipped: <why>".
Verdict SkipVerdict(const std::string& oracle, const std::string& why);
bool IsSkip(const Verdict& v);

}  // namespace paradiff
