// Parsing JSON text read from a file or another process without exceptions.
//
// nlohmann's lexer takes a NUL byte as the end of its input, so "{...}\0garbage" parses as the
// prefix: a truncated file would read as valid. JSON text holds no raw NUL (inside strings it is
// written \u0000), so a NUL anywhere makes the text malformed. ParseConfig (config_json.h) applies
// the same rule with a byte offset in its message.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace paradiff {

// The document, or a discarded value (is_discarded()) when `text` is malformed or holds a NUL.
inline nlohmann::json ParseJsonText(const std::string& text) {
  if (text.find('\0') != std::string::npos)
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace paradiff
