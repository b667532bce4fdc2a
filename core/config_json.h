// Config <-> JSON. Owns the on-disk schema of a config (docs/CONFIG.md): which keys exist, their
// types, their defaults when omitted, and the stable written form.
//
// Reading is strict (a config is untrusted input): unknown keys, duplicate keys, wrong types,
// non-integral or out-of-range integers and unknown enum spellings are errors, each naming the
// dotted path of the field ("model.hiden: unknown key", "model.layers: expected an integer, got
// string"); every error is collected, not just the first. Reading checks the schema only; the
// rules between fields (divisibility, ranges) are Validate's (validate.h), the resource limits
// CheckBudget's (budget.h).
//
// Omitted keys take the defaults of config.h, except: an omitted parallel.world is tp * pp * dp,
// and an omitted parallel.dp with a given world is world / (tp * pp) when that divides.
//
// Writing is stable: every key is written (defaults included), in the fixed order of the schema in
// docs/CONFIG.md, with a 2-space indent and a trailing newline, so files can be diffed and
// content-addressed. Doubles are written in their shortest exact form. read(write(c)) == c and
// write(read(text)) is a fixed point.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/config.h"
#include "core/status.h"

namespace paradiff {

// Parses JSON text. Malformed JSON gives one error with field "" and the message
// "config: malformed JSON: at byte N: <parser message>".
StatusOr<Config> ParseConfig(const std::string& text);

// Reads an already parsed document (which cannot report duplicate keys any more).
StatusOr<Config> ConfigFromJson(const nlohmann::json& json);

// The document WriteConfig writes. nlohmann::json orders keys alphabetically; WriteConfig keeps
// the schema order.
nlohmann::json ConfigToJson(const Config& config);

// The stable text form (see above).
std::string WriteConfig(const Config& config);

// The dotted path of `key` inside the object at `path` ("" = the document), as errors name fields:
// "model.hidden". A key that is not a plain name (letters, digits, '_'; an empty key included) is
// written as its JSON string, so every field an error names is unambiguous: model."" or "a.b".
std::string KeyPath(const std::string& path, const std::string& key);

// Reads and parses a file. A missing, unreadable, too large (kMaxConfigFileBytes) file or a
// directory is one error with field "" naming the path; parse errors do not repeat the path.
inline constexpr size_t kMaxConfigFileBytes = size_t{1} << 20;
StatusOr<Config> LoadConfigFile(const std::string& path);

}  // namespace paradiff
