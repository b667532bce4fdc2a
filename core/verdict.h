// Verdict: the outcome of checking one config. A finding is a value, never an exception.
// The signature is built only from layout- and seed-independent facts (kind, oracle, tensor kind,
// layer type, phase, and the oracle's detail when it has one), so the same bug under different
// seeds and sizes gets the same signature.
#pragma once

#include <cstdint>
#include <string>

#include "core/spelling.h"

namespace paradiff {

enum class VerdictKind {
  kPass,
  kMismatch,         // a numeric disagreement with the reference beyond the tolerance bound
  kInvariant,        // a structural invariant broke (shards do not tile, replicas differ, ...)
  kCollective,       // ranks disagreed on a collective call
  kHang,             // a rank never arrived; watchdog fired
  kCrash,            // the run threw / aborted
  kRejectedValid,    // the validator accepted the config but the engine refused it
  kAcceptedInvalid,  // the validator rejected a config the engine would run (fuzzer use)
  kInconclusive,     // legitimate disagreement (e.g. borderline overflow); not a finding
};
inline constexpr Spelling<VerdictKind> kVerdictKindNames[] = {
    {"pass", VerdictKind::kPass},
    {"mismatch", VerdictKind::kMismatch},
    {"invariant", VerdictKind::kInvariant},
    {"collective", VerdictKind::kCollective},
    {"hang", VerdictKind::kHang},
    {"crash", VerdictKind::kCrash},
    {"rejected-valid", VerdictKind::kRejectedValid},
    {"accepted-invalid", VerdictKind::kAcceptedInvalid},
    {"inconclusive", VerdictKind::kInconclusive}};
inline const char* Name(VerdictKind k) { return NameIn(kVerdictKindNames, k); }
bool IsFinding(VerdictKind);

// What part of a run a value or a finding belongs to. The first four are the phases of a step in
// localization order (See Note [Localization]); the others name what a finding about the whole
// run is about.
enum class Phase {
  kNone,
  kForward,      // the loss
  kGradient,     // the reduced gradients
  kReduction,    // the gradient norm
  kOptimizer,    // parameters, master weights, optimizer state after the update
  kOverflow,     // the loss scaler's overflow decision
  kObservation,  // what a rank reported, before any value is compared
  kCollective,   // the collective calls ranks issued
  kMemory,       // what ranks held
  kValidation,   // the validator's decision against the engine's
  kRun,          // the run as a whole (a failure, a layout-level relation)
  kDivergence,   // a reference diverged (not finite): there is nothing to compare against
};
inline constexpr Spelling<Phase> kPhaseNames[] = {{"", Phase::kNone},
                                                  {"forward", Phase::kForward},
                                                  {"gradient", Phase::kGradient},
                                                  {"reduction", Phase::kReduction},
                                                  {"optimizer", Phase::kOptimizer},
                                                  {"overflow", Phase::kOverflow},
                                                  {"observation", Phase::kObservation},
                                                  {"collective", Phase::kCollective},
                                                  {"memory", Phase::kMemory},
                                                  {"validation", Phase::kValidation},
                                                  {"run", Phase::kRun},
                                                  {"divergence", Phase::kDivergence}};
inline const char* Name(Phase p) { return NameIn(kPhaseNames, p); }
// The step phase a reported tensor kind belongs to: loss forward, grad gradient, grad_norm
// reduction, every other kind (param, master, optimizer slots) optimizer.
Phase PhaseOf(const std::string& tensor_kind);

// Where a value or a finding is: the one location of a quantity (oracles/quantities.h), a
// comparison (oracles/numeric_oracle.h) and a verdict (Localization).
struct Location {
  int64_t step = -1;  // 0-based optimizer step
  Phase phase = Phase::kNone;
  std::string
      tensor_kind;     // loss | grad_norm | grad | param | master | exp_avg | exp_avg_sq | momentum
  std::string tensor;  // logical tensor name, e.g. blocks.1.mlp.fc2.weight; "" for scalars
  std::string layer;   // layer type (embedding, attention, mlp, norm, head, linear) or ""
};

// Where a finding first shows (its Location) and the numbers that made it a finding.
struct Localization : Location {
  int rank = -1;        // rank that reported the value, when one rank is to blame
  int64_t index = -1;   // flat element index of the worst element
  double expected = 0;  // reference (fp64 truth) value at index
  double actual = 0;    // distributed value at index
  double error = 0;     // relative error of the distributed run vs truth
  double bound = 0;     // tolerance bound for that error
  int other_rank = -1;  // the second rank involved (replica, collective), -1 if none
  // Layout- and seed-independent refinement of the finding, part of the signature when not empty
  // (e.g. "all_reduce_vs_reduce_scatter" for a collective mismatch, "leak", "zero_stage").
  std::string detail;
  double ratio() const { return bound > 0 ? error / bound : 0; }
};

struct Verdict {
  VerdictKind kind = VerdictKind::kPass;
  std::string oracle;  // which oracle decided (numeric, tiling, collective, engine, ...)
  std::string
      message;  // human-readable, names rank / tensor / index / expected / actual / bound / seed
  Localization where;
  std::string Signature() const;
};

}  // namespace paradiff
