// Unit tests of targets/: safetensors round trip and rejection, target file rules, DeepSpeed import.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "targets/safetensors.h"
#include "targets/target_file.h"
#include "targets/translate.h"

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
  EXPECT_NE(cut.status().ToString().find("outside the"), std::string::npos) << cut.status().ToString();
}

TEST(TargetFile, RulesAndSupport) {
  StatusOr<TargetSpec> bad = ParseTargetSpec(R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{oops}"],
      "supports": {"optimizers": ["lamb"]}, "extra": 1})", "t.json");
  ASSERT_FALSE(bad.ok());
  const std::string msg = bad.status().ToString();
  EXPECT_NE(msg.find("unknown placeholder {oops}"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'lamb' is not one of"), std::string::npos) << msg;
  EXPECT_NE(msg.find("extra: unknown field"), std::string::npos) << msg;
  StatusOr<TargetSpec> ok = ParseTargetSpec(R"({"protocol": 1, "name": "x", "command": ["/bin/true", "{run_dir}"],
      "launcher": {"default": ["/bin/env", "W={world}"]}, "supports": {"max_world": 2, "zero_stages": [0, 1]}})", "t.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  Config c;
  c.parallel.dp = c.parallel.world = 2;
  EXPECT_TRUE(TargetSupports(ok.value(), c).ok());
  EXPECT_EQ(TargetArgv(ok.value(), c, "/r"), (std::vector<std::string>{"/bin/env", "W=2", "/bin/true", "/r"}));
  c.zero.stage = 2;
  c.parallel.dp = c.parallel.world = 3;
  const Status no = TargetSupports(ok.value(), c);
  ASSERT_EQ(no.errors().size(), 2u) << no.ToString();
  EXPECT_EQ(no.errors()[0].field, "parallel.world");
  EXPECT_EQ(no.errors()[1].field, "zero.stage");
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
  StatusOr<DeepSpeedImport> back = ImportDeepSpeed(ExportDeepSpeed(c), Config{});
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back.value().config == c);
  EXPECT_FALSE(ImportDeepSpeed(nlohmann::json{{"train_batch_size", 7}, {"train_micro_batch_size_per_gpu", 2}}, Config{}).ok());
}

}  // namespace
}  // namespace paradiff
