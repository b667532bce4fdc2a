#include "kernels/pipeline_plan.h"

#include <algorithm>
#include <limits>

namespace paradiff {

namespace {

std::vector<int64_t> Uniform(int64_t layers, int64_t chunks, const FaultSet& faults) {
  std::vector<int64_t> out(chunks, layers / chunks);
  // BUG (zoo: pp.floor_layers_per_stage): layers per stage = floor(layers / stages); the remainder
  // layers are silently not built when the stages do not divide the layers.
  if (faults.pp_floor_layers_per_stage) return out;
  for (int64_t i = 0; i < layers % chunks; ++i) ++out[i];
  return out;
}

// Contiguous split of the blocks into `chunks` non-empty chunks minimizing the largest weight.
std::vector<int64_t> ByParameters(const Config& cfg, const ModelSpec& spec, int64_t chunks) {
  const int64_t L = cfg.model.layers;
  std::vector<double> block(L, 0.0);
  double embed = 0, head = 0;
  for (const auto& p : spec.params) {
    if (p.block >= 0) {
      block[p.block] += static_cast<double>(p.numel());
    } else if (p.name.rfind("embed.", 0) == 0) {
      embed += static_cast<double>(p.numel());
    } else {
      head += static_cast<double>(p.numel());
    }
  }
  const double inf = std::numeric_limits<double>::infinity();
  // best[c][l]: minimal max-weight splitting the first l blocks into c chunks; cut[c][l]: last cut.
  std::vector<std::vector<double>> best(chunks + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int64_t>> cut(chunks + 1, std::vector<int64_t>(L + 1, 0));
  best[0][0] = 0;
  for (int64_t c = 1; c <= chunks; ++c)
    for (int64_t l = c; l <= L; ++l)
      for (int64_t k = c - 1; k < l; ++k) {
        double w = 0;
        for (int64_t b = k; b < l; ++b) w += block[b];
        if (c == 1) w += embed;
        if (c == chunks && l == L) w += head;
        const double m = std::max(best[c - 1][k], w);
        if (m < best[c][l]) {
          best[c][l] = m;
          cut[c][l] = k;
        }
      }
  std::vector<int64_t> out(chunks);
  for (int64_t c = chunks, l = L; c >= 1; --c) {
    out[c - 1] = l - cut[c][l];
    l = cut[c][l];
  }
  return out;
}

}  // namespace

std::vector<int64_t> PartitionLayers(const Config& cfg, const ModelSpec& spec,
                                     const FaultSet& faults) {
  const int64_t chunks = cfg.parallel.pp * cfg.parallel.virtual_stages;
  switch (cfg.parallel.partition) {
    case PartitionMethod::kExplicit:
      return cfg.parallel.partition_layers;
    case PartitionMethod::kParameters:
      return ByParameters(cfg, spec, chunks);
    case PartitionMethod::kUniform:
      break;
  }
  return Uniform(cfg.model.layers, chunks, faults);
}

std::vector<PipelineOp> PipelineSchedule(const Config& cfg, int64_t rank) {
  const int64_t pp = cfg.parallel.pp, M = cfg.batch.accumulation_steps;
  std::vector<PipelineOp> ops;
  if (cfg.parallel.schedule == Schedule::kGpipe) {
    for (int64_t m = 0; m < M; ++m) ops.push_back({true, 0, m});
    for (int64_t m = M; m-- > 0;) ops.push_back({false, 0, m});
    return ops;
  }
  if (cfg.parallel.schedule == Schedule::k1F1B) {
    const int64_t warmup = std::min(pp - rank - 1, M);
    for (int64_t m = 0; m < warmup; ++m) ops.push_back({true, 0, m});
    for (int64_t i = 0; i < M - warmup; ++i) {
      ops.push_back({true, 0, warmup + i});
      ops.push_back({false, 0, i});
    }
    for (int64_t m = M - warmup; m < M; ++m) ops.push_back({false, 0, m});
    return ops;
  }
  // Interleaved 1F1B (Megatron): forward k runs chunk (k / pp) % v on micro-batch
  // (k / (pp * v)) * pp + k % pp; backward k the same with chunks in reverse order.
  const int64_t v = cfg.parallel.virtual_stages, total = M * v;
  auto fwd = [&](int64_t k) {
    return PipelineOp{true, (k / pp) % v, (k / (pp * v)) * pp + k % pp};
  };
  auto bwd = [&](int64_t k) {
    return PipelineOp{false, v - 1 - (k / pp) % v, (k / (pp * v)) * pp + k % pp};
  };
  const int64_t warmup = std::min((pp - rank - 1) * 2 + (v - 1) * pp, total);
  for (int64_t k = 0; k < warmup; ++k) ops.push_back(fwd(k));
  for (int64_t i = 0; i < total - warmup; ++i) {
    ops.push_back(fwd(warmup + i));
    ops.push_back(bwd(i));
  }
  for (int64_t k = total - warmup; k < total; ++k) ops.push_back(bwd(k));
  return ops;
}

}  // namespace paradiff
