#include "fuzz/coverage.h"

namespace paradiff {

namespace {

std::string FeatureName(const std::string& f) { return f.substr(0, f.find('=')); }

}  // namespace

bool PairCoverage::Add(const std::vector<std::string>& features) {
  bool added = false;
  for (const auto& f : features) values_[FeatureName(f)].insert(f);
  for (size_t i = 0; i < features.size(); ++i)
    for (size_t j = i + 1; j < features.size(); ++j) {
      if (FeatureName(features[i]) == FeatureName(features[j])) continue;
      const bool lt = features[i] < features[j];
      added |= pairs_.insert(lt ? features[i] + "|" + features[j] : features[j] + "|" + features[i])
                   .second;
    }
  return added;
}

int64_t PairCoverage::possible() const {
  int64_t total = 0, sum = 0;
  for (const auto& [name, vals] : values_) {
    const int64_t n = static_cast<int64_t>(vals.size());
    total += sum * n;
    sum += n;
  }
  return total;
}

nlohmann::json PairCoverage::ToJson() const {
  nlohmann::json values = nlohmann::json::object();
  for (const auto& [name, vals] : values_) values[name] = vals;
  return {{"pairs", pairs_}, {"values", values}};
}

void PairCoverage::FromJson(const nlohmann::json& j) {
  if (j.contains("pairs")) pairs_ = j["pairs"].get<std::set<std::string>>();
  if (j.contains("values"))
    for (auto it = j["values"].begin(); it != j["values"].end(); ++it)
      values_[it.key()] = it.value().get<std::set<std::string>>();
}

}  // namespace paradiff
