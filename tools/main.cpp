// paradiff: entry point. Maps subcommand results to exit codes; nothing else does.
#include <exception>
#include <iostream>

#include "core/exit_codes.h"
#include "core/self_exe.h"
#include "tools/cli.h"

int main(int argc, char** argv) {
  using namespace paradiff;
  SetParadiffExecutable(SelfExecutablePath());  // what mpirun ranks and campaign workers run
  Args args;
  std::string error;
  if (!ParseArgs(argc, argv, args, error)) {
    std::cerr << "ERROR: " << error << "\n";
    return kExitBadInput;
  }
  if (args.help) {
    std::cout << HelpText(args.subcommand);
    return kExitPass;
  }
  try {
    for (const auto& s : Subcommands())
      if (args.subcommand == s.name) return s.run(args);
  } catch (const std::exception& e) {
    std::cerr << "ERROR: internal: " << e.what() << "\n";
    return kExitInternal;
  }
  return kExitInternal;
}
