// Sensors for controllers: a planar range scan and the nearest objects. Both are pure
// functions of a world's state, computed from the collision stage's grids; the world computes
// them only for vehicles that carry them, and only when a snapshot is taken.
#ifndef PITLANE_SERVER_SIM_SENSORS_SENSORS_H_
#define PITLANE_SERVER_SIM_SENSORS_SENSORS_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "server/sim/collision/collision_stage.h"
#include "server/sim/world/vehicle_table.h"
#include "server/sim/world/obstacle.h"
#include "server/sim/vehicles/vehicle.h"

namespace pitlane::sim {

// No vehicle to ignore in CastRay.
inline constexpr std::uint32_t kNoVehicle = 0xFFFFFFFF;

// The distance from (origin_x_m, origin_y_m) along the unit direction (dir_x, dir_y) to the
// first vehicle (other than fleet index `ignore_vehicle`), obstacle or wall it meets, or
// +infinity if there is none within max_range_m. Walks the grid cells the ray crosses, in
// order, and stops at the first cell that starts beyond the nearest hit so far.
double CastRay(double origin_x_m, double origin_y_m, double dir_x, double dir_y,
               double max_range_m, std::uint32_t ignore_vehicle, const CollisionScene& scene,
               absl::Span<const Obstacle> obstacles, const std::optional<WorldBounds>& bounds);

// The scan of the vehicle at fleet index `self`, from the centre of its body.
RangeScanReading ScanRange(const RangeScanSpec& spec, std::uint32_t self,
                           const CollisionScene& scene, absl::Span<const Obstacle> obstacles,
                           const std::optional<WorldBounds>& bounds);

// Up to spec.count vehicles and obstacles whose centres lie within spec.radius_m of the body
// centre of the vehicle at fleet index `self`, nearest first (ties: vehicles before obstacles,
// then by id).
std::vector<NearbyObject> FindNearestObjects(const NearestObjectsSpec& spec, std::uint32_t self,
                                             const VehicleTable& fleet,
                                             const CollisionScene& scene,
                                             absl::Span<const Obstacle> obstacles);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_SENSORS_SENSORS_H_
