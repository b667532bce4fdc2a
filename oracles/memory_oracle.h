// The memory oracle (memory accounting): each rank's bytes per category (kernels/observations.h
// MemoryAccount) against an analytical expectation for the layout, derived here from the model
// spec and the config alone (never from the engine's layout code, which is under test), and no
// category growing from one step to the next (a leak).
//
// Note [Memory expectation]: data parallel with ZeRO, tp = pp = 1. The flat buffer lays the
// parameters out in model order, each starting at a multiple of zero.align_elems, and pads the
// total to P = a multiple of dp * align_elems; rank r's shard is [r * S, (r + 1) * S), S = P / dp.
// The rank "holds" the whole buffer up to stage 2 and its shard at stage 3, and "owns" (updates)
// the whole buffer at stage 0 and its shard from stage 1. Exactly:
//   params     = held * bytes(param)
//   master     = owned * 4 with master weights and param != fp32, else 0
//   optimizer  = slots * owned * 4 (sgd 1 slot, adam / adamw 2; always fp32)
//   grads      = (stage <= 2 ? P : 0) * bytes(accumulate)   this micro-step's local gradients
//              + (stage <= 1 ? P : S) * bytes(accumulate)   the reduced, accumulated gradients
//   padding    = (held - parameter elements inside the held range) * bytes(param)
// and as an upper bound (the engine's bucketing is its own business):
//   buffers_peak <= max(bucket_elems, largest parameter) * bytes(reduce) at stages 0 / 1,
//                   the same in bytes(accumulate) at stage 2, and the largest unit's parameters
//                   (kernels/model.h BuildUnits) * bytes(param) at stage 3.
// With tensor or pipeline parallelism the shard sizes depend on the engine's tp split and stage
// map; there only the leak check applies. Categories the engine reports beyond these are checked
// for leaks only.
#pragma once

#include <map>
#include <string>

#include "core/config.h"
#include "core/verdict.h"
#include "kernels/observations.h"
#include "oracles/oracle.h"

namespace paradiff {

struct MemoryExpectation {
  std::map<std::string, int64_t> exact;  // category -> bytes
  std::map<std::string, int64_t> upper;  // category -> at most these bytes
};

// The expectation for world rank `rank` (= its dp rank when tp = pp = 1). Only for tp = pp = 1.
MemoryExpectation ExpectedMemory(const Config& cfg, int rank);

// kPass or the first kInvariant (oracle "memory"): accounting at each step (ranks in order, the
// categories in the order above), then leaks.
Verdict CheckMemory(const Config& cfg, const Observations& obs);

class MemoryOracle : public Oracle {
 public:
  const char* name() const override { return "memory"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
