// The metamorphic oracle: relations between two runs of the engine that must hold whatever the
// reference says, so bugs the engine shares with the reference (data, loss averaging, the model
// math both call) still show. Each relation runs one variant config (through
// OracleInput::run_engine) and applies only when the variant passes ValidationGate (valid and
// supported by this engine build); otherwise it is skipped.
// - zero_stage: ZeRO stage k vs stage 0 at equal dp (stage 0 vs stage 3 when the config is at 0)
//   must agree bitwise in every reported quantity where the system promises it
//   (Reporting::zero_stages_bitwise: the built-in engine, see Note [Layer-wise execution] in
//   kernels/rank_engine.h: all stages share one compute path and one norm partition); elsewhere
//   (a framework whose stages reduce and take norms in other orders) within the sum of the two
//   runs' bounds, like split.
// - split: the same global batch split differently (see Note [Split variant]) is the same data
//   (kernels/data.h: samples are a function of the global sample index), so the two runs agree
//   within the sum of their own numeric bounds (see Note [Cross-run bound]).
// - tp: tp = 1 vs tp = n (n = 2 from tp = 1) within the sum of the bounds likewise.
// It costs up to three more engine runs and two references: off in the campaign default set, on
// by name ("metamorphic", or the "all" set). Findings: kMismatch, oracle "metamorphic", detail
// the relation, localized to the first quantity that breaks it.
//
// Note [Split variant]: (dp, micro_batch, accumulation_steps) becomes (1, mb, acc * dp) when
// dp > 1 (the single-rank run of the same global batch), else (dp, mb / 2, acc * 2) when mb is
// even, else (dp, mb * 2, acc / 2) when acc is even; otherwise the relation is skipped.
//
// Note [Cross-run bound]: if runs A and B each pass the numeric oracle, |A - B| <= |A - t| +
// |B - t| <= bound_A + bound_B. Requiring |A - B| / |t| <= bound_A + bound_B therefore adds no
// false positives, yet catches a split- or tp-dependent error that the reference shares (t is wrong
// for both, bound_A and bound_B still measure rounding only). The variant must also pass the
// numeric oracle against its own reference. Under Adam only the loss, the gradients and the
// gradient norm are compared directly (see Note [Adam sensitivity] in numeric_oracle.cpp:
// parameters near zero gradient may legitimately move apart by about lr), and only the steps before
// the two runs' overflow decisions part (see Note [Different overflow decisions] in the .cpp).
#pragma once

#include <optional>

#include "oracles/oracle.h"

namespace paradiff {

// The variant configs of the relations (std::nullopt when the relation has none for cfg); not
// yet checked against ValidationGate.
std::optional<Config> ZeroStageVariant(const Config& cfg);
std::optional<Config> SplitVariant(const Config& cfg);
std::optional<Config> TpVariant(const Config& cfg);

class MetamorphicOracle : public Oracle {
 public:
  const char* name() const override { return "metamorphic"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
