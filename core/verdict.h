// Verdict: the outcome of checking one config. A finding is a value, never an exception.
// The signature is built only from layout- and seed-independent facts (kind, oracle, tensor kind,
// layer type, phase, and the oracle's detail when it has one), so the same bug under different
// seeds and sizes gets the same signature.
#pragma once

#include <cstdint>
#include <string>

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
const char* Name(VerdictKind);
bool IsFinding(VerdictKind);

// Where a finding first shows: step, phase, tensor, and the numbers that made it a finding.
struct Localization {
  int64_t step = -1;        // 0-based optimizer step
  std::string phase;        // forward | gradient | optimizer | parameters | collective | ...
  std::string tensor;       // logical tensor name, e.g. blocks.1.mlp.fc2.weight
  std::string tensor_kind;  // loss | grad_norm | grad | param | exp_avg | exp_avg_sq | momentum
  std::string layer;        // layer type (embedding, attention, mlp, norm, head, linear) or ""
  int rank = -1;            // rank that reported the value, when one rank is to blame
  int64_t index = -1;       // flat element index of the worst element
  double expected = 0;      // reference (fp64 truth) value at index
  double actual = 0;        // distributed value at index
  double error = 0;         // relative error of the distributed run vs truth
  double bound = 0;         // tolerance bound for that error
  int other_rank = -1;      // the second rank involved (replica, collective), -1 if none
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
