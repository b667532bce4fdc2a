// Shared helpers of the oracle self-tests: a clean engine run to plant bugs into, an OracleInput
// built the way CheckRun builds it, and CheckRun with a chosen oracle selection and engine runner.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/watchdog.h"
#include "kernels/engine.h"
#include "oracles/check.h"
#include "oracles/oracle.h"
#include "tests/unit/engine_test_util.h"

namespace paradiff::testing {

inline constexpr std::chrono::milliseconds kTestTimeout = kDefaultCollectiveTimeout;

// Plants a bug: multiplies every rank's reported pieces of `kind` at `step` by `factor` (only
// those of `tensor` when it is not empty).
inline void ScalePieces(EngineOutcome& e, int64_t step, const std::string& kind, double factor,
                        const std::string& tensor = "") {
  for (auto& r : e.obs.ranks)
    for (auto& piece : r.steps[step].pieces)
      if (piece.kind == kind && (tensor.empty() || piece.tensor == tensor))
        piece.values.mul_(factor);
}

inline EngineOutcome RunClean(const Config& c) {
  EngineOutcome e = RunEngine(c, kTestTimeout);
  EXPECT_TRUE(e.ok) << e.failure;
  return e;
}

// Everything an oracle sees, owned in one place (OracleInput only points at it).
struct Harness {
  Config cfg;
  EngineOutcome outcome;
  std::shared_ptr<const RefPair> ref;
  Assembly assembly;
  NumericResult numeric;
  EngineRunner runner;
  ReferenceCache* cache = nullptr;

  OracleInput Input() const {
    OracleInput in(cfg, outcome);
    in.ref = ref.get();
    if (outcome.ok) {
      in.assembly = &assembly;
      in.numeric = &numeric;
    }
    in.run_engine = runner;
    in.cache = cache;
    return in;
  }
};

// Builds the harness from an outcome (a clean run, possibly with a bug planted into it).
inline Harness MakeHarness(const Config& c, EngineOutcome e, EngineRunner runner = {},
                           ReferenceCache* cache = nullptr) {
  Harness h;
  h.cfg = c;
  h.outcome = std::move(e);
  h.ref = GetReference(c, h.outcome.reporting.reduction, cache,
                       RandomTwinsFor(c, h.outcome.reporting.same_model_arithmetic));
  h.cache = cache;
  h.runner = runner ? runner : [](const Config& x) { return RunEngine(x, kTestTimeout); };
  if (h.outcome.ok) {
    h.assembly = AssembleTensors(c, h.outcome.obs);
    h.numeric = CheckNumerics(c, h.assembly, *h.ref);
  }
  return h;
}

inline CheckResult CheckWith(const Config& c, std::vector<std::string> oracles,
                             EngineRunner runner = {}, ReferenceCache* cache = nullptr) {
  CheckOptions opts;
  opts.oracles = std::move(oracles);
  opts.run_engine = std::move(runner);
  opts.cache = cache;
  return CheckRun(c, opts);
}

// Replaces what every rank reported (its pieces, and with one rank its loss and norm) by `run`'s
// values: a run with another reduction structure, or kernels that round otherwise.
inline void ReportRun(EngineOutcome& e, const RefRun& run) {
  for (auto& r : e.obs.ranks)
    for (size_t s = 0; s < r.steps.size(); ++s) {
      if (e.obs.ranks.size() == 1) {
        r.steps[s].loss_sum = run.steps[s].loss * static_cast<double>(r.steps[s].loss_count);
        r.steps[s].grad_norm = run.steps[s].grad_norm;
      }
      for (auto& p : r.steps[s].pieces) {
        const at::Tensor full = run.steps[s].tensors.at(p.kind + ":" + p.tensor);
        p.values.copy_(full.narrow(0, p.offset, p.values.numel()).to(p.values.scalar_type()));
      }
    }
}

// The first piece of `kind:tensor` reported by `rank` at `step` (nullptr if none).
inline TensorPiece* FindPiece(EngineOutcome& e, int rank, int64_t step, const std::string& kind,
                              const std::string& tensor = "") {
  for (auto& p : e.obs.ranks.at(rank).steps.at(step).pieces)
    if (p.kind == kind && (tensor.empty() || p.tensor == tensor)) return &p;
  return nullptr;
}

// Moves element `i` of a piece one ulp (of its own dtype) away from zero.
inline void NudgeOneUlp(TensorPiece& p, int64_t i) {
  at::Tensor flat = p.values.reshape({-1});
  if (flat.scalar_type() == at::kFloat) {
    float* v = flat.data_ptr<float>() + i;
    *v = std::nextafter(*v, *v >= 0 ? INFINITY : -INFINITY);
  } else {
    at::Tensor x = flat.narrow(0, i, 1);
    x.mul_(1.0 + 1.0 / 128);  // bf16 / fp16: one ulp or more
  }
}

// Expects a finding with a complete localization (see Note [Localization] in oracles/oracle.h).
inline void ExpectLocalized(const Verdict& v, bool needs_step = true) {
  EXPECT_TRUE(IsFinding(v.kind)) << v.message;
  if (needs_step) {
    EXPECT_GE(v.where.step, 0) << v.message;
  }
  EXPECT_NE(v.where.phase, Phase::kNone) << v.message;
  EXPECT_FALSE(v.oracle.empty()) << v.message;
  EXPECT_GT(v.where.bound, 0) << v.message;
  EXPECT_GE(v.where.ratio(), 1.0) << v.message;
  EXPECT_NE(v.message.find("seed"), std::string::npos) << v.message;
}

// A tensor / pipeline parallel layout of the small test model (3 layers), for the oracles'
// clean-run matrices.
struct TpPpLayout {
  int64_t tp, pp, dp, stage, kv_heads;
  bool sp, tied;
};
inline Config TpPpConfig(const TpPpLayout& l) {
  Config c = SmallConfig(l.dp, l.stage);
  c.model.layers = 3;
  c.model.kv_heads = l.kv_heads;
  c.model.tied_embeddings = l.tied;
  c.parallel.tp = l.tp;
  c.parallel.pp = l.pp;
  c.parallel.sp = l.sp;
  c.parallel.world = l.tp * l.pp * l.dp;
  if (l.pp > 1) c.batch.accumulation_steps = 2;
  return c;
}
inline std::string Describe(const TpPpLayout& l) {
  return "tp " + std::to_string(l.tp) + " pp " + std::to_string(l.pp) + " dp " +
         std::to_string(l.dp) + " stage " + std::to_string(l.stage);
}

}  // namespace paradiff::testing
