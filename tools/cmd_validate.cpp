// `paradiff validate CONFIG...` and `paradiff version`.
#include <iostream>

#include "core/budget.h"
#include "core/config_json.h"
#include "core/exit_codes.h"
#include "core/model_spec.h"
#include "kernels/engine.h"
#include "tools/cli.h"
#include "tools/load_config.h"

namespace paradiff {

int CmdVersion(const Args&) {
  std::cout << "paradiff " << PARADIFF_VERSION << " (C++17; backends: local)\n";
  return kExitPass;
}

int CmdValidate(const Args& args) {
  if (args.positional.empty()) {
    std::cerr << "ERROR: validate needs at least one CONFIG (see paradiff validate --help)\n";
    return kExitBadInput;
  }
  int bad = 0;
  for (const auto& path : args.positional) {
    StatusOr<Config> cfg = LoadCheckedConfig(path, {});
    if (!cfg.ok()) {
      ++bad;
      for (const auto& e : cfg.status().errors())
        std::cerr << "ERROR: " << path << ": " << e.message << "\n";
      continue;
    }
    if (!args.quiet) {
      std::cout << "OK: " << path << " seed=" << cfg.value().seed
                << " world=" << cfg.value().parallel.world
                << " params=" << ModelParameterCount(cfg.value().model) << "\n";
      const Status sup = EngineSupports(cfg.value());
      for (const auto& e : sup.errors())
        std::cout << "WARNING: " << path
                  << ": valid, but this engine build cannot run it: " << e.message << "\n";
    }
  }
  std::cout << "SUMMARY: paradiff: validate " << args.positional.size() - bad << " valid, " << bad
            << " invalid\n";
  return bad ? kExitBadInput : kExitPass;
}

}  // namespace paradiff
