// Validate: the rules between the fields of a Config (docs/CONFIG.md, "Validation rules"). Parsing
// (config_json.h) checks types; Validate checks that the values describe a layout the engine can
// run; CheckBudget (budget.h) checks that it fits the resource budget.
//
// Every broken rule is reported, not just the first. Each FieldError names the field (dotted JSON
// path) and its message starts with "field=value" and states the rule, e.g.
// "parallel.tp=3 does not divide model.heads=8". Validate never divides by zero or overflows,
// whatever the input.
//
// For model.kind=exact_linear the fields heads, kv_heads, ffn, vocab, activation, tied_embeddings
// and position_embeddings are ignored by the model, but their ranges are still checked (so a file
// stays valid when its kind is switched); the divisibility rules that involve them apply to gpt
// only. DType::kFp64 (internal to the reference) is not rejected here; JSON cannot express it.
#pragma once

#include "core/config.h"
#include "core/status.h"

namespace paradiff {

Status Validate(const Config& config);

}  // namespace paradiff
