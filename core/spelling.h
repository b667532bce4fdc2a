// Spelling tables: each closed vocabulary (an enum) has exactly one table of its names, used to
// write it (JSON, reports, messages) and to read it back (JSON, the command line). A value
// missing from its table is a programming error that a unit test catches (spelling_test.cpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace paradiff {

template <class E>
struct Spelling {
  const char* name;
  E value;
};

// The name of `value`, "?" when the table lacks it.
template <class E, size_t N>
constexpr const char* NameIn(const Spelling<E> (&table)[N], E value) {
  for (const Spelling<E>& s : table) {
    if (s.value == value) return s.name;
  }
  return "?";
}

// The value spelled `name`, nothing when no entry is spelled so.
template <class E, size_t N>
std::optional<E> ParseIn(const Spelling<E> (&table)[N], std::string_view name) {
  for (const Spelling<E>& s : table) {
    if (name == s.name) return s.value;
  }
  return std::nullopt;
}

// "a, b, c": every name, for an error message that lists what is accepted.
template <class E, size_t N>
std::string NamesOf(const Spelling<E> (&table)[N]) {
  std::string out;
  for (const Spelling<E>& s : table) out += std::string(out.empty() ? "" : ", ") + s.name;
  return out;
}

}  // namespace paradiff
