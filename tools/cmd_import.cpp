// `paradiff import deepspeed DS_CONFIG.json [--out CONFIG.json]`: a paradiff config from a
// DeepSpeed config (targets/translate.h); model, seed and steps are paradiff's defaults. Prints the
// config (or writes --out) and the import's INFO / WARNING lines (what was scaled, what "auto"
// took, each DeepSpeed key without a counterpart). Exit 2 on bad input, naming the key.
#include <fstream>
#include <iostream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/budget.h"
#include "core/config_json.h"
#include "core/exit_codes.h"
#include "core/json_text.h"
#include "targets/translate.h"
#include "tools/cli.h"
#include "tools/load_config.h"

namespace paradiff {

int CmdImport(const Args& args) {
  if (args.positional.size() != 2 || args.positional[0] != "deepspeed") {
    std::cerr << "ERROR: usage: paradiff import deepspeed DS_CONFIG.json [--out CONFIG.json]\n";
    return kExitBadInput;
  }
  const std::string& path = args.positional[1];
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const nlohmann::json ds = ParseJsonText(ss.str());
  if (!f || ds.is_discarded()) {
    std::cerr << "ERROR: " << path << ": not a readable JSON file\n";
    return kExitBadInput;
  }
  StatusOr<DeepSpeedImport> r = ImportDeepSpeed(ds, Config{});
  if (r.ok()) {
    for (const ImportMessage& m : r.value().messages)
      std::cerr << (m.level == ImportMessage::kWarning ? "WARNING: " : "INFO: ") << path << ": "
                << m.text << "\n";
  }
  Status ok = r.ok() ? CheckConfig(r.value().config, ResourceBudget{}) : r.status();
  if (!ok.ok()) {
    for (const auto& e : ok.errors()) std::cerr << "ERROR: " << path << ": " << e.message << "\n";
    return kExitBadInput;
  }
  const std::string text = WriteConfig(r.value().config);
  return EmitText(args.out, text);
}

}  // namespace paradiff
