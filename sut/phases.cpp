#include "sut/phases.h"

#include <algorithm>

#include "core/budget.h"

namespace paradiff {

Config ReloadPhaseConfig(const Config& c) {
  Config r = c;
  const paradiff::ReloadConfig& rl = c.checkpoint.reload;
  r.parallel.tp = rl.tp;
  r.parallel.pp = rl.pp;
  r.parallel.dp = rl.dp;
  r.parallel.world = rl.tp * rl.pp * rl.dp;
  r.zero.stage = rl.zero_stage;
  // The global batch stays the same: the micro-batches per step are re-divided over the new dp.
  const int64_t micro_batches = c.parallel.dp * c.batch.accumulation_steps;
  if (rl.dp > 0 && micro_batches % rl.dp == 0) r.batch.accumulation_steps = micro_batches / rl.dp;
  if (r.parallel.pp != c.parallel.pp) {  // stage structure does not carry over
    r.parallel.virtual_stages = 1;
    if (r.parallel.schedule == Schedule::kInterleaved) r.parallel.schedule = Schedule::k1F1B;
    r.parallel.partition = PartitionMethod::kUniform;
    r.parallel.partition_layers.clear();
  }
  if (r.parallel.tp == 1 || r.model.seq_len % r.parallel.tp != 0) r.parallel.sp = false;
  r.checkpoint.save_at = 0;
  return r;
}

Config LayoutAtStep(const Config& cfg, int64_t step) {
  return cfg.checkpoint.save_at > 0 && step >= cfg.checkpoint.save_at ? ReloadPhaseConfig(cfg)
                                                                      : cfg;
}

int64_t PhaseFirstStep(const Config& cfg, int64_t step) {
  return cfg.checkpoint.save_at > 0 && step >= cfg.checkpoint.save_at ? cfg.checkpoint.save_at : 0;
}

Observations JoinPhases(const Observations& a, const Observations& b, int64_t split,
                        int64_t steps) {
  if (b.ranks.empty() && split == steps) return a;
  Observations out;
  const size_t n = std::max(a.ranks.size(), b.ranks.size());
  out.ranks.resize(n);
  // Memory and collective marks only where the phases recorded them (an external target does not).
  bool memory = false, marks_recorded = false;
  for (const Observations* phase : {&a, &b})
    for (const RankObservations& ro : phase->ranks) {
      memory = memory || !ro.memory.empty();
      marks_recorded = marks_recorded || !ro.collective_marks.empty();
    }
  for (size_t r = 0; r < n; ++r) {
    RankObservations& o = out.ranks[r];
    o.rank = static_cast<int>(r);
    for (const Observations* phase : {&a, &b}) {
      const bool have = r < phase->ranks.size();
      const int64_t from = phase == &a ? 0 : split, to = phase == &a ? split : steps;
      const int64_t before = static_cast<int64_t>(o.collectives.size());  // calls of earlier phases
      for (int64_t s = from; s < to; ++s) {
        const int64_t i = s - from;
        if (have && i < static_cast<int64_t>(phase->ranks[r].steps.size())) {
          o.steps.push_back(phase->ranks[r].steps[i]);
          if (i < static_cast<int64_t>(phase->ranks[r].memory.size()))
            o.memory.push_back(phase->ranks[r].memory[i]);
          const auto& marks = phase->ranks[r].collective_marks;
          if (i < static_cast<int64_t>(marks.size()))
            o.collective_marks.push_back(before + marks[i]);
        } else {
          RankStep placeholder;
          if (!phase->ranks.empty() && i < static_cast<int64_t>(phase->ranks[0].steps.size()))
            placeholder.skipped = phase->ranks[0].steps[i].skipped;
          o.steps.push_back(placeholder);
          if (memory) o.memory.push_back(MemoryAccount{});
          if (marks_recorded)
            o.collective_marks.push_back(
                before + (have ? static_cast<int64_t>(phase->ranks[r].collectives.size()) : 0));
        }
      }
      if (!have) continue;
      for (Fingerprint f : phase->ranks[r].collectives) {
        // The reloaded ranks form new groups: keep their calls apart from the first phase's.
        if (phase == &b) f.group = "reload:" + f.group;
        o.collectives.push_back(std::move(f));
      }
    }
  }
  return out;
}

Status ReloadSupports(const Config& cfg) {
  Status s;
  if (cfg.checkpoint.save_at <= 0) return s;
  const int64_t micro_batches = cfg.parallel.dp * cfg.batch.accumulation_steps;
  if (cfg.checkpoint.reload.dp < 1 || micro_batches % cfg.checkpoint.reload.dp != 0)
    s.Add("checkpoint.reload.dp",
          "checkpoint.reload.dp=" + std::to_string(cfg.checkpoint.reload.dp) +
              " must divide parallel.dp * batch.accumulation_steps = " +
              std::to_string(micro_batches) +
              " (the global batch stays the same across the reload)");
  Status r = CheckConfig(ReloadPhaseConfig(cfg), ResourceBudget{});
  for (const auto& e : r.errors())
    s.Add("checkpoint.reload", "checkpoint.reload gives an invalid layout: " + e.message);
  return s;
}

}  // namespace paradiff
