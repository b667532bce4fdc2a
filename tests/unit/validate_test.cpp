// Tests of core/validate.h, model, batch and layout rules (validate.cpp): one test per rule, each
// with a valid side (the rule holds, the config passes) and an invalid side (the rule breaks, the
// error names the field and starts "field="). The other rules: validate_training_test.cpp.
#include "core/validate.h"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "tests/unit/validate_test_helpers.h"

namespace paradiff::validate_test {
namespace {

TEST(Validate, DefaultsAreValid) { ExpectValid(Config{}); }

TEST(Validate, SchemaIsOne) {
  ExpectValid(With([](Config& c) { c.schema = 1; }));
  ExpectInvalid(With([](Config& c) { c.schema = 2; }), "schema", "schema=2 is not supported");
}

TEST(Validate, StepsAtLeastOne) {
  ExpectValid(With([](Config& c) { c.steps = 1; }));
  ExpectInvalid(With([](Config& c) { c.steps = 0; }), "steps", "steps=0 must be >= 1");
}

TEST(Validate, ModelSizesInRange) {
  ExpectValid(With([](Config& c) {
    c.model.layers = 1;
    c.model.hidden = 1;
    c.model.heads = 1;
    c.model.kv_heads = 1;
    c.model.ffn = 1;
    c.model.vocab = 2;
    c.model.seq_len = 1;
  }));
  ExpectInvalid(With([](Config& c) { c.model.layers = 0; }), "model.layers");
  ExpectInvalid(With([](Config& c) { c.model.hidden = -1; }), "model.hidden");
  ExpectInvalid(With([](Config& c) { c.model.heads = 0; }), "model.heads");
  ExpectInvalid(With([](Config& c) { c.model.kv_heads = 0; }), "model.kv_heads");
  ExpectInvalid(With([](Config& c) { c.model.ffn = 0; }), "model.ffn");
  ExpectInvalid(With([](Config& c) { c.model.vocab = 1; }), "model.vocab", ">= 2");
  ExpectInvalid(With([](Config& c) { c.model.seq_len = 0; }), "model.seq_len");
}

TEST(Validate, HeadsDivideHidden) {
  ExpectValid(With([](Config& c) { c.model.heads = c.model.kv_heads = 8; }));
  ExpectInvalid(With([](Config& c) { c.model.heads = c.model.kv_heads = 5; }), "model.heads",
                "model.heads=5 does not divide model.hidden=32");
}

TEST(Validate, KvHeadsDivideHeads) {
  ExpectValid(With([](Config& c) { c.model.kv_heads = 2; }));
  ExpectInvalid(With([](Config& c) { c.model.kv_heads = 3; }), "model.kv_heads",
                "does not divide model.heads=4");
}

TEST(Validate, ExactLinearIgnoresGptFieldsButRangeChecksThem) {
  ExpectValid(With([](Config& c) {
    c.model.kind = ModelKind::kExactLinear;
    c.model.heads = 5;  // would not divide hidden for gpt
    c.model.kv_heads = 3;
  }));
  ExpectInvalid(With([](Config& c) {
                  c.model.kind = ModelKind::kExactLinear;
                  c.model.heads = 0;
                }),
                "model.heads");
}

TEST(Validate, BatchSizesInRange) {
  ExpectValid(With([](Config& c) { c.batch.micro_batch = c.batch.accumulation_steps = 1; }));
  ExpectInvalid(With([](Config& c) { c.batch.micro_batch = 0; }), "batch.micro_batch");
  ExpectInvalid(With([](Config& c) { c.batch.accumulation_steps = 0; }),
                "batch.accumulation_steps");
}

TEST(Validate, ParallelDegreesAtLeastOne) {
  ExpectValid(With([](Config& c) {
    c.parallel.dp = 3;
    c.parallel.world = 3;
  }));
  ExpectInvalid(With([](Config& c) { c.parallel.tp = 0; }), "parallel.tp");
  ExpectInvalid(With([](Config& c) { c.parallel.pp = -2; }), "parallel.pp");
  ExpectInvalid(With([](Config& c) { c.parallel.dp = 0; }), "parallel.dp");
}

TEST(Validate, WorldIsTpTimesPpTimesDp) {
  ExpectValid(Tp(2, [](Config& c) {
    c.parallel.dp = 3;
    c.parallel.world = 6;
  }));
  ExpectInvalid(Tp(2, [](Config& c) { c.parallel.world = 4; }), "parallel.world",
                "must equal parallel.tp*parallel.pp*parallel.dp=2");
  // An overflowing product: no UB, rejected as such (not as a mismatch with a saturated product).
  ExpectInvalid(With([](Config& c) { c.parallel.tp = c.parallel.pp = c.parallel.dp = 1LL << 40; }),
                "parallel.dp", "overflows a 64-bit integer");
}

TEST(Validate, WorldSizeIsNotLimitedHere) {
  // Large worlds are the budget's concern (budget.h), not a validation rule.
  ExpectValid(With([](Config& c) { c.parallel.dp = c.parallel.world = 1000; }));
}

TEST(Validate, TpDividesHeads) {
  ExpectValid(Tp(4));
  ExpectInvalid(Tp(3,
                   [](Config& c) {
                     c.model.hidden = 48;
                     c.model.heads = c.model.kv_heads = 8;
                     c.model.ffn = 96;
                   }),
                "parallel.tp", "parallel.tp=3 does not divide model.heads=8");
}

TEST(Validate, KvHeadsSplitOrReplicatedAcrossTp) {
  ExpectValid(Tp(2, [](Config& c) { c.model.kv_heads = 2; }));  // split: one kv head per rank
  ExpectValid(Tp(4, [](Config& c) { c.model.kv_heads = 2; }));  // replicated: tp % kv_heads == 0
  ExpectValid(Tp(4, [](Config& c) { c.model.kv_heads = 1; }));  // multi-query, replicated
  ExpectInvalid(Tp(4,
                   [](Config& c) {
                     c.model.heads = 12;
                     c.model.hidden = 48;
                     c.model.kv_heads = 6;  // 6 % 4 != 0 and kv_heads >= tp
                   }),
                "parallel.tp", "model.kv_heads=6");
  ExpectInvalid(Tp(4,
                   [](Config& c) {
                     c.model.heads = 12;
                     c.model.hidden = 48;
                     c.model.kv_heads = 3;  // kv_heads < tp and 4 % 3 != 0
                   }),
                "parallel.tp", "model.kv_heads=3");
}

TEST(Validate, TpDividesFfn) {
  ExpectValid(Tp(2, [](Config& c) { c.model.ffn = 66; }));
  ExpectInvalid(Tp(4, [](Config& c) { c.model.ffn = 66; }), "parallel.tp",
                "does not divide model.ffn=66");
}

TEST(Validate, SequenceParallelNeedsTensorParallel) {
  ExpectValid(Tp(2, [](Config& c) { c.parallel.sp = true; }));
  ExpectInvalid(With([](Config& c) { c.parallel.sp = true; }), "parallel.sp",
                "requires parallel.tp>1");
}

TEST(Validate, SequenceParallelSplitsSeqLen) {
  ExpectValid(Tp(4, [](Config& c) { c.parallel.sp = true; }));
  ExpectInvalid(Tp(4,
                   [](Config& c) {
                     c.parallel.sp = true;
                     c.model.seq_len = 6;
                   }),
                "parallel.sp", "to divide model.seq_len=6");
}

TEST(Validate, VirtualStagesAtLeastOne) {
  ExpectValid(With([](Config& c) { c.parallel.virtual_stages = 1; }));
  ExpectInvalid(With([](Config& c) { c.parallel.virtual_stages = 0; }), "parallel.virtual_stages");
}

// The interleaved schedule of pp=2 with 2 virtual stages over 4 layers, accumulation 2.
Config Interleaved(const Edit& edit = [](Config&) {}) {
  return Pp(2, [&](Config& c) {
    c.model.layers = 4;
    c.parallel.virtual_stages = 2;
    c.parallel.schedule = Schedule::kInterleaved;
    c.batch.accumulation_steps = 2;
    edit(c);
  });
}

TEST(Validate, VirtualStagesRequirePipeline) {
  ExpectValid(Interleaved());
  ExpectInvalid(Interleaved([](Config& c) { c.parallel.pp = c.parallel.world = 1; }),
                "parallel.virtual_stages", "requires parallel.pp>1");
}

TEST(Validate, VirtualStagesRequireInterleavedSchedule) {
  ExpectValid(Interleaved());
  ExpectInvalid(Interleaved([](Config& c) { c.parallel.schedule = Schedule::kGpipe; }),
                "parallel.virtual_stages", "requires parallel.schedule=interleaved");
}

TEST(Validate, InterleavedScheduleRequiresVirtualStages) {
  ExpectValid(Interleaved());
  ExpectInvalid(Interleaved([](Config& c) { c.parallel.virtual_stages = 1; }), "parallel.schedule",
                "requires parallel.virtual_stages>1");
}

TEST(Validate, InterleavedScheduleRequiresAccumulationMultipleOfPp) {
  ExpectValid(Interleaved([](Config& c) { c.batch.accumulation_steps = 4; }));
  ExpectInvalid(Interleaved([](Config& c) { c.batch.accumulation_steps = 3; }), "parallel.schedule",
                "batch.accumulation_steps=3");
}

TEST(Validate, EveryPipelineChunkHasALayer) {
  ExpectValid(Pp(2));
  ExpectValid(Pp(2, [](Config& c) { c.parallel.partition = PartitionMethod::kParameters; }));
  ExpectInvalid(Pp(4), "model.layers", "is fewer than the 4 pipeline chunks");
  ExpectInvalid(Interleaved([](Config& c) { c.model.layers = 3; }), "model.layers",
                "parallel.virtual_stages=2");
}

Config Explicit(std::vector<int64_t> parts) {
  return Pp(2, [&](Config& c) {
    c.model.layers = 3;
    c.parallel.partition = PartitionMethod::kExplicit;
    c.parallel.partition_layers = parts;
  });
}

TEST(Validate, ExplicitPartitionHasOneEntryPerChunk) {
  ExpectValid(Explicit({2, 1}));
  ExpectInvalid(Explicit({1, 1, 1}), "parallel.partition", "has 3 entries but there are 2");
}

TEST(Validate, ExplicitPartitionEntriesAtLeastOne) {
  ExpectValid(Explicit({1, 2}));
  ExpectInvalid(Explicit({3, 0}), "parallel.partition[1]", "must be >= 1");
}

TEST(Validate, ExplicitPartitionSumsToLayers) {
  ExpectValid(Explicit({1, 2}));
  ExpectInvalid(Explicit({2, 2}), "parallel.partition", "sums to 4, expected model.layers=3");
  ExpectInvalid(Explicit({std::numeric_limits<int64_t>::max(), 5}), "parallel.partition");
}

TEST(Validate, ExactLinearRequiresTpToDivideHidden) {
  ExpectValid(With([](Config& c) {
    c.model.kind = ModelKind::kExactLinear;
    c.parallel.dp = c.parallel.world = 4;
  }));
  ExpectValid(Tp(2, [](Config& c) { c.model.kind = ModelKind::kExactLinear; }));
  ExpectInvalid(Tp(3, [](Config& c) { c.model.kind = ModelKind::kExactLinear; }), "parallel.tp",
                "parallel.tp=3 does not divide model.hidden=32");
}

TEST(Validate, EveryBrokenRuleIsReported) {
  const Status st = Validate(With([](Config& c) {
    c.steps = 0;
    c.model.layers = 0;
    c.parallel.tp = 3;  // does not divide heads (4) nor ffn (64), and world != 3
    c.zero.stage = 7;
    c.optimizer.lr = -1;
    c.faults = {"nope"};
  }));
  EXPECT_GE(st.errors().size(), 8u) << st.ToString();
}

TEST(Validate, ExtremeValuesNeverCrash) {
  for (int64_t v : {std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{0},
                    std::numeric_limits<int64_t>::max()}) {
    Config c;
    for (int64_t* f : {&c.schema,
                       &c.steps,
                       &c.model.layers,
                       &c.model.hidden,
                       &c.model.heads,
                       &c.model.kv_heads,
                       &c.model.ffn,
                       &c.model.vocab,
                       &c.model.seq_len,
                       &c.batch.micro_batch,
                       &c.batch.accumulation_steps,
                       &c.parallel.world,
                       &c.parallel.tp,
                       &c.parallel.pp,
                       &c.parallel.dp,
                       &c.parallel.virtual_stages,
                       &c.zero.stage,
                       &c.zero.bucket_elems,
                       &c.zero.align_elems,
                       &c.checkpoint.save_at,
                       &c.checkpoint.reload.tp,
                       &c.checkpoint.reload.pp})
      *f = v;
    c.parallel.sp = true;
    c.parallel.schedule = Schedule::kInterleaved;
    c.parallel.partition = PartitionMethod::kExplicit;
    c.parallel.partition_layers = {v, v};
    const Status st = Validate(c);
    EXPECT_FALSE(st.ok());
  }
}

}  // namespace
}  // namespace paradiff::validate_test
