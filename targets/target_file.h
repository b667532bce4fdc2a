// TargetSpec: an external target described by a target file (JSON, docs/TARGETS.md): the argv
// template of its command, the launcher prefix per world size, its watchdog, and the config
// features it supports, so that the generator and the minimizer only produce configs it can run.
// Loading never trusts the file: every error names the field and the rule (exit 2 at the CLI).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/reload_support.h"
#include "core/status.h"
#include "core/target_option.h"
#include "sut/outcome.h"

namespace paradiff {

struct TargetPrecision {
  DType param = DType::kFp32, compute = DType::kFp32, reduce = DType::kFp32,
        accumulate = DType::kFp32;
  int master_weights = -1;  // -1: either; 0 / 1: only that value (meaningful when param != fp32)
};

struct TargetSpec {
  std::string name;
  std::string path;  // the target file
  std::string dir;   // its directory, the {target_dir} placeholder
  // 1: one launch of `command` per run dir; 2: `command` starts a warm worker that serves run
  // dirs one after another (targets/warm_workers.h).
  int64_t protocol = 1;
  std::vector<std::string> command;                          // argv template of the target
  std::map<std::string, std::vector<std::string>> launcher;  // "1", "2", ... or "default" -> prefix
  int64_t timeout_s = 300;                                   // watchdog of one run
  // Supported features (the "supports" object).
  int64_t max_world = 1;
  std::vector<std::string> parallel = {"dp"};  // of dp, tp, pp, sp
  std::vector<int64_t> zero_stages = {0};
  std::vector<std::string> models = {"gpt"};
  std::vector<std::string> activations = {"gelu", "swiglu"};
  std::vector<std::string> optimizers = {"sgd", "adam", "adamw"};
  std::vector<std::string> lr_schedules = {"constant"};                   // optimizer.schedule.kind
  std::vector<std::string> schedules = {"gpipe", "1f1b", "interleaved"};  // when pp > 1
  std::vector<TargetPrecision> precisions = {TargetPrecision{}};
  bool clip_grad_norm = false, loss_scale = false, checkpoint = false;
  // Key / value heads with kv_heads < tp, each shared by tp / kv_heads ranks (Megatron's layout);
  // false for a target that can only split them (DTensor's Shard placements).
  bool kv_head_sharing = true;
  // zero.shard_group other than 0: ZeRO's state sharded within groups of dp ranks, replicated
  // across them (torch's HSDP); false: sharded over every dp rank.
  bool shard_groups = false;
  ReloadSupport reload;   // with checkpoint: the reload layouts it takes (supports.checkpoint)
  int64_t max_steps = 0;  // 0: any
  // The target's own settings a campaign may vary ("options": name -> its values and their rule);
  // a config sets each at most once, in target_options.
  std::map<std::string, TargetOption> options;
  // What the target reports ("reports": any of "grad", "optimizer"; both when absent) and the
  // precision of its gradient norm ("grad_norm_dtype", fp64 when absent). Loss, gradient norm and
  // parameters are always reported.
  Reporting reporting;
};

StatusOr<TargetSpec> LoadTargetFile(const std::string& path);
StatusOr<TargetSpec> ParseTargetSpec(const std::string& text, const std::string& path);

// OK when `t` declares every feature `cfg` uses; else one error per unsupported field, naming the
// field, the value and what the target supports.
Status TargetSupports(const TargetSpec& t, const Config& cfg);

// The full argv of one run: the launcher for cfg's world size (or "default"), then the command,
// with {run_dir}, {target_dir} and {world} substituted (protocol 1).
std::vector<std::string> TargetArgv(const TargetSpec& t, const Config& cfg,
                                    const std::string& run_dir);
// The argv of a protocol-2 target's warm worker: the command with {target_dir} substituted.
std::vector<std::string> WorkerArgv(const TargetSpec& t);

}  // namespace paradiff
