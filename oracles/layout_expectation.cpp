#include "oracles/layout_expectation.h"

#include <string>

namespace paradiff {

namespace {

enum class TpSplit { kSplit, kKvShared, kVocab, kReplicated };

TpSplit SplitOf(const ModelConfig& m, const ParamSpec& p, int64_t tp) {
  const std::string& name = p.name;
  const auto has = [&](const char* part) { return name.find(part) != std::string::npos; };
  const auto ends = [&](const std::string& suffix) {
    return name.size() >= suffix.size() &&
           name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (m.kind == ModelKind::kExactLinear) return TpSplit::kSplit;  // every layer split
  if (name == "embed.wte" || name == "head.lm_head.weight") return TpSplit::kVocab;
  if (has(".attn.kv.")) return m.kv_heads >= tp ? TpSplit::kSplit : TpSplit::kKvShared;
  if (has(".attn.q.") || has(".mlp.fc1.") || has(".mlp.gate.") || has(".mlp.up.") ||
      ends(".attn.proj.weight") || ends(".mlp.fc2.weight"))
    return TpSplit::kSplit;
  return TpSplit::kReplicated;
}

}  // namespace

int64_t TpLocalNumel(const ModelConfig& m, const ParamSpec& p, int64_t tp) {
  const int64_t n = p.numel();
  if (tp <= 1) return n;
  switch (SplitOf(m, p, tp)) {
    case TpSplit::kSplit:
      return n / tp;
    case TpSplit::kKvShared:
      return n / m.kv_heads;
    case TpSplit::kVocab: {
      const int64_t cols = n / m.vocab, mult = 4 * tp;
      return (m.vocab + mult - 1) / mult * mult / tp * cols;
    }
    case TpSplit::kReplicated:
      break;
  }
  return n;
}

int64_t TpHolders(const ModelConfig& m, const ParamSpec& p, int64_t tp) {
  if (tp <= 1) return 1;
  switch (SplitOf(m, p, tp)) {
    case TpSplit::kSplit:
    case TpSplit::kVocab:
      return 1;
    case TpSplit::kKvShared:
      return tp / m.kv_heads;
    case TpSplit::kReplicated:
      break;
  }
  return tp;
}

int64_t PpHolders(const Config& cfg, const ParamSpec& p) {
  return cfg.parallel.pp > 1 && cfg.model.tied_embeddings && p.name == "embed.wte" ? 2 : 1;
}

}  // namespace paradiff
