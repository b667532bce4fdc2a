// The collective watchdog's default: how long a rank may wait in one collective (or, under mpirun,
// go without progress) before the run is a hang. Every default in the engine, the oracles, the
// campaign, the minimizer, the gate and the command line (--timeout-ms) is this one value.
#pragma once

#include <chrono>

namespace paradiff {

inline constexpr std::chrono::milliseconds kDefaultCollectiveTimeout{20000};

}  // namespace paradiff
