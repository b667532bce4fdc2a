#include "kernels/data.h"

#include <ATen/ATen.h>

#include "comm/fresh.h"
#include "core/rng.h"

namespace paradiff {

namespace {

// exact_linear data are in {-1, 0, 1} * kDyadicData, exact in every dtype.
constexpr double kDyadicData = 0.25;

}  // namespace

MicroBatch MakeMicroBatch(const Config& c, int64_t step, int64_t g) {
  const int64_t mb = c.batch.micro_batch, seq = c.model.seq_len;
  const int64_t first_sample = step * GlobalBatch(c) + g * mb;
  MicroBatch out;
  if (c.model.kind == ModelKind::kExactLinear) {
    const int64_t h = c.model.hidden;
    out.inputs = Empty({mb, seq, h}, at::kDouble);
    out.targets = Empty({mb, seq, h}, at::kDouble);
    double* x = out.inputs.data_ptr<double>();
    double* y = out.targets.data_ptr<double>();
    const CounterStream xs(c.seed, "data/x"), ys(c.seed, "data/y");
    for (int64_t i = 0; i < mb * seq * h; ++i) {
      const uint64_t idx = static_cast<uint64_t>(first_sample * seq * h + i);
      x[i] = kDyadicData * (static_cast<double>(xs.Below(idx, 3)) - 1.0);
      y[i] = kDyadicData * (static_cast<double>(ys.Below(idx, 3)) - 1.0);
    }
    return out;
  }
  // seq_len + 1 tokens per sample: inputs are the first seq_len, targets the last seq_len.
  out.inputs = Empty({mb, seq}, at::kLong);
  out.targets = Empty({mb, seq}, at::kLong);
  int64_t* inputs = out.inputs.data_ptr<int64_t>();
  int64_t* targets = out.targets.data_ptr<int64_t>();
  const CounterStream ts(c.seed, "data/tokens");
  for (int64_t s = 0; s < mb; ++s)
    for (int64_t p = 0; p <= seq; ++p) {
      const auto token = static_cast<int64_t>(
          ts.Below(static_cast<uint64_t>((first_sample + s) * (seq + 1) + p), c.model.vocab));
      if (p < seq) inputs[s * seq + p] = token;
      if (p > 0) targets[s * seq + p - 1] = token;
    }
  return out;
}

}  // namespace paradiff
