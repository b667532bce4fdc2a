// The run directory of the external-target protocol (docs/TARGETS.md, protocol 1): what paradiff
// writes for a target before launching it, and how it reads the target's observations back.
//
//   RUN/config.json              the paradiff config (docs/CONFIG.md)
//   RUN/run.json                 {protocol, world, dp, steps, micro_batch, accumulation_steps,
//                                 micro_batches_per_step, params: [names in model order],
//                                 kinds: [tensor kinds to report], out_dir: "out"}, and for one
//                                 phase of a checkpointed config: first_step, save_checkpoint /
//                                 load_checkpoint (see Note [Checkpointed target runs])
//   RUN/init.safetensors         the initial full parameters, in precision.param
//   RUN/data/step<S>.safetensors "inputs" / "targets": every micro-batch of step S, [M, ...];
//                                data-parallel rank r at micro-step m takes micro-batch r*A+m
//   RUN/out/rank<R>.json         written by the target: {"steps": [{"loss_sum", "loss_count",
//                                 "grad_norm"}, ...]} (loss_sum: sum of the rank's micro-batch mean
//                                 losses, loss_count: how many)
//   RUN/out/rank<R>.step<S>.safetensors  written by the target: "KIND:TENSOR" for what rank R holds
//                                 after step S, full shape, or a flat piece with __metadata__
//                                 "offset:KIND:TENSOR"
//                                 ("block:KIND:TENSOR" per-dimension offsets; "partial:KIND:TENSOR"
//                                 "tp": see Note [Partial pieces])
// Parameters and data are paradiff's own (kernels/param_init, kernels/data): a target never
// re-implements the RNG.
//
// Note [Partial pieces]: a framework may leave a value unreduced between backward and step (torch's
// DTensor under sequence parallelism keeps a replicated parameter's gradient as Partial(sum): each
// tensor-parallel rank a partial sum of full shape). Reading the reduced value would take the
// framework's own collective, which an observation never does; so each rank reports its own
// addend, marked partial, and ReadObservations sums the group's addends (ranks g*tp .. g*tp+tp-1,
// tp innermost in paradiff's rank order) in tp rank order in the pieces' dtype, giving every rank
// of the group the sum as the value it holds once the framework reduces it. A sum of two addends
// is the same in any order, so at tp 2 it is bitwise what the framework's all-reduce computes; at
// tp > 2 the framework may add them in another order, within (tp - 1) u of the sum of their
// magnitudes of this sum (u = the dtype's unit roundoff).
// Each summed piece also keeps the sum of its addends' magnitudes (TensorPiece::addend_abs): the
// framework computes on the addends (DTensor adds the decay term and the momentum to each rank's
// Partial gradient), so its roundings scale with them, which cancel in the sum (see Note [Partial
// state rounds at its addends] in oracles/update_oracle.cpp).
#pragma once

#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"
#include "sut/observations.h"

namespace paradiff {

// Note [Checkpointed target runs]: a config with checkpoint.save_at > 0 runs as two launches of
// the target, as the built-in engine runs it (see Note [Checkpointed runs]): the save phase
// trains steps [0, save_at) of the config and saves a checkpoint through the framework's own API
// into run.json's save_checkpoint (a directory, absolute); the reload phase gets the reload
// layout's config (kernels/engine.h ReloadPhaseConfig: its world, dp, accumulation, ZeRO stage),
// loads load_checkpoint (the same directory) through the framework's API and trains steps
// [first_step, steps). Rank files are named by the absolute step; rank<R>.json lists the phase's
// steps only. Data files exist for the phase's steps.
struct RunPhase {
  int64_t first_step = 0;
  int64_t end_step = 0;         // one past the last step (a whole run: the config's steps)
  std::string save_checkpoint;  // save after end_step - 1 ("" = none)
  std::string load_checkpoint;  // load before first_step ("" = none)
};

// Writes every input file of `cfg` for `phase` into `dir` (created; out/ created empty).
Status WriteRunDir(const Config& cfg, const std::vector<std::string>& kinds, const std::string& dir,
                   const RunPhase& phase);

// What ReadObservations found wrong: "no_output" (a rank wrote nothing), "shape" (a tensor of the
// wrong shape or size), "bad_output" (anything else malformed).
struct ObservationError {
  std::string detail;
  std::string message;
  int rank = -1;
};

// Reads every rank's observations of `phase`'s steps from dir/out (obs steps start at its first);
// `kinds` are the tensor kinds the target declares (targets/target_file.h reporting:
// ExpectedKinds). A tensor of another kind is "bad_output"; a declared kind that no rank wrote at
// some step is "no_output". On failure returns false and fills `err`.
bool ReadObservations(const Config& cfg, const std::string& dir,
                      const std::vector<std::string>& kinds, Observations* obs,
                      ObservationError* err, const RunPhase& phase);

}  // namespace paradiff
