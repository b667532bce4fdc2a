// The libFuzzer target (the `asan` preset; docs/FUZZING.md): one input is one config in its JSON
// form, checked in-process on the local backend by CheckRun.
//
// Contract with libFuzzer:
// - LLVMFuzzerTestOneInput returns -1 (reject) for input that is not a config (ParseConfig), an
//   invalid one (CheckConfig), one this engine build does not run in-process (EngineSupports,
//   backend != local) or one over the fuzz size budget (FuzzSizeBudget). Note: the libFuzzer of
//   clang 14 still adds a rejected input to the corpus when it covered new code (docs/FUZZING.md
//   has the pruning recipe). A valid config is checked; a finding writes its JSON report, prints
//   the SUMMARY line and calls abort(), so libFuzzer keeps the input as a crash artifact
//   (crash-<sha1>) next to the report.
// - LLVMFuzzerCustomMutator / LLVMFuzzerCustomCrossOver work on the config, not on bytes: they
//   parse, mutate (fuzz/config_domain.h) and write the result with WriteConfig, so the corpus
//   stays readable JSON. A small share of mutations are libFuzzer's byte-level ones
//   (LLVMFuzzerMutate, which uses the -dict dictionary) to exercise the parser and validator.
// - Flags of our own, read from argv in LLVMFuzzerInitialize (libFuzzer warns "unrecognized flag"
//   and goes on; it passes them on to its -fork / -merge / -minimize_crash children):
//     -paradiff_inject=NAME[,NAME...]  bug-zoo switches (core/fault_names.h) on in every config
//     -paradiff_oracles=LIST           oracle selection (oracles/oracle_registry.h)
//     -paradiff_explain=1              one line per input: why it was rejected, or the verdict
//                                      and where the time went (to prune a corpus, to profile)
//   The input's own "faults" list is replaced by the injected set: switches are a property of the
//   run, so a byte-level mutation cannot plant a zoo bug into a clean run. Reports go where
//   libFuzzer's -artifact_prefix puts artifacts (the working directory by default).
//
// Note [Fuzz target state]: libFuzzer's C entry points take no context pointer, so the options
// parsed at initialization and the reference cache live in one function-local static
// (TargetState). This is the one place in paradiff where process-wide state is acceptable: the
// fuzz target is a whole process dedicated to one loop, and the cache (keyed by model, data,
// optimizer, steps and seed) makes layout mutations of the same model cheap.
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/atomic_file.h"
#include "core/budget.h"
#include "core/config.h"
#include "core/config_json.h"
#include "core/fault_names.h"
#include "core/rng.h"
#include "core/status.h"
#include "fuzz/config_domain.h"
#include "kernels/engine.h"
#include "oracles/check.h"
#include "oracles/oracle_registry.h"
#include "oracles/reference.h"
#include "oracles/report.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace paradiff {
namespace {

// The fuzz size budget: small enough that one execution (reference pair + engine + oracles)
// takes tens, at most a few hundred, milliseconds under ASan (docs/FUZZING.md, "Performance").
// Bigger configs are the campaign's (`paradiff campaign`).
struct FuzzSizeBudget {
  static constexpr int64_t kMaxWorld = 8;
  static constexpr int64_t kMaxLayers = 3;
  static constexpr int64_t kMaxHidden = 64;
  static constexpr int64_t kMaxFfn = 256;
  static constexpr int64_t kMaxVocab = 128;
  static constexpr int64_t kMaxSteps = 2;
  static constexpr int64_t kMaxSeqLen = 16;
  static constexpr int64_t kMaxGlobalBatch = 16;  // micro_batch * accumulation_steps * dp
};

constexpr std::chrono::milliseconds kCollectiveTimeout{10000};  // a rank waiting longer: hang
constexpr double kByteMutationShare = 0.08;  // LLVMFuzzerMutate (dictionary, parser paths)
constexpr double kShrinkShare = 0.1;         // a ShrinkCandidates step instead of MutateConfig
constexpr int kCrossOverAttempts = 8;
constexpr const char* kInjectFlag = "-paradiff_inject=";
constexpr const char* kOraclesFlag = "-paradiff_oracles=";
constexpr const char* kExplainFlag = "-paradiff_explain=";
constexpr const char* kArtifactPrefixFlag = "-artifact_prefix=";

// See Note [Fuzz target state].
struct TargetState {
  std::vector<std::string> inject;   // -paradiff_inject
  std::vector<std::string> oracles;  // -paradiff_oracles (resolved)
  std::string report_prefix;         // libFuzzer's -artifact_prefix
  bool explain = false;              // -paradiff_explain=1
  ReferenceCache cache;
  DomainOptions domain;
};

TargetState& State() {
  static TargetState state;
  return state;
}

void AddLimit(Status& s, const char* field, int64_t value, int64_t max) {
  if (value > max)
    s.Add(field, std::string(field) + "=" + std::to_string(value) +
                     " exceeds the fuzz target's limit of " + std::to_string(max) +
                     " (FuzzSizeBudget)");
}

// What this target checks in-process: small configs on the local backend.
Status CheckFuzzSize(const Config& c) {
  Status s;
  using B = FuzzSizeBudget;
  AddLimit(s, "parallel.world", c.parallel.world, B::kMaxWorld);
  AddLimit(s, "model.layers", c.model.layers, B::kMaxLayers);
  AddLimit(s, "model.hidden", c.model.hidden, B::kMaxHidden);
  AddLimit(s, "model.ffn", c.model.ffn, B::kMaxFfn);
  AddLimit(s, "model.vocab", c.model.vocab, B::kMaxVocab);
  AddLimit(s, "steps", c.steps, B::kMaxSteps);
  AddLimit(s, "model.seq_len", c.model.seq_len, B::kMaxSeqLen);
  // Each factor is bounded first so that the product cannot overflow.
  const bool batch_sane = c.batch.micro_batch <= B::kMaxGlobalBatch &&
                          c.batch.accumulation_steps <= B::kMaxGlobalBatch &&
                          c.parallel.dp <= B::kMaxGlobalBatch;
  AddLimit(s, "batch.global", batch_sane ? GlobalBatch(c) : B::kMaxGlobalBatch + 1,
           B::kMaxGlobalBatch);
  if (c.backend != Backend::kLocal)
    s.Add("backend", std::string("backend=") + Name(c.backend) +
                         ": the fuzz target runs the local backend only");
  return s;
}

// The config, and the layout it reloads into after a checkpoint, both within the size budget.
Status CheckFuzzSizeWithReload(const Config& c) {
  Status s = CheckFuzzSize(c);
  if (c.checkpoint.save_at > 0) {
    const Status reload = CheckFuzzSize(ReloadPhaseConfig(c));
    for (const auto& e : reload.errors())
      s.Add("checkpoint.reload", "checkpoint.reload: " + e.message);
  }
  return s;
}

// Validate + resource budget + this build's engine + the fuzz size budget.
Status CheckFuzzable(const Config& c) {
  Status s = CheckConfig(c, ResourceBudget{});
  if (!s.ok()) return s;
  s = EngineSupports(c);
  if (const std::string why = EngineShardGroupRefusal(c); !why.empty())
    s.Add("zero.shard_group", why);
  if (!s.ok()) return s;
  return CheckFuzzSizeWithReload(c);
}

std::vector<std::string> SplitList(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// All errors of `s` on one line.
std::string OneLine(const Status& s) {
  std::string out;
  for (const auto& e : s.errors()) out += (out.empty() ? "" : "; ") + e.message;
  return out;
}

// Letters, digits, '.', '_' and '-' only: the signature becomes part of a file name.
std::string FileSafe(const std::string& s) {
  std::string out = s;
  for (char& ch : out) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '.' || ch == '_' || ch == '-';
    if (!ok) ch = '_';
  }
  return out;
}

// The config an input stands for: parsed, with the injected switches as its faults.
StatusOr<Config> InputConfig(const uint8_t* data, size_t size) {
  StatusOr<Config> cfg = ParseConfig(std::string(reinterpret_cast<const char*>(data), size));
  if (!cfg.ok()) return cfg;
  Config c = std::move(cfg).value();
  c.faults = State().inject;
  return c;
}

// `doc` without the members equal to `defaults` (recursively; objects left empty go too).
void DropDefaults(nlohmann::json& doc, const nlohmann::json& defaults) {
  for (auto it = doc.begin(); it != doc.end();) {
    const auto d = defaults.find(it.key());
    if (d != defaults.end() && it->is_object() && d->is_object()) DropDefaults(*it, *d);
    const bool drop = d != defaults.end() && (*it == *d || (it->is_object() && it->empty()));
    it = drop ? doc.erase(it) : std::next(it);
  }
}

// The sparse form: one line holding only the fields that differ from config.h's defaults (what
// ParseConfig fills in for omitted keys). Its size shrinks as a config moves toward the defaults,
// which is what -minimize_crash measures. Empty when it would not read back as `c`.
std::string SparseText(const Config& c) {
  nlohmann::json doc = ConfigToJson(c);
  DropDefaults(doc, ConfigToJson(Config{}));
  std::string text = doc.dump();
  StatusOr<Config> back = ParseConfig(text);
  return back.ok() && back.value() == c ? text : std::string();
}

// Writes `c` into data[0, max_size): the stable pretty form (WriteConfig) when it fits, else the
// sparse form. Returns 0 when neither fits.
size_t WriteInto(const Config& c, uint8_t* data, size_t max_size) {
  std::string text = WriteConfig(c);
  if (text.size() > max_size) text = SparseText(c);
  if (text.empty() || text.size() > max_size) return 0;
  std::memcpy(data, text.data(), text.size());
  return text.size();
}

// A generated config that fits, or the original size when none does (the input is unchanged).
size_t WriteGenerated(SeqRng& rng, uint8_t* data, size_t size, size_t max_size) {
  const size_t n = WriteInto(GenerateConfig(rng, State().domain), data, max_size);
  return n > 0 ? n : std::min(size, max_size);
}

// ShrinkCandidates of `base` that are fuzzable, in an order drawn from `rng`.
std::vector<Config> Smaller(const Config& base, SeqRng& rng) {
  std::vector<Config> out;
  for (Config& c : ShrinkCandidates(base)) {
    c.faults = State().inject;
    if (CheckFuzzable(c).ok()) out.push_back(std::move(c));
  }
  for (size_t i = out.size(); i > 1; --i) std::swap(out[i - 1], out[rng.Below(i)]);
  return out;
}

// Under -minimize_crash libFuzzer asks for an input shorter than the crashing one (max_size <
// size): the first fuzzable shrink step whose sparse form fits. None: the input cut to max_size,
// which does not parse, so that attempt is simply rejected.
size_t WriteSmaller(const Config& base, SeqRng& rng, uint8_t* data, size_t size, size_t max_size) {
  for (const Config& c : Smaller(base, rng))
    if (const size_t n = WriteInto(c, data, max_size); n > 0) return n;
  return std::min(size, max_size);
}

// One step of the search: mostly MutateConfig, sometimes a shrink step.
Config Mutated(const Config& base, SeqRng& rng) {
  if (rng.Chance(kShrinkShare)) {
    std::vector<Config> smaller = Smaller(base, rng);
    if (!smaller.empty()) return smaller.front();
  }
  return MutateConfig(base, rng, State().domain);
}

void ReportFinding(const Config& cfg, const CheckResult& res) {
  const TargetState& st = State();
  const Verdict& v = res.verdict;
  const std::string sig = v.Signature();
  const std::string path = st.report_prefix + "paradiff-finding-" + FileSafe(sig) + ".json";
  const Status w = WriteFileAtomic(path, ReportJson(cfg, res).dump(2) + "\n");
  if (!w.ok())
    std::fprintf(stderr, "ERROR: paradiff: could not write the report: %s\n", OneLine(w).c_str());
  std::fprintf(stderr,
               "SUMMARY: paradiff: FINDING kind=%s sig=%s seed=%llu step=%lld phase=%s tensor=%s "
               "report=%s\n",
               Name(v.kind), sig.c_str(), static_cast<unsigned long long>(cfg.seed),
               static_cast<long long>(v.where.step), Name(v.where.phase), v.where.tensor.c_str(),
               w.ok() ? path.c_str() : "-");
  std::fprintf(stderr, "INFO: paradiff: %s\n", v.message.c_str());
  std::fflush(stderr);
}

bool ParseFlags(int argc, char** argv) {
  TargetState& st = State();
  bool ok = true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.rfind(kInjectFlag, 0) == 0) {
      for (const std::string& name : SplitList(std::string(arg.substr(std::strlen(kInjectFlag))))) {
        if (!IsKnownFault(name)) {
          std::fprintf(stderr,
                       "ERROR: paradiff: -paradiff_inject: unknown fault switch '%s' (see "
                       "core/fault_names.h)\n",
                       name.c_str());
          ok = false;
        } else if (std::find(st.inject.begin(), st.inject.end(), name) == st.inject.end()) {
          st.inject.push_back(name);
        }
      }
    } else if (arg.rfind(kOraclesFlag, 0) == 0) {
      auto names =
          ResolveOracleNames(SplitList(std::string(arg.substr(std::strlen(kOraclesFlag)))));
      if (!names.ok()) {
        std::fprintf(stderr, "ERROR: paradiff: -paradiff_oracles: %s\n",
                     OneLine(names.status()).c_str());
        ok = false;
      } else {
        st.oracles = names.value();
      }
    } else if (arg.rfind(kExplainFlag, 0) == 0) {
      st.explain = arg.substr(std::strlen(kExplainFlag)) != "0";
    } else if (arg.rfind(kArtifactPrefixFlag, 0) == 0) {
      st.report_prefix = std::string(arg.substr(std::strlen(kArtifactPrefixFlag)));
    }
  }
  return ok;
}

}  // namespace
}  // namespace paradiff

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  using namespace paradiff;  // NOLINT(build/namespaces): the C entry points
  at::set_num_threads(1);    // ranks are threads: one intra-op thread each (TOOLCHAIN.md)
  if (!ParseFlags(*argc, *argv)) std::exit(2);  // bad flags are bad input (core/exit_codes.h)
  TargetState& st = State();
  st.domain.max_world = FuzzSizeBudget::kMaxWorld;
  st.domain.max_layers = FuzzSizeBudget::kMaxLayers;
  st.domain.max_hidden = FuzzSizeBudget::kMaxHidden;
  st.domain.max_vocab = FuzzSizeBudget::kMaxVocab;
  st.domain.max_steps = FuzzSizeBudget::kMaxSteps;
  st.domain.max_scaler_steps = FuzzSizeBudget::kMaxSteps;
  st.domain.max_schedule_steps = FuzzSizeBudget::kMaxSteps;
  st.domain.faults = st.inject;
  st.domain.accept = [](const Config& c) {
    return EngineSupports(c).ok() && CheckFuzzSizeWithReload(c).ok();
  };
  std::string inject;
  for (const std::string& f : st.inject) inject += (inject.empty() ? "" : ",") + f;
  std::fprintf(stderr, "INFO: paradiff_fuzz_target inject=%s oracles=%s reports=%s*.json\n",
               inject.empty() ? "-" : inject.c_str(), st.oracles.empty() ? "default" : "selected",
               st.report_prefix.empty() ? "./paradiff-finding-"
                                        : (st.report_prefix + "paradiff-finding-").c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace paradiff;  // NOLINT(build/namespaces): the C entry points
  TargetState& st = State();
  StatusOr<Config> cfg = InputConfig(data, size);
  const Status fuzzable = cfg.ok() ? CheckFuzzable(cfg.value()) : cfg.status();
  if (!fuzzable.ok()) {
    if (st.explain)
      std::fprintf(stderr, "INFO: paradiff: REJECTED %s\n", OneLine(fuzzable).c_str());
    return -1;
  }
  CheckOptions opts;
  opts.timeout = kCollectiveTimeout;
  opts.cache = &st.cache;
  opts.oracles = st.oracles;
  const CheckResult res = CheckRun(cfg.value(), opts);
  if (st.explain)
    std::fprintf(stderr,
                 "INFO: paradiff: %s world=%lld reference=%.3fs%s engine=%.3fs compare=%.3fs\n",
                 res.rejected ? "REJECTED by the validation gate" : Name(res.verdict.kind),
                 static_cast<long long>(cfg.value().parallel.world), res.timing.reference_s,
                 res.reference_cached ? "(cached)" : "", res.timing.engine_s, res.timing.compare_s);
  if (res.rejected) return -1;
  if (IsFinding(res.verdict.kind)) {
    ReportFinding(cfg.value(), res);
    std::abort();  // libFuzzer's SIGABRT handler saves the input as crash-<sha1>
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  using namespace paradiff;  // NOLINT(build/namespaces): the C entry points
  SeqRng rng(seed);
  const bool want_smaller = max_size < size;
  if (!want_smaller && rng.Chance(kByteMutationShare))
    return LLVMFuzzerMutate(data, size, max_size);
  StatusOr<Config> cfg = InputConfig(data, size);
  if (!cfg.ok()) return WriteGenerated(rng, data, size, max_size);
  if (want_smaller) return WriteSmaller(cfg.value(), rng, data, size, max_size);
  const size_t n = WriteInto(Mutated(cfg.value(), rng), data, max_size);
  return n > 0 ? n : WriteGenerated(rng, data, size, max_size);
}

extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1,
                                            const uint8_t* data2, size_t size2, uint8_t* out,
                                            size_t max_out_size, unsigned int seed) {
  using namespace paradiff;  // NOLINT(build/namespaces): the C entry points
  SeqRng rng(seed);
  StatusOr<Config> a = InputConfig(data1, size1);
  StatusOr<Config> b = InputConfig(data2, size2);
  if (!a.ok() || !b.ok()) return WriteGenerated(rng, out, 0, max_out_size);
  // Each section from either parent; a child that is not fuzzable is redrawn, then mutated.
  for (int attempt = 0; attempt < kCrossOverAttempts; ++attempt) {
    Config c = a.value();
    const Config& o = b.value();
    if (rng.Chance(0.5)) c.model = o.model;
    if (rng.Chance(0.5)) c.batch = o.batch;
    if (rng.Chance(0.5)) c.parallel = o.parallel;
    if (rng.Chance(0.5)) c.zero = o.zero;
    if (rng.Chance(0.5)) c.precision = o.precision;
    if (rng.Chance(0.5)) c.optimizer = o.optimizer;
    if (rng.Chance(0.5)) c.checkpoint = o.checkpoint;
    if (rng.Chance(0.5)) c.steps = o.steps;
    if (c == a.value() || c == o || !CheckFuzzable(c).ok()) continue;
    if (const size_t n = WriteInto(c, out, max_out_size); n > 0) return n;
  }
  const size_t n = WriteInto(MutateConfig(a.value(), rng, State().domain), out, max_out_size);
  return n > 0 ? n : WriteGenerated(rng, out, 0, max_out_size);
}
