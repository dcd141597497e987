// Static obstacles and the optional boundary walls around a world.
#ifndef PITLANE_SERVER_SIM_WORLD_OBSTACLE_H_
#define PITLANE_SERVER_SIM_WORLD_OBSTACLE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "server/sim/collision/collision.h"
#include "server/sim/world/ids.h"

namespace pitlane::sim {

// Largest obstacle side, metres: long enough for a wall around a 100 km world.
inline constexpr double kMaxObstacleDimension_m = 1e5;

// A static box, as a client asks for it. Possibly invalid: see ResolveObstacleSpec.
struct ObstacleSpec {
  std::string name = {};    // Label, at most kMaxNameBytes bytes.
  double center_x_m = 0.0;  // Box centre east, metres; |x| <= kMaxCoordinate_m.
  double center_y_m = 0.0;  // Box centre north, metres; |y| <= kMaxCoordinate_m.
  double yaw_rad = 0.0;     // Direction of the length side, radians, finite.
  double length_m = 1.0;    // Extent along yaw, metres, in (0, kMaxObstacleDimension_m].
  double width_m = 1.0;     // Extent across yaw, metres, in (0, kMaxObstacleDimension_m].
};

// Checks every field of `spec`. InvalidArgument names the field ("center_x_m", "length_m").
absl::Status CheckObstacleSpec(const ObstacleSpec& spec);

// An obstacle in a world.
struct Obstacle {
  ObstacleId id = 0;
  ObstacleSpec spec;
  CollisionBox box;  // Derived from spec.
};

// Walls around the rectangle [min_x_m, max_x_m] x [min_y_m, max_y_m]. Each wall is a half
// plane (everything beyond that side), so no vehicle can pass through one however fast it
// goes.
struct WorldBounds {
  double min_x_m = 0.0;  // West wall, metres.
  double min_y_m = 0.0;  // South wall, metres.
  double max_x_m = 0.0;  // East wall, metres, > min_x_m.
  double max_y_m = 0.0;  // North wall, metres, > min_y_m.
};

// Checks that the bounds are finite, within kMaxCoordinate_m, and each max exceeds its min.
// InvalidArgument names the field ("max_x_m").
absl::Status CheckWorldBounds(const WorldBounds& bounds);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_WORLD_OBSTACLE_H_
