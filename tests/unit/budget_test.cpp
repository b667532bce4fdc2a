// Tests of core/budget.h: each budget dimension rejects with a message naming the field and the
// limit, realistic small configs pass, the parameter estimate agrees with ModelParameterCount, and
// degenerate or extreme configs never crash or hang.
#include "core/budget.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/model_spec.h"
#include "core/validate.h"

namespace paradiff {
namespace {

using Edit = std::function<void(Config&)>;

Config With(const Edit& edit) {
  Config c;
  edit(c);
  return c;
}

// A realistic small run: a 4-layer, 128-wide GPT with an 8k vocabulary on tp=2 x dp=4. (With a
// 32k vocabulary it kept 10.1 GB resident over its 8 steps, estimated 9.8 GB: over the process
// budget, see Note [Bytes per process].)
Config Realistic() {
  Config c;
  c.model.layers = 4;
  c.model.hidden = 128;
  c.model.heads = c.model.kv_heads = 4;
  c.model.ffn = 512;
  c.model.vocab = 8192;
  c.model.seq_len = 256;
  c.batch.micro_batch = 4;
  c.batch.accumulation_steps = 2;
  c.parallel.tp = 2;
  c.parallel.dp = 4;
  c.parallel.world = 8;
  c.zero.stage = 2;
  c.steps = 8;
  return c;
}

// Expects an error on `field` that starts "field=" and names ResourceBudget.<limit>.
void ExpectOver(const Config& c, const std::string& field, const std::string& limit,
                const ResourceBudget& b = ResourceBudget{}) {
  const Status st = CheckBudget(c, b);
  for (const FieldError& e : st.errors()) {
    if (e.field != field) continue;
    EXPECT_EQ(e.message.rfind(field + "=", 0), 0u) << e.message;
    EXPECT_NE(e.message.find("(ResourceBudget." + limit + ")"), std::string::npos) << e.message;
    return;
  }
  ADD_FAILURE() << "no budget error on " << field << "; got:\n" << st.ToString();
}

TEST(Budget, DefaultConfigPasses) { EXPECT_TRUE(CheckConfig(Config{}, ResourceBudget{}).ok()); }

TEST(Budget, RealisticSmallConfigPasses) {
  const Config c = Realistic();
  ASSERT_TRUE(Validate(c).ok()) << Validate(c).ToString();
  const Status st = CheckConfig(c, ResourceBudget{});
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(Budget, LayersMessage) {
  const Status st = CheckBudget(With([](Config& c) { c.model.layers = 500; }), ResourceBudget{});
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.errors()[0].field, "model.layers");
  EXPECT_EQ(st.errors()[0].message,
            "model.layers=500 exceeds the budget of 64 (ResourceBudget.max_layers)");
}

TEST(Budget, EachDimensionRejects) {
  ExpectOver(With([](Config& c) { c.parallel.dp = c.parallel.world = 65; }), "parallel.world",
             "max_world");
  ExpectOver(With([](Config& c) { c.steps = 65; }), "steps", "max_steps");
  ExpectOver(With([](Config& c) { c.model.seq_len = 1025; }), "model.seq_len", "max_seq_len");
  ExpectOver(With([](Config& c) { c.model.vocab = (1 << 20) + 1; }), "model.vocab", "max_vocab");
  ExpectOver(With([](Config& c) { c.batch.accumulation_steps = 65; }), "batch.accumulation_steps",
             "max_accumulation");
  ExpectOver(With([](Config& c) { c.batch.micro_batch = 1025; }), "batch.micro_batch",
             "max_micro_batch");
  ExpectOver(With([](Config& c) { c.zero.bucket_elems = (1 << 28) + 1; }), "zero.bucket_elems",
             "max_bucket_elems");
  ExpectOver(With([](Config& c) {
               c.batch.micro_batch = 64;
               c.model.seq_len = 1024;
               c.parallel.dp = c.parallel.world = 2;
             }),
             "batch.tokens_per_step", "max_tokens_per_step");
  ExpectOver(With([](Config& c) {
               c.model.hidden = 2048;
               c.model.ffn = 8192;
               c.model.layers = 8;
             }),
             "model.parameters", "max_params");
  ExpectOver(With([](Config& c) { c.zero.align_elems = 1 << 17; }), "zero.align_elems",
             "max_align_elems");
  ResourceBudget small;
  small.max_bytes_per_rank = 1 << 20;
  ExpectOver(Realistic(), "bytes_per_rank", "max_bytes_per_rank", small);
  // Within the per-rank limit, but 32 ranks in one process with 64 steps of records each.
  ExpectOver(With([](Config& c) {
               c.model.hidden = 1024;
               c.model.ffn = 4096;
               c.model.layers = 1;
               c.model.vocab = 8192;
               c.parallel.dp = c.parallel.world = 32;
               c.steps = 64;
             }),
             "bytes_per_process", "max_bytes_per_process");
}

// See Note [Bytes per process]: the whole check grows with the ranks, the steps recorded and the
// padding; a huge alignment is priced without overflowing anything.
TEST(Budget, BytesPerProcessEstimate) {
  const Config base = Realistic();
  const double bytes = EstimateBytesPerProcess(base);
  EXPECT_GT(bytes, EstimateBytesPerRank(base));
  Config more_steps = base;
  more_steps.steps = base.steps * 4;
  EXPECT_GT(EstimateBytesPerProcess(more_steps), bytes);
  Config aligned = base;
  aligned.zero.align_elems = int64_t{1} << 62;
  EXPECT_TRUE(std::isfinite(EstimateBytesPerProcess(aligned)));
  EXPECT_GT(EstimateBytesPerRank(aligned), 1e18);
  const Status st = CheckBudget(aligned, ResourceBudget{});
  EXPECT_NE(st.ToString().find("zero.align_elems"), std::string::npos) << st.ToString();
  EXPECT_NE(st.ToString().find("bytes_per_process"), std::string::npos) << st.ToString();
}

TEST(Budget, LimitsAreInclusive) {
  for (const Edit& edit : std::initializer_list<Edit>{
           [](Config& c) { c.steps = 64; }, [](Config& c) { c.model.layers = 64; },
           [](Config& c) { c.model.seq_len = 1024; },
           [](Config& c) { c.parallel.dp = c.parallel.world = 64; },
           [](Config& c) {
             c.batch.micro_batch = 64;  // 64 * 1024 tokens = max_tokens_per_step exactly
             c.model.seq_len = 1024;
           }}) {
    const Status st = CheckBudget(With(edit), ResourceBudget{});
    EXPECT_TRUE(st.ok()) << st.ToString();
  }
}

TEST(Budget, ParameterEstimateMatchesModelSpec) {
  for (const Edit& edit : std::initializer_list<Edit>{
           [](Config&) {}, [](Config& c) { c.model.activation = Activation::kSwiglu; },
           [](Config& c) { c.model.tied_embeddings = false; },
           [](Config& c) { c.model.position_embeddings = false; },
           [](Config& c) { c.model.kv_heads = 1; },
           [](Config& c) { c.model.kind = ModelKind::kExactLinear; }}) {
    const Config c = With([&](Config& c) {
      c.model.layers = 3;
      c.model.hidden = 48;
      c.model.heads = 6;
      c.model.kv_heads = 3;
      c.model.ffn = 80;
      c.model.vocab = 97;
      c.model.seq_len = 12;
      edit(c);
    });
    const int64_t exact = ModelParameterCount(c.model);
    ResourceBudget b;
    b.max_params = exact;
    EXPECT_TRUE(CheckBudget(c, b).ok()) << CheckBudget(c, b).ToString();
    b.max_params = exact - 1;
    const Status st = CheckBudget(c, b);
    ASSERT_EQ(st.errors().size(), 1u) << st.ToString();
    EXPECT_EQ(st.errors()[0].message.rfind("model.parameters=" + std::to_string(exact) + " ", 0),
              0u)
        << st.ToString();
  }
}

TEST(Budget, BytesPerRankEstimate) {
  const Config base = Realistic();
  const double bytes = EstimateBytesPerRank(base);
  EXPECT_GT(bytes, 0);
  Config more_tp = base;
  more_tp.parallel.tp = 4;
  more_tp.parallel.world = 16;
  EXPECT_LT(EstimateBytesPerRank(more_tp), bytes);
  Config sgd = base;
  sgd.optimizer.kind = OptimizerKind::kSgd;
  sgd.optimizer.momentum = 0;
  EXPECT_LT(EstimateBytesPerRank(sgd), bytes);
  Config fp16 = base;
  fp16.precision.param = DType::kFp16;
  fp16.precision.master_weights = true;
  Config fp16_no_master = fp16;
  fp16_no_master.precision.master_weights = false;
  EXPECT_GT(EstimateBytesPerRank(fp16), EstimateBytesPerRank(fp16_no_master));
  // The budget boundary is the estimate itself.
  ResourceBudget b;
  b.max_bytes_per_rank = static_cast<int64_t>(std::ceil(bytes));
  EXPECT_TRUE(CheckBudget(base, b).ok()) << CheckBudget(base, b).ToString();
}

TEST(Budget, DegenerateConfigsNeverCrash) {
  const std::initializer_list<Edit> edits = {
      [](Config& c) { c.model.hidden = 0; },   [](Config& c) { c.model.heads = 0; },
      [](Config& c) { c.model.heads = 5; },  // hidden % heads != 0
      [](Config& c) { c.model.kv_heads = 0; }, [](Config& c) { c.parallel.tp = 0; },
      [](Config& c) { c.parallel.pp = 0; },    [](Config& c) { c.batch.micro_batch = -3; },
      [](Config& c) { c.model.layers = -1; },
  };
  for (const Edit& edit : edits) {
    const Config c = With(edit);
    CheckBudget(c, ResourceBudget{});
    EXPECT_FALSE(CheckConfig(c, ResourceBudget{}).ok());  // the validator still rejects it
  }
  EXPECT_LT(EstimateBytesPerRank(With([](Config& c) { c.model.hidden = 0; })), 0);
}

TEST(Budget, HugeConfigsRejectedWithoutBuildingThem) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const Config c = With([](Config& c) {
    c.model.layers = kMax;
    c.model.hidden = kMax;
    c.model.heads = c.model.kv_heads = 1;
    c.model.ffn = c.model.vocab = c.model.seq_len = kMax;
    c.batch.micro_batch = c.batch.accumulation_steps = kMax;
    c.parallel.dp = c.parallel.world = kMax;
  });
  const Status st = CheckBudget(c, ResourceBudget{});
  EXPECT_GE(st.errors().size(), 9u) << st.ToString();
  // Within every single-dimension limit, but far too many parameters.
  const Config wide = With([](Config& c) { c.model.hidden = c.model.ffn = 1LL << 40; });
  ExpectOver(wide, "model.parameters", "max_params");
}

TEST(Budget, CheckConfigReportsValidationThenBudget) {
  const Status st = CheckConfig(With([](Config& c) {
                                  c.model.layers = 500;
                                  c.parallel.tp = 3;
                                }),
                                ResourceBudget{});
  ASSERT_GE(st.errors().size(), 2u);
  EXPECT_EQ(st.errors().front().field, "parallel.world");
  EXPECT_EQ(st.errors().back().field.rfind("model.", 0), 0u) << st.ToString();
  bool has_layers = false;
  for (const FieldError& e : st.errors()) has_layers |= e.field == "model.layers";
  EXPECT_TRUE(has_layers) << st.ToString();
}

}  // namespace
}  // namespace paradiff
