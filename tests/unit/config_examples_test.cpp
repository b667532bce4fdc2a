// Tests of the written config format and the shipped configs: WriteConfig's exact bytes (key
// order, indent, defaults), configs/examples/ are valid, within the budget, data-parallel only and
// written exactly in WriteConfig's format; configs/invalid/ are each rejected.
// PARADIFF_SOURCE_DIR (the source tree) is defined by tests/unit/core.cmake.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "core/budget.h"
#include "core/config_json.h"

namespace paradiff {
namespace {

TEST(ConfigJson, WriteIsStableAndExplicit) {
  const std::string expected = R"({
  "schema": 1,
  "seed": 1234,
  "steps": 2,
  "model": {
    "kind": "gpt",
    "layers": 2,
    "hidden": 32,
    "heads": 4,
    "kv_heads": 4,
    "ffn": 64,
    "vocab": 61,
    "seq_len": 8,
    "tied_embeddings": true,
    "position_embeddings": true,
    "activation": "gelu"
  },
  "batch": {
    "micro_batch": 2,
    "accumulation_steps": 1
  },
  "parallel": {
    "world": 1,
    "tp": 1,
    "pp": 1,
    "dp": 1,
    "sp": false,
    "virtual_stages": 1,
    "schedule": "1f1b",
    "partition": "uniform"
  },
  "zero": {
    "stage": 0,
    "bucket_elems": 4096,
    "align_elems": 1
  },
  "precision": {
    "param": "fp32",
    "compute": "fp32",
    "reduce": "fp32",
    "accumulate": "fp32",
    "master_weights": true,
    "loss_scale": {
      "mode": "none",
      "init": 65536.0,
      "growth_factor": 2.0,
      "backoff": 0.5,
      "growth_interval": 1000,
      "hysteresis": 2,
      "min": 1.0
    }
  },
  "optimizer": {
    "kind": "adamw",
    "lr": 0.01,
    "momentum": 0.9,
    "betas": [
      0.9,
      0.999
    ],
    "eps": 1e-08,
    "weight_decay": 0.0
  },
  "clip_grad_norm": 0.0,
  "checkpoint": {
    "save_at": 0,
    "reload": {
      "tp": 1,
      "pp": 1,
      "dp": 1,
      "zero_stage": 0
    }
  },
  "backend": "local",
  "faults": []
}
)";
  EXPECT_EQ(WriteConfig(Config{}), expected);
  Config c;
  c.parallel.partition = PartitionMethod::kExplicit;
  c.parallel.partition_layers = {1, 1};
  EXPECT_EQ(WriteConfig(c), WriteConfig(c));
  EXPECT_NE(WriteConfig(c).find("\"partition\": [\n      1,\n      1\n    ]"), std::string::npos);
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(ConfigExamples, ExamplesAreValidAndInWriteConfigFormat) {
  const std::filesystem::path dir = std::filesystem::path(PARADIFF_SOURCE_DIR) / "configs/examples";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    StatusOr<Config> c = LoadConfigFile(entry.path().string());
    ASSERT_TRUE(c.ok()) << entry.path() << ": " << c.status().ToString();
    const Status st = CheckConfig(c.value(), ResourceBudget{});
    EXPECT_TRUE(st.ok()) << entry.path() << ": " << st.ToString();
    EXPECT_EQ(c.value().parallel.tp, 1) << entry.path();
    EXPECT_EQ(c.value().parallel.pp, 1) << entry.path();
    EXPECT_EQ(WriteConfig(c.value()), ReadFile(entry.path())) << entry.path();
  }
  EXPECT_GE(count, 5);
}

TEST(ConfigExamples, InvalidConfigsAreRejected) {
  const std::filesystem::path dir = std::filesystem::path(PARADIFF_SOURCE_DIR) / "configs/invalid";
  int count = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    ++count;
    StatusOr<Config> c = LoadConfigFile(entry.path().string());
    EXPECT_FALSE(c.ok() && CheckConfig(c.value(), ResourceBudget{}).ok()) << entry.path();
  }
  EXPECT_GE(count, 3);
}

}  // namespace
}  // namespace paradiff
