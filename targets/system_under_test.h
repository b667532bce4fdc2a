// SystemUnderTest: what a check runs, the built-in engine or an external target (docs/TARGETS.md),
// with the one question every driver asks first (can it run this config?) and the runner the
// oracles call. Campaigns, the minimizer, replay and the gate take one of these.
#pragma once

#include <memory>
#include <string>

#include "core/config.h"
#include "core/status.h"
#include "oracles/oracle.h"
#include "targets/target_file.h"

namespace paradiff {

struct SystemUnderTest {
  std::shared_ptr<const TargetSpec> target;  // null: the built-in engine

  // EngineSupports for the built-in engine, TargetSupports for a target.
  Status Supports(const Config& cfg) const;
  // Empty for the built-in engine (CheckRun's default), RunTarget bound to the target otherwise.
  EngineRunner Runner() const;
  // "engine" or "target NAME (FILE)".
  std::string Describe() const;
};

// The system named by a --target FILE argument ("" = the built-in engine).
StatusOr<SystemUnderTest> LoadSystemUnderTest(const std::string& target_file);

}  // namespace paradiff
