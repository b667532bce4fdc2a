// The HTML report building blocks: a self-contained page (inline CSS, inline SVG from
// tools/svg_plot.h; no scripts, fonts, images or URLs) and the section for one checked config,
// rendered from its JSON report (oracles/report.h ReportJson form, as stored in report.json):
// verdict and signature, the localization, plots of the loss per step (distributed vs
// same-precision reference vs fp64 truth), error / bound per tensor (log scale, a line at 1.0),
// memory per rank by category (stacked), the collective calls per rank, and the config itself.
// Used by `paradiff run --html`, `paradiff report` and `paradiff gate --html`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace paradiff::html {

// A complete HTML5 document.
std::string Page(const std::string& title, const std::string& body);

// One report section with id `anchor`; `extra` (trusted HTML) goes below the heading.
std::string ReportSection(const nlohmann::json& report, const std::string& anchor,
                          const std::string& heading, const std::string& extra = "");

// A JSON document as an escaped, collapsible <pre> block.
std::string JsonBlock(const std::string& summary, const nlohmann::json& doc, bool open = false);

// An HTML id from any text: letters, digits, '-', '_' and '.' kept, the rest '-'.
std::string AnchorId(const std::string& text);

// A report number that may be written as "nan" / "inf" / "-inf" (oracles/report.cpp).
double JsonNumber(const nlohmann::json& v);

}  // namespace paradiff::html
