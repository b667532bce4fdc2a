// Tensor and sequence parallelism composed with data parallelism and ZeRO: parity with the
// reference across tp sizes, GQA / MQA, vocabularies that need padding and every ZeRO stage; the
// tensor-parallel bug-zoo switches caught where they trigger and silent elsewhere.
#include <gtest/gtest.h>

#include "kernels/tp_layout.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff {
namespace {

using testing::Check;
using testing::ExpectCaught;
using testing::ExpectSilent;
using testing::SmallConfig;

Config Tp(int64_t tp, int64_t dp, int64_t stage) {
  Config c = SmallConfig(dp, stage);
  c.model.heads = 8;
  c.model.kv_heads = 8;
  c.model.ffn = 48;
  c.model.hidden = 48;  // head_dim 6
  c.parallel.tp = tp;
  c.parallel.world = tp * dp;
  return c;
}

std::string Describe(const Config& c) {
  return "tp=" + std::to_string(c.parallel.tp) + " dp=" + std::to_string(c.parallel.dp) +
         " zero=" + std::to_string(c.zero.stage) + " sp=" + std::to_string(c.parallel.sp) +
         " kv=" + std::to_string(c.model.kv_heads) + " vocab=" + std::to_string(c.model.vocab) +
         " tied=" + std::to_string(c.model.tied_embeddings) + " act=" + Name(c.model.activation);
}

TEST(TpParity, MatrixTpSpKvVocabZero) {
  ReferenceCache cache;
  int i = 0;
  for (int64_t tp : {1, 2, 3, 4, 8}) {
    for (int64_t stage = 0; stage <= 3; ++stage, ++i) {
      const int64_t dp = (i % 3 == 0) ? 1 : (i % 3 == 1 ? 2 : 3);
      if (tp * dp > 12) continue;
      Config c = Tp(tp, dp, stage);
      if (tp == 3) {  // heads 6 / ffn 48 divide 3
        c.model.heads = c.model.kv_heads = 6;
        c.model.hidden = 36;
      }
      c.parallel.sp = tp > 1 && (i % 2 == 0);
      if (c.parallel.sp && c.model.seq_len % tp) c.model.seq_len = 2 * tp;
      c.model.kv_heads = (i % 4 == 1) ? 1 : (i % 4 == 2 ? 2 : c.model.heads);  // MQA / GQA / MHA
      if (tp == 3 && c.model.kv_heads == 2) c.model.kv_heads = 3;
      c.model.vocab = (i % 2 == 0) ? 61 : 64;  // 61 needs padding for every tp > 1
      c.model.tied_embeddings = (i % 3 != 0);
      c.model.activation = (i % 5 == 2) ? Activation::kSwiglu : Activation::kGelu;
      c.batch.accumulation_steps = 1 + i % 2;
      c.clip_grad_norm = (i % 4 == 3) ? 0.05 : 0.0;
      CheckResult r = Check(c, &cache);
      EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << Describe(c) << "\n" << r.verdict.message;
    }
  }
}

TEST(TpLayout, ShardsTileEveryLogicalTensorOnce) {
  ModelConfig m;
  m.heads = 8;
  m.kv_heads = 2;
  m.hidden = 48;
  m.ffn = 48;
  m.vocab = 61;
  m.tied_embeddings = false;
  const ModelSpec spec = BuildModelSpec(m);
  for (int64_t tp : {1, 2, 4, 8}) {
    std::vector<std::vector<int>> count(spec.params.size());
    for (size_t i = 0; i < spec.params.size(); ++i) count[i].assign(spec.params[i].numel(), 0);
    for (int64_t r = 0; r < tp; ++r) {
      auto shards = BuildTpShards(spec, m, tp, r);
      for (size_t i = 0; i < shards.size(); ++i) {
        shards[i].ForEachLogicalRun(0, shards[i].numel(), [&](int64_t, int64_t logical, int64_t n) {
          for (int64_t k = 0; k < n; ++k) count[i][logical + k]++;
        });
      }
    }
    for (size_t i = 0; i < spec.params.size(); ++i) {
      auto rep = BuildTpShards(spec, m, tp, 0)[i].rep;
      const int want = rep == TpReplication::kReplicated ? tp
                       : rep == TpReplication::kShared   ? tp / m.kv_heads
                                                         : 1;
      for (int c : count[i]) ASSERT_EQ(c, want) << spec.params[i].name << " tp=" << tp;
    }
  }
}

Config With(Config c, const std::string& fault) {
  c.faults.push_back(fault);
  return c;
}

TEST(TpFaults, VocabPaddingInLoss) {
  Config c = Tp(2, 1, 0);
  c.faults = {"tp.vocab_padding_in_loss"};
  c.model.vocab = 61;  // padded to 64
  ExpectCaught(c, "tp.vocab_padding_in_loss", "invariant.tiling.padding.");
  c.model.vocab = 64;  // no padding
  ExpectSilent(c, "tp.vocab_padding_in_loss without padding");
  Config one = Tp(1, 2, 0);
  one.faults = {"tp.vocab_padding_in_loss"};
  ExpectSilent(one, "tp.vocab_padding_in_loss at tp=1");
}

TEST(TpFaults, DpAverageByWorldSize) {
  Config c = Tp(2, 2, 1);
  c.faults = {"dp.average_by_world_size"};
  ExpectCaught(c, "dp.average_by_world_size", "mismatch.numeric.grad.embedding.reduction.scale");
  ExpectSilent(With(Tp(1, 4, 1), "dp.average_by_world_size"), "when world == dp");
}

TEST(TpFaults, ClipCountReplicatedPerTpRank) {
  Config c = Tp(2, 1, 0);
  c.clip_grad_norm = 0.05;
  c.faults = {"clip.count_replicated_per_tp_rank"};
  ExpectCaught(c, "clip.count_replicated_per_tp_rank",
               "mismatch.numeric.grad_norm.-.reduction.consistency");
  c.clip_grad_norm = 0.0;  // no clipping: the norm is still reported, but nothing depends on it
  CheckResult r = Check(c);
  EXPECT_NE(r.verdict.where.tensor_kind, "param")
      << "without clipping only the reported norm may differ";
  Config one = Tp(1, 2, 0);
  one.clip_grad_norm = 0.05;
  one.faults = {"clip.count_replicated_per_tp_rank"};
  ExpectSilent(one, "at tp=1");
}

}  // namespace
}  // namespace paradiff
