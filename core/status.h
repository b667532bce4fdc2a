// Status: the result of checking untrusted input. Holds every broken rule, each naming the field
// and the rule ("parallel.tp=3 does not divide model.heads=8"), never just the first one.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace paradiff {

struct FieldError {
  std::string field;  // dotted JSON path, e.g. "parallel.tp"
  std::string
      message;  // the whole rule, starting with the field, e.g. "parallel.tp=3 does not ..."
};

class Status {
 public:
  Status() = default;
  static Status Error(std::string field, std::string message) {
    Status s;
    s.Add(std::move(field), std::move(message));
    return s;
  }
  void Add(std::string field, std::string message) {
    errors_.push_back({std::move(field), std::move(message)});
  }
  void Merge(const Status& other) {
    errors_.insert(errors_.end(), other.errors_.begin(), other.errors_.end());
  }
  bool ok() const { return errors_.empty(); }
  const std::vector<FieldError>& errors() const { return errors_; }
  // One error per line.
  std::string ToString() const {
    std::string out;
    for (const auto& e : errors_) {
      if (!out.empty()) out += '\n';
      out += e.message;
    }
    return out;
  }

 private:
  std::vector<FieldError> errors_;
};

// A value or the Status explaining why there is none.
template <class T>
class StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT(runtime/explicit)
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT(runtime/explicit)
  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  const T& value() const& { return *value_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace paradiff
