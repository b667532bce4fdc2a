#include "kernels/checkpoint.h"

#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/atomic_file.h"
#include "core/config_json.h"
#include "core/json_text.h"
#include "core/model_spec.h"
#include "core/rng.h"

namespace paradiff {

namespace {

constexpr int kFormat = 1;

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// FNV-1a over the bytes, mixed: detects truncation and corruption (not an adversary).
uint64_t Checksum(const char* p, size_t n) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(p[i]);
    h *= 0x100000001B3ULL;
  }
  return Mix64(h ^ n);
}

at::ScalarType DtypeOf(const std::string& name, const std::string& where) {
  if (name == "float") return at::kFloat;
  if (name == "double") return at::kDouble;
  if (name == "c10::BFloat16") return at::kBFloat16;
  if (name == "c10::Half") return at::kHalf;
  throw CheckpointError(where + ": unknown dtype '" + name + "'");
}

std::string RankFile(int rank) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "rank%05d.bin", rank);
  return buf;
}

}  // namespace

nlohmann::json WriteCheckpointShard(const std::string& dir, const CheckpointShard& shard) {
  std::string bytes;
  nlohmann::json pieces = nlohmann::json::array();
  for (const auto& p : shard.pieces) {
    at::Tensor v = p.values.contiguous();
    pieces.push_back({{"kind", p.kind},
                      {"tensor", p.tensor},
                      {"offset", p.offset},
                      {"count", v.numel()},
                      {"dtype", std::string(v.dtype().name())},
                      {"flat_offset", p.flat_offset},
                      {"data", bytes.size()}});
    bytes.append(static_cast<const char*>(v.data_ptr()), v.numel() * v.element_size());
  }
  const std::string file = RankFile(shard.rank);
  const Status s = WriteFileAtomic(dir + "/" + file, bytes);
  if (!s.ok()) throw CheckpointError("checkpoint save: " + s.ToString());
  return {{"rank", shard.rank},         {"file", file},
          {"bytes", bytes.size()},      {"checksum", Hex(Checksum(bytes.data(), bytes.size()))},
          {"data_end", shard.data_end}, {"pieces", pieces}};
}

void WriteCheckpointManifest(const std::string& dir, const Config& cfg, int64_t step,
                             int64_t updates, const nlohmann::json& scaler,
                             std::vector<nlohmann::json> ranks) {
  nlohmann::json m = {{"paradiff_checkpoint", kFormat},
                      {"step", step},
                      {"updates", updates},
                      {"config", ConfigToJson(cfg)},
                      {"scaler", scaler},
                      {"layout",
                       {{"tp", cfg.parallel.tp},
                        {"pp", cfg.parallel.pp},
                        {"dp", cfg.parallel.dp},
                        {"zero_stage", cfg.zero.stage},
                        {"world", cfg.parallel.world}}},
                      {"ranks", ranks}};
  const Status s = WriteFileAtomic(dir + "/manifest.json", m.dump(1) + "\n");
  if (!s.ok()) throw CheckpointError("checkpoint save: " + s.ToString());
}

CheckpointReader::CheckpointReader(const std::string& dir) : dir_(dir) {
  const std::string mpath = dir + "/manifest.json";
  std::ifstream in(mpath);
  if (!in)
    throw CheckpointError(mpath + ": missing (not a checkpoint, or its save did not finish)");
  std::stringstream ss;
  ss << in.rdbuf();
  manifest_ = ParseJsonText(ss.str());
  if (manifest_.is_discarded() || !manifest_.is_object())
    throw CheckpointError(mpath + ": corrupt JSON");
  if (manifest_.value("paradiff_checkpoint", 0) != kFormat)
    throw CheckpointError(mpath + ": not a paradiff checkpoint of format " +
                          std::to_string(kFormat));
  for (const char* k : {"step", "updates", "config", "layout", "scaler", "ranks"})
    if (!manifest_.contains(k)) throw CheckpointError(mpath + ": missing key '" + k + "'");
  const auto& ranks = manifest_["ranks"];
  if (static_cast<int64_t>(ranks.size()) != manifest_["layout"].value("world", int64_t{-1}))
    throw CheckpointError(mpath + ": lists " + std::to_string(ranks.size()) +
                          " rank files for world " +
                          std::to_string(manifest_["layout"].value("world", int64_t{-1})));
  for (size_t r = 0; r < ranks.size(); ++r) {
    const std::string file = dir + "/" + ranks[r].value("file", std::string("?"));
    std::ifstream f(file, std::ios::binary);
    if (!f) throw CheckpointError(file + ": missing rank file");
    std::vector<char> data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    const int64_t want = ranks[r].value("bytes", int64_t{-1});
    if (static_cast<int64_t>(data.size()) != want)
      throw CheckpointError(file + ": " + std::to_string(data.size()) + " bytes, manifest says " +
                            std::to_string(want) + " (truncated?)");
    if (Hex(Checksum(data.data(), data.size())) != ranks[r].value("checksum", std::string()))
      throw CheckpointError(file + ": checksum mismatch (corrupted)");
    for (const auto& p : ranks[r]["pieces"]) {
      Loc loc{static_cast<int>(r),          p.at("offset").get<int64_t>(),
              p.at("count").get<int64_t>(), p.at("flat_offset").get<int64_t>(),
              p.at("data").get<int64_t>(),  p.at("dtype").get<std::string>()};
      const int64_t bytes =
          loc.count * static_cast<int64_t>(c10::elementSize(DtypeOf(loc.dtype, file)));
      if (loc.data < 0 || loc.count < 0 || loc.data + bytes > want)
        throw CheckpointError(file + ": piece " + p.at("kind").get<std::string>() + ":" +
                              p.at("tensor").get<std::string>() + " lies outside the file");
      index_[p.at("kind").get<std::string>() + ":" + p.at("tensor").get<std::string>()].push_back(
          loc);
    }
    files_.push_back(std::move(data));
  }
}

void CheckpointReader::CheckModel(const ModelConfig& model) const {
  StatusOr<Config> saved = ConfigFromJson(manifest_["config"]);
  if (!saved.ok())
    throw CheckpointError(dir_ + "/manifest.json: config: " + saved.status().ToString());
  const ModelSpec want = BuildModelSpec(model), have = BuildModelSpec(saved.value().model);
  for (const auto& p : want.params) {
    const ParamSpec* q = have.Find(p.name);
    if (q == nullptr || q->shape != p.shape)
      throw CheckpointError(dir_ + "/manifest.json: model mismatch: parameter " + p.name +
                            (q ? " has another shape" : " is not in the checkpoint"));
  }
}

bool CheckpointReader::Has(const std::string& kind) const {
  for (const auto& [key, locs] : index_)
    if (key.compare(0, kind.size() + 1, kind + ":") == 0) return true;
  return false;
}

void CheckpointReader::Read(const std::string& kind, const std::string& tensor, int64_t offset,
                            at::Tensor dst, bool drop_uneven_tail) const {
  const std::string key = kind + ":" + tensor;
  const int64_t n = dst.numel();
  std::vector<char> covered(static_cast<size_t>(n), 0);
  auto it = index_.find(key);
  const int64_t old_dp = manifest_["layout"].value("dp", int64_t{1});
  if (it != index_.end()) {
    for (const Loc& loc : it->second) {
      const int64_t lo = std::max(offset, loc.offset),
                    hi = std::min(offset + n, loc.offset + loc.count);
      if (lo >= hi) continue;
      int64_t count = hi - lo;
      if (drop_uneven_tail) {
        // BUG (zoo: ckpt.reshard_drops_tail): equal pieces of floor(data_end / dp); the rest of
        // each saving rank's buffer is never read.
        const int64_t data_end = manifest_["ranks"][loc.rank_entry].value("data_end", int64_t{0});
        const int64_t cut = data_end / old_dp * old_dp;
        const int64_t first_flat = loc.flat_offset + (lo - loc.offset);
        count = std::max<int64_t>(0, std::min(count, cut - first_flat));
        for (int64_t i = lo + count; i < hi; ++i) covered[i - offset] = 1;  // lost, not missing
        if (count == 0) continue;
      }
      const auto dt = DtypeOf(loc.dtype, key);
      const int64_t esize = static_cast<int64_t>(c10::elementSize(dt));
      const char* bytes = files_[loc.rank_entry].data() + loc.data + (lo - loc.offset) * esize;
      if (dt == dst.scalar_type() && dst.is_contiguous()) {  // nothing converts: no operator
        std::memcpy(static_cast<char*>(dst.data_ptr()) + (lo - offset) * esize, bytes,
                    count * esize);
      } else {
        at::Tensor src = at::empty({count}, at::TensorOptions().dtype(dt));
        std::memcpy(src.data_ptr(), bytes, count * esize);
        dst.narrow(0, lo - offset, count).copy_(src);
      }
      for (int64_t i = lo; i < lo + count; ++i) covered[i - offset] = 1;
    }
  }
  for (int64_t i = 0; i < n; ++i)
    if (!covered[i])
      throw CheckpointError(dir_ + ": no rank file holds " + key + "[" +
                            std::to_string(offset + i) + "]");
}

void ConsolidateCheckpoint(const std::string& dir, const std::string& out) {
  CheckpointReader reader(dir);
  StatusOr<Config> cfg = ConfigFromJson(reader.manifest()["config"]);
  if (!cfg.ok()) throw CheckpointError(dir + "/manifest.json: config: " + cfg.status().ToString());
  const ModelSpec spec = BuildModelSpec(cfg.value().model);
  const std::string kind = reader.Has("master") ? "master" : "param";
  nlohmann::json tensors = nlohmann::json::array();
  std::string data;
  for (const auto& p : spec.params) {
    at::Tensor t = at::empty({p.numel()}, at::kFloat);
    reader.Read(kind, p.name, 0, t);
    tensors.push_back({{"name", p.name}, {"shape", p.shape}, {"offset", data.size()}});
    data.append(static_cast<const char*>(t.data_ptr()), t.numel() * sizeof(float));
  }
  const std::string header =
      nlohmann::json{{"tensors", tensors}, {"step", reader.step()}, {"source", kind}}.dump();
  std::string file = "PDCKPT1\n";
  const uint64_t len = header.size();
  file.append(reinterpret_cast<const char*>(&len), sizeof len);
  file += header;
  file += data;
  const Status s = WriteFileAtomic(out, file);
  if (!s.ok()) throw CheckpointError("consolidate: " + s.ToString());
}

}  // namespace paradiff
