// LossScaler: static or dynamic loss scaling with DeepSpeed's semantics. Pure per-step state
// arithmetic (no communication), shared by the engine and the reference so both follow the same
// schedule: the engine feeds it the overflow decision its ranks agreed on, the reference its own.
//
// Dynamic: an overflow skips the step; the scale backs off (scale * backoff, not below min) once
// `hysteresis` consecutive-or-not overflows have been absorbed (each overflow before that only
// spends one unit of hysteresis). After growth_interval steps without overflow the scale grows by
// growth_factor and the hysteresis is restored. Static: the scale never changes; an overflow still
// skips the step. None: scale 1, no overflow check.
#pragma once

#include <cstdint>

#include "core/config.h"

namespace paradiff {

class LossScaler {
 public:
  explicit LossScaler(const LossScaleConfig& cfg);
  double scale() const { return scale_; }
  bool enabled() const { return cfg_.mode != LossScaleMode::kNone; }
  // Advances after a step whose (agreed) overflow decision is `overflow`. Returns true when the
  // scale changed.
  bool Update(bool overflow);

  // The whole mutable state, for checkpoints.
  struct State {
    double scale;
    int64_t good_steps, hysteresis_left;
  };
  State state() const { return {scale_, good_steps_, hysteresis_left_}; }
  void Restore(const State& s) {
    scale_ = s.scale;
    good_steps_ = s.good_steps;
    hysteresis_left_ = s.hysteresis_left;
  }

 private:
  LossScaleConfig cfg_;
  double scale_;
  int64_t good_steps_ = 0;
  int64_t hysteresis_left_;
};

}  // namespace paradiff
