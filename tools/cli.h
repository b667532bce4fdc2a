// The `paradiff` command line: one options table (cli.cpp) shared by every subcommand, parsed with
// Boost.Program_options into a plain Args value. Subcommands live in cmd_*.cpp and return exit codes
// (core/exit_codes.h); only main() returns them to the shell.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace paradiff {

struct Args {
  std::string subcommand;
  std::vector<std::string> positional;  // CONFIG... for validate / run
  std::vector<std::string> inject;      // --inject NAME (repeatable)
  std::string report;                   // --report FILE.json
  int64_t timeout_ms = 20000;           // --timeout-ms
  bool quiet = false;                   // --quiet
  bool help = false;
};

struct Subcommand {
  const char* name;
  const char* usage;    // e.g. "paradiff run CONFIG [options]"
  const char* summary;  // one line
  int (*run)(const Args&);
};

const std::vector<Subcommand>& Subcommands();

// Parses argv[1..] (argv[1] is the subcommand). Returns false and fills `error` on a usage error.
bool ParseArgs(int argc, char** argv, Args& out, std::string& error);
std::string HelpText(const std::string& subcommand);  // "" = top-level help

int CmdVersion(const Args& args);
int CmdValidate(const Args& args);
int CmdRun(const Args& args);

}  // namespace paradiff
