// Process exit codes of every paradiff subcommand (documented in README.md). Only main() maps
// results to these; everything below returns values.
#pragma once

namespace paradiff {

enum ExitCode : int {
  kExitPass = 0,      // everything checked agreed
  kExitInternal = 1,  // a bug or environment failure in paradiff itself
  kExitBadInput = 2,  // usage error, unreadable / malformed / invalid / over-budget config
  kExitFinding = 3,   // a finding: mismatch, hang, crash, invariant, ... (kind in SUMMARY line)
};

}  // namespace paradiff
