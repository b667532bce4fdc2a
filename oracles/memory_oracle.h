// The memory oracle (memory accounting): each rank's bytes per category (sut/observations.h
// MemoryAccount) against an analytical expectation for the layout, derived here from the model
// spec and the config alone (never from the engine's layout code, which is under test), and no
// category growing from one step to the next (a leak).
//
// Note [Memory expectation]: data parallel with ZeRO (with tp / pp: below). The flat buffer lays
// the parameters out in model order, each starting at a multiple of zero.align_elems, and pads the
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
// With tensor parallelism each parameter enters the flat buffer with its local size, derived here
// from the Megatron split rules alone: column-parallel (attn.q, attn.kv, mlp.fc1 / gate / up) and
// row-parallel (attn.proj.weight, mlp.fc2.weight) hold numel / tp (kv: numel / kv_heads when
// kv_heads < tp, one head per share group), the vocabulary matrices hold PaddedVocab / tp rows
// (vocab rounded up to 4 * tp), everything else is replicated whole. With pipeline parallelism a
// rank's buffer holds only its stage's parameters; which ones is read off the parameters the
// rank reports (a wrong stage map is the numeric and tiling oracles' business; this oracle checks
// that the bytes match the parameters held). Categories the engine reports beyond these are
// checked for leaks only.
#pragma once

#include <map>
#include <set>
#include <string>

#include "core/config.h"
#include "core/verdict.h"
#include "oracles/oracle.h"
#include "sut/observations.h"

namespace paradiff {

struct MemoryExpectation {
  std::map<std::string, int64_t> exact;  // category -> bytes
  std::map<std::string, int64_t> upper;  // category -> at most these bytes
};

// The expectation for world rank `rank` (ranks: tp fastest, then dp, then pp). `stage_params`:
// the parameters its pipeline stage holds (nullptr = all, as without pipeline parallelism).
MemoryExpectation ExpectedMemory(const Config& cfg, int rank,
                                 const std::set<std::string>* stage_params = nullptr);

// kPass or the first kInvariant (oracle "memory"): accounting at each step (ranks in order, the
// categories in the order above), then leaks.
Verdict CheckMemory(const Config& cfg, const Observations& obs);

class MemoryOracle : public Oracle {
 public:
  const char* name() const override { return "memory"; }
  Verdict Check(const OracleInput& in) const override;
};

}  // namespace paradiff
