#include "targets/system_under_test.h"

#include "kernels/engine.h"

namespace paradiff {

Status SystemUnderTest::Supports(const Config& cfg) const {
  if (target) return TargetSupports(*target, cfg);
  // The engine's rules bind every system (its reference runs each config); the options and shard
  // groups only a target's file declares bind the engine alone.
  Status s = EngineSupports(cfg);
  if (!cfg.target_options.empty())
    s.Add("target_options",
          "target_options are an external target's own settings; the built-in engine has none");
  if (const std::string why = EngineShardGroupRefusal(cfg); !why.empty())
    s.Add("zero.shard_group", why);
  return s;
}

EngineRunner SystemUnderTest::Runner() const {
  if (!target) return EngineRunner{};
  return [t = target, o = run_options, w = warm](const Config& cfg) {
    return RunTarget(*t, cfg, o, w.get());
  };
}

SystemLimits SystemUnderTest::Limits() const {
  SystemLimits l;
  if (!target) return l;
  l.max_world = target->max_world;
  l.options = target->options;
  l.reload = target->reload;
  l.precisions = target->precisions;
  l.parallel = target->parallel;
  l.run_timeout_s = target->timeout_s;
  l.shard_groups = target->shard_groups;
  return l;
}

std::string SystemUnderTest::Describe() const {
  return target ? "target " + target->name + " (" + target->path + ")" : "engine";
}

TargetRunOptions KeepingRunDirs(const std::string& keep_run_dirs) {
  if (keep_run_dirs.empty()) return {"", KeepRunDirs::kFailed};
  return {keep_run_dirs, KeepRunDirs::kAll};
}

StatusOr<SystemUnderTest> LoadSystemUnderTest(const std::string& target_file,
                                              const TargetRunOptions& run_options) {
  SystemUnderTest s;
  if (target_file.empty()) return s;
  s.run_options = run_options;
  StatusOr<TargetSpec> t = LoadTargetFile(target_file);
  if (!t.ok()) return t.status();
  s.target = std::make_shared<const TargetSpec>(t.value());
  if (s.target->protocol == 2)
    s.warm = std::make_shared<WarmWorkers>(*s.target, run_options.work_dir,
                                           run_options.keep == KeepRunDirs::kAll);
  return s;
}

}  // namespace paradiff
