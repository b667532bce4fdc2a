// Validate (validate.h): the entry point, the message helpers, and the rules of the model, the
// batch and the parallel layout (tensor, sequence, pipeline, data parallel). The rules of ZeRO,
// precision, optimizer, checkpoint and faults are in validate_training.cpp.
#include "core/validate.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "core/validate_rules.h"

namespace paradiff {
namespace validate_internal {

std::string Str(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(buf, sizeof buf, "%.*g", precision, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t out = 0;
  return __builtin_mul_overflow(a, b, &out) ? std::numeric_limits<int64_t>::max() : out;
}

bool AtLeast(Status& st, const std::string& field, int64_t value, int64_t min) {
  if (value >= min) return true;
  st.Add(field, field + "=" + Str(value) + " must be >= " + Str(min));
  return false;
}

bool InRange(Status& st, const std::string& field, int64_t value, int64_t lo, int64_t hi) {
  if (value >= lo && value <= hi) return true;
  st.Add(field, field + "=" + Str(value) + " must be in " + Str(lo) + ".." + Str(hi));
  return false;
}

bool Finite(Status& st, const std::string& field, double value) {
  if (std::isfinite(value)) return true;
  st.Add(field, field + "=" + Str(value) + " must be finite");
  return false;
}

void CheckTensorParallel(const ModelConfig& m, int64_t tp, const std::string& tp_field,
                         Status& st) {
  if (tp < 1) return;  // range reported by the caller
  const std::string tp_is = tp_field + "=" + Str(tp);
  if (m.kind == ModelKind::kExactLinear) {
    if (m.hidden >= 1 && m.hidden % tp != 0)
      st.Add(tp_field, tp_is + " does not divide model.hidden=" + Str(m.hidden) +
                           " (each tp rank holds hidden/tp columns or rows of every exact layer)");
    return;
  }
  if (m.heads >= 1 && m.heads % tp != 0)
    st.Add(tp_field, tp_is + " does not divide model.heads=" + Str(m.heads) +
                         " (each tp rank holds heads/tp attention heads)");
  if (m.kv_heads >= 1) {
    const bool ok = m.kv_heads >= tp ? m.kv_heads % tp == 0 : tp % m.kv_heads == 0;
    if (!ok)
      st.Add(tp_field, tp_is + " and model.kv_heads=" + Str(m.kv_heads) +
                           " do not divide one another (kv_heads >= tp: kv_heads % tp must be 0,"
                           " heads are split; kv_heads < tp: tp % kv_heads must be 0, heads are"
                           " replicated)");
  }
  if (m.ffn >= 1 && m.ffn % tp != 0)
    st.Add(tp_field, tp_is + " does not divide model.ffn=" + Str(m.ffn) +
                         " (the MLP is split column-wise across tp ranks)");
}

}  // namespace validate_internal

namespace {

using namespace validate_internal;  // NOLINT(build/namespaces): this file implements it

void CheckModel(const ModelConfig& m, Status& st) {
  AtLeast(st, "model.layers", m.layers, 1);
  const bool hidden_ok = AtLeast(st, "model.hidden", m.hidden, 1);
  const bool heads_ok = AtLeast(st, "model.heads", m.heads, 1);
  const bool kv_ok = AtLeast(st, "model.kv_heads", m.kv_heads, 1);
  AtLeast(st, "model.ffn", m.ffn, 1);
  AtLeast(st, "model.vocab", m.vocab, 2);
  AtLeast(st, "model.seq_len", m.seq_len, 1);
  if (m.kind != ModelKind::kGpt) return;
  if (hidden_ok && heads_ok && m.hidden % m.heads != 0)
    st.Add("model.heads", "model.heads=" + Str(m.heads) + " does not divide model.hidden=" +
                              Str(m.hidden) + " (head_dim = hidden / heads)");
  if (heads_ok && kv_ok && m.heads % m.kv_heads != 0)
    st.Add("model.kv_heads", "model.kv_heads=" + Str(m.kv_heads) +
                                 " does not divide model.heads=" + Str(m.heads) +
                                 " (each key/value head serves heads/kv_heads query heads)");
}

void CheckSequenceParallel(const Config& c, Status& st) {
  const ParallelConfig& p = c.parallel;
  if (!p.sp || p.tp < 1) return;
  if (p.tp == 1) {
    st.Add("parallel.sp",
           "parallel.sp=true requires parallel.tp>1 (got parallel.tp=1; sequence"
           " parallelism splits the sequence across the tensor-parallel group)");
    return;
  }
  if (c.model.seq_len >= 1 && c.model.seq_len % p.tp != 0)
    st.Add("parallel.sp", "parallel.sp=true requires parallel.tp=" + Str(p.tp) +
                              " to divide model.seq_len=" + Str(c.model.seq_len) +
                              " (each tp rank holds seq_len/tp tokens)");
}

std::string ListText(const std::vector<int64_t>& v) {
  constexpr size_t kShown = 16;  // long lists are elided in messages
  std::string out = "[";
  for (size_t i = 0; i < v.size() && i < kShown; ++i) out += (i ? "," : "") + Str(v[i]);
  return out + (v.size() > kShown ? ",...]" : "]");
}

void CheckPipeline(const Config& c, Status& st) {
  const ParallelConfig& p = c.parallel;
  const bool vs_ok = AtLeast(st, "parallel.virtual_stages", p.virtual_stages, 1);
  const bool interleaved = p.schedule == Schedule::kInterleaved;
  if (p.virtual_stages > 1 && p.pp == 1)
    st.Add("parallel.virtual_stages", "parallel.virtual_stages=" + Str(p.virtual_stages) +
                                          " requires parallel.pp>1 (got parallel.pp=1)");
  if (p.virtual_stages > 1 && !interleaved)
    st.Add("parallel.virtual_stages", "parallel.virtual_stages=" + Str(p.virtual_stages) +
                                          " requires parallel.schedule=interleaved (got " +
                                          Name(p.schedule) + ")");
  if (interleaved && vs_ok && p.virtual_stages == 1)
    st.Add("parallel.schedule",
           "parallel.schedule=interleaved requires"
           " parallel.virtual_stages>1 (got 1)");
  if (interleaved && p.pp >= 1 && c.batch.accumulation_steps >= 1 &&
      c.batch.accumulation_steps % p.pp != 0)
    st.Add("parallel.schedule",
           "parallel.schedule=interleaved requires"
           " batch.accumulation_steps=" +
               Str(c.batch.accumulation_steps) + " to be a multiple of parallel.pp=" + Str(p.pp) +
               " (micro-batches run in groups of pp)");
  if (p.pp < 1 || !vs_ok) return;
  const int64_t chunks = SaturatingMul(p.pp, p.virtual_stages);
  const std::string chunks_text = Str(chunks) + " pipeline chunks (parallel.pp=" + Str(p.pp) +
                                  " * parallel.virtual_stages=" + Str(p.virtual_stages) + ")";
  if (p.partition != PartitionMethod::kExplicit) {
    if (c.model.layers >= 1 && c.model.layers < chunks)
      st.Add("model.layers", "model.layers=" + Str(c.model.layers) + " is fewer than the " +
                                 chunks_text + "; every chunk needs at least one layer");
    return;
  }
  const std::vector<int64_t>& parts = p.partition_layers;
  const std::string list = "parallel.partition=" + ListText(parts);
  if (static_cast<uint64_t>(parts.size()) != static_cast<uint64_t>(chunks))
    st.Add("parallel.partition", list + " has " + std::to_string(parts.size()) +
                                     " entries but there are " + chunks_text +
                                     "; it needs one entry per chunk");
  int64_t sum = 0;
  bool entries_ok = true;
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string field = "parallel.partition[" + std::to_string(i) + "]";
    if (parts[i] < 1) {
      st.Add(field, field + "=" + Str(parts[i]) + " must be >= 1 (no empty pipeline chunk)");
      entries_ok = false;
    } else if (__builtin_add_overflow(sum, parts[i], &sum)) {
      sum = std::numeric_limits<int64_t>::max();
    }
  }
  if (entries_ok && sum != c.model.layers)
    st.Add("parallel.partition",
           list + " sums to " + Str(sum) + ", expected model.layers=" + Str(c.model.layers));
}

void CheckParallel(const Config& c, Status& st) {
  const ParallelConfig& p = c.parallel;
  const bool tp_ok = AtLeast(st, "parallel.tp", p.tp, 1);
  const bool pp_ok = AtLeast(st, "parallel.pp", p.pp, 1);
  const bool dp_ok = AtLeast(st, "parallel.dp", p.dp, 1);
  if (tp_ok && pp_ok && dp_ok) {
    int64_t tp_pp = 0, product = 0;
    if (__builtin_mul_overflow(p.tp, p.pp, &tp_pp) || __builtin_mul_overflow(tp_pp, p.dp, &product))
      st.Add("parallel.dp", "parallel.dp=" + Str(p.dp) + ": parallel.tp*parallel.pp*parallel.dp (" +
                                Str(p.tp) + "*" + Str(p.pp) + "*" + Str(p.dp) +
                                ") overflows a 64-bit integer: no such world");
    else if (p.world != product)
      st.Add("parallel.world",
             "parallel.world=" + Str(p.world) + " must equal parallel.tp*parallel.pp*parallel.dp=" +
                 Str(product) + " (" + Str(p.tp) + "*" + Str(p.pp) + "*" + Str(p.dp) + ")");
  }
  CheckTensorParallel(c.model, p.tp, "parallel.tp", st);
  CheckSequenceParallel(c, st);
  CheckPipeline(c, st);
}

}  // namespace

Status Validate(const Config& c) {
  Status st;
  if (c.schema != 1) st.Add("schema", "schema=" + Str(c.schema) + " is not supported (expected 1)");
  AtLeast(st, "steps", c.steps, 1);
  CheckModel(c.model, st);
  AtLeast(st, "batch.micro_batch", c.batch.micro_batch, 1);
  AtLeast(st, "batch.accumulation_steps", c.batch.accumulation_steps, 1);
  CheckParallel(c, st);
  CheckZero(c, st);
  CheckPrecision(c, st);
  CheckOptimizer(c, st);
  if (Finite(st, "clip_grad_norm", c.clip_grad_norm) && c.clip_grad_norm < 0)
    st.Add("clip_grad_norm",
           "clip_grad_norm=" + Str(c.clip_grad_norm) + " must be >= 0 (0 disables clipping)");
  CheckCheckpoint(c, st);
  CheckFaults(c, st);
  return st;
}

}  // namespace paradiff
