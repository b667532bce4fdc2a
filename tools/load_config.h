// Loading a config from the command line: read, parse, apply --inject, validate, check the budget;
// and emitting a command's text result.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"

namespace paradiff {

StatusOr<Config> LoadCheckedConfig(const std::string& path, const std::vector<std::string>& inject);

// A command's text result: printed when `out` is empty, else written atomically to `out`.
// Returns the exit code (an unwritable file is an internal error, reported on stderr).
int EmitText(const std::string& out, const std::string& text);

}  // namespace paradiff
