// ShrinkCandidates: the configs one step smaller or simpler than a given one, for the minimizer.
// Owns the order of the moves, most aggressive first: collapse the layout to one device, shrink a
// checkpoint's save and reload layouts together and save earlier, then halve, then decrement each
// size, then simplify one feature at a time (ZeRO 0, fp32, untied, no
// clipping, plain sgd, ...). Faults are kept. Every candidate is checked with CheckConfig; one
// that breaks a rule, or equals the input or an earlier candidate, is left out.
#include <algorithm>
#include <functional>
#include <numeric>
#include <vector>

#include "fuzz/config_domain.h"
#include "fuzz/config_domain_internal.h"

namespace paradiff {
namespace {

using domain_internal::FixWorld;
using Edit = std::function<void(Config&)>;

constexpr double kPlainSgdLr = 0.1;  // lr of the "plain sgd" simplification of a gpt model

void SetDp(Config& c, int64_t dp) {
  c.parallel.dp = std::max<int64_t>(1, dp);
  FixWorld(c);
}

// The reload layout's dp: at most `dp`, and dividing the global batch's micro-batches
// (parallel.dp x accumulation), which a reload keeps. The checkpoint's other fields stay.
void SetReloadDp(Config& c, int64_t dp) {
  const int64_t micro_batches = c.parallel.dp * c.batch.accumulation_steps;
  int64_t d = std::max<int64_t>(1, std::min(dp, micro_batches));
  while (d > 1 && micro_batches % d != 0) --d;
  c.checkpoint.reload.dp = d;
}

void NoTp(Config& c) {
  c.parallel.tp = 1;
  c.parallel.sp = false;
  FixWorld(c);
}

void NoPipeline(Config& c) {
  ParallelConfig& p = c.parallel;
  p.pp = 1;
  p.virtual_stages = 1;
  p.schedule = Schedule::k1F1B;
  p.partition = PartitionMethod::kUniform;
  p.partition_layers.clear();
  FixWorld(c);
}

void UniformPartition(Config& c) {
  c.parallel.partition = PartitionMethod::kUniform;
  c.parallel.partition_layers.clear();
}

// Fewer pipeline stages, still a pipeline (NoPipeline takes it away): a stage-boundary finding
// at pp 3 need not vanish at pp 2.
void FewerStages(Config& c, int64_t pp) {
  if (pp < 2 || pp >= c.parallel.pp) return;
  c.parallel.pp = pp;
  UniformPartition(c);
  FixWorld(c);
}

// Fewer layers; an explicit partition loses the layer from its largest chunk, or becomes uniform.
void SetLayers(Config& c, int64_t layers) {
  std::vector<int64_t>& parts = c.parallel.partition_layers;
  if (c.parallel.partition == PartitionMethod::kExplicit && layers == c.model.layers - 1) {
    auto largest = std::max_element(parts.begin(), parts.end());
    if (largest != parts.end() && *largest > 1) {
      --*largest;
      c.model.layers = layers;
      return;
    }
  }
  if (c.parallel.partition == PartitionMethod::kExplicit) UniformPartition(c);
  c.model.layers = std::max<int64_t>(1, layers);
}

// hidden = heads * head_dim with a smaller head_dim (gpt), or the next power of two down (exact).
void SetHeadDim(Config& c, int64_t head_dim) {
  ModelConfig& m = c.model;
  if (m.kind == ModelKind::kExactLinear) {
    m.hidden = std::max<int64_t>(1, m.hidden / 2);
    return;
  }
  m.hidden = m.heads * std::max<int64_t>(1, head_dim);
}

void HalveHeads(Config& c) {
  ModelConfig& m = c.model;
  const int64_t head_dim = m.hidden / m.heads;
  m.heads = std::max<int64_t>(1, m.heads / 2);
  m.kv_heads = std::gcd(m.kv_heads, m.heads);
  m.hidden = m.heads * head_dim;
}

// ffn / seq_len stay multiples of tp where the layout needs it.
void SetFfn(Config& c, int64_t ffn) {
  const int64_t tp = c.model.kind == ModelKind::kGpt ? c.parallel.tp : 1;
  c.model.ffn = std::max(tp, ffn / tp * tp);
}

void SetSeqLen(Config& c, int64_t seq_len) {
  const int64_t unit = c.parallel.sp ? c.parallel.tp : 1;
  c.model.seq_len = std::max(unit, seq_len / unit * unit);
}

void AllFp32(Config& c) { c.precision = PrecisionConfig{}; }

void PlainSgd(Config& c) {
  OptimizerConfig& o = c.optimizer;
  const bool keep_lr = o.kind == OptimizerKind::kSgd;
  o.kind = OptimizerKind::kSgd;
  o.momentum = 0.0;
  o.weight_decay = 0.0;
  if (!keep_lr) o.lr = kPlainSgdLr;
}

// The moves, most aggressive first. Fields exact_linear ignores are not shrunk for it.
std::vector<Edit> Moves(const Config& c) {
  const ModelConfig& m = c.model;
  const ParallelConfig& p = c.parallel;
  const bool gpt = m.kind == ModelKind::kGpt;
  const int64_t head_dim = m.hidden / m.heads;
  const int64_t chunks = p.pp * p.virtual_stages;
  const int64_t pp_unit = p.schedule == Schedule::kInterleaved ? p.pp : 1;
  std::vector<Edit> moves = {
      [](Config& x) {
        NoTp(x);
        NoPipeline(x);
        SetDp(x, 1);
      },
      [](Config& x) {
        x.steps = 1;
        x.checkpoint = CheckpointConfig{};
      },
      [](Config& x) { SetDp(x, 1); },
      NoTp,
      NoPipeline,
  };
  for (const auto& option : c.target_options)  // back to the target's default
    moves.push_back([name = option.first](Config& x) { x.target_options.erase(name); });
  // A finding that shows only after a reload needs both layouts: they shrink together, the reload
  // layout also alone, and the save moves earlier.
  const ReloadConfig& r = c.checkpoint.reload;
  if (c.checkpoint.save_at > 0) {
    const std::vector<Edit> reload = {
        [=](Config& x) {
          SetDp(x, p.dp / 2);
          SetReloadDp(x, r.dp / 2);
        },
        [=](Config& x) { SetReloadDp(x, 1); },
        [=](Config& x) { SetReloadDp(x, r.dp / 2); },
        [=](Config& x) {
          x.checkpoint.reload.tp = 1;
          x.checkpoint.reload.pp = 1;
        },
        [=](Config& x) {
          x.steps = c.steps - 1;
          x.checkpoint.save_at = c.checkpoint.save_at - 1;
        },
        [=](Config& x) { x.checkpoint.save_at = c.checkpoint.save_at - 1; },
        [=](Config& x) {
          SetDp(x, p.dp - 1);
          SetReloadDp(x, r.dp - 1);
        },
        [=](Config& x) { SetReloadDp(x, r.dp - 1); },
        [](Config& x) { x.checkpoint.reload.zero_stage = 0; },
    };
    moves.insert(moves.end(), reload.begin(), reload.end());
  }
  // The layout shrinks before the model does: a distributed finding usually needs some layout,
  // and every later check is cheaper with fewer ranks and micro-batches.
  const int64_t half_accumulation =
      std::max<int64_t>(pp_unit, c.batch.accumulation_steps / 2 / pp_unit * pp_unit);
  const std::vector<Edit> halves = {
      [=](Config& x) { SetLayers(x, chunks); },
      [=](Config& x) { SetDp(x, p.dp / 2); },
      [=](Config& x) { SetDp(x, p.dp - 1); },
      [=](Config& x) { FewerStages(x, p.pp / 2); },
      [=](Config& x) { FewerStages(x, p.pp - 1); },
      [=](Config& x) { x.batch.accumulation_steps = half_accumulation; },
      [=](Config& x) { SetLayers(x, m.layers / 2); },
      [=](Config& x) { SetHeadDim(x, head_dim / 2); },
  };
  moves.insert(moves.end(), halves.begin(), halves.end());
  if (gpt) {
    moves.push_back(HalveHeads);
    moves.push_back([=](Config& x) { SetFfn(x, m.ffn / 2); });
    moves.push_back([=](Config& x) { x.model.vocab = std::max<int64_t>(2, m.vocab / 2); });
  }
  const std::vector<Edit> more_sizes = {
      [=](Config& x) { SetSeqLen(x, m.seq_len / 2); },
      [=](Config& x) { x.batch.micro_batch = std::max<int64_t>(1, c.batch.micro_batch / 2); },
      [=](Config& x) { x.batch.accumulation_steps = pp_unit; },
      [=](Config& x) { x.steps = std::max<int64_t>(1, c.steps / 2); },
      [=](Config& x) { SetLayers(x, m.layers - 1); },
  };
  moves.insert(moves.end(), more_sizes.begin(), more_sizes.end());
  if (gpt) {
    moves.push_back([=](Config& x) { SetHeadDim(x, head_dim - 1); });
    moves.push_back([=](Config& x) { SetFfn(x, m.ffn - p.tp); });
    moves.push_back([=](Config& x) { x.model.vocab = m.vocab - 1; });
  }
  const std::vector<Edit> decrements_and_features = {
      [=](Config& x) { SetSeqLen(x, m.seq_len - (p.sp ? p.tp : 1)); },
      [=](Config& x) { x.batch.micro_batch = c.batch.micro_batch - 1; },
      [=](Config& x) { x.batch.accumulation_steps = c.batch.accumulation_steps - pp_unit; },
      [=](Config& x) { x.steps = c.steps - 1; },
      [](Config& x) { x.checkpoint = CheckpointConfig{}; },
      [](Config& x) {
        x.zero.stage = 0;
        x.zero.shard_group = 0;
      },
      [](Config& x) { x.zero.shard_group = 0; },
      AllFp32,
      [](Config& x) { x.clip_grad_norm = 0.0; },
      PlainSgd,
      [](Config& x) { x.optimizer.schedule = LrScheduleConfig{}; },
      [](Config& x) { x.parallel.sp = false; },
      [](Config& x) {
        x.parallel.schedule = Schedule::k1F1B;
        x.parallel.virtual_stages = 1;
      },
      UniformPartition,
      [](Config& x) { x.zero.align_elems = 1; },
      [](Config& x) { x.optimizer.weight_decay = 0.0; },
      [](Config& x) { x.backend = Backend::kLocal; },
  };
  moves.insert(moves.end(), decrements_and_features.begin(), decrements_and_features.end());
  if (gpt) {
    moves.push_back([](Config& x) { x.model.tied_embeddings = false; });
    moves.push_back([](Config& x) { x.model.position_embeddings = false; });
    moves.push_back([](Config& x) { x.model.activation = Activation::kGelu; });
    moves.push_back([](Config& x) { x.model.kv_heads = x.model.heads; });
  }
  return moves;
}

}  // namespace

std::vector<Config> ShrinkCandidates(const Config& c) {
  std::vector<Config> out;
  if (!domain_internal::SaneModel(c.model) || c.parallel.tp < 1 || c.parallel.pp < 1 ||
      c.parallel.dp < 1 || c.parallel.virtual_stages < 1)
    return out;
  const ResourceBudget budget = domain_internal::DomainBudget();
  for (const Edit& edit : Moves(c)) {
    Config candidate = c;
    edit(candidate);
    if (candidate == c || !CheckConfig(candidate, budget).ok()) continue;
    if (std::find(out.begin(), out.end(), candidate) != out.end()) continue;
    out.push_back(std::move(candidate));
  }
  return out;
}

}  // namespace paradiff
