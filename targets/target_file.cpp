#include "targets/target_file.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/config_json.h"
#include "core/json_text.h"
#include "sut/phases.h"

namespace paradiff {

namespace {

using nlohmann::json;

const std::vector<std::string> kPlaceholders = {"{run_dir}", "{target_dir}", "{world}"};

template <class T>
bool Has(const std::vector<T>& v, const T& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// Reads the fields of one JSON object, recording an error per broken rule.
class Reader {
 public:
  Reader(const json& j, std::string prefix, Status* st)
      : j_(j), prefix_(std::move(prefix)), st_(st) {}
  void Error(const std::string& field, const std::string& rule) {
    st_->Merge(Status::Error(prefix_ + field, prefix_ + field + ": " + rule));
  }
  void Unknown(const std::set<std::string>& known) {
    for (const auto& [k, v] : j_.items())
      if (!known.count(k))
        Error(k, "unknown field (known: " + Join({known.begin(), known.end()}) + ")");
  }
  bool Strings(const std::string& k, std::vector<std::string>& out,
               const std::vector<std::string>& allowed) {
    if (!j_.contains(k)) return false;
    const json& v = j_[k];
    if (!v.is_array() ||
        !std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_string(); })) {
      Error(k, "must be an array of strings");
      return false;
    }
    out.clear();
    for (const auto& x : v) {
      const std::string s = x.get<std::string>();
      if (!allowed.empty() && !Has(allowed, s))
        Error(k, "'" + s + "' is not one of " + Join(allowed));
      out.push_back(s);
    }
    return true;
  }
  void Int(const std::string& k, int64_t& out, int64_t lo, int64_t hi) {
    if (!j_.contains(k)) return;
    if (!j_[k].is_number_integer() || j_[k].get<int64_t>() < lo || j_[k].get<int64_t>() > hi)
      return Error(
          k, "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    out = j_[k].get<int64_t>();
  }
  void Bool(const std::string& k, bool& out) {
    if (!j_.contains(k)) return;
    if (!j_[k].is_boolean()) return Error(k, "must be true or false");
    out = j_[k].get<bool>();
  }

 private:
  const json& j_;
  std::string prefix_;
  Status* st_;
};

void CheckTemplate(Reader& r, const std::string& field, const std::vector<std::string>& argv) {
  for (const auto& a : argv) {
    for (size_t p = a.find('{'); p != std::string::npos; p = a.find('{', p + 1)) {
      const size_t e = a.find('}', p);
      const std::string ph = e == std::string::npos ? a.substr(p) : a.substr(p, e - p + 1);
      if (!Has(kPlaceholders, ph))
        r.Error(field, "unknown placeholder " + ph + " (known: " + Join(kPlaceholders) + ")");
    }
  }
}

DType ParseDType(Reader& r, const json& p, const char* k, Status* st) {
  if (!p.contains(k)) return DType::kFp32;
  for (DType d : {DType::kFp32, DType::kBf16, DType::kFp16})
    if (p[k] == Name(d)) return d;
  r.Error(k, "must be one of fp32, bf16, fp16");
  (void)st;
  return DType::kFp32;
}

// "options": {"NAME": [scalar, ...] | {"values": [scalar, ...], "divides": "dp", "zero_stages":
// [S, ...], "requires": {"OTHER": [scalar, ...]}}, ...}, each list non-empty and without repeats;
// under "divides" every value a positive integer; "zero_stages" ZeRO stages 0-3; "requires" names
// other options of the file, without a "requires" of their own, and values they declare.
std::vector<int64_t> ParseOptionStages(const json& spec, const std::string& field, Reader& r) {
  const json& v = spec["zero_stages"];
  std::vector<int64_t> stages;
  bool ok = v.is_array() && !v.empty();
  for (size_t i = 0; ok && i < v.size(); ++i) {
    ok = v[i].is_number_integer() && v[i].get<int64_t>() >= 0 && v[i].get<int64_t>() <= 3 &&
         !Has(stages, v[i].get<int64_t>());
    if (ok) stages.push_back(v[i].get<int64_t>());
  }
  if (!ok)
    r.Error(KeyPath(field, "zero_stages"),
            "must be a non-empty array of distinct ZeRO stages 0-3 (where the option may be set)");
  return ok ? stages : std::vector<int64_t>{};
}

// A non-empty array of scalar values (boolean, number or string), each listed once, as the JSON
// texts options hold (empty after an error, which names `field`).
std::vector<std::string> ScalarTexts(const json* v, const std::string& field, Reader& r) {
  std::vector<std::string> texts;
  const bool scalars = v && v->is_array() && std::all_of(v->begin(), v->end(), [](const json& x) {
                         return x.is_boolean() || x.is_number() || x.is_string();
                       });
  if (!scalars || v->empty()) {
    r.Error(field, "must be a non-empty array of scalar values (boolean, number or string)");
    return texts;
  }
  for (const json& x : *v) {
    const std::string text = x.dump();
    if (Has(texts, text)) r.Error(field, text + " is listed twice");
    texts.push_back(text);
  }
  return texts;
}

std::map<std::string, std::vector<std::string>> ParseOptionRequires(const json& spec,
                                                                    const std::string& field,
                                                                    Reader& r) {
  const json& v = spec["requires"];
  const std::string rule =
      "must be a non-empty object {\"OTHER\": [values]}: the option is set only where the "
      "target's option OTHER is set to one of them";
  std::map<std::string, std::vector<std::string>> out;
  if (!v.is_object() || v.empty()) {
    r.Error(KeyPath(field, "requires"), rule);
    return out;
  }
  for (const auto& [other, values] : v.items()) {
    std::vector<std::string> texts =
        ScalarTexts(&values, KeyPath(KeyPath(field, "requires"), other), r);
    if (!texts.empty()) out[other] = std::move(texts);
  }
  return out;
}

// Each option named under another's "requires" is declared, takes the values listed there, and
// requires nothing itself (the generator draws the required options first).
void CheckOptionRequires(const TargetSpec& t, Reader& r) {
  for (const auto& [name, opt] : t.options)
    for (const auto& [other, wanted] : opt.requires) {
      const std::string field = KeyPath(KeyPath(KeyPath("options", name), "requires"), other);
      const auto it = t.options.find(other);
      if (it == t.options.end() || other == name) {
        r.Error(field, "names no other option of the file");
        continue;
      }
      if (!it->second.requires.empty())
        r.Error(field, "names an option with a \"requires\" of its own (one level only)");
      for (const std::string& w : wanted)
        if (!Has(it->second.values, w))
          r.Error(field, w + " is not one of the values of the option " + other);
    }
}

void ParseOptions(const json& o, TargetSpec& t, Reader& r, Status* st) {
  if (!o.is_object()) {
    r.Error("options", "must be an object {\"NAME\": [values]} of the target's own settings");
    return;
  }
  for (const auto& [name, spec] : o.items()) {
    std::string field = KeyPath("options", name);
    TargetOption opt;
    const json* values = &spec;
    if (spec.is_object()) {
      Reader(spec, field + ".", st).Unknown({"values", "divides", "zero_stages", "requires"});
      if (spec.contains("divides")) {
        opt.divides_dp = spec["divides"] == "dp";
        if (!opt.divides_dp) r.Error(KeyPath(field, "divides"), "must be \"dp\"");
      }
      if (spec.contains("zero_stages")) opt.zero_stages = ParseOptionStages(spec, field, r);
      if (spec.contains("requires")) opt.requires = ParseOptionRequires(spec, field, r);
      field = KeyPath(field, "values");
      values = spec.contains("values") ? &spec["values"] : nullptr;
    }
    opt.values = ScalarTexts(values, field, r);
    if (opt.values.empty()) continue;
    for (const json& v : *values)
      if (opt.divides_dp && !(v.is_number_integer() && v.get<int64_t>() > 0))
        r.Error(field, v.dump() + " is not a positive integer (the option \"divides\" dp)");
    t.options[name] = std::move(opt);
  }
  CheckOptionRequires(t, r);
}

// "checkpoint": {"reload_changes": [...], "reload_zero_stages": {"S": [stages]},
// "reload_changes_optimizers": [...]}: checkpoints supported, reloaded into a layout where only the
// listed fields may differ from the save layout's, and only for the listed optimizers.
void ParseCheckpoint(const json& c, TargetSpec& t, Status* st) {
  Reader r(c, "supports.checkpoint.", st);
  r.Unknown({"reload_changes", "reload_zero_stages", "reload_changes_optimizers"});
  t.checkpoint = true;
  std::vector<std::string> changes;
  r.Strings("reload_changes", changes, {"dp", "tp", "pp", "zero_stage"});
  ReloadSupport& rs = t.reload;
  rs.dp = Has(changes, std::string("dp"));
  rs.tp = Has(changes, std::string("tp"));
  rs.pp = Has(changes, std::string("pp"));
  rs.zero_stage = Has(changes, std::string("zero_stage"));
  if (c.contains("reload_changes_optimizers")) {
    std::vector<std::string> names;
    r.Strings("reload_changes_optimizers", names, {"sgd", "adam", "adamw"});
    for (const auto& n : names)
      if (const auto kind = ParseIn(kOptimizerNames, n)) rs.changes_optimizers.push_back(*kind);
    if (names.empty())
      r.Error("reload_changes_optimizers", "must list at least one optimizer (absent: all)");
  }
  if (!c.contains("reload_zero_stages")) return;
  const json& z = c["reload_zero_stages"];
  const std::string rule =
      "must be an object {\"S\": [stages]} with S and the stages in 0-3 ([]: none at stage S)";
  if (!rs.zero_stage) r.Error("reload_zero_stages", "needs \"zero_stage\" in reload_changes");
  if (!z.is_object()) return r.Error("reload_zero_stages", rule);
  for (const auto& [k, v] : z.items()) {
    const bool key_ok = k.size() == 1 && k[0] >= '0' && k[0] <= '3';
    const bool list_ok =
        v.is_array() && std::all_of(v.begin(), v.end(), [](const json& x) {
          return x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() <= 3;
        });
    if (!key_ok || !list_ok) {
      r.Error("reload_zero_stages", rule);
      continue;
    }
    rs.zero_stages[k[0] - '0'] = v.get<std::vector<int64_t>>();
  }
}

void ParseSupports(const json& s, TargetSpec& t, Status* st) {
  Reader r(s, "supports.", st);
  if (!s.is_object()) return r.Error("", "must be an object");
  r.Unknown({"max_world", "parallel", "zero_stages", "models", "activations", "optimizers",
             "lr_schedules", "schedules", "precision", "clip_grad_norm", "loss_scale", "checkpoint",
             "max_steps", "kv_head_sharing", "shard_groups"});
  r.Int("max_world", t.max_world, 1, 1024);
  r.Strings("parallel", t.parallel, {"dp", "tp", "pp", "sp"});
  r.Strings("models", t.models, {"gpt", "exact_linear"});
  r.Strings("activations", t.activations, {"gelu", "swiglu"});
  r.Strings("optimizers", t.optimizers, {"sgd", "adam", "adamw"});
  r.Strings("lr_schedules", t.lr_schedules,
            {"constant", "warmup", "warmup_linear", "warmup_cosine"});
  r.Strings("schedules", t.schedules, {"gpipe", "1f1b", "interleaved"});
  r.Bool("clip_grad_norm", t.clip_grad_norm);
  r.Bool("loss_scale", t.loss_scale);
  r.Bool("kv_head_sharing", t.kv_head_sharing);
  r.Bool("shard_groups", t.shard_groups);
  if (s.contains("checkpoint") && s["checkpoint"].is_object()) {
    ParseCheckpoint(s["checkpoint"], t, st);
  } else {
    r.Bool("checkpoint", t.checkpoint);
  }
  r.Int("max_steps", t.max_steps, 0, 1000000);
  if (s.contains("zero_stages")) {
    const json& z = s["zero_stages"];
    t.zero_stages.clear();
    if (!z.is_array() || z.empty())
      r.Error("zero_stages", "must be a non-empty array of stages 0-3");
    for (const auto& x : z.is_array() ? z : json::array()) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() > 3)
        r.Error("zero_stages", "must be a non-empty array of stages 0-3");
      else
        t.zero_stages.push_back(x.get<int64_t>());
    }
  }
  if (s.contains("precision")) {
    const json& ps = s["precision"];
    t.precisions.clear();
    if (!ps.is_array() || ps.empty()) r.Error("precision", "must be a non-empty array of objects");
    for (const auto& p : ps.is_array() ? ps : json::array()) {
      Reader pr(p, "supports.precision[].", st);
      if (!p.is_object()) {
        pr.Error("", "must be an object {param, compute, reduce, accumulate, master_weights}");
        continue;
      }
      pr.Unknown({"param", "compute", "reduce", "accumulate", "master_weights"});
      TargetPrecision tp;
      tp.param = ParseDType(pr, p, "param", st);
      tp.compute = ParseDType(pr, p, "compute", st);
      tp.reduce = ParseDType(pr, p, "reduce", st);
      tp.accumulate = ParseDType(pr, p, "accumulate", st);
      if (p.contains("master_weights")) {
        bool m = false;
        pr.Bool("master_weights", m);
        tp.master_weights = m ? 1 : 0;
      }
      t.precisions.push_back(tp);
    }
  }
}

std::string Substitute(std::string a, const std::string& ph, const std::string& value) {
  for (size_t p = a.find(ph); p != std::string::npos; p = a.find(ph, p + value.size()))
    a.replace(p, ph.size(), value);
  return a;
}

// False when argv[0], with {target_dir} (known now) substituted, is a path (it contains '/') that
// is not an executable file; names without a '/' are looked up in PATH by execvp at launch, and a
// program named by {run_dir} or {world} is known only then (a failure then is the run's crash
// finding).
bool Executable(const std::string& prog, const std::string& target_dir) {
  const std::string p = Substitute(prog, "{target_dir}", target_dir);
  if (p.find("{run_dir}") != std::string::npos || p.find("{world}") != std::string::npos)
    return true;
  return p.find('/') == std::string::npos || ::access(p.c_str(), X_OK) == 0;
}

// "grad_reduction": {"when", "when_pipelined", "order", "average"} (docs/TARGETS.md), each
// optional and "unknown" when absent; when_pipelined defaults to when.
void ParseGradReduction(const json& g, GradReduction& out, Status* st) {
  if (!g.is_object()) {
    st->Merge(
        Status::Error("grad_reduction",
                      "grad_reduction: must be an object {when, when_pipelined, order, average}"));
    return;
  }
  Reader r(g, "grad_reduction.", st);
  r.Unknown({"when", "when_pipelined", "order", "average"});
  auto text = [&](const char* key, const char* rule, auto parse) {
    if (!g.contains(key)) return;
    if (!g[key].is_string() || !parse(g[key].get<std::string>())) r.Error(key, rule);
  };
  text("when", "must be \"micro_step\", \"step\" or \"unknown\"",
       [&](const std::string& v) { return ParseWhen(v, &out.when); });
  out.when_pipelined = out.when;
  text("when_pipelined", "must be \"micro_step\", \"step\" or \"unknown\"",
       [&](const std::string& v) { return ParseWhen(v, &out.when_pipelined); });
  text("order", "must be \"rank\" or \"unknown\"", [&](const std::string& v) {
    out.rank_order = v == "rank";
    return v == "rank" || v == "unknown";
  });
  text("average", "must be \"after_sum\", \"before_sum\", \"divide_before_sum\" or \"unknown\"",
       [&](const std::string& v) { return ParseAverage(v, &out.average); });
}

}  // namespace

StatusOr<TargetSpec> ParseTargetSpec(const std::string& text, const std::string& path) {
  const json j = ParseJsonText(text);
  if (j.is_discarded() || !j.is_object())
    return Status::Error("", path + ": the target file is not a JSON object");
  Status st;
  Reader r(j, "", &st);
  r.Unknown({"protocol", "name", "command", "launcher", "timeout_s", "supports", "reports",
             "grad_norm_dtype", "grad_reduction", "zero_stages_bitwise", "model_arithmetic",
             "partitioned_from", "description", "options", "optimizer_arithmetic"});
  TargetSpec t;
  t.path = path;
  t.dir = std::filesystem::absolute(path).parent_path().string();
  r.Int("protocol", t.protocol, 1, 2);
  if (!j.contains("protocol"))
    r.Error("protocol", "required (this paradiff speaks protocols 1 and 2)");
  if (!j.contains("name") || !j["name"].is_string() || j["name"].get<std::string>().empty())
    r.Error("name", "required, a non-empty string");
  else
    t.name = j["name"];
  if (!r.Strings("command", t.command, {}) || t.command.empty()) {
    r.Error("command", "required, a non-empty array of strings (argv; never run through a shell)");
  } else {
    CheckTemplate(r, "command", t.command);
    if (!Executable(t.command[0], t.dir))
      r.Error("command", "'" + Substitute(t.command[0], "{target_dir}", t.dir) +
                             "' is not an executable file (nor in PATH)");
    for (const std::string& a : t.command)
      for (const char* per_run : {"{run_dir}", "{world}"})
        if (t.protocol == 2 && a.find(per_run) != std::string::npos)
          r.Error("command", std::string("a protocol-2 worker serves every run: no ") + per_run +
                                 " (it reads run dirs from stdin, docs/TARGETS.md)");
  }
  if (t.protocol == 2 && j.contains("launcher"))
    r.Error("launcher", "a protocol-2 worker forks its own ranks: no launcher");
  if (j.contains("launcher")) {
    const json& l = j["launcher"];
    if (!l.is_object())
      r.Error("launcher", "must be an object {\"WORLD\" | \"default\": [argv prefix]}");
    const json empty = json::object();
    for (const auto& [k, v] : (l.is_object() ? l : empty).items()) {
      const bool key_ok =
          k == "default" || (!k.empty() && std::all_of(k.begin(), k.end(), ::isdigit));
      if (!key_ok) r.Error("launcher." + k, "keys are world sizes or \"default\"");
      Reader lr(l, "launcher.", &st);
      std::vector<std::string> argv;
      if (!lr.Strings(k, argv, {})) continue;
      CheckTemplate(lr, k, argv);
      if (!argv.empty() && !Executable(argv[0], t.dir))
        lr.Error(k,
                 "'" + Substitute(argv[0], "{target_dir}", t.dir) + "' is not an executable file");
      t.launcher[k] = argv;
    }
  }
  r.Int("timeout_s", t.timeout_s, 1, 86400);
  std::vector<std::string> reports;
  if (r.Strings("reports", reports, {"grad", "optimizer"})) {
    t.reporting.loss_scale = false;  // the run-dir protocol carries no loss scale (docs/TARGETS.md)
    t.reporting.grad = Has(reports, std::string("grad"));
    t.reporting.optimizer = Has(reports, std::string("optimizer"));
  }
  if (j.contains("grad_norm_dtype")) {
    bool known = false;
    for (DType d : {DType::kFp64, DType::kFp32, DType::kBf16, DType::kFp16})
      if (j["grad_norm_dtype"] == Name(d)) {
        t.reporting.grad_norm_dtype = d;
        known = true;
      }
    if (!known) r.Error("grad_norm_dtype", "must be one of fp64, fp32, bf16, fp16");
  }
  // Nothing about the reduction is assumed that the file does not declare.
  t.reporting.reduction = GradReduction{};
  if (j.contains("grad_reduction"))
    ParseGradReduction(j["grad_reduction"], t.reporting.reduction, &st);
  if (j.contains("partitioned_from")) {
    const json& pf = j["partitioned_from"];
    if (!pf.is_object()) {
      r.Error("partitioned_from",
              "must be an object {param, grad, optimizer}: ZeRO stages 0-4 (4: never)");
    } else {
      Reader pr(pf, "partitioned_from.", &st);
      pr.Unknown({"param", "grad", "optimizer"});
      pr.Int("param", t.reporting.partitioned_from.param, 0, 4);
      pr.Int("grad", t.reporting.partitioned_from.grad, 0, 4);
      pr.Int("optimizer", t.reporting.partitioned_from.optimizer, 0, 4);
    }
  }
  t.reporting.same_model_arithmetic = false;
  if (j.contains("model_arithmetic")) {
    if (j["model_arithmetic"] == "paradiff")
      t.reporting.same_model_arithmetic = true;
    else if (j["model_arithmetic"] != "own")
      r.Error("model_arithmetic", "must be \"paradiff\" or \"own\"");
  }
  t.reporting.zero_stages_bitwise = false;
  if (j.contains("zero_stages_bitwise")) {
    if (j["zero_stages_bitwise"].is_boolean())
      t.reporting.zero_stages_bitwise = j["zero_stages_bitwise"];
    else
      r.Error("zero_stages_bitwise", "must be true or false");
  }
  if (j.contains("optimizer_arithmetic")) {
    const json& oa = j["optimizer_arithmetic"];
    Reader ar(oa, "optimizer_arithmetic.", &st);
    if (!oa.is_object())
      r.Error("optimizer_arithmetic", "must be an object {\"hyperparameters\", \"clip\"}");
    else
      ar.Unknown({"hyperparameters", "clip"});
    if (oa.is_object() && oa.contains("hyperparameters")) {
      if (oa["hyperparameters"] == "fp32")
        t.reporting.optimizer_hyperparameters = DType::kFp32;
      else if (oa["hyperparameters"] != "fp64")
        ar.Error("hyperparameters", "must be \"fp64\" or \"fp32\"");
    }
    if (oa.is_object() && oa.contains("clip")) {
      if (oa["clip"] == "accumulate")
        t.reporting.clips_in_accumulate = true;
      else if (oa["clip"] != "fp32")
        ar.Error("clip", "must be \"fp32\" or \"accumulate\"");
    }
  }
  if (j.contains("options")) ParseOptions(j["options"], t, r, &st);
  if (j.contains("supports"))
    ParseSupports(j["supports"], t, &st);
  else
    r.Error("supports", "required: the config features the target can run");
  if (!st.ok()) return st;
  return t;
}

StatusOr<TargetSpec> LoadTargetFile(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status::Error("", path + ": cannot read the target file");
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseTargetSpec(ss.str(), path);
}

Status TargetSupports(const TargetSpec& t, const Config& c) {
  Status st;
  auto no = [&](const std::string& field, const std::string& why) {
    st.Merge(Status::Error(field, field + ": " + why + " (target " + t.name + ", " + t.path + ")"));
  };
  if (!c.faults.empty())
    no("faults", "bug-zoo switches belong to the built-in engine, not to an external target");
  // The backend picks the built-in engine's executor; a target starts its own processes. Without
  // this a campaign drew mpi / nccl configs that the validation gate then refused (inconclusive).
  if (c.backend != Backend::kLocal)
    no("backend",
       std::string("backend=") + Name(c.backend) +
           ": the built-in engine's executor; a target starts its own ranks (use local)");
  // A reload that re-divides the step's micro-batches unevenly binds every system: without this a
  // campaign drew such configs for targets, which the validation gate then refused (inconclusive).
  const Status reload = ReloadSupports(c);
  for (const auto& e : reload.errors()) no(e.field, e.message);
  if (c.parallel.world > t.max_world)
    no("parallel.world", std::to_string(c.parallel.world) + " exceeds the target's max_world " +
                             std::to_string(t.max_world));
  const std::pair<const char*, bool> dims[] = {{"dp", c.parallel.dp > 1},
                                               {"tp", c.parallel.tp > 1},
                                               {"pp", c.parallel.pp > 1},
                                               {"sp", c.parallel.sp}};
  for (const auto& [dim, used] : dims)
    if (used && !Has(t.parallel, std::string(dim)))
      no(std::string("parallel.") + dim,
         "the target does not support " + std::string(dim) + " parallelism");
  if (c.parallel.tp > c.model.kv_heads && c.model.kind == ModelKind::kGpt && !t.kv_head_sharing)
    no("model.kv_heads", std::to_string(c.model.kv_heads) + " < parallel.tp " +
                             std::to_string(c.parallel.tp) +
                             ": the target splits key / value heads over tp ranks and cannot "
                             "share one (supports.kv_head_sharing)");
  if (c.zero.shard_group != 0 && !t.shard_groups)
    no("zero.shard_group", "the target shards over every dp rank (supports.shard_groups)");
  if (!Has(t.zero_stages, c.zero.stage))
    no("zero.stage", "stage " + std::to_string(c.zero.stage) + " is not supported");
  if (!Has(t.models, std::string(Name(c.model.kind))))
    no("model.kind", std::string(Name(c.model.kind)) + " is not supported");
  if (c.model.kind == ModelKind::kGpt && !Has(t.activations, std::string(Name(c.model.activation))))
    no("model.activation", std::string(Name(c.model.activation)) + " is not supported");
  if (!Has(t.optimizers, std::string(Name(c.optimizer.kind))))
    no("optimizer.kind",
       std::string(Name(c.optimizer.kind)) + " is not supported (" + Join(t.optimizers) + ")");
  const std::string sched = Name(c.optimizer.schedule.kind);
  if (!Has(t.lr_schedules, sched))
    no("optimizer.schedule.kind", sched + " is not supported (" + Join(t.lr_schedules) + ")");
  for (const auto& [name, value] : c.target_options) {
    const auto it = t.options.find(name);
    if (it == t.options.end())
      no(KeyPath("target_options", name), "the target declares no option " + name);
    else if (!Has(it->second.values, value))
      no(KeyPath("target_options", name),
         value + " is not one of the declared values " + Join(it->second.values));
    else if (const std::string why = OptionMisfit(it->second, value, c); !why.empty())
      no(KeyPath("target_options", name), why);
  }
  if (c.parallel.pp > 1 && !Has(t.schedules, std::string(Name(c.parallel.schedule))))
    no("parallel.schedule",
       std::string(Name(c.parallel.schedule)) + " is not supported (" + Join(t.schedules) + ")");
  const PrecisionConfig& p = c.precision;
  const bool precision_ok =
      std::any_of(t.precisions.begin(), t.precisions.end(), [&](const TargetPrecision& q) {
        return q.param == p.param && q.compute == p.compute && q.reduce == p.reduce &&
               q.accumulate == p.accumulate &&
               (q.master_weights < 0 || p.param == DType::kFp32 ||
                q.master_weights == (p.master_weights ? 1 : 0));
      });
  if (!precision_ok)
    no("precision", std::string("param=") + Name(p.param) + " compute=" + Name(p.compute) +
                        " reduce=" + Name(p.reduce) + " accumulate=" + Name(p.accumulate) +
                        " is not a supported combination");
  if (c.clip_grad_norm > 0 && !t.clip_grad_norm)
    no("clip_grad_norm", "gradient clipping is not supported");
  if (p.loss_scale.mode != LossScaleMode::kNone && !t.loss_scale)
    no("precision.loss_scale.mode", "loss scaling is not supported");
  if (c.checkpoint.save_at > 0 && !t.checkpoint)
    no("checkpoint.save_at", "checkpoints are not supported");
  if (c.checkpoint.save_at > 0 && t.checkpoint) {
    const auto [field, why] = ReloadRefusal(t.reload, c);
    if (!field.empty()) no(field, why);
    // The reload phase is a run of its own: everything above holds for its layout too.
    // (Refusals the save layout already has are not repeated.)
    const Status reload = TargetSupports(t, ReloadPhaseConfig(c));
    for (const auto& e : reload.errors()) {
      const auto& have = st.errors();
      if (std::none_of(have.begin(), have.end(),
                       [&](const auto& h) { return h.message == e.message; }))
        st.Merge(Status::Error("checkpoint.reload", "checkpoint.reload: " + e.message));
    }
  }
  if (t.max_steps > 0 && c.steps > t.max_steps)
    no("steps",
       std::to_string(c.steps) + " exceeds the target's max_steps " + std::to_string(t.max_steps));
  return st;
}

std::vector<std::string> WorkerArgv(const TargetSpec& t) {
  std::vector<std::string> argv = t.command;
  for (auto& a : argv) a = Substitute(a, "{target_dir}", t.dir);
  return argv;
}

std::vector<std::string> TargetArgv(const TargetSpec& t, const Config& cfg,
                                    const std::string& run_dir) {
  std::vector<std::string> argv;
  auto it = t.launcher.find(std::to_string(cfg.parallel.world));
  if (it == t.launcher.end()) it = t.launcher.find("default");
  if (it != t.launcher.end()) argv = it->second;
  argv.insert(argv.end(), t.command.begin(), t.command.end());
  for (auto& a : argv) {
    a = Substitute(a, "{run_dir}", run_dir);
    a = Substitute(a, "{target_dir}", t.dir);
    a = Substitute(a, "{world}", std::to_string(cfg.parallel.world));
  }
  return argv;
}

}  // namespace paradiff
