#include "oracles/report.h"

#include <cmath>

#include "core/config_json.h"

namespace paradiff {

namespace {

// JSON has no inf / nan: write them as strings.
nlohmann::json Num(double v) {
  if (std::isfinite(v)) return v;
  return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
}

}  // namespace

nlohmann::json VerdictJson(const Verdict& v) {
  const Localization& w = v.where;
  return {{"kind", Name(v.kind)},
          {"oracle", v.oracle},
          {"signature", v.Signature()},
          {"message", v.message},
          {"where",
           {{"step", w.step},
            {"phase", Name(w.phase)},
            {"tensor", w.tensor},
            {"tensor_kind", w.tensor_kind},
            {"layer", w.layer},
            {"rank", w.rank},
            {"index", w.index},
            {"expected", Num(w.expected)},
            {"actual", Num(w.actual)},
            {"error", Num(w.error)},
            {"bound", Num(w.bound)},
            {"ratio", Num(w.ratio())},
            {"other_rank", w.other_rank},
            {"detail", w.detail}}}};
}

nlohmann::json ReportJson(const Config& cfg, const CheckResult& res) {
  nlohmann::json j;
  j["paradiff_report"] = 1;
  j["seed"] = cfg.seed;
  j["config"] = ConfigToJson(cfg);
  j["verdict"] = VerdictJson(res.verdict);
  j["steps"] = nlohmann::json::array();
  for (const auto& r : res.rows)
    j["steps"].push_back({{"step", r.step},
                          {"loss_dist", Num(r.loss_dist)},
                          {"loss_same_precision", Num(r.loss_same)},
                          {"loss_truth", Num(r.loss_truth)},
                          {"worst_ratio", Num(r.worst_ratio)},
                          {"worst_where", r.worst_where},
                          {"restarted", r.restarted}});
  j["comparisons"] = nlohmann::json::array();
  for (const auto& c : res.comparisons)
    j["comparisons"].push_back({{"step", c.step},
                                {"phase", Name(c.phase)},
                                {"kind", c.tensor_kind},
                                {"tensor", c.tensor},
                                {"layer", c.layer},
                                {"error", Num(c.error)},
                                {"bound", Num(c.bound)},
                                {"ref_error", Num(c.ref_error)},
                                {"index", c.index},
                                {"expected", Num(c.expected)},
                                {"actual", Num(c.actual)},
                                {"detail", c.detail},
                                {"ok", c.ok()}});
  j["ranks"] = nlohmann::json::array();
  for (size_t r = 0; r < res.ranks.size(); ++r)
    j["ranks"].push_back({{"rank", r},
                          {"memory_bytes", res.ranks[r].memory_bytes},
                          {"memory_grew", res.ranks[r].memory_grew},
                          {"collectives", res.ranks[r].collectives},
                          {"first_collectives", res.ranks[r].first_collectives}});
  j["oracles"] = nlohmann::json::array();
  for (const auto& o : res.oracles)
    j["oracles"].push_back(
        {{"name", o.name}, {"status", Name(o.status)}, {"note", o.note}, {"seconds", o.seconds}});
  j["rejected"] = res.rejected;
  j["timing_s"] = {{"reference", res.timing.reference_s},
                   {"engine", res.timing.engine_s},
                   {"compare", res.timing.compare_s}};
  j["reference_cached"] = res.reference_cached;
  return j;
}

}  // namespace paradiff
