// Tests of core/config_json.h: round trip over generated configs, stable bytes, defaults and
// derivations, and the rejection (with the field named) of every kind of malformed input.
#include "core/config_json.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/json_text.h"
#include "core/rng.h"

namespace paradiff {
namespace {

constexpr int kGeneratedConfigs = 600;

// Integers from every corner: small, zero, negative, extreme.
int64_t AnyInt(SeqRng& r) {
  switch (r.Below(5)) {
    case 0:
      return r.Range(-3, 3);
    case 1:
      return r.Range(1, 4096);
    case 2:
      return std::numeric_limits<int64_t>::max() - r.Range(0, 2);
    case 3:
      return std::numeric_limits<int64_t>::min() + r.Range(0, 2);
    default:
      return static_cast<int64_t>(r.Next());
  }
}

// Finite doubles from every corner: simple, tiny, huge, subnormal, negative, arbitrary bits.
double AnyDouble(SeqRng& r) {
  switch (r.Below(6)) {
    case 0:
      return static_cast<double>(r.Range(-4, 4)) * 0.5;
    case 1:
      return std::ldexp(static_cast<double>(r.Next() >> 11), -r.Range(53, 80));
    case 2:
      return std::ldexp(1.0 + static_cast<double>(r.Below(1000)), r.Range(100, 1000));
    case 3:
      return std::numeric_limits<double>::denorm_min() * static_cast<double>(r.Range(1, 99));
    case 4:
      return -std::ldexp(static_cast<double>(r.Next() >> 11), -r.Range(1, 60));
    default: {
      for (;;) {
        const uint64_t bits = r.Next();
        double d;
        std::memcpy(&d, &bits, sizeof d);
        if (std::isfinite(d)) return d;
      }
    }
  }
}

template <class E>
E AnyOf(SeqRng& r, std::initializer_list<E> values) {
  return *(values.begin() + r.Below(values.size()));
}

DType AnyDType(SeqRng& r) { return AnyOf(r, {DType::kFp32, DType::kBf16, DType::kFp16}); }

std::string AnyName(SeqRng& r) {
  static const char* kNames[] = {
      "zero.uneven_last_shard", "gas.overwrite_grad",          "", "x y", "quote\"back\\slash",
      "tab\tnewline\n",         "unicode \xC3\xA9\xE2\x82\xAC"};
  return kNames[r.Below(sizeof kNames / sizeof kNames[0])];
}

Config RandomConfig(SeqRng& r) {
  Config c;
  c.schema = AnyInt(r);
  c.seed = r.Chance(0.5) ? r.Next() : r.Below(100);
  c.steps = AnyInt(r);
  ModelConfig& m = c.model;
  m.kind = AnyOf(r, {ModelKind::kGpt, ModelKind::kExactLinear});
  m.layers = AnyInt(r);
  m.hidden = AnyInt(r);
  m.heads = AnyInt(r);
  m.kv_heads = AnyInt(r);
  m.ffn = AnyInt(r);
  m.vocab = AnyInt(r);
  m.seq_len = AnyInt(r);
  m.tied_embeddings = r.Chance(0.5);
  m.position_embeddings = r.Chance(0.5);
  m.activation = AnyOf(r, {Activation::kGelu, Activation::kSwiglu});
  c.batch.micro_batch = AnyInt(r);
  c.batch.accumulation_steps = AnyInt(r);
  ParallelConfig& p = c.parallel;
  p.world = AnyInt(r);
  p.tp = AnyInt(r);
  p.pp = AnyInt(r);
  p.dp = AnyInt(r);
  p.sp = r.Chance(0.5);
  p.virtual_stages = AnyInt(r);
  p.schedule = AnyOf(r, {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved});
  p.partition = AnyOf(
      r, {PartitionMethod::kUniform, PartitionMethod::kParameters, PartitionMethod::kExplicit});
  if (p.partition == PartitionMethod::kExplicit)
    for (uint64_t i = 0, n = r.Below(6); i < n; ++i) p.partition_layers.push_back(AnyInt(r));
  c.zero.stage = AnyInt(r);
  c.zero.bucket_elems = AnyInt(r);
  c.zero.align_elems = AnyInt(r);
  PrecisionConfig& pr = c.precision;
  pr.param = AnyDType(r);
  pr.compute = AnyDType(r);
  pr.reduce = AnyDType(r);
  pr.accumulate = AnyDType(r);
  pr.master_weights = r.Chance(0.5);
  LossScaleConfig& l = pr.loss_scale;
  l.mode = AnyOf(r, {LossScaleMode::kNone, LossScaleMode::kStatic, LossScaleMode::kDynamic});
  l.init = AnyDouble(r);
  l.growth_factor = AnyDouble(r);
  l.backoff = AnyDouble(r);
  l.growth_interval = AnyInt(r);
  l.hysteresis = AnyInt(r);
  l.min = AnyDouble(r);
  OptimizerConfig& o = c.optimizer;
  o.kind = AnyOf(r, {OptimizerKind::kSgd, OptimizerKind::kAdam, OptimizerKind::kAdamW});
  o.lr = AnyDouble(r);
  o.momentum = AnyDouble(r);
  o.beta1 = AnyDouble(r);
  o.beta2 = AnyDouble(r);
  o.eps = AnyDouble(r);
  o.weight_decay = AnyDouble(r);
  c.clip_grad_norm = AnyDouble(r);
  c.checkpoint.save_at = AnyInt(r);
  c.checkpoint.reload = {AnyInt(r), AnyInt(r), AnyInt(r), AnyInt(r)};
  c.backend = AnyOf(r, {Backend::kLocal, Backend::kMpi, Backend::kNccl});
  for (uint64_t i = 0, n = r.Below(4); i < n; ++i) c.faults.push_back(AnyName(r));
  return c;
}

// The single error of a rejected parse; fails the test when there is not exactly one.
FieldError OnlyError(const std::string& text) {
  StatusOr<Config> c = ParseConfig(text);
  EXPECT_FALSE(c.ok()) << text;
  EXPECT_EQ(c.status().errors().size(), 1u) << c.status().ToString();
  return c.status().errors().empty() ? FieldError{} : c.status().errors()[0];
}

Config ParseOk(const std::string& text) {
  StatusOr<Config> c = ParseConfig(text);
  EXPECT_TRUE(c.ok()) << text << "\n" << c.status().ToString();
  return c.ok() ? c.value() : Config{};
}

TEST(ConfigJson, RoundTripOfGeneratedConfigs) {
  SeqRng rng(20240601);
  std::set<std::string> spellings;
  for (int i = 0; i < kGeneratedConfigs; ++i) {
    const Config c = RandomConfig(rng);
    const std::string text = WriteConfig(c);
    StatusOr<Config> back = ParseConfig(text);
    ASSERT_TRUE(back.ok()) << "config #" << i << "\n" << text << back.status().ToString();
    ASSERT_TRUE(back.value() == c) << "config #" << i << " changed on read\n" << text;
    ASSERT_EQ(WriteConfig(back.value()), text) << "config #" << i;
    StatusOr<Config> via_json = ConfigFromJson(ConfigToJson(c));
    ASSERT_TRUE(via_json.ok() && via_json.value() == c) << "config #" << i;
    const PrecisionConfig& pr = c.precision;
    for (std::string name :
         {std::string("kind.") + Name(c.model.kind), std::string("act.") + Name(c.model.activation),
          std::string("sched.") + Name(c.parallel.schedule),
          std::string("part.") + Name(c.parallel.partition), std::string("dt.") + Name(pr.param),
          std::string("dt.") + Name(pr.compute), std::string("dt.") + Name(pr.reduce),
          std::string("dt.") + Name(pr.accumulate), std::string("ls.") + Name(pr.loss_scale.mode),
          std::string("opt.") + Name(c.optimizer.kind), std::string("be.") + Name(c.backend)})
      spellings.insert(name);
  }
  // Every value of every enum (but the internal fp64) was generated.
  EXPECT_EQ(spellings.size(), 2u + 2 + 3 + 3 + 3 + 3 + 3 + 3);
}

TEST(ConfigJson, OmittedKeysTakeDefaults) {
  EXPECT_TRUE(ParseOk("{}") == Config{});
  const Config c = ParseOk(R"({"model": {"layers": 3}, "precision": {"loss_scale": {}}})");
  Config expected;
  expected.model.layers = 3;
  EXPECT_TRUE(c == expected);
}

TEST(ConfigJson, WorldAndDpDerivation) {
  Config c = ParseOk(R"({"parallel": {"tp": 2, "pp": 3, "dp": 5}})");
  EXPECT_EQ(c.parallel.world, 30);
  c = ParseOk(R"({"parallel": {"world": 8, "tp": 2}})");
  EXPECT_EQ(c.parallel.dp, 4);
  c = ParseOk(R"({"parallel": {"world": 7, "tp": 2}})");  // not divisible: nothing derived
  EXPECT_EQ(c.parallel.world, 7);
  EXPECT_EQ(c.parallel.dp, 1);
  c = ParseOk(R"({"parallel": {"world": 6, "dp": 2}})");  // both given: kept as written
  EXPECT_EQ(c.parallel.world, 6);
  EXPECT_EQ(c.parallel.dp, 2);
  c = ParseOk(R"({"parallel": {"tp": 9223372036854775807, "pp": 2}})");  // overflow: not derived
  EXPECT_EQ(c.parallel.world, 1);
}

TEST(ConfigJson, UnknownKeysNameTheirPath) {
  FieldError e = OnlyError(R"({"model": {"hiden": 32}})");
  EXPECT_EQ(e.field, "model.hiden");
  EXPECT_EQ(e.message, "model.hiden: unknown key");
  EXPECT_EQ(OnlyError(R"({"seeed": 1})").field, "seeed");
  EXPECT_EQ(OnlyError(R"({"precision": {"loss_scale": {"grow": 2}}})").field,
            "precision.loss_scale.grow");
  EXPECT_EQ(OnlyError(R"({"checkpoint": {"reload": {"zero": 1}}})").field,
            "checkpoint.reload.zero");
}

// Found by the parser fuzz target (fuzz/parse_fuzz_target.cpp): an empty key gave the error
// ": unknown key" with an empty field. A key that is not a plain name is quoted, so the field is
// never empty and never ambiguous ("a.b" is one key, not a path).
TEST(ConfigJson, UnusualKeysAreQuotedInTheirPath) {
  FieldError e = OnlyError(R"({"": 1})");
  EXPECT_EQ(e.field, R"("")");
  EXPECT_EQ(e.message, R"("": unknown key)");
  EXPECT_EQ(OnlyError(R"({"model": {"a.b": 1}})").field, R"(model."a.b")");
  EXPECT_EQ(OnlyError(R"({"model": {"x\u0000y": 1}})").field, R"(model."x\u0000y")");
  EXPECT_EQ(OnlyError(R"({"seed": 1, "seed": 2})").field, "seed");
}

TEST(ConfigJson, WrongTypesNameTheField) {
  FieldError e = OnlyError(R"({"model": {"layers": "2"}})");
  EXPECT_EQ(e.field, "model.layers");
  EXPECT_EQ(e.message, "model.layers: expected an integer, got string");
  EXPECT_EQ(OnlyError(R"({"model": {"tied_embeddings": 1}})").message,
            "model.tied_embeddings: expected a boolean, got 1");
  EXPECT_EQ(OnlyError(R"({"optimizer": {"lr": "0.1"}})").field, "optimizer.lr");
  EXPECT_EQ(OnlyError(R"({"model": 3})").message, "model: expected an object, got 3");
  EXPECT_EQ(OnlyError(R"({"zero": {"stage": null}})").field, "zero.stage");
  EXPECT_EQ(OnlyError(R"({"faults": "gas.overwrite_grad"})").field, "faults");
  EXPECT_EQ(OnlyError(R"({"faults": ["a", 2]})").field, "faults[1]");
  EXPECT_EQ(OnlyError(R"({"optimizer": {"betas": [0.9]}})").field, "optimizer.betas");
  EXPECT_EQ(OnlyError(R"({"optimizer": {"betas": [0.9, true]}})").field, "optimizer.betas[1]");
  EXPECT_EQ(OnlyError(R"({"parallel": {"partition": 2}})").field, "parallel.partition");
  EXPECT_EQ(OnlyError(R"({"parallel": {"partition": [1, 1.5]}})").field, "parallel.partition[1]");
  EXPECT_EQ(OnlyError("[]").message, "config: expected a JSON object, got array");
}

TEST(ConfigJson, TargetOptionsAreScalarsKeptAsTheirJson) {
  const Config c = ParseOk(
      R"({"target_options": {"zero_optimization.overlap_comm": true, "n": 5e8, "s": "x"}})");
  ASSERT_EQ(c.target_options.size(), 3u);
  EXPECT_EQ(c.target_options.at("zero_optimization.overlap_comm"), "true");
  EXPECT_EQ(c.target_options.at("s"), R"("x")");
  EXPECT_EQ(ParseOk(WriteConfig(c)), c);
  EXPECT_EQ(WriteConfig(Config{}).find("target_options"), std::string::npos);  // absent when empty
  EXPECT_EQ(OnlyError(R"({"target_options": {"a": [1]}})").field, "target_options.a");
  EXPECT_EQ(OnlyError(R"({"target_options": {"a.b": null}})").field, R"(target_options."a.b")");
  EXPECT_EQ(OnlyError(R"({"target_options": 3})").field, "target_options");
}

TEST(ConfigJson, ShardGroupIsWrittenOnlyWhenSet) {
  const Config c =
      ParseOk(R"({"parallel": {"world": 4, "dp": 4}, "zero": {"stage": 3, "shard_group": 2}})");
  EXPECT_EQ(c.zero.shard_group, 2);
  EXPECT_EQ(ParseOk(WriteConfig(c)), c);
  EXPECT_EQ(WriteConfig(Config{}).find("shard_group"),
            std::string::npos);  // configs keep their text
  EXPECT_EQ(OnlyError(R"({"zero": {"shard_group": 1.5}})").field, "zero.shard_group");
}

TEST(ConfigJson, IntegersMustBeIntegral) {
  FieldError e = OnlyError(R"({"steps": 2.5})");
  EXPECT_EQ(e.field, "steps");
  EXPECT_EQ(e.message, "steps: expected an integer, got 2.5");
  EXPECT_EQ(ParseOk(R"({"steps": 3.0, "zero": {"bucket_elems": 1e3}})").zero.bucket_elems, 1000);
  EXPECT_EQ(OnlyError(R"({"model": {"layers": 9223372036854775808}})").field, "model.layers");
  EXPECT_EQ(OnlyError(R"({"model": {"layers": 1e30}})").field, "model.layers");
  EXPECT_EQ(ParseOk(R"({"model": {"layers": -9223372036854775808}})").model.layers,
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(ParseOk(R"({"seed": 18446744073709551615})").seed,
            std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(OnlyError(R"({"seed": -1})").message,
            "seed: expected a non-negative integer that fits in 64 bits, got -1");
  EXPECT_EQ(OnlyError(R"({"seed": 1.5})").field, "seed");
  EXPECT_EQ(OnlyError(R"({"seed": 18446744073709551616})").field, "seed");
}

TEST(ConfigJson, EnumSpellings) {
  FieldError e = OnlyError(R"({"model": {"kind": "gtp"}})");
  EXPECT_EQ(e.field, "model.kind");
  EXPECT_EQ(e.message, "model.kind: unknown value \"gtp\" (expected one of gpt, exact_linear)");
  EXPECT_EQ(OnlyError(R"({"precision": {"param": "fp64"}})").field, "precision.param");
  EXPECT_EQ(OnlyError(R"({"parallel": {"partition": "explicit"}})").field, "parallel.partition");
  EXPECT_EQ(OnlyError(R"({"backend": "gloo"})").field, "backend");
  EXPECT_EQ(OnlyError(R"({"parallel": {"schedule": 1}})").field, "parallel.schedule");
  const Config c = ParseOk(R"({"parallel": {"partition": [2, 1]}})");
  EXPECT_EQ(c.parallel.partition, PartitionMethod::kExplicit);
  EXPECT_EQ(c.parallel.partition_layers, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(ParseOk(R"({"parallel": {"partition": "parameters"}})").parallel.partition,
            PartitionMethod::kParameters);
}

TEST(ConfigJson, MalformedJsonNamesTheBytePosition) {
  for (const char* text : {"", "{", "{\"steps\": }", "{\"steps\": 2,}", "nul", "{\"a\" 1}",
                           "{\"steps\": 1e999}", "{\"x\": \"\xFF\"}"}) {
    FieldError e = OnlyError(text);
    EXPECT_EQ(e.field, "") << text;
    EXPECT_EQ(e.message.rfind("config: malformed JSON: at byte ", 0), 0u) << e.message;
  }
}

// nlohmann reads a NUL as the end of input: what follows one must not be dropped silently.
TEST(ConfigJson, ANulByteIsMalformedNotTheEnd) {
  const std::string text("{\"steps\": 2}\0{{{ garbage", 24);
  FieldError e = OnlyError(text);
  EXPECT_EQ(e.field, "");
  EXPECT_EQ(e.message,
            "config: malformed JSON: at byte 13: a NUL character (JSON text holds none)");
}

// The same rule for every other JSON file paradiff reads (work dirs, target files and outputs,
// checkpoint manifests, DeepSpeed configs): core/json_text.h.
TEST(JsonText, ANulByteIsMalformedNotTheEnd) {
  EXPECT_TRUE(ParseJsonText(std::string("{\"a\": 1}\0{{{", 12)).is_discarded());
  EXPECT_TRUE(ParseJsonText("{\"a\": ").is_discarded());
  EXPECT_EQ(ParseJsonText("{\"a\": 1}").value("a", 0), 1);
}

// Python's json module writes non-finite floats as bare NaN / Infinity / -Infinity: a target's
// observations may hold them, and they read back as those values, strings left as they are.
TEST(JsonText, NonFiniteTokensOfPythonReadBack) {
  const nlohmann::json j = ParseJsonText(QuoteNonFiniteTokens(
      R"({"a": NaN, "b": [Infinity, -Infinity, -1.5], "NaN": "x \" NaN Infinity", "c": 2})"));
  ASSERT_FALSE(j.is_discarded());
  double v = 0;
  ASSERT_TRUE(JsonDouble(j["a"], &v));
  EXPECT_TRUE(std::isnan(v));
  ASSERT_TRUE(JsonDouble(j["b"][0], &v));
  EXPECT_EQ(v, std::numeric_limits<double>::infinity());
  ASSERT_TRUE(JsonDouble(j["b"][1], &v));
  EXPECT_EQ(v, -std::numeric_limits<double>::infinity());
  ASSERT_TRUE(JsonDouble(j["b"][2], &v));
  EXPECT_EQ(v, -1.5);
  EXPECT_EQ(j["NaN"], "x \" NaN Infinity");  // inside a string: untouched
  EXPECT_EQ(j["c"], 2);
  EXPECT_FALSE(JsonDouble(j["NaN"], &v));
  EXPECT_FALSE(JsonDouble(nlohmann::json("nan"), &v));
  EXPECT_TRUE(ParseJsonText(QuoteNonFiniteTokens("{\"a\": NaNx}")).is_discarded());
}

TEST(ConfigJson, DuplicateKeysAreErrors) {
  FieldError e = OnlyError(R"({"model": {"layers": 2, "layers": 3}})");
  EXPECT_EQ(e.field, "model.layers");
  EXPECT_EQ(e.message, "model.layers: duplicate key");
  EXPECT_EQ(OnlyError(R"({"steps": 1, "steps": 1})").field, "steps");
}

TEST(ConfigJson, AllErrorsAreCollected) {
  StatusOr<Config> c = ParseConfig(
      R"({"model": {"hiden": 1, "layers": "x"}, "steps": 1.5, "zero": {"stage": true},
          "precision": {"param": "fp8"}, "optimizer": {"betas": [1, "y"]}, "junk": 0})");
  ASSERT_FALSE(c.ok());
  std::set<std::string> fields;
  for (const FieldError& e : c.status().errors()) fields.insert(e.field);
  EXPECT_EQ(fields, (std::set<std::string>{"model.hiden", "model.layers", "steps", "zero.stage",
                                           "precision.param", "optimizer.betas[1]", "junk"}))
      << c.status().ToString();
}

TEST(ConfigJson, LoadConfigFile) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("paradiff_config_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string missing = (dir / "missing.json").string();
  StatusOr<Config> c = LoadConfigFile(missing);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find(missing), std::string::npos);
  c = LoadConfigFile(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().ToString().find("is a directory"), std::string::npos);
  Config written;
  written.model.layers = 5;
  const std::string path = (dir / "c.json").string();
  std::ofstream(path) << WriteConfig(written);
  c = LoadConfigFile(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c.value() == written);
  std::ofstream(path) << std::string(kMaxConfigFileBytes + 1, ' ');
  EXPECT_FALSE(LoadConfigFile(path).ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace paradiff
