// `paradiff report (WORKDIR | REPORT.json) --html FILE`: renders a campaign work dir
// (tools/workdir_html.h) or one JSON report written by `paradiff run --report` or stored as a
// finding's report.json (tools/html_report.h) as one self-contained HTML file. Exit 0, or 2 when
// the input is not a work dir or a report.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "core/atomic_file.h"
#include "core/exit_codes.h"
#include "fuzz/json_file.h"
#include "tools/cli.h"
#include "tools/html_report.h"
#include "tools/workdir_html.h"

namespace paradiff {

int CmdReport(const Args& a) {
  if (a.positional.size() != 1 || a.html.empty()) {
    std::cerr << "ERROR: report takes one WORKDIR or REPORT.json and --html FILE (see paradiff "
                 "report --help)\n";
    return kExitBadInput;
  }
  const std::string& in = a.positional[0];
  std::string page;
  if (std::filesystem::is_directory(in)) {
    StatusOr<std::string> p = WorkDirHtml(in);
    if (!p.ok()) {
      std::cerr << "ERROR: " << p.status().ToString() << "\n";
      return kExitBadInput;
    }
    page = p.value();
  } else {
    StatusOr<nlohmann::json> j = ReadJsonFile(in);
    if (!j.ok() || !j.value().is_object() || !j.value().contains("verdict")) {
      std::cerr << "ERROR: "
                << (j.ok() ? in + ": not a paradiff report (no \"verdict\")"
                           : j.status().ToString())
                << "\n";
      return kExitBadInput;
    }
    page = html::Page("paradiff report " + in, html::ReportSection(j.value(), "report", in));
  }
  const Status w = WriteFileAtomic(a.html, page);
  if (!w.ok()) {
    std::cerr << "ERROR: " << w.ToString() << "\n";
    return kExitInternal;
  }
  std::printf("SUMMARY: paradiff: report html=%s from=%s bytes=%zu\n", a.html.c_str(), in.c_str(),
              page.size());
  return kExitPass;
}

}  // namespace paradiff
