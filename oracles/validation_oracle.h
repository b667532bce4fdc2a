// The validation oracle (validation agreement): the validator (core/validate.h, core/budget.h)
// and the engine must agree on which configs run.
// - Before any rank starts, CheckRun asks ValidationGate: a config the validator rejects, or one
//   EngineSupports declares unsupported by this build, never reaches the engine; CheckRun returns
//   it as rejected (kInconclusive, not a finding) with the validator's messages.
// - A config that passed the gate must run: an engine that refuses it anyway (fails with a
//   refusal such as "not implemented" / "not supported"; see Note [Refusal markers]) is a
//   rejected-valid finding naming the field when the message names one. Any other failure is left
//   to the collective oracle and CheckRun's crash verdict.
// Not covered: accepted-invalid (the engine running a config the validator rejects) needs the
// engine to be run on invalid configs on purpose; the gate never does that.
#pragma once

#include "core/budget.h"
#include "core/config.h"
#include "core/status.h"
#include "core/verdict.h"
#include "oracles/oracle.h"

namespace paradiff {

// CheckConfig(cfg, budget), then EngineSupports(cfg). ok() means: the engine must run it.
Status ValidationGate(const Config& cfg, const ResourceBudget& budget);

// The non-finding verdict of a config the gate rejected (kInconclusive, oracle "validation").
Verdict GateRejection(const Config& cfg, const Status& why);

class ValidationOracle : public Oracle {
 public:
  const char* name() const override { return "validation"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
