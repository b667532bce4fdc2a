// Pipeline parallelism: parity with the reference across pipeline sizes, the three schedules,
// layer counts that do not divide the stages, tied and untied embeddings, composed with tp and
// dp; partitions and schedules are well formed; the pipeline switches caught where they trigger.
#include <gtest/gtest.h>

#include <map>

#include "kernels/pipeline_plan.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

using testing::Check;
using testing::ExpectCaught;
using testing::ExpectSilent;
using testing::SmallConfig;

Config Pp(int64_t pp, int64_t tp, int64_t dp, int64_t layers, Schedule s, int64_t v = 1) {
  Config c = SmallConfig(dp, dp > 1 ? 1 : 0);
  c.model.layers = layers;
  c.parallel.pp = pp;
  c.parallel.tp = tp;
  c.parallel.world = pp * tp * dp;
  c.parallel.schedule = s;
  c.parallel.virtual_stages = v;
  c.batch.accumulation_steps = s == Schedule::kInterleaved ? 2 * pp : 4;
  return c;
}

std::string Describe(const Config& c) {
  return "pp=" + std::to_string(c.parallel.pp) + " tp=" + std::to_string(c.parallel.tp) +
         " dp=" + std::to_string(c.parallel.dp) + " layers=" + std::to_string(c.model.layers) +
         " schedule=" + Name(c.parallel.schedule) +
         " v=" + std::to_string(c.parallel.virtual_stages) +
         " tied=" + std::to_string(c.model.tied_embeddings) +
         " partition=" + Name(c.parallel.partition);
}

TEST(PpParity, MatrixStagesSchedulesLayersTiedTpDp) {
  ReferenceCache cache;
  int i = 0;
  for (int64_t pp : {1, 2, 3, 4}) {
    for (Schedule s : {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved}) {
      ++i;
      const int64_t v = s == Schedule::kInterleaved ? 2 : 1;
      if (v > 1 && pp == 1) continue;           // interleaving needs pp > 1
      const int64_t layers = pp * v + (i % 3);  // often not divisible
      const int64_t tp = (i % 4 == 1) ? 2 : 1, dp = (i % 3 == 2) ? 2 : 1;
      Config c = Pp(pp, tp, dp, layers, s, v);
      c.model.tied_embeddings = (i % 2 == 0);
      c.parallel.partition =
          (i % 5 == 3) ? PartitionMethod::kParameters : PartitionMethod::kUniform;
      c.clip_grad_norm = (i % 4 == 0) ? 0.05 : 0.0;
      CheckResult r = Check(c, &cache);
      EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(c) << "\n" << r.verdict.message;
    }
  }
}

TEST(PpParity, ExplicitPartitionAndZero2) {
  Config c = Pp(2, 1, 2, 3, Schedule::k1F1B);
  c.parallel.partition = PartitionMethod::kExplicit;
  c.parallel.partition_layers = {2, 1};
  c.zero.stage = 2;
  CheckResult r = Check(c);
  EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(c) << "\n" << r.verdict.message;
}

TEST(PipelinePlan, UniformSpreadsRemainderNeverDrops) {
  Config c = Pp(3, 1, 1, 7, Schedule::k1F1B);
  const auto spec = BuildModelSpec(c.model);
  EXPECT_EQ(PartitionLayers(c, spec, FaultSet{}), (std::vector<int64_t>{3, 2, 2}));
  FaultSet f;
  f.pp_floor_layers_per_stage = true;
  EXPECT_EQ(PartitionLayers(c, spec, f), (std::vector<int64_t>{2, 2, 2}));
  c.parallel.partition = PartitionMethod::kParameters;
  int64_t total = 0;
  for (int64_t n : PartitionLayers(c, spec, FaultSet{})) {
    EXPECT_GE(n, 1);
    total += n;
  }
  EXPECT_EQ(total, 7);
}

TEST(PipelinePlan, EveryPassExactlyOnceInEverySchedule) {
  for (Schedule s : {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved}) {
    for (int64_t pp : {2, 3, 4}) {
      const int64_t v = s == Schedule::kInterleaved ? 3 : 1;
      Config c = Pp(pp, 1, 1, pp * v, s, v);
      c.batch.accumulation_steps = 2 * pp;
      for (int64_t r = 0; r < pp; ++r) {
        std::map<std::tuple<bool, int64_t, int64_t>, int> seen;
        for (const auto& op : PipelineSchedule(c, r)) {
          // a backward never precedes its forward
          if (!op.forward) {
            EXPECT_EQ((seen[std::make_tuple(true, op.chunk, op.micro)]), 1);
          }
          ++seen[std::make_tuple(op.forward, op.chunk, op.micro)];
        }
        EXPECT_EQ(static_cast<int64_t>(seen.size()), 2 * v * c.batch.accumulation_steps);
        for (const auto& [k, n] : seen) EXPECT_EQ(n, 1);
      }
    }
  }
}

TEST(PpFaults, FloorLayersPerStage) {
  Config c = Pp(2, 1, 1, 3, Schedule::k1F1B);
  c.faults = {"pp.floor_layers_per_stage"};
  ExpectCaught(c, "pp.floor_layers_per_stage", "invariant.tiling.grad.");
  Config even = Pp(2, 1, 1, 4, Schedule::k1F1B);
  even.faults = c.faults;
  ExpectSilent(even, "pp.floor_layers_per_stage when stages divide the layers");
}

TEST(PpFaults, SkipTiedEmbeddingSync) {
  Config c = Pp(2, 1, 1, 2, Schedule::kGpipe);
  c.model.tied_embeddings = true;
  c.faults = {"pp.skip_tied_embedding_sync"};
  ExpectCaught(c, "pp.skip_tied_embedding_sync", "invariant.replica.grad.embedding.");
  c.model.tied_embeddings = false;
  ExpectSilent(c, "pp.skip_tied_embedding_sync without tied embeddings");
  Config one = Pp(1, 1, 2, 2, Schedule::k1F1B);
  one.faults = {"pp.skip_tied_embedding_sync"};
  ExpectSilent(one, "pp.skip_tied_embedding_sync at pp=1");
}

}  // namespace
}  // namespace paradiff
