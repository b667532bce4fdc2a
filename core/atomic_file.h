// Atomic file writes: content goes to a temporary file in the same directory, is flushed to disk,
// and renamed over the target, so readers (and a resumed campaign) never see a partial file.
#pragma once

#include <string>

#include "core/status.h"

namespace paradiff {

// Creates missing parent directories. Errors name the path and the system's reason.
Status WriteFileAtomic(const std::string& path, const std::string& content);

}  // namespace paradiff
