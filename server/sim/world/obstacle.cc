#include "server/sim/world/obstacle.h"

#include "absl/strings/str_cat.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {

absl::Status CheckObstacleSpec(const ObstacleSpec& spec) {
  if (spec.name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: at most ", kMaxNameBytes, " bytes, got ", spec.name.size()));
  }
  RETURN_IF_ERROR(
      CheckInRange("center_x_m", spec.center_x_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  RETURN_IF_ERROR(
      CheckInRange("center_y_m", spec.center_y_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  RETURN_IF_ERROR(CheckFinite("yaw_rad", spec.yaw_rad));
  RETURN_IF_ERROR(CheckPositive("length_m", spec.length_m, kMaxObstacleDimension_m));
  return CheckPositive("width_m", spec.width_m, kMaxObstacleDimension_m);
}

absl::Status CheckWorldBounds(const WorldBounds& bounds) {
  RETURN_IF_ERROR(CheckInRange("min_x_m", bounds.min_x_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  RETURN_IF_ERROR(CheckInRange("min_y_m", bounds.min_y_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  RETURN_IF_ERROR(CheckInRange("max_x_m", bounds.max_x_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  RETURN_IF_ERROR(CheckInRange("max_y_m", bounds.max_y_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  if (!(bounds.max_x_m > bounds.min_x_m)) {
    return absl::InvalidArgumentError(absl::StrCat("max_x_m: must exceed min_x_m (",
                                                   bounds.min_x_m, "), got ", bounds.max_x_m));
  }
  if (!(bounds.max_y_m > bounds.min_y_m)) {
    return absl::InvalidArgumentError(absl::StrCat("max_y_m: must exceed min_y_m (",
                                                   bounds.min_y_m, "), got ", bounds.max_y_m));
  }
  return absl::OkStatus();
}

}  // namespace pitlane::sim
