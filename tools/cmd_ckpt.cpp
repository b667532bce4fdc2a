// `paradiff ckpt save CONFIG DIR | inspect DIR | consolidate DIR OUT`: sharded checkpoints
// (kernels/checkpoint.h) from the command line.
#include <iostream>

#include "core/exit_codes.h"
#include "kernels/checkpoint.h"
#include "kernels/engine.h"
#include "tools/cli.h"
#include "tools/load_config.h"

namespace paradiff {

namespace {

int Save(const std::string& path, const std::string& dir) {
  StatusOr<Config> cfg = LoadCheckedConfig(path, {});
  Status s = cfg.ok() ? EngineSupports(cfg.value()) : cfg.status();
  if (!s.ok()) {
    for (const auto& e : s.errors()) std::cerr << "ERROR: " << path << ": " << e.message << "\n";
    return kExitBadInput;
  }
  Config c = cfg.value();
  c.checkpoint.save_at = 0;  // train every step, then save
  EngineOptions opts;
  opts.checkpoint_dir = dir;
  EngineOutcome out = RunEngine(c, opts);
  if (!out.ok) {
    std::cerr << "ERROR: the run failed before saving: " << out.failure << "\n";
    return kExitFinding;
  }
  std::cout << "SUMMARY: paradiff: ckpt saved " << c.steps << " steps of " << path << " to " << dir
            << "\n";
  return kExitPass;
}

int Inspect(const std::string& dir) {
  CheckpointReader r(dir);
  const auto& m = r.manifest();
  std::cout << "INFO: checkpoint " << dir << " step=" << m["step"] << " updates=" << m["updates"]
            << " layout=" << m["layout"].dump() << " scaler=" << m["scaler"].dump() << "\n";
  for (const auto& rank : m["ranks"])
    std::cout << "INFO:   rank " << rank["rank"] << " " << rank["file"].get<std::string>() << " "
              << rank["bytes"] << " bytes, " << rank["pieces"].size() << " pieces, checksum "
              << rank["checksum"].get<std::string>() << "\n";
  std::cout << "SUMMARY: paradiff: ckpt inspect OK (" << m["ranks"].size()
            << " rank files verified)\n";
  return kExitPass;
}

}  // namespace

int CmdCkpt(const Args& a) {
  const auto& p = a.positional;
  try {
    if (p.size() == 3 && p[0] == "save") return Save(p[1], p[2]);
    if (p.size() == 2 && p[0] == "inspect") return Inspect(p[1]);
    if (p.size() == 3 && p[0] == "consolidate") {
      ConsolidateCheckpoint(p[1], p[2]);
      std::cout << "SUMMARY: paradiff: ckpt consolidated " << p[1] << " into " << p[2] << "\n";
      return kExitPass;
    }
  } catch (const CheckpointError& e) {
    std::cerr << "ERROR: " << e.what() << "\n";
    return kExitBadInput;
  }
  std::cerr << "ERROR: usage: paradiff ckpt save CONFIG DIR | inspect DIR | consolidate DIR OUT\n";
  return kExitBadInput;
}

}  // namespace paradiff
