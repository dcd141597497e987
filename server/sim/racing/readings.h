// What a world reports of its vehicles on their race tracks (World::TrackReadings,
// World::lap_events): a frame carries them, so they stand apart from the world.
#ifndef PITLANE_SERVER_SIM_RACING_READINGS_H_
#define PITLANE_SERVER_SIM_RACING_READINGS_H_

#include <cstdint>
#include <optional>

#include "server/sim/racing/lap_tracker.h"
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

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_RACING_READINGS_H_
