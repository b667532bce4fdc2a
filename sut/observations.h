// Observations: what one distributed run reports, per rank and per step. Sharded state is reported
// as pieces of logical tensors with their global offsets; the harness (oracles/assemble.h)
// assembles them and checks that they tile each tensor, so an engine bug cannot hide behind the
// engine's own gather (see Note [Independent observation]).
//
// Note [Independent observation]: every rank copies what it holds locally (a shard, or a full
// replica) into pieces {kind, tensor, offset, values}. The engine's collectives are never used to
// build an observation. Replicated copies are reported by every holder and must agree bitwise.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace paradiff {

struct TensorPiece {
  std::string kind;    // param | master | grad | exp_avg | exp_avg_sq | momentum
  std::string tensor;  // logical parameter name
  int64_t offset = 0;  // first element within the flattened logical tensor
  at::Tensor values;   // flat, in the dtype the rank holds
  // Where `values` is the sum of a tensor-parallel group's unreduced addends (see Note [Partial
  // pieces] in targets/run_dir.h): the sum of their magnitudes, flat, same dtype; undefined
  // otherwise. The framework's arithmetic on the addends rounds at this scale, not at |values|'s.
  at::Tensor addend_abs = {};
};

struct RankStep {
  double loss_sum = 0;     // sum of this rank's micro-batch mean losses (unscaled)
  int64_t loss_count = 0;  // number of micro-batches in loss_sum
  double grad_norm = 0;    // the engine's global gradient norm (before clipping)
  // Largest |value| among the padding elements this rank holds (alignment / dp padding of flat
  // buffers, padded vocabulary rows) in parameters, master weights and optimizer state after the
  // step; padding must stay exactly zero.
  double padding_max_abs = 0;
  double loss_scale = 1;  // scale used in this step
  bool skipped = false;   // step skipped (overflow)
  std::vector<TensorPiece> pieces;
};

// Bytes held by one rank, by category, measured from its live buffers.
struct MemoryAccount {
  std::map<std::string, int64_t> bytes;  // params, grads, optimizer, master, padding, buffers_peak
};

struct RankObservations {
  int rank = 0;
  std::vector<RankStep> steps;
  std::vector<MemoryAccount> memory;  // one per step
  std::vector<Fingerprint> collectives;
  // collectives.size() after each step (one per step; empty when not recorded): call k belongs to
  // the first step whose mark exceeds k, so a collective finding names its step.
  std::vector<int64_t> collective_marks;
};

struct Observations {
  std::vector<RankObservations> ranks;
};

}  // namespace paradiff
