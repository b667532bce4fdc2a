// Reading the JSON files of work dirs, finding dirs, expectations and baselines. Owns one rule:
// a missing or unreadable file and malformed JSON are errors naming the path (callers that treat
// "absent" as "empty" check existence first).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace paradiff {

inline constexpr size_t kMaxJsonFileBytes = size_t{64} << 20;  // larger files are refused

StatusOr<nlohmann::json> ReadJsonFile(const std::string& path);

// The document, or null when the file is absent, unreadable or malformed.
nlohmann::json ReadJsonOrNull(const std::string& path);

}  // namespace paradiff
