#include "kernels/param_init.h"

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <tuple>

#include "core/rng.h"

namespace paradiff {

void GenerateParamValues(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t count,
                         double* p) {
  const CounterStream stream(seed, "param/" + spec.name);
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t idx = static_cast<uint64_t>(begin + i);
    switch (spec.init) {
      case InitKind::kNormal:
        p[i] = spec.scale * stream.Normal(idx);
        break;
      case InitKind::kOnes:
        p[i] = 1.0;
        break;
      case InitKind::kZeros:
        p[i] = 0.0;
        break;
      case InitKind::kDyadic:
        p[i] = spec.scale * (static_cast<double>(stream.Below(idx, 3)) - 1.0);
        break;
    }
  }
}

at::Tensor GenerateParamSlice(const ParamSpec& spec, uint64_t seed, int64_t begin, int64_t count) {
  at::Tensor out = at::empty({count}, at::kDouble);
  GenerateParamValues(spec, seed, begin, count, out.data_ptr<double>());
  return out;
}

at::Tensor GenerateParam(const ParamSpec& spec, uint64_t seed) {
  // A check generates each whole parameter several times (the reference pair's runs, the numeric
  // and update oracles), and the configs of a campaign's family share their seed and model: each
  // thread keeps the last tensors it generated, and hands out copies (callers own their result).
  using Key = std::tuple<uint64_t, std::string, int, double, int64_t>;
  constexpr int64_t kKeptBytes = int64_t{16} << 20;  // a few models; all dropped when full
  thread_local std::map<Key, at::Tensor> kept;
  thread_local int64_t kept_bytes = 0;
  const Key key{seed, spec.name, static_cast<int>(spec.init), spec.scale, spec.numel()};
  auto it = kept.find(key);
  if (it == kept.end()) {
    const int64_t bytes = spec.numel() * static_cast<int64_t>(sizeof(double));
    if (kept_bytes + bytes > kKeptBytes) {
      kept.clear();
      kept_bytes = 0;
    }
    it = kept.emplace(key, GenerateParamSlice(spec, seed, 0, spec.numel())).first;
    kept_bytes += bytes;
  }
  return it->second.clone().view(spec.shape);
}

}  // namespace paradiff
