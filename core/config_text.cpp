// Config <-> JSON text (config_json.h): the stable writer, text parsing (with duplicate-key
// detection) and file loading. The key-by-key reader is config_json.cpp.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "core/config_json.h"

namespace paradiff {
namespace {

using json = nlohmann::json;

// Builds the document in schema order; J is nlohmann::json or nlohmann::ordered_json. Each
// sub-object is built whole and then moved in (ordered_json's storage is a vector).
template <class J>
J Build(const Config& c) {
  J j = J::object();
  j["schema"] = c.schema;
  j["seed"] = c.seed;
  j["steps"] = c.steps;
  const ModelConfig& m = c.model;
  J model = J::object();
  model["kind"] = Name(m.kind);
  model["layers"] = m.layers;
  model["hidden"] = m.hidden;
  model["heads"] = m.heads;
  model["kv_heads"] = m.kv_heads;
  model["ffn"] = m.ffn;
  model["vocab"] = m.vocab;
  model["seq_len"] = m.seq_len;
  model["tied_embeddings"] = m.tied_embeddings;
  model["position_embeddings"] = m.position_embeddings;
  model["activation"] = Name(m.activation);
  j["model"] = std::move(model);
  J batch = J::object();
  batch["micro_batch"] = c.batch.micro_batch;
  batch["accumulation_steps"] = c.batch.accumulation_steps;
  j["batch"] = std::move(batch);
  const ParallelConfig& p = c.parallel;
  J parallel = J::object();
  parallel["world"] = p.world;
  parallel["tp"] = p.tp;
  parallel["pp"] = p.pp;
  parallel["dp"] = p.dp;
  parallel["sp"] = p.sp;
  parallel["virtual_stages"] = p.virtual_stages;
  parallel["schedule"] = Name(p.schedule);
  if (p.partition == PartitionMethod::kExplicit)
    parallel["partition"] = p.partition_layers;
  else
    parallel["partition"] = Name(p.partition);
  j["parallel"] = std::move(parallel);
  J zero = J::object();
  zero["stage"] = c.zero.stage;
  zero["bucket_elems"] = c.zero.bucket_elems;
  zero["align_elems"] = c.zero.align_elems;
  if (c.zero.shard_group != 0)
    zero["shard_group"] = c.zero.shard_group;  // absent: configs keep their text
  j["zero"] = std::move(zero);
  const PrecisionConfig& pr = c.precision;
  J ls = J::object();
  ls["mode"] = Name(pr.loss_scale.mode);
  ls["init"] = pr.loss_scale.init;
  ls["growth_factor"] = pr.loss_scale.growth_factor;
  ls["backoff"] = pr.loss_scale.backoff;
  ls["growth_interval"] = pr.loss_scale.growth_interval;
  ls["hysteresis"] = pr.loss_scale.hysteresis;
  ls["min"] = pr.loss_scale.min;
  J precision = J::object();
  precision["param"] = Name(pr.param);
  precision["compute"] = Name(pr.compute);
  precision["reduce"] = Name(pr.reduce);
  precision["accumulate"] = Name(pr.accumulate);
  precision["master_weights"] = pr.master_weights;
  precision["loss_scale"] = std::move(ls);
  j["precision"] = std::move(precision);
  const OptimizerConfig& o = c.optimizer;
  J opt = J::object();
  opt["kind"] = Name(o.kind);
  opt["lr"] = o.lr;
  if (o.schedule.kind != LrScheduleKind::kConstant) {  // absent = constant
    J sched = J::object();
    sched["kind"] = Name(o.schedule.kind);
    sched["warmup_steps"] = o.schedule.warmup_steps;
    sched["total_steps"] = o.schedule.total_steps;
    sched["min_ratio"] = o.schedule.min_ratio;
    opt["schedule"] = std::move(sched);
  }
  opt["momentum"] = o.momentum;
  opt["betas"] = J::array({o.beta1, o.beta2});
  opt["eps"] = o.eps;
  opt["weight_decay"] = o.weight_decay;
  j["optimizer"] = std::move(opt);
  j["clip_grad_norm"] = c.clip_grad_norm;
  J reload = J::object();
  reload["tp"] = c.checkpoint.reload.tp;
  reload["pp"] = c.checkpoint.reload.pp;
  reload["dp"] = c.checkpoint.reload.dp;
  reload["zero_stage"] = c.checkpoint.reload.zero_stage;
  J ckpt = J::object();
  ckpt["save_at"] = c.checkpoint.save_at;
  ckpt["reload"] = std::move(reload);
  j["checkpoint"] = std::move(ckpt);
  j["backend"] = Name(c.backend);
  j["faults"] = c.faults;
  if (!c.target_options.empty()) {  // absent when empty: configs without options keep their text
    J options = J::object();
    for (const auto& [name, text] : c.target_options) options[name] = J::parse(text);
    j["target_options"] = std::move(options);
  }
  return j;
}

// Reports duplicate object keys during parsing (nlohmann keeps the last one silently).
class DuplicateKeyTracker {
 public:
  explicit DuplicateKeyTracker(Status& st) : st_(st) {}
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        frames_.push_back({true, {}, ""});
        break;
      case json::parse_event_t::array_start:
        frames_.push_back({false, {}, "[]"});
        break;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames_.empty()) frames_.pop_back();
        break;
      case json::parse_event_t::key: {
        if (frames_.empty()) break;
        Frame& top = frames_.back();
        top.key = parsed.get<std::string>();
        if (!top.keys.insert(top.key).second) {
          const std::string path = CurrentPath();
          st_.Add(path, path + ": duplicate key");
        }
        break;
      }
      case json::parse_event_t::value:
        break;
    }
    return true;
  }

 private:
  struct Frame {
    bool object;
    std::set<std::string> keys;
    std::string key;
  };
  std::string CurrentPath() const {
    std::string path;
    for (const Frame& f : frames_) path = f.object ? KeyPath(path, f.key) : path + f.key;
    return path;
  }
  Status& st_;
  std::vector<Frame> frames_;
};

// Removes nlohmann's "[json.exception.parse_error.101] " prefix.
std::string StripExceptionId(const std::string& what) {
  const size_t close = what.find("] ");
  return what.rfind("[json.exception.", 0) == 0 && close != std::string::npos
             ? what.substr(close + 2)
             : what;
}

}  // namespace

StatusOr<Config> ParseConfig(const std::string& text) {
  // nlohmann's lexer reads a NUL as the end of input, so "{...}\0garbage" would parse as its
  // prefix; JSON allows no raw NUL anywhere (inside strings it is written \u0000).
  if (const size_t nul = text.find('\0'); nul != std::string::npos)
    return Status::Error("", "config: malformed JSON: at byte " + std::to_string(nul + 1) +
                                 ": a NUL character (JSON text holds none)");
  Status dups;
  json j;
  try {
    j = json::parse(text, DuplicateKeyTracker(dups), /*allow_exceptions=*/true);
  } catch (const json::parse_error& e) {
    return Status::Error("", "config: malformed JSON: at byte " + std::to_string(e.byte) + ": " +
                                 StripExceptionId(e.what()));
  } catch (const json::exception& e) {
    // Number overflow ("number overflow parsing '1e999'") carries no position; locate the number.
    const std::string message = StripExceptionId(e.what());
    const size_t open = message.find('\''), close = message.rfind('\'');
    const size_t at =
        open < close ? text.find(message.substr(open + 1, close - open - 1)) : std::string::npos;
    return Status::Error(
        "",
        "config: malformed JSON: " +
            (at == std::string::npos ? std::string() : "at byte " + std::to_string(at + 1) + ": ") +
            message);
  }
  StatusOr<Config> config = ConfigFromJson(j);
  if (dups.ok()) return config;
  dups.Merge(config.status());
  return dups;
}

nlohmann::json ConfigToJson(const Config& config) { return Build<json>(config); }

std::string WriteConfig(const Config& config) {
  return Build<nlohmann::ordered_json>(config).dump(2, ' ', /*ensure_ascii=*/false,
                                                    json::error_handler_t::replace) +
         "\n";
}

StatusOr<Config> LoadConfigFile(const std::string& path) {
  const std::string cannot = "config: cannot read \"" + path + "\": ";
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status)) return Status::Error("", cannot + "no such file");
  if (ec) return Status::Error("", cannot + ec.message());
  if (std::filesystem::is_directory(status)) return Status::Error("", cannot + "is a directory");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::Error("", cannot + (errno ? std::strerror(errno) : "cannot open"));
  std::string text;
  char buffer[4096];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigFileBytes)
      return Status::Error(
          "", cannot + "larger than " + std::to_string(kMaxConfigFileBytes) + " bytes");
  }
  if (in.bad()) return Status::Error("", cannot + "read error");
  return ParseConfig(text);
}

}  // namespace paradiff
