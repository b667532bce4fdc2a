// TargetOption: one of an external target's own settings that campaigns vary (a target file's
// "options", docs/TARGETS.md): the values it may take and the rule a value must meet in a config.
// Used by the target's support check (refusal) and by the generator (it draws only fitting values).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/config.h"

namespace paradiff {

struct TargetOption {
  std::vector<std::string> values;  // each the JSON text of a scalar
  // "divides": "dp": a value (a positive integer) must divide the config's dp, and its reload dp
  // with a checkpoint (DeepSpeed's zero_hpz_partition_size splits the dp ranks into groups of that
  // many, and refuses a size that does not divide them).
  bool divides_dp = false;
  // "zero_stages": [S, ...]: a value is set only in a config whose ZeRO stage, and its reload
  // stage with a checkpoint, is listed (DeepSpeed offloads parameters at stage 3 only, and changes
  // its optimizer at stage 1 under offload). Empty: any stage.
  std::vector<int64_t> zero_stages;
  // "requires": {"OTHER": [v, ...]}: a value is set only in a config that sets the target's option
  // OTHER to one of those values (ZeRO 2 and 3 take DeepSpeed's gradient_predivide_factor only
  // with zero_optimization.reduce_scatter false, which is not their default). OTHER has no
  // "requires" of its own, so the generator can draw it first.
  std::map<std::string, std::vector<std::string>>
  requires;
};

// Why `value` of option `o` does not fit cfg (its dp or ZeRO stage, or those it reloads into, or
// the options it requires), or "" when it does.
std::string OptionMisfit(const TargetOption& o, const std::string& value, const Config& cfg);

}  // namespace paradiff
