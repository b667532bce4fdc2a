// The path of the running executable (/proc/self/exe), for commands that start copies of
// themselves (campaign workers, mpirun ranks). Empty if it cannot be read.
#pragma once

#include <string>

namespace paradiff {

std::string SelfExecutablePath();

}  // namespace paradiff
