// WorkDir: a campaign's persistent state on disk. Every write is atomic (core/atomic_file.h) and
// idempotent, so a campaign killed at any point (SIGINT or SIGKILL) resumes from it with nothing
// lost and nothing counted twice (see Note [Idempotent findings]).
//
//   DIR/stats.json                      seed, options, completed execution indices, counters
//   DIR/findings/<signature>/config.json    the first config that showed it (a reproducer)
//   DIR/findings/<signature>/report.json    its full report
//   DIR/findings/<signature>/log            the finding's message
//   DIR/findings/<signature>/meta.json      kind, count, first/last seen, execution indices
//   DIR/inconclusive/<signature>/...    the same four files for each reason a check was
//                                       inconclusive (a borderline overflow, a diverged
//                                       reference, ...): why, and a config to rerun it with
//   DIR/corpus/<hash>.json              configs that covered a new feature pair
//
// Note [Idempotent findings]: meta.json keeps the set of execution indices that showed the
// signature; recording an index twice (a resumed campaign re-running an execution whose result
// was stored but not yet marked complete in stats.json) changes nothing, and count = |indices|.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/status.h"

namespace paradiff {

class WorkDir {
 public:
  explicit WorkDir(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }

  // Loads DIR/stats.json; an absent file gives an empty object. A corrupt one is an error.
  StatusOr<nlohmann::json> LoadStats() const;
  Status SaveStats(const nlohmann::json& stats) const;

  // Records that execution `index` showed the finding `verdict` (VerdictJson form: signature, kind,
  // oracle, message) on `cfg`. Returns true when the signature is new to this work dir.
  StatusOr<bool> RecordFinding(const nlohmann::json& verdict, const Config& cfg,
                               const nlohmann::json& report, int64_t index, double elapsed_s) const;
  // The same for an inconclusive verdict, under DIR/inconclusive/ (never minimized or gated on).
  StatusOr<bool> RecordInconclusive(const nlohmann::json& verdict, const Config& cfg,
                                    const nlohmann::json& report, int64_t index,
                                    double elapsed_s) const;
  // Saves an interesting config to DIR/corpus/ (named by its content hash).
  Status SaveCorpus(const Config& cfg) const;

  std::string FindingDir(const std::string& signature) const;
  std::string InconclusiveDir(const std::string& signature) const;

 private:
  StatusOr<bool> Record(const std::string& dir, const nlohmann::json& verdict, const Config& cfg,
                        const nlohmann::json& report, int64_t index, double elapsed_s) const;
  std::string root_;
};

// The signatures recorded under DIR/<area> ("findings" or "inconclusive"): its sub-directories
// that hold a meta.json, sorted. An absent area gives none.
std::vector<std::string> RecordedSignatures(const std::string& workdir, const std::string& area);

// Content hash of a config's stable JSON bytes (16 hex digits).
std::string ConfigHash(const Config& cfg);

}  // namespace paradiff
