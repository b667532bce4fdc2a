#include "kernels/optim.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>

namespace paradiff {

std::vector<std::string> OptimizerSlotNames(OptimizerKind kind) {
  if (kind == OptimizerKind::kSgd) return {"momentum"};
  return {"exp_avg", "exp_avg_sq"};
}

double ClipCoefficient(double max_norm, double norm) {
  constexpr double kClipEps = 1e-6;
  return max_norm > 0 ? std::min(1.0, max_norm / (norm + kClipEps)) : 1.0;
}

void OptimizerUpdate(const OptimizerConfig& opt, int64_t step, at::Tensor& param,
                     const at::Tensor& grad, std::vector<at::Tensor>& slots) {
  at::Tensor g = grad;
  if (opt.kind == OptimizerKind::kSgd) {
    if (opt.weight_decay != 0) g = g + param * opt.weight_decay;
    at::Tensor& buf = slots[0];
    if (step == 1) {
      buf.copy_(g);
    } else {
      buf.mul_(opt.momentum).add_(g);
    }
    param.sub_(buf * opt.lr);
    return;
  }
  if (opt.kind == OptimizerKind::kAdamW) {
    param.mul_(1.0 - opt.lr * opt.weight_decay);
  } else if (opt.weight_decay != 0) {
    g = g + param * opt.weight_decay;
  }
  at::Tensor& m = slots[0];
  at::Tensor& v = slots[1];
  m.mul_(opt.beta1).add_(g * (1.0 - opt.beta1));
  v.mul_(opt.beta2).add_(g * g * (1.0 - opt.beta2));
  const double bc1 = 1.0 - std::pow(opt.beta1, static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(opt.beta2, static_cast<double>(step));
  at::Tensor denom = v.sqrt() / std::sqrt(bc2) + opt.eps;
  param.sub_(m / denom * (opt.lr / bc1));
}

}  // namespace paradiff
