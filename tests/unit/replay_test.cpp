// Replay: paths expand to configs with their expectations (config files, directories, finding
// dirs, work dirs), and each config lands in the right class: same, different, fails, pass,
// invalid; an inconclusive check passes and says so.
#include "fuzz/replay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/config_json.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

namespace fs = std::filesystem;
using testing::SmallConfig;

class ReplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ("paradiff_replay_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static void Write(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  static Config Gas() {
    Config c = SmallConfig(1, 2);
    c.model.layers = 1;
    c.batch.accumulation_steps = 3;
    c.faults = {"gas.overwrite_grad"};
    return c;
  }
  static std::string Expect(const std::string& sig) { return "{\"signature\": \"" + sig + "\"}\n"; }

  ReplayResult ReplayPath(const fs::path& p) {
    StatusOr<std::vector<ReplayItem>> items = CollectReplayItems({p.string()});
    EXPECT_TRUE(items.ok()) << items.status().ToString();
    EXPECT_EQ(items.value().size(), 1u);
    CheckOptions o;
    o.cache = &cache_;
    return Replay(items.value().at(0), o);
  }

  fs::path dir_;
  ReferenceCache cache_;
};

TEST_F(ReplayTest, Categories) {
  CheckOptions o;
  o.cache = &cache_;
  const std::string sig = CheckRun(Gas(), o).verdict.Signature();
  ASSERT_NE(sig, "pass");

  Write(dir_ / "same/gas.json", WriteConfig(Gas()));
  Write(dir_ / "same/gas.expect.json", Expect(sig));
  ReplayResult r = ReplayPath(dir_ / "same/gas.json");
  EXPECT_EQ(r.outcome, ReplayOutcome::kSame);
  EXPECT_TRUE(r.matches);
  EXPECT_EQ(r.got, sig);
  EXPECT_TRUE(r.report.is_object());

  Write(dir_ / "diff/gas.json", WriteConfig(Gas()));
  Write(dir_ / "diff/gas.expect.json", Expect("invariant.tiling.grad.norm.gradient"));
  r = ReplayPath(dir_ / "diff/gas.json");
  EXPECT_EQ(r.outcome, ReplayOutcome::kDifferent);
  EXPECT_FALSE(r.matches);

  Write(dir_ / "fails/gas.json", WriteConfig(Gas()));
  r = ReplayPath(dir_ / "fails/gas.json");
  EXPECT_EQ(r.outcome, ReplayOutcome::kFails);
  EXPECT_EQ(r.item.expected, "");

  Write(dir_ / "pass/clean.json", WriteConfig(SmallConfig(2, 1)));
  Write(dir_ / "pass/clean.expect.json", Expect("pass"));
  r = ReplayPath(dir_ / "pass/clean.json");
  EXPECT_EQ(r.outcome, ReplayOutcome::kPass);
  EXPECT_TRUE(r.matches);

  Write(dir_ / "bad/malformed.json", "{\"steps\": ");
  r = ReplayPath(dir_ / "bad/malformed.json");
  EXPECT_EQ(r.outcome, ReplayOutcome::kInvalid);
  EXPECT_EQ(r.got, "invalid");
  EXPECT_NE(r.message.find("malformed"), std::string::npos);

  // A diverging run (SGD at lr 1e30) is inconclusive: a pass by outcome, marked as undecided.
  Config diverging = SmallConfig(2, 1);
  diverging.optimizer.kind = OptimizerKind::kSgd;
  diverging.optimizer.lr = 1e30;
  diverging.optimizer.momentum = 0.0;
  diverging.steps = 4;
  diverging.clip_grad_norm = 0.0;
  Write(dir_ / "undecided/diverging.json", WriteConfig(diverging));
  r = ReplayPath(dir_ / "undecided/diverging.json");
  EXPECT_EQ(r.outcome, ReplayOutcome::kPass);
  EXPECT_EQ(r.got, "pass");
  EXPECT_TRUE(r.inconclusive);
  EXPECT_EQ(r.verdict.Signature(), "inconclusive.numeric.-.-.divergence");
  Write(dir_ / "pass2/clean.json", WriteConfig(SmallConfig(2, 1)));
  EXPECT_FALSE(ReplayPath(dir_ / "pass2/clean.json").inconclusive);

  Config broken = SmallConfig(2, 1);
  broken.model.heads = 5;  // does not divide hidden=32
  Write(dir_ / "bad/broken.json", WriteConfig(broken));
  r = ReplayPath(dir_ / "bad/broken.json");
  EXPECT_EQ(r.outcome, ReplayOutcome::kInvalid);
  EXPECT_FALSE(r.unsupported);
}

TEST_F(ReplayTest, DirectoriesFindingDirsAndWorkDirs) {
  Write(dir_ / "corpus/a.json", WriteConfig(SmallConfig(1, 0)));
  Write(dir_ / "corpus/a.expect.json", Expect("pass"));
  Write(dir_ / "corpus/b.json", WriteConfig(SmallConfig(2, 0)));
  Write(dir_ / "corpus/notes.txt", "not a config");
  StatusOr<std::vector<ReplayItem>> items = CollectReplayItems({(dir_ / "corpus").string()});
  ASSERT_TRUE(items.ok()) << items.status().ToString();
  ASSERT_EQ(items.value().size(), 2u);
  EXPECT_EQ(items.value()[0].name, "a.json");
  EXPECT_EQ(items.value()[0].expected, "pass");
  EXPECT_EQ(items.value()[1].expected, "");

  const fs::path finding = dir_ / "work/findings/mismatch.numeric.grad.embedding.gradient";
  Write(finding / "config.json", WriteConfig(Gas()));
  Write(finding / "minimized.json", WriteConfig(Gas()));
  Write(finding / "meta.json",
        "{\"signature\": \"mismatch.numeric.grad.embedding.gradient\", \"count\": 1}");
  Write(dir_ / "work/stats.json", "{}");
  for (const fs::path& p : {finding, dir_ / "work", dir_ / "work/findings"}) {
    items = CollectReplayItems({p.string()});
    ASSERT_TRUE(items.ok()) << items.status().ToString();
    ASSERT_EQ(items.value().size(), 2u) << p;
    EXPECT_EQ(items.value()[0].name, "mismatch.numeric.grad.embedding.gradient/config.json");
    EXPECT_EQ(items.value()[1].name, "mismatch.numeric.grad.embedding.gradient/minimized.json");
    EXPECT_EQ(items.value()[1].expected, "mismatch.numeric.grad.embedding.gradient");
  }
}

TEST_F(ReplayTest, BadPathsAndExpectationsAreErrors) {
  EXPECT_FALSE(CollectReplayItems({(dir_ / "missing.json").string()}).ok());
  Write(dir_ / "x.json", WriteConfig(SmallConfig(1, 0)));
  Write(dir_ / "x.expect.json", "{\"sig\": 1}");
  StatusOr<std::vector<ReplayItem>> items = CollectReplayItems({(dir_ / "x.json").string()});
  ASSERT_FALSE(items.ok());
  EXPECT_NE(items.status().ToString().find("x.expect.json"), std::string::npos);
}

}  // namespace
}  // namespace paradiff
