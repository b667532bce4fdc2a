#include "targets/crash_state.h"

#include <cctype>
#include <regex>
#include <sstream>

namespace paradiff {

// Note [Crash state]: fuzzers bucket crashes by their state (libFuzzer's deduplication by stack,
// ClusterFuzz's crash state of the top frames). An external target's crash is a process that exited
// non-zero or died of a signal; what it died of is in its log: a Python traceback ending in the
// exception's type (a rank's own, or quoted by torch.multiprocessing's "Process N terminated with
// the following error"), or a C++ "terminate called after throwing an instance of 'T'". The state
// is the first such exception's type and the function of the innermost frame above it, e.g.
// "PipeliningShapeError-_validate_fwd_outputs": stable for one cause across configs, sizes and
// seeds (no message text, no line numbers), different for different causes. Skipped, because they
// report another process's failure rather than a cause: the spawning wrappers
// (ProcessRaisedException, ProcessExitedException, ChildFailedError) and a rank's lost connection
// to a peer that died first ("closed by peer", "reset by peer", "Broken pipe"). A log naming no
// exception gives "" and the crash keeps the bare detail ("exit", "signal").
std::string CrashState(const std::string& log) {
  static const std::regex kFrame(R"re(^\s*File ".*", line \d+, in ([A-Za-z_<][\w<>]*))re");
  static const std::regex kException(
      R"re(^\s*(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Failure))(?::\s?(.*))?$)re");
  static const std::regex kTerminate(
      R"re(terminate called after throwing an instance of '(?:[\w]+::)*([\w]+)')re");
  static const char* const kWrappers[] = {"ProcessRaisedException", "ProcessExitedException",
                                          "ChildFailedError"};
  static const char* const kConsequences[] = {"closed by peer", "reset by peer", "Broken pipe"};
  std::istringstream in(log);
  std::string frame;
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (line.find("Traceback (most recent call last)") != std::string::npos) frame.clear();
    if (std::regex_search(line, m, kFrame)) {
      frame = m[1];
      continue;
    }
    std::string type;
    if (std::regex_search(line, m, kTerminate)) {
      type = m[1];
      frame.clear();
    } else if (std::regex_match(line, m, kException)) {
      type = m[1];
    } else {
      continue;
    }
    bool skip = false;
    for (const char* w : kWrappers) skip = skip || type == w;
    for (const char* c : kConsequences) skip = skip || line.find(c) != std::string::npos;
    if (skip) continue;
    std::string state = frame.empty() ? type : type + "-" + frame;
    std::string safe;
    for (char c : state)
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-') safe += c;
    return safe.substr(0, 80);
  }
  return "";
}

}  // namespace paradiff
