// CheckBudget / CheckConfig / EstimateBytesPerRank (budget.h).
//
// Note [Bytes per rank]: an analytical upper estimate of one rank's memory, in bytes:
//   P / (tp * pp) * (param + grad + optimizer state + master copy)      -- model state
//   + micro_batch * seq_len * hidden * layers * 16 * 4                  -- activations
//   + micro_batch * seq_len * ceil(vocab / tp) * 4 * 2                  -- logits + their grad
//   (gpt)
// where P = ModelParameterCount, param = bytes of precision.param, grad = bytes of
// precision.accumulate (gradients are accumulated in it), optimizer state = 2 fp32 slots (8 bytes)
// for adam / adamw, 1 slot (4 bytes) for sgd with momentum > 0, none for plain sgd, and master
// copy = 4 bytes when master_weights is on and param is not fp32. ZeRO sharding is ignored, so the
// estimate is an upper bound for every stage. Activations count about 16 fp32 values per token,
// hidden unit and layer; a pipeline stage holds layers / pp layers but up to pp micro-batches in
// flight, hence the full layer count. Padding: every tensor starts at a multiple of
// zero.align_elems and the flat buffer is padded to a multiple of dp * align_elems, so at most
// align_elems * (tensors + dp) padding elements (tensors <= kTensorsPerLayer per layer plus
// kTensorsOutsideLayers), each holding the same state. Everything is computed in double, so
// nothing overflows.
//
// Note [Bytes per process]: with the local backend every rank is a thread of the checking process,
// which also runs the reference pair and keeps what each side recorded per step:
//   world * (bytes per rank + steps * P / (tp * pp) * kReportedKinds * 4)    -- ranks, reports
//   + steps * P * kReportedKinds * 8 * kRecordedRuns                          -- truth, twin, run
//   + P * kReferenceStateBytes                                               -- reference state
// (kReportedKinds: parameters, gradients, master weights, two optimizer slots, at most). The
// per-rank estimate alone leaves out the records and the reference pair, so a config within the
// per-rank limit can still exhaust the process. Evidence: docs/EVIDENCE.md.
#include "core/budget.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "core/model_spec.h"
#include "core/validate.h"

namespace paradiff {
namespace {

constexpr double kActivationValuesPerUnit = 16;  // fp32 values per token, hidden unit and layer
constexpr double kFp32Bytes = 4;
constexpr double kLogitCopies = 2;           // the logits and their gradient
constexpr double kTensorsPerLayer = 16;      // upper bound of a block's parameter tensors
constexpr double kTensorsOutsideLayers = 8;  // embeddings, final norm, head
constexpr double kReportedKinds = 5;         // param, grad, master, two optimizer slots
constexpr double kRecordedRuns = 3;          // the float64 truth, the twin, the assembled run
constexpr double kReferenceStateBytes = 64;  // live state of the two reference runs per parameter

double Bytes(DType t) {
  switch (t) {
    case DType::kFp32:
      return 4;
    case DType::kBf16:
      return 2;
    case DType::kFp16:
      return 2;
    case DType::kFp64:
      return 8;
  }
  return 8;
}

// An integer-valued double as text: exact digits when it fits, scientific otherwise.
std::string Text(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, v < 1e18 ? "%.0f" : "%.3e", v);
  return buf;
}

// Whether the model's structure admits a parameter count and a memory estimate.
bool Measurable(const Config& c) {
  const ModelConfig& m = c.model;
  if (m.layers < 1 || m.hidden < 1 || m.seq_len < 1 || c.parallel.tp < 1 || c.parallel.pp < 1)
    return false;
  if (m.kind == ModelKind::kExactLinear) return true;
  return m.heads >= 1 && m.kv_heads >= 1 && m.ffn >= 1 && m.vocab >= 1 && m.hidden % m.heads == 0;
}

// ModelParameterCount in double (model_spec.h documents the parameter list). Only called when
// Measurable; exact while the count is below 2^53.
double ParameterCount(const ModelConfig& m) {
  const double h = static_cast<double>(m.hidden), layers = static_cast<double>(m.layers);
  if (m.kind == ModelKind::kExactLinear) return (layers + 2) * h * h;
  const double vocab = static_cast<double>(m.vocab), ffn = static_cast<double>(m.ffn);
  const double qkv = (static_cast<double>(m.heads) + 2 * static_cast<double>(m.kv_heads)) *
                     static_cast<double>(m.hidden / m.heads);
  const double mlp = m.activation == Activation::kSwiglu ? 2 * ffn * h : ffn * h + ffn;
  const double block = 4 * h + qkv * h + qkv + h * h + h + mlp + h * ffn + h;
  double total = vocab * h + layers * block + 2 * h;
  if (m.position_embeddings) total += static_cast<double>(m.seq_len) * h;
  if (!m.tied_embeddings) total += vocab * h;
  return total;
}

// The exact count from the model spec when it is within the budget (so building the spec is
// cheap and cannot overflow); the double count otherwise.
double ExactOrEstimatedParameters(const Config& c, const ResourceBudget& b) {
  constexpr double kMaxExact = 9007199254740992.0;  // 2^53: doubles count exactly below it
  const double estimate = ParameterCount(c.model);
  if (estimate > static_cast<double>(b.max_params) || estimate > kMaxExact ||
      c.model.layers > b.max_layers)
    return estimate;
  return static_cast<double>(ModelParameterCount(c.model));
}

double BytesPerRank(const Config& c, double params) {
  const PrecisionConfig& pr = c.precision;
  const ModelConfig& m = c.model;
  double state = Bytes(pr.param) + Bytes(pr.accumulate);
  if (c.optimizer.kind != OptimizerKind::kSgd)
    state += 2 * kFp32Bytes;
  else if (c.optimizer.momentum > 0)
    state += kFp32Bytes;
  if (pr.keeps_master()) state += kFp32Bytes;
  const double tp = static_cast<double>(c.parallel.tp), pp = static_cast<double>(c.parallel.pp);
  const double tokens = static_cast<double>(std::max<int64_t>(c.batch.micro_batch, 0)) *
                        static_cast<double>(m.seq_len);
  const double tensors = kTensorsPerLayer * static_cast<double>(m.layers) + kTensorsOutsideLayers;
  const double padding = static_cast<double>(std::max<int64_t>(c.zero.align_elems, 1)) *
                         (tensors + static_cast<double>(std::max<int64_t>(c.parallel.dp, 1)));
  double bytes = (params / (tp * pp) + padding) * state;
  bytes += tokens * static_cast<double>(m.hidden) * static_cast<double>(m.layers) *
           kActivationValuesPerUnit * kFp32Bytes;
  if (m.kind == ModelKind::kGpt)
    bytes += tokens * std::ceil(static_cast<double>(m.vocab) / tp) * kFp32Bytes * kLogitCopies;
  return bytes;
}

double BytesPerProcess(const Config& c, double params) {
  const double world = static_cast<double>(std::max<int64_t>(c.parallel.world, 1));
  const double steps = static_cast<double>(std::max<int64_t>(c.steps, 1));
  const double local = params / static_cast<double>(c.parallel.tp * c.parallel.pp);
  return world * (BytesPerRank(c, params) + steps * local * kReportedKinds * kFp32Bytes) +
         steps * params * kReportedKinds * Bytes(DType::kFp64) * kRecordedRuns +
         params * kReferenceStateBytes;
}

void Limit(Status& st, const std::string& field, double value, int64_t max, const char* name,
           const std::string& detail = "") {
  if (value <= static_cast<double>(max)) return;
  st.Add(field, field + "=" + Text(value) + detail + " exceeds the budget of " +
                    std::to_string(max) + " (ResourceBudget." + name + ")");
}

}  // namespace

double EstimateBytesPerRank(const Config& c) {
  if (!Measurable(c)) return -1;
  return BytesPerRank(c, ParameterCount(c.model));
}

double EstimateBytesPerProcess(const Config& c) {
  if (!Measurable(c)) return -1;
  return BytesPerProcess(c, ParameterCount(c.model));
}

Status CheckBudget(const Config& c, const ResourceBudget& b) {
  Status st;
  const auto d = [](int64_t v) { return static_cast<double>(v); };
  Limit(st, "parallel.world", d(c.parallel.world), b.max_world, "max_world");
  Limit(st, "steps", d(c.steps), b.max_steps, "max_steps");
  Limit(st, "model.seq_len", d(c.model.seq_len), b.max_seq_len, "max_seq_len");
  Limit(st, "model.layers", d(c.model.layers), b.max_layers, "max_layers");
  Limit(st, "model.vocab", d(c.model.vocab), b.max_vocab, "max_vocab");
  Limit(st, "batch.accumulation_steps", d(c.batch.accumulation_steps), b.max_accumulation,
        "max_accumulation");
  Limit(st, "batch.micro_batch", d(c.batch.micro_batch), b.max_micro_batch, "max_micro_batch");
  Limit(st, "zero.bucket_elems", d(c.zero.bucket_elems), b.max_bucket_elems, "max_bucket_elems");
  Limit(st, "zero.align_elems", d(c.zero.align_elems), b.max_align_elems, "max_align_elems");
  const BatchConfig& batch = c.batch;
  if (batch.micro_batch >= 1 && batch.accumulation_steps >= 1 && c.parallel.dp >= 1 &&
      c.model.seq_len >= 1) {
    const double tokens =
        d(batch.micro_batch) * d(batch.accumulation_steps) * d(c.parallel.dp) * d(c.model.seq_len);
    Limit(st, "batch.tokens_per_step", tokens, b.max_tokens_per_step, "max_tokens_per_step",
          " (batch.micro_batch * batch.accumulation_steps * parallel.dp * model.seq_len)");
  }
  if (!Measurable(c)) return st;
  const double params = ExactOrEstimatedParameters(c, b);
  Limit(st, "model.parameters", params, b.max_params, "max_params");
  Limit(st, "bytes_per_rank", BytesPerRank(c, params), b.max_bytes_per_rank, "max_bytes_per_rank",
        " (estimated: model state / (tp*pp) + padding + activations + logits)");
  Limit(st, "bytes_per_process", BytesPerProcess(c, params), b.max_bytes_per_process,
        "max_bytes_per_process",
        " (estimated: every rank and its reports, the reference pair and the per-step records)");
  return st;
}

Status CheckConfig(const Config& c, const ResourceBudget& b) {
  Status st = Validate(c);
  st.Merge(CheckBudget(c, b));
  return st;
}

}  // namespace paradiff
