// Tests of core/validate.h, ZeRO, precision, optimizer, checkpoint and fault rules
// (validate_training.cpp): one test per rule with a valid and an invalid side.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <string>

#include "core/validate.h"
#include "tests/unit/validate_test_helpers.h"

namespace paradiff::validate_test {
namespace {

TEST(Validate, ZeroStageInRange) {
  ExpectValid(With([](Config& c) { c.zero.stage = 3; }));
  ExpectInvalid(With([](Config& c) { c.zero.stage = 4; }), "zero.stage", "must be in 0..3");
  ExpectInvalid(With([](Config& c) { c.zero.stage = -1; }), "zero.stage");
}

TEST(Validate, ZeroStage3WithPipelineRejected) {
  ExpectValid(Pp(2, [](Config& c) { c.zero.stage = 2; }));
  ExpectInvalid(Pp(2, [](Config& c) { c.zero.stage = 3; }), "zero.stage",
                "zero.stage=3 is not supported with parallel.pp>1 (parameters are gathered per "
                "layer within one stage only)");
}

TEST(Validate, BucketElemsAtLeastOne) {
  ExpectValid(With([](Config& c) { c.zero.bucket_elems = 1; }));
  ExpectInvalid(With([](Config& c) { c.zero.bucket_elems = 0; }), "zero.bucket_elems");
}

TEST(Validate, AlignElemsPowerOfTwo) {
  ExpectValid(With([](Config& c) { c.zero.align_elems = 64; }));
  ExpectInvalid(With([](Config& c) { c.zero.align_elems = 12; }), "zero.align_elems",
                "power of two");
  ExpectInvalid(With([](Config& c) { c.zero.align_elems = 0; }), "zero.align_elems");
  ExpectInvalid(With([](Config& c) { c.zero.align_elems = std::numeric_limits<int64_t>::min(); }),
                "zero.align_elems");
}

// zero.shard_group: 0, or groups that tile dp under a stage that shards; a checkpoint's reload
// layout keeps the groups' size.
TEST(Validate, ShardGroupsTileDpUnderAShardingStage) {
  auto dp4 = [](int64_t stage, int64_t group) {
    return With([=](Config& c) {
      c.parallel.dp = c.parallel.world = 4;
      c.zero.stage = stage;
      c.zero.shard_group = group;
    });
  };
  ExpectValid(dp4(3, 2));
  ExpectValid(dp4(1, 1));
  ExpectValid(dp4(3, 4));
  ExpectInvalid(dp4(3, 3), "zero.shard_group",
                "must divide parallel.dp=4 (its groups tile the dp ranks)");
  ExpectInvalid(dp4(0, 2), "zero.shard_group", "needs a ZeRO stage that shards");
  ExpectInvalid(dp4(3, -1), "zero.shard_group", "must be >= 0");
  Config saved = dp4(3, 2);
  saved.steps = 3;
  saved.checkpoint.save_at = 1;
  saved.checkpoint.reload = {1, 1, 2, 3};
  ExpectValid(saved);
  saved.checkpoint.reload.dp = 3;
  ExpectInvalid(saved, "zero.shard_group", "must divide checkpoint.reload.dp=3");
  saved.checkpoint.reload = {1, 1, 2, 0};
  ExpectInvalid(saved, "zero.shard_group", "checkpoint.reload.zero_stage >= 1");
}

TEST(Validate, LossScaleWithoutFp16IsAllowed) {
  ExpectValid(With([](Config& c) { c.precision.loss_scale.mode = LossScaleMode::kDynamic; }));
  ExpectValid(With([](Config& c) {
    c.precision.param = c.precision.compute = DType::kBf16;
    c.precision.loss_scale.mode = LossScaleMode::kStatic;
  }));
  ExpectInvalid(With([](Config& c) {
                  c.precision.loss_scale.mode = LossScaleMode::kNone;
                  c.precision.loss_scale.init = 0;  // parameters are checked whatever the mode
                }),
                "precision.loss_scale.init");
}

TEST(Validate, LossScaleParameters) {
  auto ls = [](const std::function<void(LossScaleConfig&)>& f) {
    return With([&](Config& c) {
      c.precision.param = c.precision.compute = DType::kFp16;
      c.precision.loss_scale.mode = LossScaleMode::kDynamic;
      f(c.precision.loss_scale);
    });
  };
  const std::string p = "precision.loss_scale.";
  ExpectValid(ls([](LossScaleConfig& l) {
    l.init = l.min = 0.25;
    l.growth_factor = 1.5;
    l.backoff = 0.99;
    l.growth_interval = l.hysteresis = 1;
  }));
  ExpectInvalid(ls([](LossScaleConfig& l) { l.init = -1; }), p + "init", "must be > 0");
  ExpectInvalid(ls([](LossScaleConfig& l) { l.growth_factor = 1; }), p + "growth_factor", "> 1");
  ExpectInvalid(ls([](LossScaleConfig& l) { l.backoff = 1; }), p + "backoff", "(0, 1)");
  ExpectInvalid(ls([](LossScaleConfig& l) { l.backoff = 0; }), p + "backoff", "(0, 1)");
  ExpectInvalid(ls([](LossScaleConfig& l) { l.growth_interval = 0; }), p + "growth_interval");
  ExpectInvalid(ls([](LossScaleConfig& l) { l.hysteresis = 0; }), p + "hysteresis");
  ExpectInvalid(ls([](LossScaleConfig& l) { l.min = 0; }), p + "min", "must be > 0");
  ExpectInvalid(ls([](LossScaleConfig& l) { l.init = 2, l.min = 4; }), p + "init",
                "must be >= precision.loss_scale.min=4");
  // 1 / scale must be a normal float32 (the engine unscales with it).
  ExpectValid(ls([](LossScaleConfig& l) { l.init = l.min = 0x1p-24; }));
  ExpectInvalid(ls([](LossScaleConfig& l) { l.init = 1e-39, l.min = 1e-40; }), p + "min",
                "must be >= 2^-24");
  ExpectInvalid(ls([](LossScaleConfig& l) { l.init = 1e-39, l.min = 1e-40; }), p + "init",
                "must be >= 2^-24");
}

TEST(Validate, DoublesAreFinite) {
  ExpectValid(With([](Config& c) { c.optimizer.lr = 1e300; }));
  ExpectInvalid(With([](Config& c) { c.optimizer.lr = kInf; }), "optimizer.lr",
                "optimizer.lr=inf must be finite");
  ExpectInvalid(With([](Config& c) { c.optimizer.eps = kNan; }), "optimizer.eps", "=nan");
  ExpectInvalid(With([](Config& c) { c.precision.loss_scale.init = kInf; }),
                "precision.loss_scale.init", "finite");
  ExpectInvalid(With([](Config& c) { c.clip_grad_norm = -kInf; }), "clip_grad_norm", "finite");
  ExpectInvalid(With([](Config& c) { c.optimizer.beta2 = kNan; }), "optimizer.betas[1]");
}

TEST(Validate, OptimizerHyperparameters) {
  ExpectValid(With([](Config& c) {
    c.optimizer.kind = OptimizerKind::kSgd;
    c.optimizer.momentum = 0;
    c.optimizer.beta1 = c.optimizer.beta2 = 0;
    c.optimizer.weight_decay = 0.1;
  }));
  ExpectInvalid(With([](Config& c) { c.optimizer.lr = 0; }), "optimizer.lr", "must be > 0");
  ExpectInvalid(With([](Config& c) { c.optimizer.momentum = 1; }), "optimizer.momentum", "[0, 1)");
  ExpectInvalid(With([](Config& c) { c.optimizer.beta1 = -0.1; }), "optimizer.betas[0]");
  ExpectInvalid(With([](Config& c) { c.optimizer.beta2 = 1; }), "optimizer.betas[1]");
  ExpectInvalid(With([](Config& c) { c.optimizer.eps = 0; }), "optimizer.eps");
  ExpectInvalid(With([](Config& c) { c.optimizer.weight_decay = -1e-3; }),
                "optimizer.weight_decay");
}

TEST(Validate, LrScheduleFieldsWhereTheKindReadsThem) {
  using K = LrScheduleKind;
  const auto sched = [](LrScheduleConfig s) {
    return With([s](Config& c) { c.optimizer.schedule = s; });
  };
  ExpectValid(sched({K::kWarmup, 2, 0, 0.0}));
  ExpectValid(sched({K::kWarmupLinear, 2, 3, 0.0}));
  ExpectValid(sched({K::kWarmupCosine, 3, 9, 0.5}));
  ExpectInvalid(sched({K::kWarmup, 1, 0, 0.0}), "optimizer.schedule.warmup_steps", "must be >= 2");
  ExpectInvalid(sched({K::kConstant, 2, 0, 0.0}), "optimizer.schedule.warmup_steps",
                "must be 0: no warmup (kind=constant)");
  ExpectInvalid(sched({K::kWarmupLinear, 4, 4, 0.0}), "optimizer.schedule.total_steps",
                "must be > warmup_steps=4");
  ExpectInvalid(sched({K::kWarmup, 2, 5, 0.0}), "optimizer.schedule.total_steps",
                "must be 0: no decay (kind=warmup)");
  ExpectInvalid(sched({K::kWarmupCosine, 2, 5, 1.0}), "optimizer.schedule.min_ratio",
                "must be in [0, 1)");
  ExpectInvalid(sched({K::kWarmupLinear, 2, 5, 0.1}), "optimizer.schedule.min_ratio",
                "only warmup_cosine decays to a floor");
}

TEST(Validate, ClipGradNormNonNegative) {
  ExpectValid(With([](Config& c) { c.clip_grad_norm = 1.0; }));
  ExpectInvalid(With([](Config& c) { c.clip_grad_norm = -0.5; }), "clip_grad_norm",
                "clip_grad_norm=-0.5 must be >= 0");
}

TEST(Validate, CheckpointSaveAtBeforeLastStep) {
  ExpectValid(With([](Config& c) { c.checkpoint.save_at = 1; }));
  ExpectInvalid(With([](Config& c) { c.checkpoint.save_at = 2; }), "checkpoint.save_at",
                "must be < steps=2");
  ExpectInvalid(With([](Config& c) { c.checkpoint.save_at = -1; }), "checkpoint.save_at");
}

TEST(Validate, ReloadLayoutInRange) {
  ExpectValid(With([](Config& c) { c.checkpoint.reload = {1, 2, 3, 2}; }));
  ExpectInvalid(With([](Config& c) { c.checkpoint.reload.tp = 0; }), "checkpoint.reload.tp");
  ExpectInvalid(With([](Config& c) { c.checkpoint.reload.pp = 0; }), "checkpoint.reload.pp");
  ExpectInvalid(With([](Config& c) { c.checkpoint.reload.dp = 0; }), "checkpoint.reload.dp");
  ExpectInvalid(With([](Config& c) { c.checkpoint.reload.zero_stage = 4; }),
                "checkpoint.reload.zero_stage");
}

TEST(Validate, ReloadLayoutFollowsLayoutRulesWhenSaving) {
  auto reload = [](ReloadConfig r, int64_t save_at = 1) {
    return With([&](Config& c) {
      c.checkpoint.save_at = save_at;
      c.checkpoint.reload = r;
    });
  };
  ExpectValid(reload({4, 2, 1, 2}));
  ExpectValid(reload({3, 4, 1, 3}, /*save_at=*/0));  // no checkpoint: the reload layout is unused
  ExpectInvalid(reload({3, 1, 1, 0}), "checkpoint.reload.tp",
                "checkpoint.reload.tp=3 does not divide model.heads=4");
  ExpectInvalid(With([](Config& c) {
                  c.model.hidden = 48;
                  c.model.heads = 12;
                  c.model.kv_heads = 6;  // kv_heads >= reload.tp but 6 % 4 != 0
                  c.checkpoint.save_at = 1;
                  c.checkpoint.reload.tp = 4;
                }),
                "checkpoint.reload.tp", "model.kv_heads=6");
  ExpectInvalid(reload({3, 4, 1, 0}), "checkpoint.reload.pp", "exceeds model.layers=2");
  ExpectInvalid(reload({1, 2, 1, 3}), "checkpoint.reload.zero_stage", "checkpoint.reload.pp>1");
  ExpectInvalid(With([](Config& c) {
                  c.model.kind = ModelKind::kExactLinear;
                  c.checkpoint.save_at = 1;
                  c.checkpoint.reload.tp = 3;
                }),
                "checkpoint.reload.tp", "does not divide model.hidden=32");
}

TEST(Validate, BackendsAllValid) {
  for (Backend b : {Backend::kLocal, Backend::kMpi, Backend::kNccl})
    ExpectValid(With([&](Config& c) { c.backend = b; }));
}

TEST(Validate, FaultsAreKnownNames) {
  ExpectValid(With([](Config& c) { c.faults = {"gas.overwrite_grad", "zero.uneven_last_shard"}; }));
  ExpectInvalid(With([](Config& c) {
                  c.faults = {"gas.overwrite_grad", "no.such_fault"};
                }),
                "faults[1]", "is not a known fault (known: zero.uneven_last_shard");
}

TEST(Validate, FaultsHaveNoDuplicates) {
  ExpectValid(With([](Config& c) { c.faults = {"gas.overwrite_grad"}; }));
  ExpectInvalid(With([](Config& c) {
                  c.faults = {"gas.overwrite_grad", "gas.overwrite_grad"};
                }),
                "faults[1]", "duplicates faults[0]");
}

}  // namespace
}  // namespace paradiff::validate_test
