// Internal to validate*.cpp: the groups of rules Validate runs and the helpers that phrase their
// messages ("field=value <rule>"). Not part of the public API; include validate.h instead.
#pragma once

#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/status.h"

namespace paradiff::validate_internal {

// Shortest decimal text that reads back as the same double; "nan", "inf", "-inf" otherwise.
std::string Str(double v);
inline std::string Str(int64_t v) { return std::to_string(v); }
inline std::string Str(bool v) { return v ? "true" : "false"; }

// a * b, saturated to INT64_MAX on overflow (inputs are >= 1 where it is used).
int64_t SaturatingMul(int64_t a, int64_t b);

// Adds "field=value must be >= min" when value < min; returns whether the rule holds.
bool AtLeast(Status& st, const std::string& field, int64_t value, int64_t min);
// Adds "field=value must be in lo..hi" when out of range; returns whether the rule holds.
bool InRange(Status& st, const std::string& field, int64_t value, int64_t lo, int64_t hi);
// Adds "field=value must be finite"; returns whether it is.
bool Finite(Status& st, const std::string& field, double value);

// The tensor-parallel rules for a tp degree named tp_field (parallel.tp or checkpoint.reload.tp).
void CheckTensorParallel(const ModelConfig& m, int64_t tp, const std::string& tp_field, Status& st);

// Rule groups, each appending to st.
void CheckZero(const Config& c, Status& st);
void CheckPrecision(const Config& c, Status& st);
void CheckOptimizer(const Config& c, Status& st);
void CheckCheckpoint(const Config& c, Status& st);
void CheckFaults(const Config& c, Status& st);

}  // namespace paradiff::validate_internal
