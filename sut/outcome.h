// What every system under test returns (the built-in engine on any backend, an external target
// through the run-dir protocol): its observations, what they hold (Reporting) and how the run
// ended (EngineOutcome). Below kernels/ and targets/ so that both own the same types.
#pragma once

#include <string>

#include "core/config.h"
#include "core/grad_reduction.h"
#include "core/spelling.h"
#include "sut/observations.h"

namespace paradiff {

// What a run reports (docs/TARGETS.md "reports", "grad_norm_dtype"). The loss, the gradient norm
// and the parameters are always reported; an external target may leave out the gradients and the
// optimizer state, and the oracles then judge only what it reports. The built-in engine reports
// everything, with a float64 gradient norm.
struct Reporting {
  bool grad = true;                      // the reduced gradients ("grad")
  bool optimizer = true;                 // master weights and optimizer slots
  DType grad_norm_dtype = DType::kFp64;  // the precision the reported gradient norm was computed in
  bool loss_scale = true;  // the loss scale each step used (external targets: not reported)
  // How the ranks' gradients are reduced (see Note [Declared reduction structure]): the built-in
  // engine's own; an external target's file declares its own ("grad_reduction", unknown if absent).
  GradReduction reduction = BuiltInReduction();
  // Every ZeRO stage computes bit-identical results at equal dp (the built-in engine: see Note
  // [Layer-wise execution] in kernels/rank_engine.h); an external target only when its file says
  // "zero_stages_bitwise": true. Else the metamorphic zero_stage relation is judged within bounds.
  bool zero_stages_bitwise = true;
  // Each rank's forward and backward of a micro-batch compute bit for bit what the reference does
  // for it, the loss multiplied by 1 / accumulation_steps before backward (the built-in engine; an
  // external target only when its file says "model_arithmetic": "paradiff", which its world-1
  // parity test checks). Else the mirror oracle has nothing it can mirror.
  bool same_model_arithmetic = true;
  // The ZeRO stage from which each kind is partitioned over dp rather than replicated (see Note
  // [Expected holders] in oracles/tiling_oracle.h): ZeRO's own 3 / 2 / 1 (the built-in engine); a
  // target whose stage k shards something earlier says so ("partitioned_from"; DeepSpeed's ZeRO-1
  // reduces each gradient slice to its owner only).
  struct PartitionedFrom {
    int64_t param = 3, grad = 2, optimizer = 1;  // optimizer: master weights and slots
  } partitioned_from;
  // The precision the optimizer holds its hyperparameters in (betas, and with them 1 - beta and
  // the bias corrections; see Note [Float32 optimizer hyperparameters] in
  // oracles/update_oracle.cpp): fp64 (the built-in engine, torch's optimizers) or fp32 (a target
  // file's "optimizer_arithmetic": {"hyperparameters": "fp32"}, DeepSpeed's CPU Adam).
  DType optimizer_hyperparameters = DType::kFp64;
  // The optimizer multiplies the gradient by the clip coefficient in the accumulation dtype
  // (precision.accumulate) rather than in float32 (a target file's "optimizer_arithmetic":
  // {"clip": "accumulate"}, DeepSpeed's BF16_Optimizer; see Note [Clip in the accumulation dtype]
  // in oracles/update_oracle.cpp).
  bool clips_in_accumulate = false;
  // Everything, as the built-in engine reports it.
  bool everything() const { return grad && optimizer && grad_norm_dtype == DType::kFp64; }
};

// Why a run failed. External targets also report kUnsupported (a config the target does not run).
enum class FailureKind { kNone, kCollective, kHang, kCrash, kUnsupported };
inline constexpr Spelling<FailureKind> kFailureKindNames[] = {
    {"", FailureKind::kNone},
    {"collective", FailureKind::kCollective},
    {"hang", FailureKind::kHang},
    {"crash", FailureKind::kCrash},
    {"unsupported", FailureKind::kUnsupported}};
inline const char* Name(FailureKind k) { return NameIn(kFailureKindNames, k); }

struct EngineOutcome {
  Observations obs;
  Reporting reporting;  // what obs holds (RunEngine: everything)
  bool ok = true;
  FailureKind failure_kind = FailureKind::kNone;  // kNone when ok
  std::string failure;                            // the primary error message, naming the rank
  int failure_rank = -1;
  // External targets (targets/target_runner.h): the target's name ("" = the built-in engine) and
  // the failure's layout-independent refinement (timeout, exit, signal, no_output, shape, ...),
  // part of the finding's signature.
  std::string target;
  std::string failure_detail;
  int64_t failure_step = -1;  // the step the failing rank was in (-1: unknown)
};

}  // namespace paradiff
