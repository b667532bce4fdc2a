// The engine entry point: trains a config on a communicator backend and returns what every rank
// observed. A failure of the target (ranks disagreeing on a collective, a hang, an exception) is
// a value in EngineOutcome, never an exception out of RunEngine.
#pragma once

#include <chrono>
#include <string>

#include "core/config.h"
#include "core/status.h"
#include "kernels/observations.h"

namespace paradiff {

struct EngineOutcome {
  Observations obs;
  bool ok = true;
  std::string failure_kind;  // collective | hang | crash (empty when ok)
  std::string failure;       // the primary error message, naming the rank
  int failure_rank = -1;
};

// Which valid configs this build of the engine can run; the rest get a message naming the field.
Status EngineSupports(const Config& cfg);

// Runs `cfg` on the local backend (ranks as threads). `timeout` bounds every collective wait.
EngineOutcome RunEngine(const Config& cfg, std::chrono::milliseconds timeout);

}  // namespace paradiff
