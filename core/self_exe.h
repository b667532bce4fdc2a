// The paradiff executable, for code that starts copies of it (campaign workers, mpirun ranks).
//
// SelfExecutablePath() is the running program (/proc/self/exe). ParadiffExecutable() is the
// paradiff binary that `paradiff rank` / `paradiff worker` must be started from: set by paradiff's
// main (tools/main.cpp) to itself, by other programs that link the engine (benchmarks, tests) to
// the paradiff they were built with, else taken from the environment variable PARADIFF_EXE; empty
// when none of these says. A library never assumes the running program is paradiff: a benchmark
// that did once started copies of itself as "ranks", which ran the whole benchmark again.
#pragma once

#include <string>

namespace paradiff {

std::string SelfExecutablePath();  // empty if /proc/self/exe cannot be read

void SetParadiffExecutable(const std::string& path);
std::string ParadiffExecutable();

}  // namespace paradiff
