// Blind spots of the config domain (`paradiff domain`, docs/FUZZING.md "Blind spots"): how often
// GenerateConfig draws each feature value and each pair of values of two features
// (ConfigFeatures), and which pairs it never draws although valid configs have them. A pair is
// shown valid by a search: chains of MutateConfig (valid by construction) from drawn configs that
// have one of its values, until a mutant has both. A pair the search does not reach is reported
// as unreached (most are invalid, e.g. ZeRO 3 under pp, which Validate refuses).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz/config_domain.h"

namespace paradiff {

struct BlindSpotOptions {
  int64_t samples = 2000;  // GenerateConfig draws
  uint64_t seed = 1;       // of the draws and of the search
  int64_t starts = 16;     // search: drawn configs to start from, per missing pair
  int64_t chain = 24;      // search: mutations per chain
  DomainOptions domain;
  // Tests: generated configs this rejects are drawn again (a planted blind spot: the search, which
  // mutates under `domain` alone, still reaches them). Null: none.
  std::function<bool(const Config&)> draw_filter;
};

struct MissingPair {
  std::string a, b;       // feature values, a < b
  bool reached = false;   // a valid config with both was found
  Config example;         // that config, when reached
  int64_t mutations = 0;  // mutations from the drawn config to it
};

struct BlindSpotReport {
  int64_t samples = 0;
  std::map<std::string, int64_t> values;  // feature value -> configs drawn with it
  std::map<std::pair<std::string, std::string>, int64_t> pairs;  // drawn pairs (a < b)
  int64_t possible_pairs = 0;        // pairs of values of different features, among values drawn
  std::vector<MissingPair> missing;  // every possible pair never drawn, reached ones first
  nlohmann::json ToJson() const;
};

BlindSpotReport FindBlindSpots(const BlindSpotOptions& opts);

// The feature's name: "zero=3" -> "zero"; a flag and its negation share one: "tied" and "untied"
// -> "tied", "clip" and "noclip" -> "clip".
std::string FeatureName(const std::string& value);

}  // namespace paradiff
