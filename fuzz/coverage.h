// Feature-pair coverage of a campaign: the share of pairs of feature values (e.g. (zero=3, tp=3),
// (param=fp16, pp=2)) exercised so far, over the pairs possible among the values seen.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace paradiff {

class PairCoverage {
 public:
  // Adds one config's features ("name=value"); returns true when it covered a new pair.
  bool Add(const std::vector<std::string>& features);
  int64_t covered() const { return static_cast<int64_t>(pairs_.size()); }
  int64_t possible() const;  // pairs of values of different features, among values seen
  nlohmann::json ToJson() const;
  void FromJson(const nlohmann::json& j);

 private:
  std::set<std::string> pairs_;
  std::map<std::string, std::set<std::string>> values_;  // feature -> values seen
};

}  // namespace paradiff
