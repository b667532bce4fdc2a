#include "oracles/oracle_registry.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "oracles/collective_oracle.h"
#include "oracles/cross_backend_oracle.h"
#include "oracles/determinism_oracle.h"
#include "oracles/exact_oracle.h"
#include "oracles/memory_oracle.h"
#include "oracles/metamorphic_oracle.h"
#include "oracles/mirror_oracle.h"
#include "oracles/numeric_oracle.h"
#include "oracles/replica_oracle.h"
#include "oracles/tiling_oracle.h"
#include "oracles/update_oracle.h"
#include "oracles/validation_oracle.h"

namespace paradiff {

namespace {

struct Entry {
  const char* name;
  bool in_default;
  bool in_all;  // false: opt-in by name only
  std::function<std::unique_ptr<Oracle>()> make;
};

template <class T>
std::unique_ptr<Oracle> Make() {
  return std::make_unique<T>();
}

// Canonical order (see the header).
const std::vector<Entry>& Entries() {
  static const std::vector<Entry> kEntries = {
      {"validation", true, true, Make<ValidationOracle>},
      {"collective", true, true, Make<CollectiveOracle>},
      {"tiling", true, true, Make<TilingOracle>},
      {"replica", true, true, Make<ReplicaOracle>},
      {"memory", true, true, Make<MemoryOracle>},
      {"numeric", true, true, Make<NumericOracle>},
      {"update", true, true, Make<UpdateOracle>},
      {"exact", true, true, Make<ExactOracle>},
      {"mirror", true, true, Make<MirrorOracle>},
      {"determinism", false, true, Make<DeterminismOracle>},
      {"metamorphic", false, true, Make<MetamorphicOracle>},
      {"cross_backend", false, false, [] { return std::make_unique<CrossBackendOracle>(); }},
  };
  return kEntries;
}

std::vector<std::string> Split(const std::string& item) {
  std::vector<std::string> out;
  std::stringstream ss(item);
  for (std::string part; std::getline(ss, part, ',');) {
    part.erase(0, part.find_first_not_of(" \t"));
    part.erase(part.find_last_not_of(" \t") + 1);
    if (!part.empty()) out.push_back(part);
  }
  return out;
}

}  // namespace

const std::vector<std::string>& AllOracleNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> n;
    for (const auto& e : Entries()) n.push_back(e.name);
    return n;
  }();
  return kNames;
}

const std::vector<std::string>& ThoroughOracleNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> n;
    for (const auto& e : Entries())
      if (e.in_all) n.push_back(e.name);
    return n;
  }();
  return kNames;
}

const std::vector<std::string>& DefaultOracleNames() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> n;
    for (const auto& e : Entries())
      if (e.in_default) n.push_back(e.name);
    return n;
  }();
  return kNames;
}

StatusOr<std::vector<std::string>> ResolveOracleNames(const std::vector<std::string>& selection) {
  std::set<std::string> chosen;
  Status errors;
  bool any = false;
  for (const auto& item : selection) {
    for (const auto& name : Split(item)) {
      any = true;
      const std::vector<std::string>* set = name == "default" ? &DefaultOracleNames()
                                            : name == "all"   ? &ThoroughOracleNames()
                                                              : nullptr;
      if (set != nullptr) {
        chosen.insert(set->begin(), set->end());
      } else if (std::count(AllOracleNames().begin(), AllOracleNames().end(), name) == 1) {
        chosen.insert(name);
      } else {
        std::string known = "default, all";
        for (const auto& n : AllOracleNames()) known += ", " + n;
        errors.Add("oracles", "oracles=" + name + " is not an oracle (known: " + known + ")");
      }
    }
  }
  if (!errors.ok()) return errors;
  if (!any) return DefaultOracleNames();
  std::vector<std::string> out;
  for (const auto& n : AllOracleNames())
    if (chosen.count(n)) out.push_back(n);
  return out;
}

std::vector<std::unique_ptr<Oracle>> MakeOracles(const std::vector<std::string>& selection) {
  StatusOr<std::vector<std::string>> names = ResolveOracleNames(selection);
  if (!names.ok()) throw std::invalid_argument(names.status().ToString());
  std::vector<std::unique_ptr<Oracle>> out;
  for (const auto& e : Entries())
    if (std::count(names.value().begin(), names.value().end(), e.name)) out.push_back(e.make());
  return out;
}

}  // namespace paradiff
