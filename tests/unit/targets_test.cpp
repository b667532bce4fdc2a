// Unit tests of targets/: safetensors round trip and rejection, target file rules, DeepSpeed
// import, and the oracles on a run that reports less than the built-in engine (docs/TARGETS.md
// "reports", "grad_norm_dtype").
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "core/budget.h"
#include "core/config_json.h"
#include "core/model_spec.h"
#include "core/reload_support.h"
#include "core/watchdog.h"
#include "kernels/engine.h"
#include "oracles/check.h"
#include "oracles/tolerance.h"
#include "targets/safetensors.h"
#include "targets/system_under_test.h"
#include "targets/target_file.h"
#include "targets/translate.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

TEST(SafeTensors, RoundTripAndTruncation) {
  const std::string path = ::testing::TempDir() + "/t.safetensors";
  SafeTensors st;
  st.tensors["a"] = at::arange(6, at::kFloat).view({2, 3});
  st.tensors["b"] = at::tensor({1.5, -2.0}, at::kDouble);
  st.metadata["offset:a"] = "3";
  ASSERT_TRUE(WriteSafeTensors(path, st).ok());
  StatusOr<SafeTensors> back = ReadSafeTensors(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back.value().tensors.at("a").equal(st.tensors["a"]));
  EXPECT_TRUE(back.value().tensors.at("b").equal(st.tensors["b"]));
  EXPECT_EQ(back.value().metadata.at("offset:a"), "3");
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(path, std::ios::binary) << bytes.substr(0, bytes.size() - 4);
  StatusOr<SafeTensors> cut = ReadSafeTensors(path);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().ToString().find("outside the"), std::string::npos)
      << cut.status().ToString();
}

TEST(TargetFile, RulesAndSupport) {
  StatusOr<TargetSpec> bad =
      ParseTargetSpec(R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{oops}"],
      "supports": {"optimizers": ["lamb"]}, "extra": 1})",
                      "t.json");
  ASSERT_FALSE(bad.ok());
  const std::string msg = bad.status().ToString();
  EXPECT_NE(msg.find("unknown placeholder {oops}"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'lamb' is not one of"), std::string::npos) << msg;
  EXPECT_NE(msg.find("extra: unknown field"), std::string::npos) << msg;
  StatusOr<TargetSpec> ok =
      ParseTargetSpec(R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"],
      "launcher": {"default": ["/bin/env", "W={world}"]}, "supports": {"max_world": 2, "zero_stages": [0, 1]}})",
                      "t.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  Config c;
  c.parallel.dp = c.parallel.world = 2;
  EXPECT_TRUE(TargetSupports(ok.value(), c).ok());
  EXPECT_EQ(TargetArgv(ok.value(), c, "/r"),
            (std::vector<std::string>{"/bin/env", "W=2", "/bin/true", "/r"}));
  c.zero.stage = 2;
  c.parallel.dp = c.parallel.world = 3;
  const Status no = TargetSupports(ok.value(), c);
  ASSERT_EQ(no.errors().size(), 2u) << no.ToString();
  EXPECT_EQ(no.errors()[0].field, "parallel.world");
  EXPECT_EQ(no.errors()[1].field, "zero.stage");
  Config mpi;  // the backend picks the built-in engine's executor: a target refuses any but local
  mpi.parallel.dp = mpi.parallel.world = 2;
  mpi.backend = Backend::kMpi;
  const Status backend = TargetSupports(ok.value(), mpi);
  ASSERT_EQ(backend.errors().size(), 1u) << backend.ToString();
  EXPECT_EQ(backend.errors()[0].field, "backend");
}

TEST(TargetFile, OptionsBoundTheConfigsTargetOptions) {
  StatusOr<TargetSpec> t = ParseTargetSpec(
      R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"], "supports": {},
      "options": {"zero_optimization.overlap_comm": [true, false], "n": [64, 5e8]}})",
      "t.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t.value().options.at("n").values, (std::vector<std::string>{"64", "500000000.0"}));
  EXPECT_FALSE(t.value().options.at("n").divides_dp);
  Config c;
  c.target_options = {{"zero_optimization.overlap_comm", "false"}};
  EXPECT_TRUE(TargetSupports(t.value(), c).ok());
  c.target_options = {{"zero_optimization.overlap_comm", "1"}, {"other", "true"}};
  const Status no = TargetSupports(t.value(), c);
  ASSERT_EQ(no.errors().size(), 2u) << no.ToString();
  EXPECT_EQ(no.errors()[0].field, "target_options.other");
  EXPECT_EQ(no.errors()[1].field, R"(target_options."zero_optimization.overlap_comm")");
  EXPECT_FALSE(SystemUnderTest{}.Supports(c).ok());  // the built-in engine has no options
  for (const char* bad : {R"("options": {"a": []})", R"("options": {"a": [[1]]})",
                          R"("options": {"a": [1, 1]})", R"("options": 2)"}) {
    const std::string text = std::string(R"({"protocol": 1, "name": "x", "command": ["/bin/true"],
      "supports": {}, )") + bad +
                             "}";
    const StatusOr<TargetSpec> r = ParseTargetSpec(text, "t.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().ToString().find("options"), std::string::npos) << r.status().ToString();
  }
}

// An option under "divides": "dp" (DeepSpeed's zero_hpz_partition_size) takes only values that
// divide the config's dp and, with a checkpoint, its reload dp; its values must be positive
// integers.
TEST(TargetFile, AnOptionThatDividesDpRefusesValuesThatDoNot) {
  const char* head = R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"],
      "supports": {"max_world": 4, "checkpoint": true}, "options": {"hpz": )";
  StatusOr<TargetSpec> t =
      ParseTargetSpec(std::string(head) + R"({"values": [2, 4], "divides": "dp"}}})", "t.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t.value().options.at("hpz").divides_dp);
  Config c;
  c.parallel.dp = c.parallel.world = 4;
  c.target_options = {{"hpz", "2"}};
  EXPECT_TRUE(TargetSupports(t.value(), c).ok());
  c.parallel.dp = c.parallel.world = 3;
  const Status no = TargetSupports(t.value(), c);
  ASSERT_EQ(no.errors().size(), 1u) << no.ToString();
  EXPECT_EQ(no.errors()[0].field, "target_options.hpz");
  EXPECT_NE(no.ToString().find("2 does not divide parallel.dp 3"), std::string::npos)
      << no.ToString();
  c.parallel.dp = c.parallel.world = 4;  // saved at dp 4, reloaded into dp 3
  c.steps = 3;
  c.checkpoint.save_at = 1;
  c.checkpoint.reload.dp = 3;
  const Status reload = TargetSupports(t.value(), c);
  EXPECT_NE(reload.ToString().find("2 does not divide checkpoint.reload.dp 3"), std::string::npos)
      << reload.ToString();
  c.checkpoint.reload.dp = 2;
  EXPECT_TRUE(TargetSupports(t.value(), c).ok()) << TargetSupports(t.value(), c).ToString();
  for (const char* bad :
       {R"({"values": [2, 0], "divides": "dp"})", R"({"values": [1.5], "divides": "dp"})",
        R"({"values": [2], "divides": "tp"})", R"({"values": [2], "unknown": 1})",
        R"({"divides": "dp"})", R"({"values": ["2"], "divides": "dp"})"}) {
    const StatusOr<TargetSpec> r = ParseTargetSpec(std::string(head) + bad + "}}", "t.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().ToString().find("options.hpz"), std::string::npos)
        << r.status().ToString();
  }
}

TEST(TargetFile, AnOptionWithZeroStagesIsSetOnlyAtThoseStages) {
  const char* head = R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"],
      "supports": {"max_world": 4, "zero_stages": [0, 1, 2, 3], "checkpoint": true},
      "options": {"offload": )";
  StatusOr<TargetSpec> t =
      ParseTargetSpec(std::string(head) + R"({"values": ["cpu"], "zero_stages": [3]}}})", "t.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t.value().options.at("offload").zero_stages, std::vector<int64_t>{3});
  Config c;
  c.parallel.dp = c.parallel.world = 2;
  c.zero.stage = 3;
  c.target_options = {{"offload", "\"cpu\""}};
  EXPECT_TRUE(TargetSupports(t.value(), c).ok()) << TargetSupports(t.value(), c).ToString();
  c.zero.stage = 2;
  const Status no = TargetSupports(t.value(), c);
  ASSERT_EQ(no.errors().size(), 1u) << no.ToString();
  EXPECT_EQ(no.errors()[0].field, "target_options.offload");
  EXPECT_NE(no.ToString().find("\"cpu\" is not set at zero.stage 2"), std::string::npos)
      << no.ToString();
  c.zero.stage = 3;  // saved at stage 3, reloaded into stage 2
  c.steps = 3;
  c.checkpoint.save_at = 1;
  c.checkpoint.reload.dp = 2;
  c.checkpoint.reload.zero_stage = 2;
  EXPECT_NE(TargetSupports(t.value(), c).ToString().find("checkpoint.reload.zero_stage 2"),
            std::string::npos)
      << TargetSupports(t.value(), c).ToString();
  for (const char* bad :
       {R"({"values": ["cpu"], "zero_stages": []})", R"({"values": ["cpu"], "zero_stages": [4]})",
        R"({"values": ["cpu"], "zero_stages": [3, 3]})",
        R"({"values": ["cpu"], "zero_stages": 3})"}) {
    const StatusOr<TargetSpec> r = ParseTargetSpec(std::string(head) + bad + "}}", "t.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().ToString().find("options.offload.zero_stages"), std::string::npos)
        << r.status().ToString();
  }
}

// An option under "requires" (DeepSpeed's gradient_predivide_factor, which ZeRO 2 and 3 take only
// with reduce_scatter false) is set only where the named option holds one of the listed values;
// the file names a declared option, its declared values, and one level only.
TEST(TargetFile, AnOptionWithRequiresIsSetOnlyWithTheRequiredValue) {
  const char* head = R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"],
      "supports": {"max_world": 4}, "options": {"rs": [true, false], "f": )";
  StatusOr<TargetSpec> t = ParseTargetSpec(
      std::string(head) + R"({"values": [2.0], "requires": {"rs": [false]}}}})", "t.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t.value().options.at("f").requires.at("rs"), std::vector<std::string>{"false"});
  Config c;
  c.parallel.dp = c.parallel.world = 2;
  c.target_options = {{"f", "2.0"}, {"rs", "false"}};
  EXPECT_TRUE(TargetSupports(t.value(), c).ok()) << TargetSupports(t.value(), c).ToString();
  for (const auto& other : std::vector<std::map<std::string, std::string>>{{}, {{"rs", "true"}}}) {
    c.target_options = other;
    c.target_options["f"] = "2.0";
    const Status no = TargetSupports(t.value(), c);
    ASSERT_EQ(no.errors().size(), 1u) << no.ToString();
    EXPECT_EQ(no.errors()[0].field, "target_options.f");
    EXPECT_NE(no.ToString().find("2.0 is set only with target_options.rs one of [false]"),
              std::string::npos)
        << no.ToString();
  }
  c.target_options = {{"rs", "true"}};  // the required option alone is fine
  EXPECT_TRUE(TargetSupports(t.value(), c).ok()) << TargetSupports(t.value(), c).ToString();
  for (const char* bad :
       {R"({"values": [2.0], "requires": {"nope": [false]}})",
        R"({"values": [2.0], "requires": {"f": [2.0]}})",
        R"({"values": [2.0], "requires": {"rs": ["no"]}})",
        R"({"values": [2.0], "requires": {"rs": []}})", R"({"values": [2.0], "requires": {}})",
        R"({"values": [2.0], "requires": ["rs"]})"}) {
    const StatusOr<TargetSpec> r = ParseTargetSpec(std::string(head) + bad + "}}", "t.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().ToString().find("options.f.requires"), std::string::npos)
        << r.status().ToString();
  }
  const StatusOr<TargetSpec> chain = ParseTargetSpec(
      R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"], "options": {
      "a": [1], "b": {"values": [1], "requires": {"a": [1]}},
      "c": {"values": [1], "requires": {"b": [1]}}}})",
      "t.json");
  ASSERT_FALSE(chain.ok());
  EXPECT_NE(chain.status().ToString().find("options.c.requires.b: names an option with a"),
            std::string::npos)
      << chain.status().ToString();
}

// zero.shard_group other than 0 needs a target that declares supports.shard_groups; the built-in
// engine shards over every dp rank only.
TEST(TargetFile, ShardGroupsNeedTheTargetsSupport) {
  const char* head = R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"],
      "supports": {"max_world": 4, "zero_stages": [3])";
  StatusOr<TargetSpec> plain = ParseTargetSpec(std::string(head) + "}}", "t.json");
  StatusOr<TargetSpec> hsdp =
      ParseTargetSpec(std::string(head) + R"(, "shard_groups": true}})", "t.json");
  ASSERT_TRUE(plain.ok() && hsdp.ok()) << hsdp.status().ToString();
  Config c;
  c.parallel.dp = c.parallel.world = 4;
  c.zero.stage = 3;
  c.zero.shard_group = 2;
  const Status no = TargetSupports(plain.value(), c);
  ASSERT_EQ(no.errors().size(), 1u) << no.ToString();
  EXPECT_EQ(no.errors()[0].field, "zero.shard_group");
  EXPECT_TRUE(TargetSupports(hsdp.value(), c).ok()) << TargetSupports(hsdp.value(), c).ToString();
  SystemUnderTest sut;
  sut.target = std::make_shared<const TargetSpec>(hsdp.value());
  EXPECT_TRUE(sut.Limits().shard_groups);
  EXPECT_FALSE(SystemUnderTest{}.Limits().shard_groups);
  const Status engine = SystemUnderTest{}.Supports(c);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.errors()[0].field, "zero.shard_group");
}

// A system's limits come from its file for a target; the built-in engine declares none.
TEST(SystemUnderTest, LimitsAreTheTargetFilesAndNoneForTheEngine) {
  const SystemLimits engine = SystemUnderTest{}.Limits();
  EXPECT_EQ(engine.max_world, std::numeric_limits<int64_t>::max());
  EXPECT_TRUE(engine.options.empty());
  EXPECT_TRUE(engine.precisions.empty());
  EXPECT_EQ(engine.run_timeout_s, 0);
  StatusOr<TargetSpec> t = ParseTargetSpec(
      R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"], "timeout_s": 7,
      "supports": {"max_world": 3, "precision": [{"param": "fp32", "compute": "bf16", "reduce": "fp32",
                                                 "accumulate": "fp32"}]},
      "options": {"n": [1, 2]}})",
      "t.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  SystemUnderTest sut;
  sut.target = std::make_shared<const TargetSpec>(t.value());
  const SystemLimits l = sut.Limits();
  EXPECT_EQ(l.max_world, 3);
  EXPECT_EQ(l.options.at("n").values, (std::vector<std::string>{"1", "2"}));
  ASSERT_EQ(l.precisions.size(), 1u);
  EXPECT_EQ(l.precisions[0].compute, DType::kBf16);
  EXPECT_EQ(l.run_timeout_s, 7);
}

// dp 2 at ZeRO `stage`, 3 steps, saved after one and reloaded into dp 1 at `reload_stage`.
Config SavedAtDp2(int64_t stage, int64_t reload_stage) {
  Config c;
  c.steps = 3;
  c.parallel.dp = c.parallel.world = 2;
  c.zero.stage = stage;
  c.checkpoint.save_at = 1;
  c.checkpoint.reload.dp = 1;
  c.checkpoint.reload.zero_stage = reload_stage;
  return c;
}

TEST(TargetFile, CheckpointDeclaresTheReloadLayoutsItTakes) {
  StatusOr<TargetSpec> t = ParseTargetSpec(
      R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"],
      "supports": {"max_world": 4, "zero_stages": [0, 1, 2], "max_steps": 4, "checkpoint":
        {"reload_changes": ["dp", "zero_stage"],
         "reload_zero_stages": {"0": [0], "1": [1, 2], "2": []}}}})",
      "t.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t.value().checkpoint);
  Config c = SavedAtDp2(1, 2);
  EXPECT_TRUE(TargetSupports(t.value(), c).ok()) << TargetSupports(t.value(), c).ToString();
  auto fields = [&](const Config& x) {
    std::vector<std::string> f;
    const Status st = TargetSupports(t.value(), x);
    for (const auto& e : st.errors()) f.push_back(e.field);
    return f;
  };
  Config stage0 = c;  // a ZeRO 0 checkpoint reloads into stage 0 only
  stage0.zero.stage = 0;
  EXPECT_EQ(fields(stage0), std::vector<std::string>{"checkpoint.reload.zero_stage"});
  Config stage2 = c;  // no checkpoint at ZeRO 2
  stage2.zero.stage = 2;
  EXPECT_EQ(fields(stage2), std::vector<std::string>{"checkpoint.save_at"});
  Config tp = c;  // tp may not change
  tp.model.heads = tp.model.kv_heads = 2;
  tp.checkpoint.reload.tp = 2;
  EXPECT_EQ(fields(tp), (std::vector<std::string>{"checkpoint.reload.tp", "checkpoint.reload"}));
  Config sgd = c;  // every optimizer may reshard unless the file lists some
  sgd.optimizer.kind = OptimizerKind::kSgd;
  EXPECT_TRUE(TargetSupports(t.value(), sgd).ok());
  Config big = c;  // the reload phase is checked as a run of its own: world 8 > max_world
  big.checkpoint.reload.dp = 4;
  big.batch.accumulation_steps = 2;
  EXPECT_TRUE(TargetSupports(t.value(), big).ok());
  big.checkpoint.reload.dp = 8;
  big.batch.accumulation_steps = 4;
  EXPECT_EQ(fields(big), std::vector<std::string>{"checkpoint.reload"});
  // `true` keeps meaning any reload layout; bad declarations name the field and the rule.
  const StatusOr<TargetSpec> any = ParseTargetSpec(
      R"({"protocol": 1, "name": "x", "command": ["/bin/true"], "supports": {"checkpoint": true}})",
      "t.json");
  ASSERT_TRUE(any.ok());
  EXPECT_TRUE(any.value().reload.Unrestricted());
  for (const char* bad :
       {R"({"reload_changes": ["world"]})", R"({"reload_zero_stages": {"1": [1]}})",
        R"({"reload_changes": ["zero_stage"], "reload_zero_stages": {"4": [1]}})",
        R"({"reload_changes": ["zero_stage"], "reload_zero_stages": {"1": 1}})",
        R"({"reload_changes": ["dp"], "reload_changes_optimizers": ["lamb"]})",
        R"({"reload_changes": ["dp"], "reload_changes_optimizers": []})", R"({"reload": true})"}) {
    const StatusOr<TargetSpec> r = ParseTargetSpec(
        std::string(R"({"protocol": 1, "name": "x", "command": ["/bin/true"], "supports":
        {"checkpoint": )") +
            bad + "}}",
        "t.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().ToString().find("supports.checkpoint."), std::string::npos)
        << r.status().ToString();
  }
}

// DeepSpeed converts a resharded ZeRO checkpoint through its universal checkpoint, which knows
// Adam's state only (upstream issue 8608): an SGD checkpoint reloads into the save layout alone,
// and the generator's restriction keeps it there.
// Found by a DeepSpeed ZeRO-1 campaign (seed 801): mutated configs whose reload dp does not divide
// the step's micro-batches passed the target's supports and then only the validation gate.
TEST(TargetFile, AReloadThatSplitsTheBatchUnevenlyIsUnsupported) {
  StatusOr<TargetSpec> t = ParseTargetSpec(
      R"({"protocol": 1, "name": "x", "command": ["/bin/true"], "supports": {"max_world": 4,
          "zero_stages": [1], "checkpoint": {"reload_changes": ["dp"]}}})",
      "t.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Config c;
  c.parallel.dp = c.parallel.world = 4;
  c.batch.accumulation_steps = 4;
  c.zero.stage = 1;
  c.checkpoint.save_at = 1;
  c.steps = 2;
  c.checkpoint.reload.zero_stage = 1;
  c.checkpoint.reload.dp = 2;
  EXPECT_TRUE(TargetSupports(t.value(), c).ok()) << TargetSupports(t.value(), c).ToString();
  c.checkpoint.reload.dp = 3;  // 16 micro-batches over 3 ranks
  const Status s = TargetSupports(t.value(), c);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.ToString().find("must divide parallel.dp * batch.accumulation_steps = 16"),
            std::string::npos)
      << s.ToString();
}

TEST(TargetFile, ReloadChangesOnlyForTheListedOptimizers) {
  StatusOr<TargetSpec> t = ParseTargetSpec(
      R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"],
      "supports": {"max_world": 4, "zero_stages": [0, 1, 2, 3], "max_steps": 4, "checkpoint":
        {"reload_changes": ["dp", "zero_stage"], "reload_changes_optimizers": ["adam", "adamw"]}}})",
      "t.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Config c = SavedAtDp2(3, 3);
  EXPECT_TRUE(TargetSupports(t.value(), c).ok());  // adamw
  c.optimizer.kind = OptimizerKind::kSgd;
  const Status st = TargetSupports(t.value(), c);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.errors().at(0).field, "checkpoint.reload") << st.ToString();
  EXPECT_NE(st.ToString().find("an sgd checkpoint reloads only into the save layout"),
            std::string::npos)
      << st.ToString();
  Config restricted = c;
  RestrictReload(t.value().reload, restricted, 0);
  EXPECT_EQ(restricted.checkpoint.reload.dp, 2);
  EXPECT_EQ(restricted.checkpoint.reload.zero_stage, 3);
  EXPECT_TRUE(TargetSupports(t.value(), restricted).ok());
}

TEST(TargetFile, OptimizerArithmeticDeclaresHyperparametersAndClipDtype) {
  auto parse = [](const std::string& field) {
    return ParseTargetSpec(
        R"({"protocol": 1, "name": "x", "command": ["/bin/true"], "supports": {})" + field + "}",
        "t.json");
  };
  ASSERT_TRUE(parse("").ok());
  EXPECT_EQ(parse("").value().reporting.optimizer_hyperparameters, DType::kFp64);
  const auto fp32 = parse(R"(, "optimizer_arithmetic": {"hyperparameters": "fp32"})");
  ASSERT_TRUE(fp32.ok()) << fp32.status().ToString();
  EXPECT_EQ(fp32.value().reporting.optimizer_hyperparameters, DType::kFp32);
  EXPECT_FALSE(fp32.value().reporting.clips_in_accumulate);
  const auto clip = parse(R"(, "optimizer_arithmetic": {"clip": "accumulate"})");
  ASSERT_TRUE(clip.ok()) << clip.status().ToString();
  EXPECT_TRUE(clip.value().reporting.clips_in_accumulate);
  EXPECT_EQ(clip.value().reporting.optimizer_hyperparameters, DType::kFp64);
  for (const char* bad :
       {R"(, "optimizer_arithmetic": {"hyperparameters": "bf16"})",
        R"(, "optimizer_arithmetic": {"clip": "bf16"})",
        R"(, "optimizer_arithmetic": {"betas": "fp32"})", R"(, "optimizer_arithmetic": "fp32")"}) {
    const auto r = parse(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().ToString().find("optimizer_arithmetic"), std::string::npos)
        << r.status().ToString();
  }
}

TEST(TargetFile, KvHeadSharingBoundsKvHeadsBelowTp) {
  auto parse = [](const std::string& sharing) {
    return ParseTargetSpec(
        R"({"protocol": 1, "name": "x", "command": ["/bin/true"], "supports": {"max_world": 4,
        "parallel": ["tp"])" +
            sharing + "}}",
        "t.json");
  };
  ASSERT_TRUE(parse("").ok());
  EXPECT_TRUE(parse("").value().kv_head_sharing);
  const auto split = parse(R"(, "kv_head_sharing": false)");
  ASSERT_TRUE(split.ok()) << split.status().ToString();
  Config c;
  c.model.heads = 4;
  c.model.kv_heads = 1;
  c.parallel.tp = c.parallel.world = 2;
  EXPECT_TRUE(TargetSupports(parse("").value(), c).ok());
  const Status no = TargetSupports(split.value(), c);
  ASSERT_EQ(no.errors().size(), 1u) << no.ToString();
  EXPECT_EQ(no.errors()[0].field, "model.kv_heads");
  c.model.kv_heads = 2;
  EXPECT_TRUE(TargetSupports(split.value(), c).ok());
  const auto bad = parse(R"(, "kv_head_sharing": "no")");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("kv_head_sharing"), std::string::npos);
}

TEST(TargetFile, SchedulesBoundPipelinedConfigsOnly) {
  StatusOr<TargetSpec> t = ParseTargetSpec(
      R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"],
      "supports": {"max_world": 4, "parallel": ["pp"], "schedules": ["gpipe", "1f1b"]}})",
      "t.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  Config c;
  c.parallel.pp = c.parallel.world = 2;
  c.model.layers = 4;
  c.parallel.schedule = Schedule::k1F1B;
  EXPECT_TRUE(TargetSupports(t.value(), c).ok());
  c.parallel.schedule = Schedule::kInterleaved;
  c.parallel.virtual_stages = 2;
  const Status no = TargetSupports(t.value(), c);
  ASSERT_EQ(no.errors().size(), 1u) << no.ToString();
  EXPECT_EQ(no.errors()[0].field, "parallel.schedule");
  EXPECT_FALSE(ParseTargetSpec(R"({"protocol": 1, "name": "x", "command": ["/bin/true"],
      "supports": {"schedules": ["zb"]}})",
                               "t.json")
                   .ok());
}

TEST(Translate, DeepSpeedRoundTrip) {
  Config c;
  c.batch.micro_batch = 3;
  c.batch.accumulation_steps = 2;
  c.parallel.dp = c.parallel.world = 2;
  c.zero.stage = 2;
  c.zero.bucket_elems = 777;
  c.precision.param = c.precision.compute = DType::kFp16;
  c.precision.loss_scale.mode = LossScaleMode::kDynamic;
  c.precision.loss_scale.init = 1024;
  c.clip_grad_norm = 0.5;
  c.optimizer.kind = OptimizerKind::kSgd;
  c.optimizer.momentum = 0.5;
  StatusOr<ImportResult> back = ImportDeepSpeed(ExportDeepSpeed(c), Config{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back.value().config == c);
  EXPECT_FALSE(
      ImportDeepSpeed(
          nlohmann::json{{"train_batch_size", 7}, {"train_micro_batch_size_per_gpu", 2}}, Config{})
          .ok());
}

// zero.shard_group is DeepSpeed's MiCS (mics_shard_size), which DeepSpeed applies at ZeRO 3 only.
TEST(Translate, DeepSpeedMicsShardSizeIsTheShardGroup) {
  Config c;
  c.parallel.dp = c.parallel.world = 4;
  c.zero.stage = 3;
  c.zero.shard_group = 2;
  const nlohmann::json ds = ExportDeepSpeed(c);
  EXPECT_EQ(ds["zero_optimization"]["mics_shard_size"], 2);
  StatusOr<ImportResult> back = ImportDeepSpeed(ds, Config{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back.value().config == c);
  EXPECT_FALSE(ExportDeepSpeed(Config{})["zero_optimization"].contains("mics_shard_size"));
  nlohmann::json z2 = ds;
  z2["zero_optimization"]["stage"] = 2;
  StatusOr<ImportResult> at2 = ImportDeepSpeed(z2, Config{});
  ASSERT_TRUE(at2.ok()) << at2.status().ToString();
  EXPECT_EQ(at2.value().config.zero.shard_group, 0);
  bool warned = false;
  for (const ImportMessage& m : at2.value().messages)
    warned |= m.text.find("mics_shard_size=2: DeepSpeed shards within groups") != std::string::npos;
  EXPECT_TRUE(warned);
  nlohmann::json off = ds;
  off["zero_optimization"]["mics_shard_size"] = -1;  // DeepSpeed's default
  StatusOr<ImportResult> none = ImportDeepSpeed(off, Config{});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none.value().config.zero.shard_group, 0);
  off["zero_optimization"]["mics_shard_size"] = "two";
  EXPECT_FALSE(ImportDeepSpeed(off, Config{}).ok());
}

// DeepSpeed's "Adam" is AdamW unless adam_w_mode is false; paradiff's adam survives a round trip.
TEST(Translate, DeepSpeedAdamIsAdamWUnlessTold) {
  Config c;
  c.optimizer.kind = OptimizerKind::kAdam;
  c.optimizer.weight_decay = 0.1;
  StatusOr<ImportResult> back = ImportDeepSpeed(ExportDeepSpeed(c), Config{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back.value().config.optimizer.kind, OptimizerKind::kAdam);
  const nlohmann::json ds = {{"optimizer", {{"type", "adam"}, {"params", {{"lr", 0.01}}}}}};
  StatusOr<ImportResult> w = ImportDeepSpeed(ds, Config{});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  EXPECT_EQ(w.value().config.optimizer.kind, OptimizerKind::kAdamW);
  EXPECT_EQ(w.value().config.optimizer.lr, 0.01);
}

// Sizes for production scale shrink to the test model, keeping their meaning.
TEST(Translate, DeepSpeedProductionSizesScale) {
  const nlohmann::json ds = {{"train_batch_size", 44},
                             {"train_micro_batch_size_per_gpu", 2},
                             {"gradient_accumulation_steps", 2},
                             {"zero_optimization", {{"stage", 2}, {"reduce_bucket_size", 5e8}}}};
  StatusOr<ImportResult> r = ImportDeepSpeed(ds, Config{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Config& c = r.value().config;
  EXPECT_EQ(c.parallel.dp, 7) << "dp 11 has no divisor in 2..8: the prime 7";
  EXPECT_EQ(c.zero.bucket_elems, ModelParameterCount(c.model)) << "one bucket";
  EXPECT_TRUE(CheckConfig(c, ResourceBudget{}).ok());
  const nlohmann::json fractional = {{"zero_optimization", {{"reduce_bucket_size", 5.5}}}};
  StatusOr<ImportResult> bad = ImportDeepSpeed(fractional, Config{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().errors()[0].field, "zero_optimization.reduce_bucket_size");
}

// Any JSON value under any mapped key gives a config or a Status, never an exception.
TEST(Translate, DeepSpeedImportNeverThrows) {
  const std::vector<nlohmann::json> values = {nullptr,
                                              true,
                                              "auto",
                                              "x",
                                              -1,
                                              0,
                                              1.5,
                                              5e8,
                                              1e300,
                                              nlohmann::json::array({1}),
                                              nlohmann::json::object({{"enabled", "auto"}})};
  const std::vector<std::vector<std::string>> keys = {{"train_batch_size"},
                                                      {"train_micro_batch_size_per_gpu"},
                                                      {"gradient_accumulation_steps"},
                                                      {"zero_optimization"},
                                                      {"zero_optimization", "stage"},
                                                      {"zero_optimization", "reduce_bucket_size"},
                                                      {"zero_optimization", "offload_param"},
                                                      {"bf16"},
                                                      {"fp16"},
                                                      {"fp16", "enabled"},
                                                      {"fp16", "initial_scale_power"},
                                                      {"fp16", "loss_scale"},
                                                      {"gradient_clipping"},
                                                      {"optimizer"},
                                                      {"optimizer", "type"},
                                                      {"optimizer", "params"},
                                                      {"communication_data_type"},
                                                      {"data_types"}};
  int configs = 0, errors = 0;
  for (const auto& key : keys) {
    for (const auto& v : values) {
      nlohmann::json ds = {{"fp16", {{"enabled", true}}}, {"optimizer", {{"type", "Adam"}}}};
      nlohmann::json* at = &ds;
      for (size_t i = 0; i + 1 < key.size(); ++i) {
        if (!(*at)[key[i]].is_object()) (*at)[key[i]] = nlohmann::json::object();
        at = &(*at)[key[i]];
      }
      (*at)[key.back()] = v;
      try {
        StatusOr<ImportResult> r = ImportDeepSpeed(ds, Config{});
        (r.ok() ? configs : errors) += 1;
      } catch (const std::exception& e) {
        ADD_FAILURE() << ds.dump() << " threw " << e.what();
      }
    }
  }
  EXPECT_GT(configs, 0);
  EXPECT_GT(errors, 0);
}

// ImportMegatron is ExportMegatron's counterpart on the fields Megatron's arguments carry (not dp
// nor accumulation: the world size comes from the launcher).
TEST(Translate, MegatronRoundTripOnSharedFields) {
  Config c;
  c.model.layers = 4, c.model.hidden = 32, c.model.heads = 4, c.model.kv_heads = 2;
  c.model.ffn = 48, c.model.vocab = 61, c.model.seq_len = 8;
  c.model.tied_embeddings = false, c.model.activation = Activation::kSwiglu;
  c.parallel.tp = 2, c.parallel.pp = 2, c.parallel.sp = true, c.parallel.world = 4;
  c.parallel.virtual_stages = 2, c.parallel.schedule = Schedule::kInterleaved;
  c.batch.micro_batch = 3, c.batch.accumulation_steps = 2;
  c.precision.param = c.precision.compute = DType::kFp16;
  c.precision.reduce = c.precision.accumulate = DType::kFp32;
  c.precision.master_weights = true;
  c.precision.loss_scale.mode = LossScaleMode::kDynamic;
  c.precision.loss_scale.init = 4096;
  c.optimizer.kind = OptimizerKind::kSgd, c.optimizer.momentum = 0.9;
  c.clip_grad_norm = 0.5, c.seed = 77, c.steps = 2;
  ASSERT_TRUE(CheckConfig(c, ResourceBudget{}).ok()) << CheckConfig(c, ResourceBudget{}).ToString();
  StatusOr<ImportResult> back = ImportMegatron(ExportMegatron(c), Config{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  const Config& b = back.value().config;
  EXPECT_TRUE(b.model == c.model) << WriteConfig(b);
  EXPECT_TRUE(b.parallel == c.parallel) << WriteConfig(b);
  EXPECT_TRUE(b.precision == c.precision) << WriteConfig(b);
  EXPECT_TRUE(b.optimizer == c.optimizer) << WriteConfig(b);
  EXPECT_TRUE(b.batch == c.batch) << WriteConfig(b);
  EXPECT_EQ(b.clip_grad_norm, 0.5);
  EXPECT_EQ(b.seed, 77u);
  EXPECT_EQ(b.steps, 2);
  StatusOr<ImportResult> bad = ImportMegatron({"stray", "--num-layers", "x"}, Config{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().errors().size(), 2u) << bad.status().ToString();
}

TEST(TargetFile, ReportsAndNormPrecision) {
  const std::string head =
      R"({"protocol": 1, "name": "x", "command": ["/bin/true"], "supports": {}, )";
  StatusOr<TargetSpec> def = ParseTargetSpec(head + R"("timeout_s": 5})", "t.json");
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  EXPECT_TRUE(def.value().reporting.everything());  // protocol 1 before "reports": everything, fp64
  StatusOr<TargetSpec> few =
      ParseTargetSpec(head + R"("reports": [], "grad_norm_dtype": "fp32"})", "t.json");
  ASSERT_TRUE(few.ok()) << few.status().ToString();
  EXPECT_FALSE(few.value().reporting.grad);
  EXPECT_FALSE(few.value().reporting.optimizer);
  EXPECT_EQ(few.value().reporting.grad_norm_dtype, DType::kFp32);
  StatusOr<TargetSpec> bad =
      ParseTargetSpec(head + R"("reports": ["param"], "grad_norm_dtype": "fp8"})", "t.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().ToString().find("reports: 'param' is not one of grad, optimizer"),
            std::string::npos)
      << bad.status().ToString();
  EXPECT_NE(bad.status().ToString().find("grad_norm_dtype: must be one of fp64, fp32"),
            std::string::npos);
  const std::string root =
      std::filesystem::path(__FILE__).parent_path().parent_path().parent_path().string();
  StatusOr<TargetSpec> torch = LoadTargetFile(root + "/adapters/torch/torch.json");
  ASSERT_TRUE(torch.ok()) << torch.status().ToString();
  EXPECT_TRUE(torch.value().reporting.grad && torch.value().reporting.optimizer);
  EXPECT_EQ(torch.value().reporting.grad_norm_dtype, DType::kFp32);
  // DDP: accumulated under no_sync, pre-divided by the reducer, summed by gloo's ring.
  const GradReduction& ddp = torch.value().reporting.reduction;
  EXPECT_EQ(ddp.when, GradReduction::When::kStep);
  EXPECT_EQ(ddp.average, GradReduction::Average::kBeforeSum);
  EXPECT_FALSE(ddp.rank_order);
}

// A command may start with {target_dir} (a venv beside the target file): the program is checked
// with the placeholder substituted, and a missing one is named as it would run.
TEST(TargetFile, CommandMayStartWithTargetDir) {
  const std::string dir = ::testing::TempDir() + "/target_dir_cmd_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string text =
      R"({"protocol": 1, "name": "x", "command": ["{target_dir}/run", "{run_dir}"], "supports": {}})";
  StatusOr<TargetSpec> missing = ParseTargetSpec(text, dir + "/t.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().ToString().find("'" + dir + "/run' is not an executable file"),
            std::string::npos)
      << missing.status().ToString();
  std::ofstream(dir + "/run") << "#!/bin/sh\n";
  std::filesystem::permissions(dir + "/run", std::filesystem::perms::owner_all);
  StatusOr<TargetSpec> present = ParseTargetSpec(text, dir + "/t.json");
  EXPECT_TRUE(present.ok()) << present.status().ToString();
}

// "grad_reduction", "model_arithmetic", "zero_stages_bitwise": the twin mirrors and the oracles
// judge bitwise only what the file declares (see Note [Declared reduction structure]); nothing is
// assumed where it says nothing.
TEST(TargetFile, NothingIsAssumedThatTheFileDoesNotDeclare) {
  const std::string head =
      R"({"protocol": 1, "name": "x", "command": ["/bin/true"], "supports": {})";
  StatusOr<TargetSpec> def = ParseTargetSpec(head + "}", "t.json");
  ASSERT_TRUE(def.ok()) << def.status().ToString();
  const GradReduction& none = def.value().reporting.reduction;
  EXPECT_EQ(none.when, GradReduction::When::kUnknown);
  EXPECT_EQ(none.when_pipelined, GradReduction::When::kUnknown);
  EXPECT_FALSE(none.rank_order);
  EXPECT_EQ(none.average, GradReduction::Average::kUnknown);
  EXPECT_FALSE(def.value().reporting.same_model_arithmetic);
  EXPECT_FALSE(def.value().reporting.zero_stages_bitwise);
  StatusOr<TargetSpec> promised = ParseTargetSpec(
      head + R"(, "model_arithmetic": "paradiff", "zero_stages_bitwise": true})", "t.json");
  ASSERT_TRUE(promised.ok()) << promised.status().ToString();
  EXPECT_TRUE(promised.value().reporting.same_model_arithmetic);
  EXPECT_TRUE(promised.value().reporting.zero_stages_bitwise);
  EXPECT_EQ(def.value().reporting.partitioned_from.grad, 2) << "ZeRO's own stages unless declared";
  StatusOr<TargetSpec> early =
      ParseTargetSpec(head + R"(, "partitioned_from": {"grad": 1}})", "t.json");
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_EQ(early.value().reporting.partitioned_from.grad, 1);
  EXPECT_EQ(early.value().reporting.partitioned_from.param, 3);
  StatusOr<TargetSpec> bad_stage =
      ParseTargetSpec(head + R"(, "partitioned_from": {"grad": 7}})", "t.json");
  EXPECT_FALSE(bad_stage.ok());
  StatusOr<TargetSpec> ddp = ParseTargetSpec(
      head + R"(, "grad_reduction": {"when": "step", "order": "rank", "average": "before_sum"}})",
      "t.json");
  ASSERT_TRUE(ddp.ok()) << ddp.status().ToString();
  const GradReduction& r = ddp.value().reporting.reduction;
  EXPECT_EQ(r.when, GradReduction::When::kStep);
  EXPECT_EQ(r.when_pipelined, GradReduction::When::kStep) << "when_pipelined defaults to when";
  EXPECT_TRUE(r.rank_order);
  EXPECT_EQ(r.average, GradReduction::Average::kBeforeSum);
  StatusOr<TargetSpec> bad = ParseTargetSpec(
      head +
          R"(, "grad_reduction": {"when": "ring", "average": 2, "size": 1}, "model_arithmetic": "x",)"
          R"( "zero_stages_bitwise": "yes"})",
      "t.json");
  ASSERT_FALSE(bad.ok());
  const std::string msg = bad.status().ToString();
  for (const char* want : {"grad_reduction.when: must be \"micro_step\", \"step\" or \"unknown\"",
                           "grad_reduction.average: must be", "grad_reduction.size: unknown field",
                           "model_arithmetic: must be \"paradiff\" or \"own\"",
                           "zero_stages_bitwise: must be true or false"})
    EXPECT_NE(msg.find(want), std::string::npos) << want << " in " << msg;
  StatusOr<TargetSpec> old = ParseTargetSpec(head + R"(, "dp_sum_order": "rank"})", "t.json");
  EXPECT_FALSE(old.ok()) << "dp_sum_order is now grad_reduction.order";
}

// See Note [Reported norm precision]: u * (n + 2), and the float64 bound the constant it always
// was.
TEST(Tolerance, NormRoundingBound) {
  EXPECT_EQ(NormRoundingBound(DType::kFp64, 19360), 1e-8);
  EXPECT_EQ(NormRoundingBound(DType::kFp32, 19360), std::ldexp(19362.0, -24));
  EXPECT_EQ(NormRoundingBound(DType::kBf16, 10), std::ldexp(12.0, -8));
  EXPECT_EQ(LookupTolerance("grad_norm_consistency", DType::kFp64).floor, 1e-8);
  ToleranceContext fp32;
  fp32.grad_norm_dtype = DType::kFp32;
  fp32.grad_norm_terms = 100;
  const double base = LookupTolerance("grad_norm", DType::kFp32).floor;
  EXPECT_EQ(LookupTolerance("grad_norm", DType::kFp32, fp32).floor, base + std::ldexp(102.0, -24));
}

// A clean built-in run, reshaped into what a target reporting `r` would hand back: pieces of the
// kinds it does not report removed, the gradient norm rounded to r.grad_norm_dtype.
EngineOutcome AsReported(const Config& c, const Reporting& r) {
  EngineOutcome e = RunEngine(c, kDefaultCollectiveTimeout);
  EXPECT_TRUE(e.ok) << e.failure;
  e.reporting = r;
  e.target = "fake";
  for (auto& rank : e.obs.ranks)
    for (auto& step : rank.steps) {
      auto& p = step.pieces;
      p.erase(std::remove_if(p.begin(), p.end(),
                             [&](const TensorPiece& x) {
                               return x.kind == "grad" ? !r.grad
                                                       : x.kind != "param" && !r.optimizer;
                             }),
              p.end());
      if (r.grad_norm_dtype == DType::kFp32) step.grad_norm = static_cast<float>(step.grad_norm);
    }
  return e;
}

CheckResult CheckAs(const Config& c, const std::function<void(EngineOutcome&)>& plant,
                    const Reporting& r) {
  CheckOptions o;
  o.oracles = {"all"};
  o.run_engine = [&](const Config& x) {
    EngineOutcome e = AsReported(x, r);
    if (plant) plant(e);
    return e;
  };
  return CheckRun(c, o);
}

std::set<std::string> ComparedKinds(const CheckResult& res) {
  std::set<std::string> kinds;
  for (const auto& c : res.comparisons)
    kinds.insert(c.tensor_kind + (c.detail.empty() ? "" : "/" + c.detail));
  return kinds;
}

TEST(PartialReports, ParamsOnlyIsJudgedOnParamsAndCaughtWhenWrong) {
  Config c = testing::SmallConfig(2, 1);
  c.optimizer.kind = OptimizerKind::kAdamW;
  Reporting params_only;
  params_only.grad = params_only.optimizer = false;
  const CheckResult clean = CheckAs(c, {}, params_only);
  EXPECT_EQ(clean.verdict.kind, VerdictKind::kPass) << clean.verdict.message;
  EXPECT_EQ(ComparedKinds(clean), (std::set<std::string>{"loss", "grad_norm", "param"}));
  for (const auto& o : clean.oracles) {  // metamorphic judges the variants on what is reported too
    if (o.name == "metamorphic") {
      EXPECT_EQ(o.status, OracleStatus::kPass) << o.note;
    }
  }
  // One parameter element moved on every rank that holds it (replicas agree): the numeric oracle.
  const CheckResult wrong = CheckAs(
      c,
      [](EngineOutcome& e) {
        for (auto& rank : e.obs.ranks)
          for (auto& p : rank.steps[1].pieces)
            if (p.kind == "param" && p.tensor == "embed.wte" && p.offset == 0) p.values[3] += 0.5;
      },
      params_only);
  EXPECT_EQ(wrong.verdict.Signature(), "mismatch.numeric.param.embedding.optimizer")
      << wrong.verdict.message;
  EXPECT_EQ(wrong.verdict.where.step, 1);
  // Only one rank's copy moved: the replica oracle still judges the parameters.
  const CheckResult desync = CheckAs(
      c,
      [](EngineOutcome& e) {
        for (auto& p : e.obs.ranks[1].steps[0].pieces)
          if (p.kind == "param" && p.tensor == "embed.wte") p.values.view(-1)[0] += 1e-3;
      },
      params_only);
  EXPECT_EQ(desync.verdict.Signature(), "invariant.replica.param.embedding.optimizer")
      << desync.verdict.message;
}

TEST(PartialReports, Fp32NormIsBoundedByItsOwnRounding) {
  const Config c = testing::SmallConfig(2, 0);
  Reporting fp32;
  fp32.grad_norm_dtype = DType::kFp32;
  const CheckResult clean = CheckAs(c, {}, fp32);
  EXPECT_EQ(clean.verdict.kind, VerdictKind::kPass) << clean.verdict.message;
  EXPECT_TRUE(ComparedKinds(clean).count("grad_norm/consistency"));
  // A float32 norm that counts the embedding's gradient twice is still far outside the bound.
  const CheckResult twice = CheckAs(
      c,
      [](EngineOutcome& e) {
        for (auto& rank : e.obs.ranks) {
          double wte = 0;
          for (const auto& p : rank.steps[0].pieces)
            if (p.kind == "grad" && p.tensor == "embed.wte")
              wte = p.values.to(at::kDouble).pow(2).sum().item<double>();
          double& g = rank.steps[0].grad_norm;
          g = static_cast<float>(std::sqrt(g * g + wte));
        }
      },
      fp32);
  EXPECT_EQ(twice.verdict.Signature(), "mismatch.numeric.grad_norm.-.reduction.consistency")
      << twice.verdict.message;
}

}  // namespace
}  // namespace paradiff
