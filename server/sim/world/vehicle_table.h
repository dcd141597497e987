// The vehicles of a world as everything but the dynamics sees them: one row per vehicle, in
// ascending id order, one column per variable. Each model keeps its own state in its fleet
// (fleet.h); after every change a fleet publishes its vehicles' poses and speeds into their
// rows here, and the collision stage, the sensors and the snapshots read only this table.
#ifndef PITLANE_SERVER_SIM_WORLD_VEHICLE_TABLE_H_
#define PITLANE_SERVER_SIM_WORLD_VEHICLE_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "server/sim/math/geometry.h"
#include "server/sim/vehicles/vehicle.h"

namespace pitlane::sim {

struct VehicleTable {
  // Fixed at spawn.
  std::vector<VehicleId> ids;
  std::vector<VehicleSpec> specs;  // As resolved at spawn, for descriptions.
  std::vector<BodyParams> bodies;
  std::vector<ModelKind> kinds;
  std::vector<std::uint32_t> slots;  // Index of the vehicle in its model's fleet.
  // 1 once halted by a collision under the STOP policy.
  std::vector<std::uint8_t> crashed;
  // Published by the fleets: the model's reference point, its signed speed (as the model
  // defines it; along the heading for most), and
  // cos and sin of the yaw (the collision stage's body axes; SinCos(yaw_rad) to within a few
  // ulps — exactly, for most models).
  std::vector<double> x_m;
  std::vector<double> y_m;
  std::vector<double> yaw_rad;
  std::vector<double> speed_mps;
  std::vector<double> cos_yaw;
  std::vector<double> sin_yaw;
  // The row of each id in `ids`: clients name vehicles by id, and a step under the STOP
  // policy looks up both sides of every contact, so lookups must not grow with the fleet.
  // Append and Erase keep it in step with `ids`.
  absl::flat_hash_map<VehicleId, std::uint32_t> rows_by_id;

  std::size_t size() const { return ids.size(); }

  // Appends a row for a resolved spec at its initial pose and speed; `id` must exceed every
  // id present. The caller sets slots.back() if the vehicle belongs to a fleet.
  void Append(VehicleId id, const VehicleSpec& resolved_spec);
  // Removes the row at `index`, keeping the order of the rest (so renumbering the rows after
  // it). O(n).
  void Erase(std::size_t index);
  // The row of `id`, or -1 when absent. O(1).
  std::ptrdiff_t Find(VehicleId id) const;
  // Sets the pose columns of row `index`, computing cos and sin of the yaw.
  void SetPose(std::size_t index, const Pose2& pose);
  Pose2 PoseAt(std::size_t index) const { return {x_m[index], y_m[index], yaw_rad[index]}; }
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_WORLD_VEHICLE_TABLE_H_
