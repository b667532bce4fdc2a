// Config <-> JSON (config_json.h): the strict key-by-key reader ConfigFromJson. Writing, text
// parsing and file loading are in config_text.cpp.
#include "core/config_json.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace paradiff {
namespace {

using json = nlohmann::json;

// Integers written as JSON floats (1e3, 2.0) are accepted when integral and exactly representable.
constexpr double kMaxExactDoubleInt = 9007199254740992.0;  // 2^53

// "got ..." part of a type error: numbers show their value, everything else its JSON type.
std::string Got(const json& v) { return v.is_number() ? v.dump() : std::string(v.type_name()); }

void TypeError(Status& st, const std::string& path, const char* expected, const json& v) {
  st.Add(path, path + ": expected " + expected + ", got " + Got(v));
}

bool ReadInt(const json& v, const std::string& path, Status& st, int64_t& out) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      TypeError(st, path, "an integer within int64", v);
      return false;
    }
    out = static_cast<int64_t>(u);
    return true;
  }
  if (v.is_number_integer()) {
    out = v.get<int64_t>();
    return true;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d != std::trunc(d)) {
      TypeError(st, path, "an integer", v);
      return false;
    }
    if (std::fabs(d) > kMaxExactDoubleInt) {
      TypeError(st, path, "an integer within int64", v);
      return false;
    }
    out = static_cast<int64_t>(d);
    return true;
  }
  TypeError(st, path, "an integer", v);
  return false;
}

bool ReadSeed(const json& v, const std::string& path, Status& st, uint64_t& out) {
  constexpr const char* kWhat = "a non-negative integer that fits in 64 bits";
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d == std::trunc(d) && d >= 0 && d <= kMaxExactDoubleInt) {
      out = static_cast<uint64_t>(d);
      return true;
    }
  }
  TypeError(st, path, kWhat, v);
  return false;
}

bool ReadDouble(const json& v, const std::string& path, Status& st, double& out) {
  if (!v.is_number()) {
    TypeError(st, path, "a number", v);
    return false;
  }
  out = v.get<double>();
  return true;
}

// Reads an enum by its name in `table` (core/config.h); JSON does not accept the names of
// `excluded` (fp64, an "explicit" partition string).
template <class E, size_t N>
bool ReadEnum(const json& v, const std::string& path, Status& st, const Spelling<E> (&table)[N],
              E& out, std::initializer_list<E> excluded = {}) {
  auto accepted = [&](E e) {
    return std::find(excluded.begin(), excluded.end(), e) == excluded.end();
  };
  std::string names;
  for (const auto& s : table) {
    if (accepted(s.value)) names += std::string(names.empty() ? "" : ", ") + s.name;
  }
  if (!v.is_string()) {
    TypeError(st, path, ("a string (one of " + names + ")").c_str(), v);
    return false;
  }
  const std::optional<E> e = ParseIn(table, v.get_ref<const std::string&>());
  if (!e || !accepted(*e)) {
    st.Add(path, path + ": unknown value " + v.dump() + " (expected one of " + names + ")");
    return false;
  }
  out = *e;
  return true;
}

// Reads the keys of one JSON object; Finish() reports every key that no accessor asked for.
class ObjectReader {
 public:
  ObjectReader(const json& obj, std::string path, Status& st)
      : obj_(obj), path_(std::move(path)), st_(st) {}

  // The value at key, or nullptr when omitted. Marks the key as known.
  const json* Find(const char* key) {
    known_.insert(key);
    auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  std::string Path(const char* key) const { return KeyPath(path_, key); }
  Status& status() { return st_; }

  bool Int(const char* key, int64_t& out) {
    const json* v = Find(key);
    return v && ReadInt(*v, Path(key), st_, out);
  }
  void Double(const char* key, double& out) {
    if (const json* v = Find(key)) ReadDouble(*v, Path(key), st_, out);
  }
  void Bool(const char* key, bool& out) {
    const json* v = Find(key);
    if (!v) return;
    if (v->is_boolean())
      out = v->get<bool>();
    else
      TypeError(st_, Path(key), "a boolean", *v);
  }
  template <class E, size_t N>
  void Enum(const char* key, const Spelling<E> (&table)[N], E& out,
            std::initializer_list<E> excluded = {}) {
    if (const json* v = Find(key)) ReadEnum(*v, Path(key), st_, table, out, excluded);
  }
  // A nested object, or nullptr when omitted or of the wrong type (then an error is recorded).
  const json* Object(const char* key) {
    const json* v = Find(key);
    if (v && !v->is_object()) {
      TypeError(st_, Path(key), "an object", *v);
      return nullptr;
    }
    return v;
  }
  void Finish() {
    for (auto it = obj_.begin(); it != obj_.end(); ++it) {
      if (known_.count(it.key())) continue;
      const std::string path = KeyPath(path_, it.key());
      st_.Add(path, path + ": unknown key");
    }
  }

 private:
  const json& obj_;
  std::string path_;
  Status& st_;
  std::set<std::string> known_;
};

void ReadModel(ObjectReader r, ModelConfig& m) {
  r.Enum("kind", kModelKindNames, m.kind);
  r.Int("layers", m.layers);
  r.Int("hidden", m.hidden);
  r.Int("heads", m.heads);
  r.Int("kv_heads", m.kv_heads);
  r.Int("ffn", m.ffn);
  r.Int("vocab", m.vocab);
  r.Int("seq_len", m.seq_len);
  r.Bool("tied_embeddings", m.tied_embeddings);
  r.Bool("position_embeddings", m.position_embeddings);
  r.Enum("activation", kActivationNames, m.activation);
  r.Finish();
}

void ReadPartition(const json& v, const std::string& path, Status& st, ParallelConfig& p) {
  if (v.is_string()) {
    if (ReadEnum(v, path, st, kPartitionNames, p.partition, {PartitionMethod::kExplicit}))
      p.partition_layers.clear();
    return;
  }
  if (!v.is_array()) {
    TypeError(st, path, "\"uniform\", \"parameters\" or an array of integers", v);
    return;
  }
  std::vector<int64_t> layers(v.size());
  bool ok = true;
  for (size_t i = 0; i < v.size(); ++i)
    ok &= ReadInt(v[i], path + "[" + std::to_string(i) + "]", st, layers[i]);
  if (!ok) return;
  p.partition = PartitionMethod::kExplicit;
  p.partition_layers = std::move(layers);
}

void ReadParallel(ObjectReader r, ParallelConfig& p) {
  const bool has_world = r.Int("world", p.world);
  r.Int("tp", p.tp);
  r.Int("pp", p.pp);
  const bool has_dp = r.Int("dp", p.dp);
  r.Bool("sp", p.sp);
  r.Int("virtual_stages", p.virtual_stages);
  r.Enum("schedule", kScheduleNames, p.schedule);
  if (const json* v = r.Find("partition")) ReadPartition(*v, r.Path("partition"), r.status(), p);
  r.Finish();
  // Derivations of config_json.h; on overflow or a non-divisible world nothing is derived and
  // Validate reports the mismatch.
  int64_t tp_pp = 0, all = 0;
  const bool tp_pp_ok = p.tp >= 1 && p.pp >= 1 && !__builtin_mul_overflow(p.tp, p.pp, &tp_pp);
  if (!has_world) {
    if (tp_pp_ok && !__builtin_mul_overflow(tp_pp, p.dp, &all)) p.world = all;
  } else if (!has_dp && tp_pp_ok && p.world % tp_pp == 0) {
    p.dp = p.world / tp_pp;
  }
}

void ReadLossScale(ObjectReader r, LossScaleConfig& l) {
  r.Enum("mode", kLossScaleModeNames, l.mode);
  r.Double("init", l.init);
  r.Double("growth_factor", l.growth_factor);
  r.Double("backoff", l.backoff);
  r.Int("growth_interval", l.growth_interval);
  r.Int("hysteresis", l.hysteresis);
  r.Double("min", l.min);
  r.Finish();
}

void ReadPrecision(ObjectReader r, PrecisionConfig& p) {
  r.Enum("param", kDTypeNames, p.param, {DType::kFp64});
  r.Enum("compute", kDTypeNames, p.compute, {DType::kFp64});
  r.Enum("reduce", kDTypeNames, p.reduce, {DType::kFp64});
  r.Enum("accumulate", kDTypeNames, p.accumulate, {DType::kFp64});
  r.Bool("master_weights", p.master_weights);
  if (const json* v = r.Object("loss_scale"))
    ReadLossScale(ObjectReader(*v, r.Path("loss_scale"), r.status()), p.loss_scale);
  r.Finish();
}

void ReadBetas(const json& v, const std::string& path, Status& st, OptimizerConfig& o) {
  constexpr const char* kExpected = "an array of 2 numbers [beta1, beta2]";
  if (!v.is_array()) {
    TypeError(st, path, kExpected, v);
    return;
  }
  if (v.size() != 2) {
    st.Add(path,
           path + ": expected " + kExpected + ", got an array of " + std::to_string(v.size()));
    return;
  }
  double b1 = o.beta1, b2 = o.beta2;
  const bool ok1 = ReadDouble(v[0], path + "[0]", st, b1);
  const bool ok2 = ReadDouble(v[1], path + "[1]", st, b2);
  if (ok1 && ok2) {
    o.beta1 = b1;
    o.beta2 = b2;
  }
}

void ReadOptimizer(ObjectReader r, OptimizerConfig& o) {
  r.Enum("kind", kOptimizerNames, o.kind);
  r.Double("lr", o.lr);
  if (const json* v = r.Object("schedule")) {
    ObjectReader s(*v, r.Path("schedule"), r.status());
    s.Enum("kind", kLrScheduleNames, o.schedule.kind);
    s.Int("warmup_steps", o.schedule.warmup_steps);
    s.Int("total_steps", o.schedule.total_steps);
    s.Double("min_ratio", o.schedule.min_ratio);
    s.Finish();
  }
  r.Double("momentum", o.momentum);
  if (const json* v = r.Find("betas")) ReadBetas(*v, r.Path("betas"), r.status(), o);
  r.Double("eps", o.eps);
  r.Double("weight_decay", o.weight_decay);
  r.Finish();
}

void ReadCheckpoint(ObjectReader r, CheckpointConfig& c) {
  r.Int("save_at", c.save_at);
  if (const json* v = r.Object("reload")) {
    ObjectReader reload(*v, r.Path("reload"), r.status());
    reload.Int("tp", c.reload.tp);
    reload.Int("pp", c.reload.pp);
    reload.Int("dp", c.reload.dp);
    reload.Int("zero_stage", c.reload.zero_stage);
    reload.Finish();
  }
  r.Finish();
}

void ReadFaults(const json& v, Status& st, std::vector<std::string>& faults) {
  if (!v.is_array()) {
    TypeError(st, "faults", "an array of fault names", v);
    return;
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].is_string())
      names.push_back(v[i].get<std::string>());
    else
      TypeError(st, "faults[" + std::to_string(i) + "]", "a string", v[i]);
  }
  if (names.size() == v.size()) faults = std::move(names);
}

void ReadTargetOptions(const json& v, Status& st, std::map<std::string, std::string>& out) {
  if (!v.is_object()) {
    TypeError(st, "target_options", "an object of option names to scalar values", v);
    return;
  }
  for (const auto& [name, value] : v.items()) {
    const std::string path = KeyPath("target_options", name);
    if (value.is_object() || value.is_array() || value.is_null())
      TypeError(st, path, "a scalar (boolean, number or string)", value);
    else
      out[name] = value.dump();
  }
}

}  // namespace

std::string KeyPath(const std::string& path, const std::string& key) {
  const bool plain = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
  });
  const std::string k =
      plain ? key : json(key).dump(-1, ' ', false, json::error_handler_t::replace);
  return path.empty() ? k : path + "." + k;
}

StatusOr<Config> ConfigFromJson(const nlohmann::json& j) {
  Status st;
  if (!j.is_object()) {
    return Status::Error("", std::string("config: expected a JSON object, got ") + j.type_name());
  }
  Config c;
  ObjectReader r(j, "", st);
  r.Int("schema", c.schema);
  if (const json* v = r.Find("seed")) ReadSeed(*v, "seed", st, c.seed);
  r.Int("steps", c.steps);
  if (const json* v = r.Object("model")) ReadModel(ObjectReader(*v, "model", st), c.model);
  if (const json* v = r.Object("batch")) {
    ObjectReader batch(*v, "batch", st);
    batch.Int("micro_batch", c.batch.micro_batch);
    batch.Int("accumulation_steps", c.batch.accumulation_steps);
    batch.Finish();
  }
  if (const json* v = r.Object("parallel"))
    ReadParallel(ObjectReader(*v, "parallel", st), c.parallel);
  if (const json* v = r.Object("zero")) {
    ObjectReader zero(*v, "zero", st);
    zero.Int("stage", c.zero.stage);
    zero.Int("bucket_elems", c.zero.bucket_elems);
    zero.Int("align_elems", c.zero.align_elems);
    zero.Int("shard_group", c.zero.shard_group);
    zero.Finish();
  }
  if (const json* v = r.Object("precision"))
    ReadPrecision(ObjectReader(*v, "precision", st), c.precision);
  if (const json* v = r.Object("optimizer"))
    ReadOptimizer(ObjectReader(*v, "optimizer", st), c.optimizer);
  r.Double("clip_grad_norm", c.clip_grad_norm);
  if (const json* v = r.Object("checkpoint"))
    ReadCheckpoint(ObjectReader(*v, "checkpoint", st), c.checkpoint);
  r.Enum("backend", kBackendNames, c.backend);
  if (const json* v = r.Find("faults")) ReadFaults(*v, st, c.faults);
  if (const json* v = r.Find("target_options")) ReadTargetOptions(*v, st, c.target_options);
  r.Finish();
  if (!st.ok()) return st;
  return c;
}

}  // namespace paradiff
