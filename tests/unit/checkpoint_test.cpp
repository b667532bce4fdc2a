// Checkpoints: save under every ZeRO stage and reload under other stages, dp, tp and pp (parity
// with the uninterrupted reference), bitwise continuation in the same layout, consolidation equal
// to the gathered parameters, corrupt checkpoints rejected with the file named, and the
// ckpt.reshard_drops_tail switch caught where it triggers.
#include "kernels/checkpoint.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/watchdog.h"
#include "kernels/engine.h"
#include "oracles/assemble.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

using testing::Check;
using testing::SmallConfig;

Config Ckpt(int64_t dp, int64_t stage, int64_t rdp, int64_t rstage) {
  Config c = SmallConfig(dp, stage);
  c.steps = 3;
  c.batch.accumulation_steps = 2;
  c.checkpoint.save_at = 1;
  c.checkpoint.reload.dp = rdp;
  c.checkpoint.reload.zero_stage = rstage;
  c.checkpoint.reload.tp = 1;
  c.checkpoint.reload.pp = 1;
  return c;
}

std::string Describe(const Config& c) {
  const auto& r = c.checkpoint.reload;
  return "save tp=" + std::to_string(c.parallel.tp) + " pp=" + std::to_string(c.parallel.pp) +
         " dp=" + std::to_string(c.parallel.dp) + " zero=" + std::to_string(c.zero.stage) +
         " -> reload tp=" + std::to_string(r.tp) + " pp=" + std::to_string(r.pp) +
         " dp=" + std::to_string(r.dp) + " zero=" + std::to_string(r.zero_stage);
}

TEST(CheckpointReshard, EveryStageIntoEveryOtherStageAndDp) {
  ReferenceCache cache;
  // 19360 parameters: divisible by neither 3 nor 6; 3 x 2 micro-batches re-divided over 6 or 1.
  for (int64_t stage = 0; stage <= 3; ++stage)
    for (int64_t rstage = 0; rstage <= 3; ++rstage) {
      Config c = Ckpt(3, stage, stage == rstage ? 1 : 6, rstage);
      CheckResult r = Check(c, &cache);
      EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(c) << "\n" << r.verdict.message;
    }
}

TEST(CheckpointReshard, TensorAndPipelineChanges) {
  Config c = Ckpt(2, 1, 1, 1);
  c.parallel.tp = 2;
  c.parallel.world = 4;
  c.checkpoint.reload.tp = 1;
  c.checkpoint.reload.pp = 2;
  c.checkpoint.reload.dp = 2;
  CheckResult r = Check(c);
  EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(c) << "\n" << r.verdict.message;
  Config d = Ckpt(1, 0, 1, 2);
  d.parallel.pp = 2;
  d.parallel.world = 2;
  d.checkpoint.reload.tp = 2;
  d.checkpoint.reload.dp = 1;
  d.model.tied_embeddings = true;
  r = Check(d);
  EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(d) << "\n" << r.verdict.message;
}

TEST(CheckpointReshard, SameLayoutContinuesBitwise) {
  Config c = Ckpt(2, 2, 2, 2);
  c.precision.param = c.precision.compute = DType::kBf16;
  Config plain = c;
  plain.checkpoint.save_at = 0;
  EngineOutcome a = RunEngine(c, kDefaultCollectiveTimeout);
  EngineOutcome b = RunEngine(plain, kDefaultCollectiveTimeout);
  ASSERT_TRUE(a.ok && b.ok) << a.failure << b.failure;
  Assembly x = Assemble(c, a.obs), y = Assemble(plain, b.obs);
  ASSERT_EQ(x.steps.size(), y.steps.size());
  for (size_t s = 0; s < x.steps.size(); ++s)
    for (const auto& [key, t] : x.steps[s].tensors)
      EXPECT_TRUE(at::equal(t, y.steps[s].tensors.at(key))) << "step " << s << " " << key;
}

std::string TempDir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "/paradiff_ckpt_" + name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

TEST(CheckpointConsolidate, EqualsGatheredParameters) {
  Config c = SmallConfig(3, 3);
  c.precision.param = c.precision.compute = DType::kBf16;  // consolidates the fp32 master weights
  EngineOptions opts;
  opts.checkpoint_dir = TempDir("consolidate");
  EngineOutcome e = RunEngine(c, opts);
  ASSERT_TRUE(e.ok) << e.failure;
  Assembly a = Assemble(c, e.obs);
  const std::string out = opts.checkpoint_dir + "/full.bin";
  ConsolidateCheckpoint(opts.checkpoint_dir, out);
  std::ifstream f(out, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ASSERT_EQ(bytes.substr(0, 8), "PDCKPT1\n");
  uint64_t len = 0;
  std::memcpy(&len, bytes.data() + 8, sizeof len);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(16, len));
  const char* data = bytes.data() + 16 + len;
  for (const auto& t : header["tensors"]) {
    const at::Tensor& want = a.steps.back().tensors.at("master:" + t["name"].get<std::string>());
    at::Tensor got = at::empty({want.numel()}, at::kFloat);
    std::memcpy(got.data_ptr(), data + t["offset"].get<size_t>(), want.numel() * sizeof(float));
    EXPECT_TRUE(at::equal(got.to(at::kDouble), want)) << t["name"];
  }
}

TEST(CheckpointErrors, CorruptTruncatedMissingAndMismatchedAreRejected) {
  Config c = SmallConfig(2, 2);
  EngineOptions opts;
  opts.checkpoint_dir = TempDir("corrupt");
  ASSERT_TRUE(RunEngine(c, opts).ok);
  const std::string dir = opts.checkpoint_dir;
  auto expect_error = [&](const std::string& what, const std::string& needle) {
    try {
      CheckpointReader r(dir);
      r.CheckModel(c.model);
      ADD_FAILURE() << what << ": loaded without error";
    } catch (const CheckpointError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << what << ": " << e.what();
    }
  };
  EXPECT_NO_THROW(CheckpointReader{dir});
  const std::string rank1 = dir + "/rank00001.bin";
  std::string saved;
  {
    std::ifstream f(rank1, std::ios::binary);
    saved.assign((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  std::ofstream(rank1, std::ios::binary | std::ios::trunc) << saved.substr(0, saved.size() / 2);
  expect_error("truncated", "rank00001.bin");
  std::string flipped = saved;
  flipped[flipped.size() / 3] ^= 0x40;
  std::ofstream(rank1, std::ios::binary | std::ios::trunc) << flipped;
  expect_error("corrupted", "checksum");
  std::filesystem::remove(rank1);
  expect_error("missing shard", "rank00001.bin");
  std::ofstream(rank1, std::ios::binary | std::ios::trunc) << saved;
  Config other = c;
  other.model.hidden = 48;
  other.model.heads = 4;
  try {
    CheckpointReader r(dir);
    r.CheckModel(other.model);
    ADD_FAILURE() << "model mismatch loaded";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("model mismatch"), std::string::npos) << e.what();
  }
  std::filesystem::remove(dir + "/manifest.json");
  expect_error("no manifest", "manifest.json");
}

TEST(CheckpointFaults, ReshardDropsTail) {
  Config c = Ckpt(3, 1, 6, 1);
  c.optimizer.kind = OptimizerKind::kAdamW;
  c.faults = {"ckpt.reshard_drops_tail"};
  CheckResult r = Check(c);
  EXPECT_TRUE(IsFinding(r.verdict.kind)) << "ckpt.reshard_drops_tail not caught: " << Describe(c);
  Config same = Ckpt(3, 1, 3, 2);  // dp unchanged: the buggy path is not taken
  same.faults = c.faults;
  r = Check(same);
  EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << r.verdict.message;
}

}  // namespace
}  // namespace paradiff
