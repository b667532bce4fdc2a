#include "kernels/tp_layout.h"

#include <algorithm>

namespace paradiff {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int64_t Rows(const ParamSpec& p) { return p.shape[0]; }
int64_t Cols(const ParamSpec& p) { return p.shape.size() > 1 ? p.shape[1] : 1; }

}  // namespace

int64_t PaddedVocab(const ModelConfig& m, int64_t tp) {
  if (tp <= 1) return m.vocab;
  const int64_t mult = kVocabPadMultiple * tp;
  return (m.vocab + mult - 1) / mult * mult;
}

int64_t KvShareGroup(const ModelConfig& m, int64_t tp, int64_t tp_rank) {
  if (tp <= 1 || m.kv_heads >= tp) return -1;
  return tp_rank / (tp / m.kv_heads);
}

int64_t TpShard::numel() const {
  int64_t n = 1;
  for (int64_t d : local_shape) n *= d;
  return n;
}

void TpShard::ForEachLogicalRun(int64_t local_begin, int64_t count,
                                const std::function<void(int64_t, int64_t, int64_t)>& fn) const {
  const int64_t logical_cols = Cols(*spec);
  int64_t local_row = 0;  // first local row of the current run
  const int64_t local_end = local_begin + count;
  for (const auto& [first, rows] : row_runs) {
    const int64_t run_begin = local_row * cols, run_end = (local_row + rows) * cols;
    local_row += rows;
    const int64_t lo = std::max(local_begin, run_begin), hi = std::min(local_end, run_end);
    if (lo >= hi) continue;
    if (cols == logical_cols) {  // whole rows: one contiguous logical run
      fn(lo, first * logical_cols + (lo - run_begin), hi - lo);
      continue;
    }
    for (int64_t i = lo; i < hi;) {  // a column slice: one run per row
      const int64_t r = (i - run_begin) / cols, c = (i - run_begin) % cols;
      const int64_t n = std::min(hi - i, cols - c);
      fn(i, (first + r) * logical_cols + col_begin + c, n);
      i += n;
    }
  }
}

std::vector<TpShard> BuildTpShards(const ModelSpec& spec, const ModelConfig& m, int64_t tp,
                                   int64_t r) {
  std::vector<TpShard> out;
  const int64_t hd = m.kind == ModelKind::kGpt ? HeadDim(m) : 0;
  for (const auto& p : spec.params) {
    TpShard s;
    s.spec = &p;
    s.col_begin = 0;
    s.cols = Cols(p);
    s.row_runs = {{0, Rows(p)}};
    const std::string& n = p.name;
    if (tp > 1 && m.kind == ModelKind::kExactLinear) {
      if (n == "head.out.weight") {  // column-parallel, its loss reduced over tp
        const int64_t rows = Rows(p) / tp;
        s.row_runs = {{r * rows, rows}};
      } else {  // embed.in and the blocks: row-parallel
        s.cols = Cols(p) / tp;
        s.col_begin = r * s.cols;
      }
    } else if (tp > 1) {
      if (n == "embed.wte" || n == "head.lm_head.weight") {
        const int64_t per = PaddedVocab(m, tp) / tp;
        const int64_t real = std::max<int64_t>(0, std::min(per, m.vocab - r * per));
        s.row_runs = {{r * per, real}};
        s.pad_rows = per - real;
      } else if (n.find(".attn.q.") != std::string::npos) {
        const int64_t rows = m.heads / tp * hd;
        s.row_runs = {{r * rows, rows}};
      } else if (n.find(".attn.kv.") != std::string::npos) {
        if (m.kv_heads >= tp) {
          const int64_t rows = m.kv_heads / tp * hd;
          s.row_runs = {{r * rows, rows}, {m.kv_heads * hd + r * rows, rows}};
        } else {
          const int64_t j = KvShareGroup(m, tp, r);
          s.row_runs = {{j * hd, hd}, {m.kv_heads * hd + j * hd, hd}};
          s.rep = TpReplication::kShared;
        }
      } else if (n.find(".mlp.fc1.") != std::string::npos ||
                 n.find(".mlp.gate.") != std::string::npos ||
                 n.find(".mlp.up.") != std::string::npos) {
        const int64_t rows = m.ffn / tp;
        s.row_runs = {{r * rows, rows}};
      } else if (EndsWith(n, ".attn.proj.weight") || EndsWith(n, ".mlp.fc2.weight")) {
        s.cols = Cols(p) / tp;
        s.col_begin = r * s.cols;
      } else {
        s.rep = TpReplication::kReplicated;  // norms, row-parallel biases, wpe
      }
    }
    int64_t local_rows = s.pad_rows;
    for (const auto& run : s.row_runs) local_rows += run.second;
    s.local_shape = p.shape.size() > 1 ? std::vector<int64_t>{local_rows, s.cols}
                                       : std::vector<int64_t>{local_rows};
    out.push_back(s);
  }
  return out;
}

}  // namespace paradiff
