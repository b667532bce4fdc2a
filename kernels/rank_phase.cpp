#include "kernels/rank_phase.h"

#include "comm/recording_communicator.h"
#include "kernels/loss_scaler.h"
#include "kernels/rank_engine.h"

namespace paradiff {

nlohmann::json TrainRankPhase(const Config& cfg, const FaultSet& faults, Communicator& world,
                              const RankPhase& phase, RankObservations& obs) {
  std::vector<Fingerprint> log;
  // A recorded duplicate of the world group: every call the engine makes lands in `log`.
  RecordingCommunicator rec(world.Split(/*color=*/0, /*key=*/world.rank()), &log);
  RankEngine engine(cfg, faults, rec);
  if (phase.load != nullptr) engine.LoadShard(*phase.load);
  obs.rank = world.rank();
  engine.RunSteps(phase.first, phase.last, obs, &log);
  nlohmann::json saved;
  if (!phase.save_dir.empty()) {
    const LossScaler::State scaler = engine.scaler_state();
    saved = {{"entry", WriteCheckpointShard(phase.save_dir, engine.SaveShard())},
             {"updates", engine.updates()},
             {"scaler",
              {{"scale", scaler.scale},
               {"good_steps", scaler.good_steps},
               {"hysteresis_left", scaler.hysteresis_left}}}};
  }
  obs.collectives = std::move(log);
  return saved;
}

void WritePhaseManifest(const std::string& dir, const Config& cfg, int64_t step,
                        const std::vector<nlohmann::json>& saved) {
  std::vector<nlohmann::json> entries;
  for (const nlohmann::json& s : saved) entries.push_back(s.at("entry"));
  const nlohmann::json& first = saved.at(0);
  WriteCheckpointManifest(dir, cfg, step, first.at("updates").get<int64_t>(), first.at("scaler"),
                          std::move(entries));
}

}  // namespace paradiff
