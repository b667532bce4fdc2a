// The HTML page of a campaign work dir (`paradiff report WORKDIR --html FILE`): the campaign's
// numbers, plots of its history (stats.json "history": findings over time, execs/s, feature-pair
// coverage), the list of findings with links, the inconclusive checks by reason, and per finding
// its report section (tools/html_report.h) with meta data, the minimized config and the
// minimization steps when present (fuzz/finding_minimizer.h).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/status.h"

namespace paradiff {

// The history plots of a stats.json document ("" when it has no history).
std::string CampaignHistoryHtml(const nlohmann::json& stats);

// The findings table and one section per finding of the work dir.
std::string FindingsHtml(const std::string& workdir);
// The table of inconclusive reasons (DIR/inconclusive/<signature>/): count, first seen, config.
std::string InconclusiveHtml(const std::string& workdir);

// The whole page. A directory without stats.json or findings/ is an error.
StatusOr<std::string> WorkDirHtml(const std::string& workdir);

}  // namespace paradiff
