// Parsing JSON text read from a file or another process without exceptions.
//
// nlohmann's lexer takes a NUL byte as the end of its input, so "{...}\0garbage" parses as the
// prefix: a truncated file would read as valid. JSON text holds no raw NUL (inside strings it is
// written \u0000), so a NUL anywhere makes the text malformed. ParseConfig (config_json.h) applies
// the same rule with a byte offset in its message.
#pragma once

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace paradiff {

// The document, or a discarded value (is_discarded()) when `text` is malformed or holds a NUL.
inline nlohmann::json ParseJsonText(const std::string& text) {
  if (text.find('\0') != std::string::npos)
    return nlohmann::json(nlohmann::json::value_t::discarded);
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// Python's json module writes a float that is not finite as the bare token NaN, Infinity or
// -Infinity, which JSON does not have (a target whose loss became NaN writes one). This quotes
// each such token outside strings, so that the text parses and JsonDouble reads the value back;
// the text is otherwise unchanged.
inline std::string QuoteNonFiniteTokens(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      out += c;
      if (c == '\\' && i + 1 < text.size()) {
        out += text[++i];
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') in_string = true;
    bool quoted = false;
    for (const std::string_view t : {"NaN", "Infinity", "-Infinity"}) {
      if (text.compare(i, t.size(), t) == 0) {
        (out += '"').append(t) += '"';
        i += t.size() - 1;
        quoted = true;
        break;
      }
    }
    if (!quoted) out += c;
  }
  return out;
}

// A JSON number, or one of the strings "NaN", "Infinity", "-Infinity" (see
// QuoteNonFiniteTokens); false for anything else.
inline bool JsonDouble(const nlohmann::json& v, double* out) {
  if (v.is_number()) {
    *out = v.get<double>();
    return true;
  }
  if (!v.is_string()) return false;
  const std::string& s = v.get_ref<const std::string&>();
  if (s == "NaN") {
    *out = std::nan("");
  } else if (s == "Infinity") {
    *out = HUGE_VAL;
  } else if (s == "-Infinity") {
    *out = -HUGE_VAL;
  } else {
    return false;
  }
  return true;
}

}  // namespace paradiff
