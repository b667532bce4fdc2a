// The campaign worker: a child process (`paradiff worker`) that checks configs in-process on the
// local backend, one task per line. Crashes and hangs of the target take down only the worker;
// the campaign (fuzz/campaign.h) notices, records them and starts a fresh one.
//
// Protocol (one JSON object per line):
//   task:   {"index": N, "config": {...}, "debug": ""|"crash"|"hang"}
//   result: {"index": N, "verdict": VerdictJson, "report": {...} (findings only), "ms": T}
// "debug" exists for the campaign's own tests: "crash" aborts the worker, "hang" blocks it.
#pragma once

#include <istream>
#include <ostream>

namespace paradiff {

// Serves tasks until end of input. Returns the process exit code.
int RunWorker(std::istream& in, std::ostream& out);

}  // namespace paradiff
