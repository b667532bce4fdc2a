// Pipeline plan: which layers each model chunk holds and the order in which a pipeline rank runs
// forward / backward passes of (chunk, micro-batch). Pure functions of the config.
//
// Chunks: pp * virtual_stages chunks in model order; chunk c lives on pipeline rank c % pp as its
// local chunk c / pp (Megatron's interleaving). The embedding is in chunk 0, the final norm, head
// and loss in the last chunk. Partition methods: uniform (remainder layers go to the first chunks,
// never dropped), parameters (contiguous split minimizing the largest chunk's parameter count,
// embedding and head included), or the explicit list.
#pragma once

#include <cstdint>
#include <vector>

#include "core/config.h"
#include "core/model_spec.h"
#include "kernels/faults.h"

namespace paradiff {

// Layers per chunk (length pp * virtual_stages), in model order.
std::vector<int64_t> PartitionLayers(const Config& cfg, const ModelSpec& spec,
                                     const FaultSet& faults);

struct PipelineOp {
  bool forward = true;
  int64_t chunk = 0;  // local chunk index on this rank
  int64_t micro = 0;  // micro-batch index within the step
};

// The ops pipeline rank `rank` runs in one step, in order (GPipe, 1F1B or interleaved 1F1B).
// Every (chunk, micro-batch) appears exactly once as a forward and once as a backward.
std::vector<PipelineOp> PipelineSchedule(const Config& cfg, int64_t rank);

}  // namespace paradiff
