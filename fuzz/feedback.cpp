#include "fuzz/feedback.h"

#include "core/config_json.h"

namespace paradiff {

void Feedback::Record(int64_t index, const Config& cfg, const nlohmann::json& behaviour) {
  if (!behaviour.is_object() || GenerationOf(index) < folded_) return;
  Pending p;
  p.config = cfg;
  p.features = behaviour.value("features", std::vector<std::string>{});
  p.margin = behaviour.value("margin", 0.0);
  pending_[index] = std::move(p);
}

void Feedback::Fold(int64_t done_below) {
  while ((folded_ + 1) * kGenerationSize <= done_below) {
    const int64_t end = (folded_ + 1) * kGenerationSize;
    for (auto it = pending_.begin(); it != pending_.end() && it->first < end;) {
      const Pending& p = it->second;
      bool keep = p.margin >= kNearBound && p.margin > best_margin_;
      if (keep) best_margin_ = p.margin;
      for (const std::string& f : p.features) keep = seen_.insert(f).second || keep;
      if (keep) {
        if (parents_.size() >= kMaxParents) parents_.erase(parents_.begin());
        parents_.push_back(p.config);
      }
      it = pending_.erase(it);
    }
    ++folded_;
  }
}

nlohmann::json Feedback::ToJson() const {
  nlohmann::json pending = nlohmann::json::array();
  for (const auto& [index, p] : pending_)
    pending.push_back({{"index", index},
                       {"config", ConfigToJson(p.config)},
                       {"features", p.features},
                       {"margin", p.margin}});
  nlohmann::json parents = nlohmann::json::array();
  for (const Config& c : parents_) parents.push_back(ConfigToJson(c));
  return {{"folded_generations", folded_},
          {"seen", seen_},
          {"best_margin", best_margin_},
          {"parents", parents},
          {"pending", pending}};
}

Status Feedback::FromJson(const nlohmann::json& j) {
  *this = Feedback();
  if (j.is_null()) return Status();
  const char* field = "stats.json feedback";
  if (!j.is_object()) return Status::Error(field, std::string(field) + ": not an object");
  folded_ = j.value("folded_generations", int64_t{0});
  seen_ = j.value("seen", std::set<std::string>{});
  best_margin_ = j.value("best_margin", 0.0);
  auto config = [&](const nlohmann::json& c, Config* out) {
    StatusOr<Config> parsed = ConfigFromJson(c);
    if (!parsed.ok())
      return Status::Error(field, std::string(field) + ": a stored config does not parse: " +
                                      parsed.status().ToString());
    *out = parsed.value();
    return Status();
  };
  for (const nlohmann::json& c : j.value("parents", nlohmann::json::array())) {
    Config cfg;
    if (Status s = config(c, &cfg); !s.ok()) return s;
    parents_.push_back(cfg);
  }
  for (const nlohmann::json& p : j.value("pending", nlohmann::json::array())) {
    Pending q;
    if (Status s = config(p.value("config", nlohmann::json()), &q.config); !s.ok()) return s;
    q.features = p.value("features", std::vector<std::string>{});
    q.margin = p.value("margin", 0.0);
    pending_[p.value("index", int64_t{0})] = std::move(q);
  }
  return Status();
}

}  // namespace paradiff
