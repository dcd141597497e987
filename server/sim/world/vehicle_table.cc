#include "server/sim/world/vehicle_table.h"

#include "absl/base/macros.h"
#include "server/sim/math/trig.h"

namespace pitlane::sim {

void VehicleTable::Append(VehicleId id, const VehicleSpec& resolved_spec) {
  ABSL_ASSERT(ids.empty() || id > ids.back());
  rows_by_id.emplace(id, static_cast<std::uint32_t>(ids.size()));
  ids.push_back(id);
  specs.push_back(resolved_spec);
  bodies.push_back(BodyOf(resolved_spec));
  kinds.push_back(ModelKindOf(resolved_spec.model));
  slots.push_back(0);
  crashed.push_back(0);
  x_m.emplace_back();
  y_m.emplace_back();
  yaw_rad.emplace_back();
  cos_yaw.emplace_back();
  sin_yaw.emplace_back();
  speed_mps.push_back(resolved_spec.initial_speed_mps);
  SetPose(size() - 1, resolved_spec.initial_pose);
}

void VehicleTable::Erase(std::size_t index) {
  ABSL_ASSERT(index < size());
  rows_by_id.erase(ids[index]);
  for (std::size_t row = index + 1; row < size(); ++row) --rows_by_id[ids[row]];
  const auto erase = [index](auto& column) { column.erase(column.begin() + index); };
  erase(ids);
  erase(specs);
  erase(bodies);
  erase(kinds);
  erase(slots);
  erase(crashed);
  erase(x_m);
  erase(y_m);
  erase(yaw_rad);
  erase(speed_mps);
  erase(cos_yaw);
  erase(sin_yaw);
}

std::ptrdiff_t VehicleTable::Find(VehicleId id) const {
  const auto it = rows_by_id.find(id);
  if (it == rows_by_id.end()) return -1;
  return it->second;
}

void VehicleTable::SetPose(std::size_t index, const Pose2& pose) {
  x_m[index] = pose.x_m;
  y_m[index] = pose.y_m;
  yaw_rad[index] = WrapToPi(pose.yaw_rad);
  SinCos(yaw_rad[index], &sin_yaw[index], &cos_yaw[index]);
}

}  // namespace pitlane::sim
