// `paradiff export deepspeed CONFIG` (a DeepSpeed JSON config) and `paradiff export megatron
// CONFIG` (the matching Megatron-LM arguments, one line), targets/translate.h. Written to stdout,
// or to --out. Exit 2 on bad input.
#include <iostream>

#include "core/atomic_file.h"
#include "core/exit_codes.h"
#include "targets/translate.h"
#include "tools/cli.h"
#include "tools/load_config.h"

namespace paradiff {

int CmdExport(const Args& args) {
  if (args.positional.size() != 2 ||
      (args.positional[0] != "deepspeed" && args.positional[0] != "megatron")) {
    std::cerr << "ERROR: usage: paradiff export deepspeed|megatron CONFIG [--out FILE]\n";
    return kExitBadInput;
  }
  const std::string& path = args.positional[1];
  StatusOr<Config> cfg = LoadCheckedConfig(path, {});
  if (!cfg.ok()) {
    for (const auto& e : cfg.status().errors())
      std::cerr << "ERROR: " << path << ": " << e.message << "\n";
    return kExitBadInput;
  }
  std::string text;
  if (args.positional[0] == "deepspeed") {
    text = ExportDeepSpeed(cfg.value()).dump(2) + "\n";
  } else {
    for (const auto& a : ExportMegatron(cfg.value())) text += (text.empty() ? "" : " ") + a;
    text += "\n";
  }
  return EmitText(args.out, text);
}

}  // namespace paradiff
