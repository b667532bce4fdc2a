// GradReduction: how a system under test turns its ranks' micro-batch gradients into one reduced
// gradient per step, as it declares it (the built-in engine: BuiltInReduction(); an external
// target: its file's "grad_reduction", docs/TARGETS.md). The same-precision twin mirrors what is
// declared, and the mirror oracle judges bit for bit only what the declaration pins down.
//
// Note [Declared reduction structure]: float sums round by their order, so a bitwise twin must add
// what the run adds in the order the run adds it. Three things decide that order, and systems
// differ in each:
// - when: each micro-step's gradients are reduced over dp and the reduced gradients accumulated
//   (the built-in engine without pipelining), or each rank accumulates its own micro-batches
//   locally and reduces once per step (PyTorch DDP under no_sync, pipeline flushes);
// - order: the dp sum adds ranks 0, 1, 2, ... in order (the built-in engine's local and MPI
//   communicators), or in an order nobody promised (gloo's ring, NCCL's trees);
// - average: the sum is multiplied by 1/dp afterwards, in the accumulate dtype (the built-in
//   engine), or each rank's gradient is multiplied by 1/dp in the reduce dtype before the sum
//   (DDP's reducer), or divided by dp in the reduce dtype before the sum (DDP's bf16 / fp16
//   compression hooks, DeepSpeed's ZeRO optimizers). A division by dp rounds otherwise than a
//   multiplication by 1/dp when dp is not a power of two, so the two are declared apart.
// Whatever a system leaves unknown the twin computes as the built-in engine does, and the mirror
// oracle skips the layouts where that choice can change a rounding (MirrorUndeclared); the
// numeric oracle, whose bounds cover any order, still judges them.
#pragma once

#include <string>

#include "core/config.h"

namespace paradiff {

struct GradReduction {
  enum class When { kMicroStep, kStep, kUnknown };
  enum class Average { kAfterSum, kBeforeSum, kDivideBeforeSum, kUnknown };
  When when = When::kUnknown;            // without pipeline parallelism
  When when_pipelined = When::kUnknown;  // with pp > 1 (a pipeline flush)
  bool rank_order = false;
  Average average = Average::kUnknown;

  // The structure of `layout` (pipelined or not).
  When WhenFor(const Config& layout) const {
    return layout.parallel.pp > 1 ? when_pipelined : when;
  }
  // The structure the twin computes for `layout`: what is declared, the built-in engine's where
  // not.
  bool TwinReducesOncePerStep(const Config& layout) const;
  Average TwinAverage() const { return average == Average::kUnknown ? BuiltInAverage() : average; }
  static constexpr Average BuiltInAverage() { return Average::kAfterSum; }
  bool operator==(const GradReduction& o) const {
    return when == o.when && when_pipelined == o.when_pipelined && rank_order == o.rank_order &&
           average == o.average;
  }
};

// The built-in engine's structure (kernels/grad_reducer.h, pipeline flushes in pipeline_exec.cpp):
// reduce every micro-step without pipelining, once per step with it; rank order; multiplied by 1/dp
// after the sum.
GradReduction BuiltInReduction();

// "" when the twin's reduction under `layout` (one phase of a run) adds what the run adds in the
// order it adds it, given the declaration `r`; else why not: a structure left unknown that the
// layout makes matter (accumulation for `when`, dp > 2 for `order`, a dp that is not a power of
// two, or fp16 sums, for `average`: scaling by 2^-k is exact unless the result is subnormal, which
// float32 and bfloat16 gradients of these models never come near and fp16 ones do).
std::string MirrorUndeclared(const GradReduction& r, const Config& layout);

// The spelling of each value in target files and reports.
const char* Name(GradReduction::When);
const char* Name(GradReduction::Average);
// Parses a spelling; false when `s` is none of them.
bool ParseWhen(const std::string& s, GradReduction::When* out);
bool ParseAverage(const std::string& s, GradReduction::Average* out);

}  // namespace paradiff
