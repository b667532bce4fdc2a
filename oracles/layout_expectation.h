// What a layout implies for each logical parameter, re-derived by the oracles from the model and
// the parallel sizes alone (never from the engine's tp split or stage map, which are under test):
// how many elements one tensor-parallel rank holds, and how many ranks of the tp and pp dimensions
// hold each element. Megatron's rules:
//   column-parallel (attn.q, attn.kv, mlp.fc1 / gate / up: weights and biases) and row-parallel
//     (attn.proj.weight, mlp.fc2.weight): numel / tp per rank, one holder; key / value heads with
//     kv_heads < tp: one head per share group of tp / kv_heads ranks, numel / kv_heads each;
//   vocabulary-parallel (embed.wte, head.lm_head.weight): PaddedVocab / tp rows, vocab rounded up
//     to a multiple of 4 * tp (the padded rows belong to no logical element), one holder;
//   everything else (norms, row-parallel biases, position embeddings): whole on every tp rank;
//   exact_linear: every weight split, numel / tp per rank, one holder.
// Pipeline: every parameter lives on one stage, except a tied embedding with pp > 1, which the
// first stage (input embedding) and the last stage (output head) both hold.
#pragma once

#include <cstdint>

#include "core/config.h"
#include "core/model_spec.h"

namespace paradiff {

// Elements of `p` one tensor-parallel rank holds (tp = 1: numel).
int64_t TpLocalNumel(const ModelConfig& m, const ParamSpec& p, int64_t tp);

// Tensor-parallel ranks holding each logical element of `p`: 1, tp / kv_heads, or tp.
int64_t TpHolders(const ModelConfig& m, const ParamSpec& p, int64_t tp);

// Pipeline stages holding `p`: 2 for a tied embedding with pp > 1, else 1.
int64_t PpHolders(const Config& cfg, const ParamSpec& p);

}  // namespace paradiff
