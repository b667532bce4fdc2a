#include "fuzz/zoo.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config_json.h"
#include "core/json_text.h"
#include "fuzz/campaign.h"
#include "fuzz/workdir_lock.h"

namespace paradiff {

const std::vector<ZooSwitch>& ZooSwitches() {
  static const std::vector<ZooSwitch> kSwitches = {
      {"zero.uneven_last_shard",
       "the last data-parallel shard is sized as if numel divided evenly; the tail is dropped",
       "ZeRO >= 1, flat numel % dp != 0", "DeepSpeed PRs 836, 1380, 1422"},
      {"pp.floor_layers_per_stage",
       "layers per stage = floor(L / stages); remainder layers are not built",
       "pp > 1, layers % (pp * virtual_stages) != 0, uniform partition", "Megatron-LM issue 1304"},
      {"tp.vocab_padding_in_loss", "padded vocabulary logits are not masked out of the softmax",
       "tp > 1, vocab % (4 * tp) != 0", "Megatron-LM issue 1754; Colossal-AI issues 6108, 6167"},
      {"dp.average_by_world_size",
       "gradients divided by the world size instead of the data-parallel size",
       "dp < world (tp > 1 or pp > 1)", "DeepSpeed PRs 5555, 6546; Megatron-LM issue 906"},
      {"pp.skip_tied_embedding_sync",
       "tied embedding gradients not all-reduced between first and last stage",
       "tied embeddings, pp > 1", "Megatron-LM issue 656; NeMo PR 6958"},
      {"fp16.local_overflow_decision",
       "each rank decides on overflow alone; ranks skip different steps",
       "dynamic loss scaling, world > 1, an overflow in some shards only",
       "DeepSpeed PR 994; Colossal-AI PR 80, issue 5003"},
      {"clip.count_replicated_per_tp_rank",
       "the global norm counts tp-replicated parameters once per tp rank",
       "gradient clipping, tp > 1", "TransformerEngine PR 715 (ROCm fork)"},
      {"gas.overwrite_grad",
       "the ZeRO-2 accumulation buffer is overwritten at non-boundary micro-steps",
       "ZeRO 2, accumulation_steps >= 3", "DeepSpeed PR 6550"},
      {"bf16.accumulate_in_bf16",
       "gradients accumulated across micro-steps in bf16 instead of the accumulate dtype",
       "bf16, accumulation_steps > 1 (visible with many micro-steps)", "DeepSpeed issue 1800"},
      {"ckpt.reshard_drops_tail",
       "a resharding load of optimizer state loses each saving rank's short last piece",
       "checkpoint reload with another dp, saved flat numel % dp != 0",
       "Megatron-LM PR 552, issue 659"},
      {"comm.rank_dependent_bucket_order", "ranks fill gradient buckets in a rank-dependent order",
       "bucketed reduction, dp > 1, more than one bucket", "DeepSpeed issue 2343"},
      {"fp16.unscale_with_new_scale",
       "the gradient norm is unscaled with the loss scale the update just produced",
       "dynamic loss scaling + clipping, a step where the scale changes", "DeepSpeed PR 2695"},
      {"sched.counts_skipped_steps",
       "the learning-rate schedule advances on steps an overflow skipped",
       "dynamic loss scaling with a skipped step, a schedule whose rate changes after it",
       "Lightning issue 18828; NeMo PR 3293; accelerate issue 4242"},
  };
  return kSwitches;
}

namespace {

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nlohmann::json();
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseJsonText(ss.str());
}

// Fills the detection columns of `row` from a finished campaign's work dir.
void ReadCampaign(const std::string& dir, ZooRow& row) {
  namespace fs = std::filesystem;
  std::error_code ec;
  double first = -1;
  for (const auto& e : fs::directory_iterator(dir + "/findings", ec)) {
    nlohmann::json meta = ReadJson((e.path() / "meta.json").string());
    if (!meta.is_object()) continue;
    ++row.signatures;
    const double t = meta.value("first_seen_s", 0.0);
    if (first >= 0 && t >= first) continue;
    first = t;
    row.found = true;
    row.time_to_detect_s = t;
    row.execs_to_detect = meta.value("first_seen_index", int64_t{0}) + 1;
    row.signature = meta.value("signature", std::string());
    StatusOr<Config> min = LoadConfigFile((e.path() / "minimized.json").string());
    if (!min.ok()) min = LoadConfigFile((e.path() / "config.json").string());
    if (min.ok()) {
      row.min_world = min.value().parallel.world;
      row.min_layers = min.value().model.layers;
      row.min_steps = min.value().steps;
    }
  }
}

}  // namespace

nlohmann::json ZooReport::ToJson() const {
  nlohmann::json rows_json = nlohmann::json::array();
  for (const auto& r : rows)
    rows_json.push_back(
        {{"switch", r.name},
         {"found", r.found},
         {"time_to_detect_s", r.time_to_detect_s},
         {"execs_to_detect", r.execs_to_detect},
         {"signatures", r.signatures},
         {"signature", r.signature},
         {"minimized",
          {{"world", r.min_world}, {"layers", r.min_layers}, {"steps", r.min_steps}}}});
  return {{"switches", rows_json},
          {"false_positives", false_positives},
          {"false_positive_signatures", false_positive_signatures},
          {"detection_rate", detection_rate},
          {"median_time_to_detect_s", median_time_to_detect_s}};
}

StatusOr<ZooReport> RunZoo(const ZooOptions& opts, std::ostream& log) {
  if (opts.workdir.empty()) return Status::Error("--workdir", "--workdir is required");
  for (const auto& name : opts.only)
    if (std::none_of(ZooSwitches().begin(), ZooSwitches().end(),
                     [&](const ZooSwitch& sw) { return sw.name == name; }))
      return Status::Error("--only",
                           "--only " + name + ": not a zoo switch (paradiff zoo list names them)");
  // Each switch's campaign locks its own sub-directory; this lock keeps a second zoo from
  // removing them under the first.
  const StatusOr<std::shared_ptr<WorkDirLock>> lock = WorkDirLock::Acquire(opts.workdir);
  if (!lock.ok()) return lock.status();
  ZooReport report;
  auto campaign = [&](const std::string& name,
                      const std::vector<std::string>& inject) -> StatusOr<std::string> {
    CampaignOptions c;
    c.workdir = opts.workdir + "/" + name;
    std::filesystem::remove_all(c.workdir);
    c.budget_s = opts.budget_s;
    c.runs = opts.runs;
    c.jobs = opts.jobs;
    c.seed = opts.seed;
    c.corpus_dir = opts.corpus_dir;
    c.inject = inject;
    c.exe = opts.exe;
    c.stop_on_first = opts.stop_on_first && !inject.empty();
    c.minimize_budget_s = opts.minimize_budget_s;
    c.feedback = opts.feedback;
    c.progress_every_s = 1e9;  // the zoo prints its own lines
    std::ostringstream quiet;
    StatusOr<CampaignSummary> s = RunCampaign(c, quiet);
    if (!s.ok()) return s.status();
    return c.workdir;
  };
  for (const ZooSwitch& sw : ZooSwitches()) {
    if (!opts.only.empty() &&
        std::find(opts.only.begin(), opts.only.end(), sw.name) == opts.only.end())
      continue;
    StatusOr<std::string> dir = campaign(sw.name, {sw.name});
    if (!dir.ok()) return dir.status();
    ZooRow row;
    row.name = sw.name;
    ReadCampaign(dir.value(), row);
    log << "INFO: zoo " << row.name << (row.found ? " FOUND" : " not found") << " after "
        << row.time_to_detect_s << "s / " << row.execs_to_detect << " execs, " << row.signatures
        << " signature(s)" << (row.found ? " first " + row.signature : "") << std::endl;
    report.rows.push_back(row);
  }
  StatusOr<std::string> clean = campaign("clean", {});
  if (!clean.ok()) return clean.status();
  ZooRow fp;
  ReadCampaign(clean.value(), fp);
  report.false_positives = fp.signatures;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(clean.value() + "/findings", ec))
    report.false_positive_signatures.push_back(e.path().filename().string());
  std::vector<double> times;
  for (const auto& r : report.rows)
    if (r.found) times.push_back(r.time_to_detect_s);
  report.detection_rate =
      report.rows.empty() ? 0 : static_cast<double>(times.size()) / report.rows.size();
  std::sort(times.begin(), times.end());
  if (!times.empty())
    report.median_time_to_detect_s =
        times.size() % 2 ? times[times.size() / 2]
                         : (times[times.size() / 2 - 1] + times[times.size() / 2]) / 2;
  return report;
}

}  // namespace paradiff
