// ImportMegatron (targets/translate.h): a pretrain_gpt.py argument list, translated onto a small
// paradiff config; the counterpart of ExportMegatron, with the same rules for production sizes
// (see Note [Importing a production config] in import_deepspeed.cpp) and see Note [Test model].
//
// Note [Test model]: a production model (hidden 4096+, 32+ layers, 32+ heads, 2k+ tokens) is shrunk
// to one a check trains in seconds while keeping what layouts depend on: each tp rank keeps up to
// 2 kv heads (or the replicated kv heads of MQA / kv < tp) and up to 4 query heads per kv head, so
// GQA and its split over tp survive; a head is 8 wide; the ffn keeps its ratio to hidden (rounded
// up to a multiple of tp); each pipeline chunk keeps up to 2 layers (plus the remainder when the
// layers do not divide); sequences keep up to 32 tokens; a vocabulary over 128 becomes about 128
// (a multiple of tp when tp divided it, one less otherwise); a run trains up to 3 steps. Each
// change is one INFO line naming the argument.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "targets/translate.h"

namespace paradiff {

namespace {

constexpr int64_t kTestHeadDim = 8, kTestSeqLen = 32, kTestSteps = 3, kTestVocab = 128;
constexpr int64_t kTestLayersPerChunk = 2, kTestKvPerRank = 2, kTestGroup = 4;

class Reader {
 public:
  explicit Reader(ImportResult& out) : out_(out) {}
  void Warn(const std::string& t) { out_.messages.push_back({ImportMessage::kWarning, t}); }
  void Info(const std::string& t) { out_.messages.push_back({ImportMessage::kInfo, t}); }
  // One INFO line for a size the test model changes.
  void Shrunk(const std::string& flag, int64_t from, int64_t to) {
    if (from != to)
      Info(flag + " " + std::to_string(from) + " -> " + std::to_string(to) +
           " (see Note [Test model])");
  }
  void Error(const std::string& k, const std::string& rule) { st_.Add(k, k + ": " + rule); }
  Status status() const { return st_; }

  // Splits argv into flag -> value: a flag followed by a token that is not a flag takes it as its
  // value, any other is a switch (""); --flag=value works too. The last of a repeated flag wins,
  // as in argparse.
  void Parse(const std::vector<std::string>& args) {
    for (size_t i = 0; i < args.size(); ++i) {
      const std::string& a = args[i];
      if (a.rfind("--", 0) != 0 || a.size() == 2) {
        Error(a, "expected an argument starting with --");
        continue;
      }
      const size_t eq = a.find('=');
      if (eq != std::string::npos) {
        flags_[a.substr(0, eq)] = a.substr(eq + 1);
      } else if (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) {
        std::string v = args[++i];  // several values (argparse nargs) are kept space-separated
        while (i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) v += " " + args[++i];
        flags_[a] = v;
      } else {
        flags_[a] = "";
      }
    }
  }
  bool Has(const std::string& k) {
    used_.insert(k);
    return flags_.count(k) > 0;
  }
  bool Int(const std::string& k, int64_t min, int64_t& dst) {
    if (!Has(k)) return false;
    const std::string& v = flags_[k];
    size_t end = 0;
    long long x = 0;
    try {
      x = std::stoll(v, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    if (v.empty() || end != v.size() || x < min) {
      Error(k, "must be an integer >= " + std::to_string(min) + ", got '" + v + "'");
      return false;
    }
    dst = x;
    return true;
  }
  bool Number(const std::string& k, double min, double& dst) {
    if (!Has(k)) return false;
    const std::string& v = flags_[k];
    size_t end = 0;
    double x = 0;
    try {
      x = std::stod(v, &end);
    } catch (const std::exception&) {
      end = 0;
    }
    if (v.empty() || end != v.size() || !std::isfinite(x) || x < min) {
      Error(k, "must be a number >= " + nlohmann::json(min).dump() + ", got '" + v + "'");
      return false;
    }
    dst = x;
    return true;
  }
  std::string Str(const std::string& k) { return Has(k) ? flags_[k] : ""; }
  void WarnUnused() {
    for (const auto& [k, v] : flags_)
      if (!used_.count(k)) Warn(k + ": no paradiff counterpart; ignored");
  }

 private:
  ImportResult& out_;
  Status st_;
  std::map<std::string, std::string> flags_;
  std::set<std::string> used_;
};

void ShrinkWidth(Config& c, Reader& r) {
  ModelConfig& m = c.model;
  const int64_t tp = c.parallel.tp;
  if (m.heads % tp != 0 || m.heads % m.kv_heads != 0 || m.hidden % m.heads != 0) return;
  const int64_t group = std::min(m.heads / m.kv_heads, kTestGroup);
  int64_t kv = m.kv_heads, heads = m.heads;
  if (m.heads / tp <= kTestKvPerRank * kTestGroup) {
    // few heads per rank already: kept
  } else if (m.kv_heads % tp == 0) {
    kv = tp * std::min(m.kv_heads / tp, kTestKvPerRank);
    heads = kv * group;
  } else {  // kv heads replicated over tp (MQA, kv < tp)
    heads = tp * std::min(m.heads / tp, kTestKvPerRank * kTestGroup);
  }
  const int64_t hidden = heads * std::min(m.hidden / m.heads, kTestHeadDim);
  r.Shrunk("--num-attention-heads", m.heads, heads);
  if (m.kv_heads != m.heads) r.Shrunk("--num-query-groups", m.kv_heads, kv);
  r.Shrunk("--hidden-size", m.hidden, hidden);
  if (hidden != m.hidden) {
    const double ratio = static_cast<double>(m.ffn) / static_cast<double>(m.hidden);
    int64_t ffn = std::max<int64_t>(1, std::llround(ratio * static_cast<double>(hidden)));
    ffn = (ffn + tp - 1) / tp * tp;
    r.Shrunk("--ffn-hidden-size", m.ffn, ffn);
    m.ffn = ffn;
  }
  m.heads = heads, m.kv_heads = kv, m.hidden = hidden;
  const int64_t chunks = c.parallel.pp * c.parallel.virtual_stages;
  if (m.layers > chunks * kTestLayersPerChunk) {
    const int64_t layers = chunks * kTestLayersPerChunk + m.layers % chunks;
    r.Shrunk("--num-layers", m.layers, layers);
    m.layers = layers;
  }
}

void ShrinkSequence(Config& c, Reader& r) {
  ModelConfig& m = c.model;
  r.Shrunk("--seq-length", m.seq_len, std::min(m.seq_len, kTestSeqLen));
  if (m.vocab > kTestVocab) {  // keeps whether tp divides it (a padded vocabulary or not)
    const int64_t tp = c.parallel.tp, even = kTestVocab - kTestVocab % tp;
    const int64_t vocab = m.vocab % tp == 0 ? even : even - 1;
    r.Shrunk("--vocab-size", m.vocab, vocab);
    m.vocab = vocab;
  }
  m.seq_len = std::min(m.seq_len, kTestSeqLen);
  r.Shrunk("--train-iters", c.steps, std::min(c.steps, kTestSteps));
  c.steps = std::min(c.steps, kTestSteps);
}

// Megatron's OptimizerParamScheduler as read from the arguments, in iterations.
struct MegatronSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  int64_t warmup = 0, decay = 0;
  double min_ratio = 0;
  std::string what;  // "--lr-decay-style S", for the INFO lines
};

// Note [Megatron's schedule]: Megatron warms up from --lr-warmup-init (0) over --lr-warmup-iters
// (or a fraction of the decay, or samples / global batch), then decays over --lr-decay-iters (or
// samples, default --train-iters) to --min-lr: linear (its default) or cosine; constant keeps the
// peak. It reads its count before the update (the first update of a warmup runs at 0, the second
// at 1/W) while DeepSpeed's schedulers, paradiff's (docs/CONFIG.md), run one update behind and
// decay linearly to 0: the import takes the nearest of paradiff's schedules with a WARNING. A
// decay needs a warmup of at least 2 here (ScaleSchedule). The arguments are read only when one
// of them is given: without any, the rate stays constant.
MegatronSchedule ReadSchedule(Reader& r, const Config& c, int64_t global) {
  MegatronSchedule m;
  const char* keys[] = {"--lr-decay-style",
                        "--lr-warmup-iters",
                        "--lr-warmup-fraction",
                        "--lr-warmup-samples",
                        "--lr-decay-iters",
                        "--lr-decay-samples",
                        "--min-lr",
                        "--lr-warmup-init"};
  bool any = false;
  for (const char* k : keys) any = r.Has(k) || any;
  if (!any) return m;
  const std::string style = r.Has("--lr-decay-style") ? r.Str("--lr-decay-style") : "linear";
  int64_t decay = c.steps, samples = 0;  // --train-iters, read before the shrink
  if (!r.Int("--lr-decay-iters", 1, decay) && r.Int("--lr-decay-samples", 1, samples))
    decay = std::max<int64_t>(1, samples / global);
  int64_t warmup = 0;
  double fraction = 0;
  if (r.Int("--lr-warmup-iters", 0, warmup)) {
    // as written
  } else if (r.Number("--lr-warmup-fraction", 0, fraction)) {
    warmup = std::llround(fraction * static_cast<double>(decay));
  } else if (r.Int("--lr-warmup-samples", 0, samples)) {
    warmup = samples / global;
  }
  double min_lr = 0, init = 0;
  r.Number("--min-lr", 0, min_lr);
  if (r.Number("--lr-warmup-init", 0, init) && init != 0)
    r.Warn("--lr-warmup-init " + nlohmann::json(init).dump() +
           ": paradiff's warmups start from 0; taken as 0");
  if (style == "constant") {
    m.kind = warmup > 0 ? LrScheduleKind::kWarmup : LrScheduleKind::kConstant;
  } else if (style == "linear") {
    m.kind = LrScheduleKind::kWarmupLinear;
    if (min_lr > 0)
      r.Warn("--min-lr " + nlohmann::json(min_lr).dump() +
             ": paradiff's linear decay ends at 0; taken as 0");
  } else if (style == "cosine") {
    m.kind = LrScheduleKind::kWarmupCosine;
    if (c.optimizer.lr > 0) m.min_ratio = std::min(min_lr / c.optimizer.lr, 0.99);
  } else {
    r.Warn("--lr-decay-style " + style +
           ": paradiff has constant, linear and cosine decays; the rate stays constant");
    return m;
  }
  if (m.kind == LrScheduleKind::kConstant) return m;
  m.warmup = warmup, m.decay = decay, m.what = "--lr-decay-style " + style;
  r.Warn("--lr-decay-style " + style +
         ": Megatron's schedule runs one update ahead of paradiff's (DeepSpeed's, docs/CONFIG.md); "
         "the nearest taken" +
         (warmup < 2 ? std::string(", with a warmup of 2 (paradiff's decays start with one)")
                     : std::string()));
  return m;
}

}  // namespace

StatusOr<ImportResult> ImportMegatron(const std::vector<std::string>& args, const Config& base) {
  ImportResult out;
  Config& c = out.config;
  c = base;
  Reader r(out);
  r.Parse(args);
  ModelConfig& m = c.model;
  r.Int("--num-layers", 1, m.layers);
  r.Int("--hidden-size", 1, m.hidden);
  r.Int("--num-attention-heads", 1, m.heads);
  m.kv_heads = m.heads;
  if (r.Has("--group-query-attention")) r.Int("--num-query-groups", 1, m.kv_heads);
  const bool swiglu = r.Has("--swiglu");
  if (swiglu) m.activation = Activation::kSwiglu;
  if (!r.Int("--ffn-hidden-size", 1, m.ffn)) {  // Megatron's default
    m.ffn = swiglu ? static_cast<int64_t>(4 * m.hidden * 2 / 3 / 64) * 64 : 4 * m.hidden;
    if (m.ffn < 1) m.ffn = 4 * m.hidden;
  }
  r.Int("--seq-length", 1, m.seq_len);
  r.Int("--vocab-size", 1, m.vocab);
  int64_t max_pos = m.seq_len;
  r.Int("--max-position-embeddings", 1, max_pos);
  m.tied_embeddings = !r.Has("--untie-embeddings-and-output-weights");
  const std::string pos = r.Str("--position-embedding-type");
  if (r.Has("--no-position-embedding") || pos == "none") {
    m.position_embeddings = false;
  } else if (pos == "rope" || r.Has("--use-rotary-position-embeddings")) {
    m.position_embeddings = false;
    r.Warn(
        "--position-embedding-type rope: paradiff's GPT has learned absolute positions or "
        "none; none taken");
  } else if (!pos.empty() && pos != "learned_absolute") {
    r.Error("--position-embedding-type",
            "must be learned_absolute, rope or none, got '" + pos + "'");
  }
  ParallelConfig& p = c.parallel;
  r.Int("--tensor-model-parallel-size", 1, p.tp);
  r.Int("--pipeline-model-parallel-size", 1, p.pp);
  p.sp = r.Has("--sequence-parallel") && p.tp > 1;
  int64_t per_chunk = 0;
  if (r.Int("--num-layers-per-virtual-pipeline-stage", 1, per_chunk) && p.pp > 1) {
    if (m.layers % (p.pp * per_chunk) != 0)
      r.Error("--num-layers-per-virtual-pipeline-stage",
              "pp x " + std::to_string(per_chunk) + " does not divide --num-layers");
    else
      p.virtual_stages = m.layers / (p.pp * per_chunk), p.schedule = Schedule::kInterleaved;
  }
  int64_t micro = c.batch.micro_batch, global = 0;
  r.Int("--micro-batch-size", 1, micro);
  c.batch.micro_batch = micro;
  c.batch.accumulation_steps = 1;
  p.dp = 1;
  if (r.Int("--global-batch-size", 1, global)) {
    // The world size comes from the launcher: a pipeline takes the micro-batches as accumulation
    // (it needs them: dp 1), anything else as data parallel ranks (accumulation 1).
    if (global % micro != 0) {
      r.Error("--global-batch-size", "is not a multiple of --micro-batch-size");
    } else {
      (p.pp > 1 ? c.batch.accumulation_steps : p.dp) = global / micro;
      r.Warn("--global-batch-size: the world size is not in the arguments; taken as micro batch " +
             std::to_string(micro) + " x accumulation " +
             std::to_string(c.batch.accumulation_steps) + " x dp " + std::to_string(p.dp));
    }
  }
  r.Int("--train-iters", 1, c.steps);
  int64_t seed = 0;
  if (r.Int("--seed", 0, seed)) c.seed = static_cast<uint64_t>(seed);
  OptimizerConfig& o = c.optimizer;
  const std::string opt = r.Has("--optimizer") ? r.Str("--optimizer") : "adam";
  if (opt == "sgd") {
    o.kind = OptimizerKind::kSgd;
    r.Number("--sgd-momentum", 0, o.momentum);
  } else if (opt == "adam") {
    o.kind = OptimizerKind::kAdamW;  // Megatron's adam decouples weight decay
  } else {
    r.Error("--optimizer", "must be adam or sgd, got '" + opt + "'");
  }
  r.Number("--lr", 0, o.lr);
  r.Number("--weight-decay", 0, o.weight_decay);
  r.Number("--adam-beta1", 0, o.beta1);
  r.Number("--adam-beta2", 0, o.beta2);
  r.Number("--adam-eps", 0, o.eps);
  r.Number("--clip-grad", 0, c.clip_grad_norm);
  if (r.Has("--use-distributed-optimizer")) c.zero.stage = 1;
  const bool bf16 = r.Has("--bf16"), fp16 = r.Has("--fp16");
  if (bf16 && fp16) r.Error("--fp16", "--bf16 and --fp16 cannot both be given");
  PrecisionConfig& pr = c.precision;
  if (bf16 || fp16) {
    pr.param = pr.compute = pr.reduce = bf16 ? DType::kBf16 : DType::kFp16;
    pr.master_weights = true;
    // Megatron accumulates and reduces bf16 gradients in fp32 unless --grad-reduce-in-bf16; fp16
    // ones in fp16 unless --accumulate-allreduce-grads-in-fp32.
    const bool fp32_grads = r.Has("--accumulate-allreduce-grads-in-fp32");
    const bool bf16_grads = r.Has("--grad-reduce-in-bf16");
    pr.accumulate = (bf16 ? !bf16_grads : fp32_grads) ? DType::kFp32 : pr.param;
    pr.reduce = pr.accumulate;
  }
  if (fp16) {
    LossScaleConfig& s = pr.loss_scale;
    double fixed = 0;
    if (r.Number("--loss-scale", 0, fixed) && fixed > 0) {
      s.mode = LossScaleMode::kStatic, s.init = fixed;
    } else {
      s.mode = LossScaleMode::kDynamic;
      s.init = std::ldexp(1.0, 32);  // Megatron's --initial-loss-scale default
      r.Number("--initial-loss-scale", 1, s.init);
      s.growth_interval = 1000, s.hysteresis = 2, s.min = 1;
      r.Int("--loss-scale-window", 1, s.growth_interval);
      r.Int("--hysteresis", 1, s.hysteresis);
      r.Number("--min-loss-scale", 0, s.min);
    }
  }
  for (const char* k : {"--attention-dropout", "--hidden-dropout"}) {
    double d = 0.1;  // Megatron's default
    r.Number(k, 0, d);
    if (d != 0)
      r.Warn(std::string(k) + " " + nlohmann::json(d).dump() + ": paradiff trains without dropout");
  }
  const MegatronSchedule sched = ReadSchedule(r, c, global > 0 ? global : micro);
  r.WarnUnused();
  if (!r.status().ok()) return r.status();
  p.world = p.tp * p.pp * p.dp;
  ShrinkSequence(c, r);
  if (sched.kind != LrScheduleKind::kConstant) {
    ScaleSchedule(c, sched.kind, sched.warmup, sched.decay, sched.min_ratio, sched.what,
                  out.messages);
  }
  ScaleLayout(c, out.messages);
  ShrinkWidth(c, r);
  return out;
}

}  // namespace paradiff
