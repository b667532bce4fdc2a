// Loading a config from the command line: read, parse, apply --inject, validate, check the budget.
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"

namespace paradiff {

StatusOr<Config> LoadCheckedConfig(const std::string& path, const std::vector<std::string>& inject);

}  // namespace paradiff
