// FlatLayout: where each parameter lives in the engine's flat contiguous buffers, and how those
// buffers are partitioned across the data-parallel group (ZeRO). Parameters are laid out in
// ModelSpec order; each starts at a multiple of zero.align_elems; the total is padded to a multiple
// of dp * align_elems so every rank owns an equal, aligned shard [r * S, (r + 1) * S).
// Padding elements are zero and never updated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/model_spec.h"
#include "kernels/faults.h"

namespace paradiff {

struct FlatEntry {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // first element in the flat buffer
  int64_t numel = 0;
};

// A contiguous run of one parameter's elements inside a flat range.
struct FlatPiece {
  int entry = 0;             // index into FlatLayout::entries()
  int64_t param_offset = 0;  // first element within the parameter (flattened)
  int64_t flat_offset = 0;   // first element within the flat buffer
  int64_t count = 0;
};

class FlatLayout {
 public:
  FlatLayout(const ModelSpec& spec, int64_t align_elems, int64_t dp, const FaultSet& faults);

  const std::vector<FlatEntry>& entries() const { return entries_; }
  int EntryIndex(const std::string& name) const;  // -1 if absent
  int64_t data_end() const { return data_end_; }  // end of the last parameter
  int64_t padded() const { return padded_; }      // buffer size (multiple of dp * align)
  int64_t dp() const { return dp_; }

  // Rank r's shard of the flat buffer: [ShardBegin(r), ShardBegin(r) + ShardSize(r)).
  int64_t ShardBegin(int64_t r) const { return r * shard_size_; }
  int64_t ShardSize(int64_t /*r*/) const { return shard_size_; }
  // The correct even partition padded / dp, whatever faults do to the shards above.
  int64_t EvenShardSize() const { return padded_ / dp_; }

  // The parameter pieces that make up flat range [begin, end), in flat order (padding skipped).
  std::vector<FlatPiece> Pieces(int64_t begin, int64_t end) const;
  // Pieces of the given parameter entries (ascending entry order) intersected with [begin, end).
  std::vector<FlatPiece> Pieces(const std::vector<int>& entries, int64_t begin, int64_t end) const;

 private:
  std::vector<FlatEntry> entries_;
  int64_t data_end_ = 0;
  int64_t padded_ = 0;
  int64_t dp_ = 1;
  int64_t shard_size_ = 0;
};

}  // namespace paradiff
