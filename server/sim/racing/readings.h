// What a world reports of its vehicles on their race tracks (World::TrackReadings,
// World::lap_events): a frame carries them, so they stand apart from the world.
#ifndef PITLANE_SERVER_SIM_RACING_READINGS_H_
#define PITLANE_SERVER_SIM_RACING_READINGS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "server/sim/racing/lap_tracker.h"
#include "server/sim/racing/race.h"
#include "server/sim/racing/track_sensors.h"
#include "server/sim/world/ids.h"

namespace pitlane::sim {

// A vehicle's progress on its track (and its track sensors) at the current tick.
struct VehicleTrackReading {
  VehicleId id = 0;
  std::uint32_t route = 0;  // The track's route.
  LapProgress progress;     // Times since the vehicle was spawned.
  std::optional<TrackSensorReading> sensor;  // When the vehicle carries track sensors.
};

// A lap or sector a vehicle completed in the last step.
struct VehicleLapEvent {
  VehicleId id = 0;
  std::uint32_t route = 0;
  LapEvent event;  // Its time_s counts from the vehicle's spawn.
};

// A world's race (World::StartRace) as it stands at the current tick.
struct RaceStatus {
  std::uint32_t route = 0;  // The race track's route.
  RaceRules rules;
  RacePhase phase = RacePhase::kCountdown;
  double start_time_s = 0.0;  // World time of the start (planned, during the countdown).
  double race_time_s = 0.0;   // Since the start (negative during the countdown).
  std::vector<RaceStanding> standings;  // By position.
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_RACING_READINGS_H_
