#include "tools/load_config.h"

#include <algorithm>
#include <iostream>

#include "core/atomic_file.h"
#include "core/budget.h"
#include "core/config_json.h"
#include "core/exit_codes.h"

namespace paradiff {

StatusOr<Config> LoadCheckedConfig(const std::string& path,
                                   const std::vector<std::string>& inject) {
  StatusOr<Config> loaded = LoadConfigFile(path);
  if (!loaded.ok()) return loaded;
  Config cfg = loaded.value();
  for (const auto& f : inject)
    if (std::find(cfg.faults.begin(), cfg.faults.end(), f) == cfg.faults.end())
      cfg.faults.push_back(f);
  Status s = CheckConfig(cfg, ResourceBudget{});
  if (!s.ok()) return s;
  return cfg;
}

int EmitText(const std::string& out, const std::string& text) {
  if (out.empty()) {
    std::cout << text;
    return kExitPass;
  }
  const Status w = WriteFileAtomic(out, text);
  if (!w.ok()) {
    std::cerr << "ERROR: " << w.ToString() << "\n";
    return kExitInternal;
  }
  return kExitPass;
}

}  // namespace paradiff
