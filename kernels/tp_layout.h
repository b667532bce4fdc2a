// Tensor-parallel layout (Megatron style): how tensor-parallel rank r holds each logical
// parameter. Every logical tensor is viewed as a matrix [rows, cols] (1-D: [numel, 1]); a rank's
// local tensor is the concatenation of some row runs restricted to one column range, followed by
// `pad_rows` zero rows that belong to no logical element (vocabulary padding).
//   column-parallel (split by output rows): attn.q, attn.kv (key / value heads; replicated across
//     groups of tp / kv_heads ranks when kv_heads < tp), mlp.fc1 / gate / up (weights and biases)
//   row-parallel (split by input columns): attn.proj.weight, mlp.fc2.weight
//   vocabulary-parallel (rows, padded to PaddedVocab): embed.wte, head.lm_head.weight
//   replicated: norms, row-parallel biases, embed.wpe
//   exact_linear: embed.in.weight and blocks.i.linear.weight row-parallel, head.out.weight
//     column-parallel (kernels/model.cpp, see Note [Exact tensor parallelism])
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/model_spec.h"

namespace paradiff {

// The vocabulary is padded to a multiple of kVocabPadMultiple * tp when tp > 1 (Megatron's
// make-vocab-size-divisible-by), so every vocabulary shard has the same number of rows.
inline constexpr int64_t kVocabPadMultiple = 4;
int64_t PaddedVocab(const ModelConfig& m, int64_t tp);

enum class TpReplication {
  kSharded,     // each element on exactly one tp rank (tp = 1: everything)
  kReplicated,  // identical on every tp rank
  kShared,      // identical within a kv share group (kv_heads < tp): tp / kv_heads ranks
};

struct TpShard {
  const ParamSpec* spec = nullptr;  // the logical parameter
  std::vector<int64_t> local_shape;
  std::vector<std::pair<int64_t, int64_t>> row_runs;  // {first logical row, rows}
  int64_t col_begin = 0, cols = 0;                    // local column range
  int64_t pad_rows = 0;
  TpReplication rep = TpReplication::kSharded;
  int64_t numel() const;
  // Calls fn(local_offset, logical_offset, count) for the logical runs of local elements
  // [local_begin, local_begin + count), in order; padding rows are skipped.
  void ForEachLogicalRun(int64_t local_begin, int64_t count,
                         const std::function<void(int64_t, int64_t, int64_t)>& fn) const;
};

// One entry per ModelSpec parameter, same order.
std::vector<TpShard> BuildTpShards(const ModelSpec& spec, const ModelConfig& model, int64_t tp,
                                   int64_t tp_rank);

// The kv share group of a tp rank when kv_heads < tp (the kv head it holds), else -1.
int64_t KvShareGroup(const ModelConfig& model, int64_t tp, int64_t tp_rank);

}  // namespace paradiff
