// Unit tests of targets/run_dir: a rank's pieces as the run-dir protocol states them
// (docs/TARGETS.md "KIND:TENSOR[#PART]"): whole tensors, flat pieces at an offset, and blocks at
// per-dimension offsets (a DTensor's local shard of a strided placement), read back as the flat
// pieces the oracles assemble; partial pieces summed over the tensor-parallel group; malformed
// pieces rejected with the rule they break.
#include "targets/run_dir.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "kernels/param_init.h"
#include "targets/safetensors.h"

namespace paradiff {
namespace {

namespace fs = std::filesystem;

class RunDirPieces : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.steps = 1;
    dir_ = (fs::temp_directory_path() / ("paradiff_run_dir_" + std::to_string(getpid()))).string();
    ASSERT_TRUE(WriteRunDir(cfg_, {"param"}, dir_, {0, 1, "", ""}).ok());
    std::ofstream(dir_ + "/out/rank0.json")
        << R"({"steps": [{"loss_sum": 1.0, "loss_count": 1, "grad_norm": 1.0}]})";
    for (const auto& ps : BuildModelSpec(cfg_.model).params)
      if (ps.shape.size() == 2 && ps.shape[0] > 2 && ps.shape[1] > 2 && weight_.name.empty())
        weight_ = ps;
    ASSERT_FALSE(weight_.name.empty());
    full_ = GenerateParam(weight_, cfg_.seed).to(at::kFloat).contiguous();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Every parameter whole except weight_, which `parts` (name suffix -> tensor, metadata) covers.
  bool Read(const SafeTensors& parts, Observations* obs, ObservationError* err) {
    SafeTensors st = parts;
    for (const auto& ps : BuildModelSpec(cfg_.model).params)
      if (ps.name != weight_.name)
        st.tensors["param:" + ps.name] = GenerateParam(ps, cfg_.seed).to(at::kFloat).contiguous();
    EXPECT_TRUE(WriteSafeTensors(dir_ + "/out/rank0.step0.safetensors", st).ok());
    return ReadObservations(cfg_, dir_, {"param"}, obs, err, {0, 1, "", ""});
  }

  // weight_ reassembled from the pieces read back (elements no piece covers stay NaN).
  at::Tensor Assembled(const Observations& obs) {
    at::Tensor flat = at::full({weight_.numel()}, NAN, at::kFloat);
    for (const auto& p : obs.ranks.at(0).steps.at(0).pieces)
      if (p.tensor == weight_.name) flat.narrow(0, p.offset, p.values.numel()).copy_(p.values);
    return flat.view(weight_.shape);
  }

  std::string Key(const std::string& part) const { return "param:" + weight_.name + part; }

  Config cfg_;
  std::string dir_;
  ParamSpec weight_;
  at::Tensor full_;
};

TEST_F(RunDirPieces, ColumnBlocksReassembleTheTensor) {
  const int64_t cols = weight_.shape[1], split = cols / 2 + 1;
  SafeTensors st;
  st.tensors[Key("#0")] = full_.narrow(1, 0, split).contiguous();
  st.metadata["block:" + Key("#0")] = "0,0";
  st.tensors[Key("#1")] = full_.narrow(1, split, cols - split).contiguous();
  st.metadata["block:" + Key("#1")] = "0," + std::to_string(split);
  Observations obs;
  ObservationError err;
  ASSERT_TRUE(Read(st, &obs, &err)) << err.message;
  EXPECT_TRUE(at::equal(Assembled(obs), full_));
  int64_t pieces = 0;  // one per row of each column block
  for (const auto& p : obs.ranks.at(0).steps.at(0).pieces) pieces += p.tensor == weight_.name;
  EXPECT_EQ(pieces, 2 * weight_.shape[0]);
}

TEST_F(RunDirPieces, ARowBlockIsOneFlatPiece) {
  const int64_t rows = weight_.shape[0], cols = weight_.shape[1];
  SafeTensors st;
  st.tensors[Key("#top")] = full_.narrow(0, 0, 2).contiguous();
  st.metadata["block:" + Key("#top")] = "0,0";
  st.tensors[Key("#rest")] = full_.narrow(0, 2, rows - 2).reshape({-1}).contiguous();
  st.metadata["offset:" + Key("#rest")] = std::to_string(2 * cols);
  Observations obs;
  ObservationError err;
  ASSERT_TRUE(Read(st, &obs, &err)) << err.message;
  EXPECT_TRUE(at::equal(Assembled(obs), full_));
  int64_t pieces = 0;
  for (const auto& p : obs.ranks.at(0).steps.at(0).pieces) pieces += p.tensor == weight_.name;
  EXPECT_EQ(pieces, 2);
}

TEST_F(RunDirPieces, MalformedPiecesNameTheRule) {
  const int64_t cols = weight_.shape[1];
  auto read = [&](const SafeTensors& st) {
    Observations obs;
    ObservationError err;
    EXPECT_FALSE(Read(st, &obs, &err));
    return err;
  };
  SafeTensors outside;  // reaches past the last column
  outside.tensors[Key("")] = full_.narrow(1, 1, cols - 1).contiguous();
  outside.metadata["block:" + Key("")] = "0,2";
  ObservationError e = read(outside);
  EXPECT_EQ(e.detail, "shape");
  EXPECT_NE(e.message.find("is not a block of"), std::string::npos) << e.message;
  SafeTensors rank1 = outside;  // one offset for a 2-D tensor
  rank1.metadata["block:" + Key("")] = "0";
  EXPECT_EQ(read(rank1).detail, "shape");
  SafeTensors words = outside;
  words.metadata["block:" + Key("")] = "0,x";
  EXPECT_EQ(read(words).detail, "shape");
  SafeTensors bare;  // a part must say where it lies
  bare.tensors[Key("#0")] = full_;
  e = read(bare);
  EXPECT_EQ(e.detail, "bad_output");
  EXPECT_NE(e.message.find("without offset:"), std::string::npos) << e.message;
  SafeTensors both;
  both.tensors[Key("")] = full_;
  both.metadata["block:" + Key("")] = "0,0";
  both.metadata["offset:" + Key("")] = "0";
  EXPECT_EQ(read(both).detail, "bad_output");
  SafeTensors stranger;  // a part of no tensor of this model
  stranger.tensors["param:nothing#0"] = full_;
  EXPECT_EQ(read(stranger).detail, "bad_output");
}

// Two tensor-parallel ranks each report an addend of every parameter's gradient; the addends of
// one weight are halves of it. See Note [Partial pieces].
class RunDirPartial : public ::testing::Test {
 protected:
  void SetUp() override {
    cfg_.steps = 1;
    cfg_.parallel.tp = cfg_.parallel.world = 2;
    dir_ = (fs::temp_directory_path() / ("paradiff_partial_" + std::to_string(getpid()))).string();
    ASSERT_TRUE(WriteRunDir(cfg_, {"grad"}, dir_, {0, 1, "", ""}).ok());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes rank r's file: every gradient a partial addend (the value / 2 + (r - 0.5) * 0.25).
  void WriteRank(int r, const std::string& group, bool skip_one) {
    std::ofstream(dir_ + "/out/rank" + std::to_string(r) + ".json")
        << R"({"steps": [{"loss_sum": 1.0, "loss_count": 1, "grad_norm": 1.0}]})";
    SafeTensors st;
    bool skipped = false;
    for (const auto& ps : BuildModelSpec(cfg_.model).params) {
      if (skip_one && !skipped && ps.shape.size() == 1) {
        skipped = true;
        continue;
      }
      const std::string key = "grad:" + ps.name;
      st.tensors[key] = (Value(ps) / 2 + (r - 0.5) * 0.25).contiguous();
      st.metadata["partial:" + key] = group;
    }
    ASSERT_TRUE(
        WriteSafeTensors(dir_ + "/out/rank" + std::to_string(r) + ".step0.safetensors", st).ok());
  }
  at::Tensor Value(const ParamSpec& ps) const {
    return GenerateParam(ps, cfg_.seed).to(at::kFloat);
  }
  bool Read(Observations* obs, ObservationError* err) {
    return ReadObservations(cfg_, dir_, {"grad"}, obs, err, {0, 1, "", ""});
  }

  Config cfg_;
  std::string dir_;
};

TEST_F(RunDirPartial, EveryRankOfTheGroupHoldsTheSumOfTheAddends) {
  WriteRank(0, "tp", false);
  WriteRank(1, "tp", false);
  Observations obs;
  ObservationError err;
  ASSERT_TRUE(Read(&obs, &err)) << err.message;
  const ModelSpec spec = BuildModelSpec(cfg_.model);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(obs.ranks.at(r).steps.at(0).pieces.size(), spec.params.size());
    for (const auto& p : obs.ranks.at(r).steps.at(0).pieces) {
      const at::Tensor addend0 = Value(*spec.Find(p.tensor)) / 2 - 0.125;
      const at::Tensor addend1 = Value(*spec.Find(p.tensor)) / 2 + 0.125;
      EXPECT_TRUE(at::equal(p.values, (addend0 + addend1).reshape({-1}))) << p.tensor;
    }
  }
}

TEST_F(RunDirPartial, AMissingAddendOrAnotherGroupNamesTheRule) {
  WriteRank(0, "tp", false);
  WriteRank(1, "tp", true);
  Observations obs;
  ObservationError err;
  EXPECT_FALSE(Read(&obs, &err));
  EXPECT_EQ(err.detail, "bad_output");
  EXPECT_EQ(err.rank, 1);
  EXPECT_NE(err.message.find("reports no partial piece"), std::string::npos) << err.message;
  WriteRank(1, "dp", false);
  EXPECT_FALSE(Read(&obs, &err));
  EXPECT_NE(err.message.find("summed over is \"tp\""), std::string::npos) << err.message;
}

}  // namespace
}  // namespace paradiff
