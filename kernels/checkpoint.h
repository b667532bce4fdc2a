// Sharded checkpoints. Every rank writes the state it owns as pieces of logical tensors (the same
// {kind, tensor, logical offset} addressing as observations), so a checkpoint is independent of
// the layout that wrote it and any layout can load it by asking for the logical ranges it holds.
//
// On disk (DIR/):
//   rank<r>.bin      raw bytes of rank r's pieces, concatenated
//   manifest.json    {"paradiff_checkpoint": 1, "step", "updates", "config", "layout", "scaler",
//                     "ranks": [{"rank", "file", "bytes", "checksum", "data_end", "pieces":
//                     [{"kind", "tensor", "offset", "count", "dtype", "flat_offset", "data"}]}]}
// Every file is written atomically (core/atomic_file.h) and the manifest last: a save killed
// midway leaves no manifest, and a directory without one never loads. The manifest records each
// rank file's size and checksum; a truncated or corrupted file, a piece outside its tensor, a
// missing range or a different model is an error naming the file and what is wrong.
#pragma once

#include <ATen/core/Tensor.h>

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config.h"

namespace paradiff {

class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One rank's part of a save.
struct CheckpointShard {
  struct Piece {
    std::string kind, tensor;
    int64_t offset = 0;       // logical element offset
    int64_t flat_offset = 0;  // where the piece starts in the saving rank's flat buffer
    at::Tensor values;        // flat
  };
  int rank = 0;
  int64_t data_end = 0;  // the saving rank's flat buffer data size (for resharding)
  std::vector<Piece> pieces;
};

// Writes DIR/rank<r>.bin atomically; returns its manifest entry.
nlohmann::json WriteCheckpointShard(const std::string& dir, const CheckpointShard& shard);
// Writes DIR/manifest.json atomically, after every shard is on disk.
void WriteCheckpointManifest(const std::string& dir, const Config& cfg, int64_t step,
                             int64_t updates, const nlohmann::json& scaler,
                             std::vector<nlohmann::json> ranks);

// A loaded, verified checkpoint.
class CheckpointReader {
 public:
  explicit CheckpointReader(const std::string& dir);  // throws CheckpointError
  const std::string& dir() const { return dir_; }
  const nlohmann::json& manifest() const { return manifest_; }
  int64_t step() const { return manifest_.at("step").get<int64_t>(); }
  // Checks that the checkpoint holds the same logical model as `model` (names the differing field).
  void CheckModel(const ModelConfig& model) const;
  // Fills `dst` (flat, any float dtype) with elements [offset, offset + dst.numel()) of
  // kind:tensor; throws CheckpointError if an element is in no piece. `drop_uneven_tail` reads the
  // way the zoo's ckpt.reshard_drops_tail loader does: each saving rank's flat buffer is cut into
  // dp equal pieces of floor(data_end / dp) and the short last piece is lost (left as it is in
  // dst).
  void Read(const std::string& kind, const std::string& tensor, int64_t offset, at::Tensor dst,
            bool drop_uneven_tail = false) const;
  bool Has(const std::string& kind) const;

 private:
  struct Loc {
    int rank_entry;
    int64_t offset, count, flat_offset, data;
    std::string dtype;
  };
  std::string dir_;
  nlohmann::json manifest_;
  std::vector<std::vector<char>> files_;           // per rank entry
  std::map<std::string, std::vector<Loc>> index_;  // "kind:tensor" -> pieces
};

// `paradiff ckpt consolidate`: one unsharded float32 state (master weights where present, else
// parameters), padding removed: "PDCKPT1\n", an 8-byte little-endian header length, a JSON header
// {"tensors": [{"name", "shape", "offset"}], "step"}, then the float32 data.
void ConsolidateCheckpoint(const std::string& dir, const std::string& out);

}  // namespace paradiff
