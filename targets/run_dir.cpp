#include "targets/run_dir.h"

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/atomic_file.h"
#include "core/config_json.h"
#include "core/json_text.h"
#include "core/model_spec.h"
#include "kernels/data.h"
#include "kernels/numerics.h"
#include "kernels/param_init.h"
#include "targets/safetensors.h"

namespace paradiff {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::set<std::string> kKinds = {"param",   "master",     "grad",
                                      "exp_avg", "exp_avg_sq", "momentum"};

std::string Shape(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

bool Fail(ObservationError* err, const std::string& detail, int rank, const std::string& msg) {
  err->detail = detail;
  err->rank = rank;
  err->message = msg;
  return false;
}

// "o0,o1,..." -> the offsets; empty when it is not a list of integers.
std::vector<int64_t> ParseOffsets(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    try {
      size_t used = 0;
      out.push_back(std::stoll(item, &used));
      if (used != item.size()) return {};
    } catch (const std::exception&) {
      return {};
    }
  }
  return out;
}

// A block of `shape` (the logical tensor's) at per-dimension `offsets`, as the flat pieces it is:
// one per contiguous run, trailing dimensions the block spans whole merged into one run.
void BlockPieces(const std::string& kind, const std::string& tensor, const at::Tensor& block,
                 const std::vector<int64_t>& shape, const std::vector<int64_t>& offsets,
                 std::vector<TensorPiece>* out) {
  if (block.numel() == 0) return;
  const int64_t dims = static_cast<int64_t>(shape.size());
  std::vector<int64_t> stride(dims, 1);
  for (int64_t d = dims - 2; d >= 0; --d) stride[d] = stride[d + 1] * shape[d + 1];
  // Dimensions [inner, dims) form one contiguous run: all but the first of them whole.
  int64_t inner = dims - 1;
  while (inner > 0 && block.size(inner) == shape[inner]) --inner;
  int64_t run = 1;
  for (int64_t d = inner; d < dims; ++d) run *= block.size(d);
  const at::Tensor flat = block.contiguous().reshape({-1});
  const int64_t runs = block.numel() / run;
  for (int64_t k = 0; k < runs; ++k) {
    int64_t rest = k, logical = 0;  // k's index over the outer dimensions, last fastest
    for (int64_t d = inner - 1; d >= 0; --d) {
      logical += (offsets[d] + rest % block.size(d)) * stride[d];
      rest /= block.size(d);
    }
    logical += offsets[inner] * stride[inner];
    out->push_back({kind, tensor, logical, flat.narrow(0, k * run, run)});
  }
}

// Where one rank's partial pieces lie in its step's list: (first index, count) per tensor entry.
using PartialRanges = std::vector<std::pair<size_t, size_t>>;

std::string PieceName(const TensorPiece& p) {
  return p.kind + ":" + p.tensor + " at offset " + std::to_string(p.offset);
}

// See Note [Partial pieces]: each rank's partial pieces become the sum of the same piece over its
// tensor-parallel group, added in tp rank order in the pieces' dtype.
bool SumPartialPieces(const Config& cfg, const std::vector<std::vector<PartialRanges>>& partial,
                      Observations* obs, ObservationError* err, int64_t first) {
  const int64_t tp = cfg.parallel.tp;
  for (size_t lead = 0; lead < obs->ranks.size(); lead += tp) {
    for (size_t s = 0; s < obs->ranks[lead].steps.size(); ++s) {
      // piece name -> (rank in group -> piece)
      std::map<std::string, std::vector<TensorPiece*>> groups;
      for (int64_t k = 0; k < tp; ++k) {
        RankStep& st = obs->ranks[lead + k].steps[s];
        for (const auto& [begin, count] : partial[lead + k][s])
          for (size_t i = begin; i < begin + count; ++i) {
            auto& members = groups[PieceName(st.pieces[i]) + " of " +
                                   std::to_string(st.pieces[i].values.numel())];
            members.resize(tp, nullptr);
            members[k] = &st.pieces[i];
          }
      }
      for (const auto& [name, members] : groups) {
        for (int64_t k = 0; k < tp; ++k)
          if (members[k] == nullptr)
            return Fail(err, "bad_output", static_cast<int>(lead + k),
                        "rank " + std::to_string(lead + k) + " step " +
                            std::to_string(first + static_cast<int64_t>(s)) +
                            ": reports no partial piece " + name +
                            ", which another rank of its tensor-parallel group reports (a partial "
                            "piece is summed over the group: every rank reports its addend)");
        at::Tensor sum = members[0]->values.clone(), abs = members[0]->values.abs();
        for (int64_t k = 1; k < tp; ++k) {
          sum.add_(members[k]->values);
          abs.add_(members[k]->values.abs());
        }
        for (int64_t k = 0; k < tp; ++k) {
          members[k]->values = k == 0 ? sum : sum.clone();
          members[k]->addend_abs = abs;
        }
      }
    }
  }
  return true;
}

}  // namespace

Status WriteRunDir(const Config& cfg, const std::vector<std::string>& kinds, const std::string& dir,
                   const RunPhase& phase) {
  const int64_t first = phase.first_step, end = phase.end_step;
  std::error_code ec;
  fs::create_directories(fs::path(dir) / "data", ec);
  fs::remove_all(fs::path(dir) / "out", ec);
  fs::create_directories(fs::path(dir) / "out", ec);
  if (ec) return Status::Error("", "cannot create run dir " + dir + ": " + ec.message());
  Status st = WriteFileAtomic(dir + "/config.json", ConfigToJson(cfg).dump(2) + "\n");
  const ModelSpec spec = BuildModelSpec(cfg.model);
  json run = {{"protocol", 1},
              {"world", cfg.parallel.world},
              {"dp", cfg.parallel.dp},
              {"steps", end},
              {"micro_batch", cfg.batch.micro_batch},
              {"accumulation_steps", cfg.batch.accumulation_steps},
              {"micro_batches_per_step", MicroBatchesPerStep(cfg)},
              {"kinds", kinds},
              {"out_dir", "out"}};
  if (first > 0) run["first_step"] = first;
  if (!phase.save_checkpoint.empty()) run["save_checkpoint"] = phase.save_checkpoint;
  if (!phase.load_checkpoint.empty()) run["load_checkpoint"] = phase.load_checkpoint;
  SafeTensors init;
  for (const auto& ps : spec.params) {
    run["params"].push_back(ps.name);
    init.tensors[ps.name] =
        GenerateParam(ps, cfg.seed).to(ToScalarType(cfg.precision.param)).contiguous();
  }
  st.Merge(WriteFileAtomic(dir + "/run.json", run.dump(2) + "\n"));
  st.Merge(WriteSafeTensors(dir + "/init.safetensors", init));
  const int64_t M = MicroBatchesPerStep(cfg);
  for (int64_t s = first; s < end && st.ok(); ++s) {
    std::vector<at::Tensor> in, tg;
    for (int64_t g = 0; g < M; ++g) {
      MicroBatch mb = MakeMicroBatch(cfg, s, g);
      in.push_back(mb.inputs);
      tg.push_back(mb.targets);
    }
    SafeTensors data;
    data.tensors["inputs"] = at::stack(in);
    data.tensors["targets"] = at::stack(tg);
    st.Merge(WriteSafeTensors(dir + "/data/step" + std::to_string(s) + ".safetensors", data));
  }
  return st;
}

bool ReadObservations(const Config& cfg, const std::string& dir,
                      const std::vector<std::string>& kinds, Observations* obs,
                      ObservationError* err, const RunPhase& phase) {
  const ModelSpec spec = BuildModelSpec(cfg.model);
  const std::set<std::string> declared(kinds.begin(), kinds.end());
  const int64_t first = phase.first_step, end = phase.end_step;
  const int64_t n = end - first;                  // the phase's steps
  std::vector<std::set<std::string>> written(n);  // per step: the kinds some rank wrote
  obs->ranks.clear();
  std::vector<std::vector<PartialRanges>> partial;  // per rank, per step
  for (int r = 0; r < cfg.parallel.world; ++r) {
    const std::string stem = dir + "/out/rank" + std::to_string(r);
    std::ifstream f(stem + ".json");
    if (!f)
      return Fail(
          err, "no_output", r,
          "rank " + std::to_string(r) + " wrote no observations (" + stem + ".json is missing)");
    std::stringstream ss;
    ss << f.rdbuf();
    const json j = ParseJsonText(QuoteNonFiniteTokens(ss.str()));
    if (j.is_discarded() || !j.is_object() || !j.contains("steps") || !j["steps"].is_array())
      return Fail(err, "bad_output", r, stem + ".json is not a JSON object with a \"steps\" array");
    if (static_cast<int64_t>(j["steps"].size()) != n)
      return Fail(err, "bad_output", r,
                  "rank " + std::to_string(r) + " reported " + std::to_string(j["steps"].size()) +
                      " steps, the run has " + std::to_string(n) + " (steps " +
                      std::to_string(first) + ".." + std::to_string(end - 1) + ")");
    RankObservations ro;
    ro.rank = r;
    partial.emplace_back();
    for (int64_t s = first; s < end; ++s) {
      partial.back().emplace_back();
      const json& js = j["steps"][s - first];
      const std::string where = "rank " + std::to_string(r) + " step " + std::to_string(s);
      RankStep st;
      if (!js.is_object() || !js.contains("loss_sum") ||
          !JsonDouble(js["loss_sum"], &st.loss_sum) || !js.contains("loss_count") ||
          !js["loss_count"].is_number_integer() || !js.contains("grad_norm") ||
          !JsonDouble(js["grad_norm"], &st.grad_norm))
        return Fail(err, "bad_output", r,
                    where + ": needs loss_sum (number), loss_count (integer), grad_norm (number)");
      st.loss_count = js["loss_count"].get<int64_t>();
      const std::string path = stem + ".step" + std::to_string(s) + ".safetensors";
      if (!fs::exists(path)) return Fail(err, "no_output", r, where + ": " + path + " is missing");
      StatusOr<SafeTensors> file = ReadSafeTensors(path);
      if (!file.ok()) return Fail(err, "bad_output", r, where + ": " + file.status().ToString());
      for (const auto& [name, t] : file.value().tensors) {
        // KIND:TENSOR, or KIND:TENSOR#PART for one of several pieces of a tensor.
        const size_t colon = name.find(':');
        const std::string kind = name.substr(0, colon);
        const ParamSpec* ps = colon == std::string::npos
                                  ? nullptr
                                  : spec.Find(name.substr(colon + 1, name.find('#') - colon - 1));
        if (!kKinds.count(kind) || ps == nullptr)
          return Fail(err, "bad_output", r,
                      where + ": tensor '" + name + "' is not KIND:TENSOR[#PART] of this model");
        if (!declared.count(kind))
          return Fail(err, "bad_output", r,
                      where + ": tensor '" + name + "' is of kind " + kind +
                          ", which this run does not report (run.json kinds; the target file's "
                          "\"reports\")");
        written[s - first].insert(kind);
        if (!t.is_floating_point())
          return Fail(err, "bad_output", r,
                      where + ": " + name + " is not a floating-point tensor");
        TensorPiece piece{kind, ps->name, 0, t.reshape({-1})};
        const auto& meta = file.value().metadata;
        const auto part = meta.find("partial:" + name);
        if (part != meta.end() && part->second != "tp")
          return Fail(err, "bad_output", r,
                      where + ": metadata partial:" + name + " is '" + part->second +
                          "'; the one group a partial piece is summed over is \"tp\"");
        const size_t before = st.pieces.size();
        const auto added = [&] {  // the pieces of a partial entry, for SumPartialPieces
          if (part != meta.end())
            partial.back().back().push_back({before, st.pieces.size() - before});
        };
        auto off = meta.find("offset:" + name);
        auto block = meta.find("block:" + name);
        if (block != meta.end() && off != meta.end())
          return Fail(err, "bad_output", r,
                      where + ": " + name + " has both offset:" + name + " and block:" + name +
                          " metadata (one of them)");
        if (block != meta.end()) {
          const std::vector<int64_t> offsets = ParseOffsets(block->second);
          bool inside =
              offsets.size() == ps->shape.size() && t.dim() == static_cast<int64_t>(offsets.size());
          for (size_t d = 0; inside && d < offsets.size(); ++d)
            inside =
                offsets[d] >= 0 && offsets[d] + t.size(static_cast<int64_t>(d)) <= ps->shape[d];
          if (!inside)
            return Fail(err, "shape", r,
                        where + ": block " + name + " of shape " + Shape(t.sizes().vec()) +
                            " at offsets [" + block->second + "] is not a block of the " +
                            Shape(ps->shape) + " tensor (metadata block:" + name +
                            ": one integer offset per dimension)");
          BlockPieces(kind, ps->name, t, ps->shape, offsets, &st.pieces);
          added();
          continue;
        }
        if (off != meta.end()) {
          try {
            piece.offset = std::stoll(off->second);
          } catch (const std::exception&) {
            return Fail(err, "bad_output", r,
                        where + ": metadata offset:" + name + " is not an integer");
          }
          if (t.dim() != 1 || piece.offset < 0 || piece.offset + t.numel() > ps->numel())
            return Fail(err, "shape", r,
                        where + ": piece " + name + " of shape " + Shape(t.sizes().vec()) +
                            " at offset " + off->second + " is not a flat slice of the " +
                            std::to_string(ps->numel()) + "-element tensor");
        } else if (name.find('#') != std::string::npos) {
          return Fail(err, "bad_output", r,
                      where + ": " + name + " is a part (#) without offset:" + name +
                          " or block:" + name + " metadata");
        } else if (t.sizes().vec() != ps->shape) {
          return Fail(err, "shape", r,
                      where + ": " + name + " has shape " + Shape(t.sizes().vec()) +
                          ", the model's " + ps->name + " is " + Shape(ps->shape));
        }
        st.pieces.push_back(std::move(piece));
        added();
      }
      ro.steps.push_back(std::move(st));
    }
    obs->ranks.push_back(std::move(ro));
  }
  if (!SumPartialPieces(cfg, partial, obs, err, first)) return false;
  // A kind the target declares must come from some rank at every step (which ranks hold which
  // pieces is the tiling oracle's to judge).
  for (int64_t s = first; s < end; ++s)
    for (const auto& kind : kinds)
      if (!written[s - first].count(kind))
        return Fail(err, "no_output", -1,
                    "step " + std::to_string(s) + ": no rank wrote any " + kind +
                        " tensor, but the run reports " + kind +
                        " (run.json kinds; the target file's \"reports\")");
  return true;
}

}  // namespace paradiff
