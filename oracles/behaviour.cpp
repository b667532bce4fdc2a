#include "oracles/behaviour.h"

#include <algorithm>
#include <set>

namespace paradiff {

namespace {

std::string Capped(const char* name, int64_t n) {
  return std::string(name) + "=" + (n >= 3 ? "3+" : std::to_string(n));
}

}  // namespace

std::vector<std::string> LossScaleFeatures(const std::vector<RankStep>& steps) {
  std::set<std::string> out;
  int64_t growths = 0, backoffs = 0, streak = 0, longest = 0, clean = 0;
  for (size_t s = 0; s < steps.size(); ++s) {
    const RankStep& st = steps[s];
    const bool has_next = s + 1 < steps.size();
    const double next = has_next ? steps[s + 1].loss_scale : st.loss_scale;
    if (st.skipped) {
      out.insert(Capped("scale.overflow_after_clean", clean));
      if (has_next && next >= st.loss_scale) out.insert("scale.skip_held");
      if (has_next && next < st.loss_scale) ++backoffs;
      longest = std::max(longest, ++streak);
      clean = 0;
    } else {
      streak = 0;
      ++clean;
      if (has_next && next > st.loss_scale) {
        ++growths;
        clean = 0;
      }
    }
  }
  if (growths > 0) out.insert(Capped("scale.growths", growths));
  if (backoffs > 0) out.insert(Capped("scale.backoffs", backoffs));
  if (longest > 0) out.insert(Capped("scale.skip_streak", longest));
  return {out.begin(), out.end()};
}

Behaviour BehaviourOf(const Config& cfg, const EngineOutcome& eng, const CheckResult& res) {
  std::set<std::string> f;
  if (!eng.ok) f.insert(std::string("failure.") + eng.failure_detail);
  if (eng.reporting.loss_scale && cfg.precision.loss_scale.mode == LossScaleMode::kDynamic &&
      !eng.obs.ranks.empty()) {
    const std::vector<RankStep>& steps = eng.obs.ranks[0].steps;
    for (std::string& s : LossScaleFeatures(steps)) f.insert(std::move(s));
    if (cfg.checkpoint.save_at > 0 && cfg.checkpoint.save_at <= static_cast<int64_t>(steps.size()))
      f.insert(steps[cfg.checkpoint.save_at - 1].skipped ? "ckpt.save_after_skip"
                                                         : "ckpt.save_after_clean");
  }
  Behaviour b;
  for (const StepRow& r : res.rows) {
    b.margin = std::max(b.margin, r.worst_ratio);
    if (r.restarted) f.insert("numeric.restarted");
  }
  if (b.margin >= 0.5) f.insert(b.margin >= 0.9 ? "margin=0.9+" : "margin=0.5+");
  for (const OracleOutcome& o : res.oracles)
    if (o.status == OracleStatus::kInconclusive || o.status == OracleStatus::kSkipped)
      f.insert(std::string(Name(o.status)) + "." + o.name);
  for (const RankSummary& r : res.ranks)
    for (const auto& [op, calls] : r.collectives) f.insert("collective." + op);
  b.features.assign(f.begin(), f.end());
  return b;
}

}  // namespace paradiff
