// Shared by the Validate tests: config edits starting from the (valid) defaults, and expectations
// on Validate's result.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <string>

#include "core/config.h"
#include "core/validate.h"

namespace paradiff::validate_test {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

using Edit = std::function<void(Config&)>;

// The defaults are valid; each test edits them.
inline Config With(const Edit& edit) {
  Config c;
  edit(c);
  return c;
}

// A tensor-parallel layout of the default model: tp ranks, world=tp.
inline Config Tp(
    int64_t tp, const Edit& edit = [](Config&) {}) {
  Config c;
  c.parallel.tp = tp;
  c.parallel.world = tp;
  edit(c);
  return c;
}

// A pipeline layout: pp stages, world=pp.
inline Config Pp(
    int64_t pp, const Edit& edit = [](Config&) {}) {
  Config c;
  c.parallel.pp = pp;
  c.parallel.world = pp;
  edit(c);
  return c;
}

inline void ExpectValid(const Config& c) {
  const Status st = Validate(c);
  EXPECT_TRUE(st.ok()) << st.ToString();
}

// Expects an error on `field` containing `fragment`; every error on `field` starts "field=".
inline void ExpectInvalid(const Config& c, const std::string& field,
                          const std::string& fragment = "") {
  const Status st = Validate(c);
  bool found = false;
  for (const FieldError& e : st.errors()) {
    if (e.field != field) continue;
    EXPECT_EQ(e.message.rfind(field + "=", 0), 0u) << e.message;
    found = found || e.message.find(fragment) != std::string::npos;
  }
  EXPECT_TRUE(found) << "no error on " << field << " containing '" << fragment << "'; got:\n"
                     << st.ToString();
}

}  // namespace paradiff::validate_test
