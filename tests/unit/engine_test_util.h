// Shared helpers for the engine / oracle tests: small configs, a one-call check, bits.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "core/budget.h"
#include "core/config.h"
#include "kernels/engine.h"
#include "oracles/check.h"

namespace paradiff::testing {

// A tensor's bits as integers of its element size, for bit-for-bit comparisons (NaN equals NaN,
// -0.0 differs from 0.0).
inline at::Tensor Bits(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return c.element_size() == 8   ? c.view(at::kLong)
         : c.element_size() == 4 ? c.view(at::kInt)
                                 : c.view(at::kShort);
}

// A tiny GPT on a data-parallel layout; 19360 parameters (19360 % 3 == 1, % 7 == 5).
inline Config SmallConfig(int64_t dp, int64_t stage) {
  Config c;
  c.steps = 2;
  c.model.layers = 2;
  c.model.hidden = 32;
  c.model.heads = 4;
  c.model.kv_heads = 4;
  c.model.ffn = 64;
  c.model.vocab = 61;
  c.model.seq_len = 8;
  c.batch.micro_batch = 2;
  c.batch.accumulation_steps = 1;
  c.parallel.dp = dp;
  c.parallel.world = dp;
  c.zero.stage = stage;
  c.zero.bucket_elems = 4096;
  return c;
}

// Validates (the test's configs must be valid and supported) and checks one config.
inline CheckResult Check(const Config& c, ReferenceCache* cache = nullptr) {
  const Status s = CheckConfig(c, ResourceBudget{});
  EXPECT_TRUE(s.ok()) << s.ToString();
  const Status sup = EngineSupports(c);
  EXPECT_TRUE(sup.ok()) << sup.ToString();
  CheckOptions opts;
  opts.cache = cache;
  return CheckRun(c, opts);
}

// A bug-zoo switch caught where it should be: under two seeds, as a finding whose signature starts
// with `signature` (the oracle and the quantity the mechanism corrupts first), the same signature
// for both seeds.
inline void ExpectCaught(const Config& c, const std::string& what, const std::string& signature) {
  std::string first;
  for (uint64_t seed : {c.seed, c.seed + 7919}) {
    Config s = c;
    s.seed = seed;
    const CheckResult r = Check(s);
    const std::string sig = r.verdict.Signature();
    EXPECT_TRUE(IsFinding(r.verdict.kind)) << what << " seed " << seed << " not caught";
    EXPECT_EQ(sig.rfind(signature, 0), 0u)
        << what << " seed " << seed << ": caught as " << sig << ", expected " << signature
        << "*: " << r.verdict.message;
    if (first.empty()) first = sig;
    EXPECT_EQ(sig, first) << what << ": the signature changed with the seed";
  }
}

// A switch that must stay silent: the config passes.
inline void ExpectSilent(const Config& c, const std::string& what) {
  const CheckResult r = Check(c);
  EXPECT_EQ(r.verdict.kind, VerdictKind::kPass) << what << ": " << r.verdict.message;
}

}  // namespace paradiff::testing
