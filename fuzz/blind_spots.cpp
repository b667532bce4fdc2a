#include "fuzz/blind_spots.h"

#include <algorithm>
#include <set>

#include "core/config_json.h"

namespace paradiff {

std::string FeatureName(const std::string& value) {
  const size_t cut = value.find_first_of("=<>");
  if (cut != std::string::npos) return value.substr(0, cut);
  // Flags and their negations are one feature: clip / noclip, tied / untied, even.dp / uneven.dp.
  for (const char* neg : {"no", "un"})
    if (value.rfind(neg, 0) == 0) return value.substr(2);
  return value;
}

namespace {

bool HasBoth(const std::vector<std::string>& f, const std::string& a, const std::string& b) {
  return std::find(f.begin(), f.end(), a) != f.end() && std::find(f.begin(), f.end(), b) != f.end();
}

// Chains of mutations from drawn configs with `a` (then with `b`) until one has both. The chains
// draw from a stream of the seed and the pair alone: a pair's verdict does not depend on which
// other pairs are missing.
void Search(MissingPair& m, const std::vector<Config>& drawn,
            const std::vector<std::vector<std::string>>& features, const BlindSpotOptions& o) {
  SeqRng rng(Mix64(o.seed ^ 0xB11D5B07ULL ^ Mix64(HashName(m.a + "+" + m.b))));
  for (const std::string& have : {m.a, m.b}) {
    int64_t started = 0;
    for (size_t i = 0; i < drawn.size() && started < o.starts; ++i) {
      const auto& f = features[i];
      if (std::find(f.begin(), f.end(), have) == f.end()) continue;
      ++started;
      Config c = drawn[i];
      for (int64_t k = 1; k <= o.chain; ++k) {
        c = MutateConfig(c, rng, o.domain);
        if (HasBoth(ConfigFeatures(c), m.a, m.b)) {
          m.reached = true, m.example = c, m.mutations = k;
          return;
        }
      }
    }
  }
}

}  // namespace

BlindSpotReport FindBlindSpots(const BlindSpotOptions& o) {
  BlindSpotReport r;
  r.samples = o.samples;
  SeqRng rng(o.seed);
  std::vector<Config> drawn;
  std::vector<std::vector<std::string>> features;
  std::map<std::string, std::set<std::string>> by_name;  // feature name -> values drawn
  for (int64_t i = 0; i < o.samples; ++i) {
    Config c = GenerateConfig(rng, o.domain);
    while (o.draw_filter && !o.draw_filter(c)) c = GenerateConfig(rng, o.domain);
    drawn.push_back(std::move(c));
    std::vector<std::string> f = ConfigFeatures(drawn.back());
    std::sort(f.begin(), f.end());
    f.erase(std::unique(f.begin(), f.end()), f.end());
    for (size_t a = 0; a < f.size(); ++a) {
      ++r.values[f[a]];
      by_name[FeatureName(f[a])].insert(f[a]);
      for (size_t b = a + 1; b < f.size(); ++b)
        if (FeatureName(f[a]) != FeatureName(f[b])) ++r.pairs[{f[a], f[b]}];
    }
    features.push_back(std::move(f));
  }
  std::vector<std::string> all;
  for (const auto& [v, n] : r.values) all.push_back(v);
  for (size_t a = 0; a < all.size(); ++a) {
    for (size_t b = a + 1; b < all.size(); ++b) {
      if (FeatureName(all[a]) == FeatureName(all[b])) continue;
      ++r.possible_pairs;
      if (r.pairs.count({all[a], all[b]})) continue;
      MissingPair m;
      m.a = all[a], m.b = all[b];
      Search(m, drawn, features, o);
      r.missing.push_back(std::move(m));
    }
  }
  std::stable_partition(r.missing.begin(), r.missing.end(),
                        [](const MissingPair& m) { return m.reached; });
  return r;
}

nlohmann::json BlindSpotReport::ToJson() const {
  nlohmann::json j = {
      {"samples", samples}, {"possible_pairs", possible_pairs}, {"drawn_pairs", pairs.size()}};
  j["values"] = nlohmann::json::object();
  for (const auto& [v, n] : values) j["values"][v] = n;
  j["missing"] = nlohmann::json::array();
  for (const MissingPair& m : missing) {
    nlohmann::json e = {{"a", m.a}, {"b", m.b}, {"reached", m.reached}};
    if (m.reached) {
      e["mutations"] = m.mutations;
      e["example"] = ConfigToJson(m.example);
    }
    j["missing"].push_back(std::move(e));
  }
  return j;
}

}  // namespace paradiff
