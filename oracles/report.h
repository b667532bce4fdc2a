// The JSON report of one checked config: the config and its seed, the verdict and signature, the
// localization, the per-step table, every compared quantity with its error and bound, what each
// oracle said (pass / finding / skipped and why), timings.
#pragma once

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "oracles/check.h"

namespace paradiff {

nlohmann::json ReportJson(const Config& cfg, const CheckResult& res);
nlohmann::json VerdictJson(const Verdict& v);

}  // namespace paradiff
