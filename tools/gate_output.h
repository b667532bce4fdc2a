// Writers of a gate's result (fuzz/gate.h) for people and CI systems: JUnit XML (one <testsuite>
// per group: suite, regression, campaign; one <testcase> per config or campaign finding; a
// <failure> with the message for failed cases, <skipped> for known (baseline) and unsupported
// ones, as pytest does for expected failures) and a self-contained HTML page (summary table with
// links, then one report section per checked config, failures first).
#pragma once

#include <string>

#include "fuzz/gate.h"

namespace paradiff {

std::string GateJunitXml(const GateResult& result);
std::string GateHtml(const GateResult& result, const GateOptions& opts);

}  // namespace paradiff
