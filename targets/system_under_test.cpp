#include "targets/system_under_test.h"

#include "kernels/engine.h"
#include "targets/target_runner.h"

namespace paradiff {

Status SystemUnderTest::Supports(const Config& cfg) const {
  return target ? TargetSupports(*target, cfg) : EngineSupports(cfg);
}

EngineRunner SystemUnderTest::Runner() const {
  if (!target) return EngineRunner{};
  return MakeTargetRunner(*target);
}

std::string SystemUnderTest::Describe() const {
  return target ? "target " + target->name + " (" + target->path + ")" : "engine";
}

StatusOr<SystemUnderTest> LoadSystemUnderTest(const std::string& target_file) {
  SystemUnderTest s;
  if (target_file.empty()) return s;
  StatusOr<TargetSpec> t = LoadTargetFile(target_file);
  if (!t.ok()) return t.status();
  s.target = std::make_shared<const TargetSpec>(t.value());
  return s;
}

}  // namespace paradiff
