// Handles of the objects in a world.
#ifndef PITLANE_SERVER_SIM_WORLD_IDS_H_
#define PITLANE_SERVER_SIM_WORLD_IDS_H_

#include <cstdint>

namespace pitlane::sim {

// Identifies a vehicle within one world. Ids start at 1 and are never reused, so a removed
// vehicle's id stays invalid ("stale") for the life of the world, and of any world that
// continues its counters (IdCounters). 0 is never a valid id.
using VehicleId = std::uint64_t;

// Identifies a static obstacle within one world; like VehicleId, from 1, never reused.
using ObstacleId = std::uint64_t;

// The next id a world hands out of each kind. A world built to replace another (a session's
// reset) starts from the old world's counters, so that an id the old world handed out never
// names an object of the new one. Both are >= 1.
struct IdCounters {
  VehicleId next_vehicle_id = 1;
  ObstacleId next_obstacle_id = 1;
};

// The four boundary walls of a world with bounds.
enum class Wall : std::uint64_t {
  kWest = 1,   // x = min_x_m; seen from inside, its normal points -x.
  kEast = 2,   // x = max_x_m; +x.
  kSouth = 3,  // y = min_y_m; -y.
  kNorth = 4,  // y = max_y_m; +y.
};

// The kinds of object a vehicle can touch or sense.
enum class ObjectKind : std::uint8_t {
  kVehicle = 1,
  kObstacle = 2,
  kWall = 3,  // A boundary wall; its id is a Wall.
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_WORLD_IDS_H_
