#include "kernels/loss_scaler.h"

#include <algorithm>

namespace paradiff {

LossScaler::LossScaler(const LossScaleConfig& cfg)
    : cfg_(cfg),
      scale_(cfg.mode == LossScaleMode::kNone ? 1.0 : cfg.init),
      hysteresis_left_(cfg.hysteresis) {}

bool LossScaler::Update(bool overflow) {
  if (cfg_.mode != LossScaleMode::kDynamic) return false;
  const double before = scale_;
  if (overflow) {
    good_steps_ = 0;
    if (hysteresis_left_ <= 1) {
      scale_ = std::max(scale_ * cfg_.backoff, cfg_.min);
    } else {
      --hysteresis_left_;
    }
  } else if (++good_steps_ >= cfg_.growth_interval) {
    scale_ *= cfg_.growth_factor;
    good_steps_ = 0;
    hysteresis_left_ = cfg_.hysteresis;
  }
  return scale_ != before;
}

}  // namespace paradiff
