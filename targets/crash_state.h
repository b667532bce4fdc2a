// CrashState: the bucket of an external target's crash, read from its log (see Note [Crash
// state] in targets/crash_state.cpp). A campaign signs findings by signature, so without it every
// crash of a target is one finding however many causes it has.
#pragma once

#include <string>

namespace paradiff {

// "<ExceptionType>-<innermost function>" of the first exception in `log` that is neither a
// process-spawning wrapper nor a peer's lost connection; "<ExceptionType>" when no frame precedes
// it (a C++ terminate); "" when the log names no exception. Only [A-Za-z0-9_-], at most 80 chars.
std::string CrashState(const std::string& log);

}  // namespace paradiff
