#include "server/sim/vehicle.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

absl::Status CheckLimits(const VehicleLimits& limits) {
  RETURN_IF_ERROR(CheckPositive("limits.max_steering_angle_rad", limits.max_steering_angle_rad,
                                kMaxSteeringLimit_rad));
  RETURN_IF_ERROR(CheckPositive("limits.max_acceleration_mps2", limits.max_acceleration_mps2,
                                kMaxAccelerationLimit_mps2));
  RETURN_IF_ERROR(CheckPositive("limits.max_braking_mps2", limits.max_braking_mps2,
                                kMaxAccelerationLimit_mps2));
  RETURN_IF_ERROR(
      CheckPositive("limits.max_speed_mps", limits.max_speed_mps, kMaxSpeedLimit_mps));
  RETURN_IF_ERROR(CheckInRange("limits.max_reverse_speed_mps", limits.max_reverse_speed_mps, 0.0,
                               kMaxSpeedLimit_mps));
  if (limits.max_steering_rate_radps != std::numeric_limits<double>::infinity()) {
    RETURN_IF_ERROR(CheckPositive("limits.max_steering_rate_radps",
                                  limits.max_steering_rate_radps, kMaxSteeringRateLimit_radps));
  }
  return absl::OkStatus();
}

absl::Status ResolveModel(const VehicleSpec& spec, KinematicBicycleSpec& bicycle) {
  RETURN_IF_ERROR(
      CheckPositive("kinematic_bicycle.wheelbase_m", bicycle.wheelbase_m, spec.length_m));
  const double overhang_m = spec.length_m - bicycle.wheelbase_m;
  if (!bicycle.rear_overhang_m.has_value()) bicycle.rear_overhang_m = 0.5 * overhang_m;
  return CheckInRange("kinematic_bicycle.rear_overhang_m", *bicycle.rear_overhang_m, 0.0,
                      overhang_m);
}

absl::Status CheckSensors(const VehicleSpec& spec) {
  if (spec.range_scan.has_value()) {
    const RangeScanSpec& scan = *spec.range_scan;
    if (scan.beam_count < 1 || scan.beam_count > kMaxScanBeams) {
      return absl::InvalidArgumentError(absl::StrCat("range_scan.beam_count: must be in [1, ",
                                                     kMaxScanBeams, "], got ", scan.beam_count));
    }
    RETURN_IF_ERROR(
        CheckPositive("range_scan.field_of_view_rad", scan.field_of_view_rad, kTwoPi));
    RETURN_IF_ERROR(CheckPositive("range_scan.max_range_m", scan.max_range_m, kMaxSensorRange_m));
  }
  if (spec.nearest_objects.has_value()) {
    const NearestObjectsSpec& nearest = *spec.nearest_objects;
    if (nearest.count < 1 || nearest.count > kMaxNearestObjects) {
      return absl::InvalidArgumentError(absl::StrCat("nearest_objects.count: must be in [1, ",
                                                     kMaxNearestObjects, "], got ",
                                                     nearest.count));
    }
    RETURN_IF_ERROR(
        CheckPositive("nearest_objects.radius_m", nearest.radius_m, kMaxSensorRange_m));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ResolveVehicleSpec(VehicleSpec& spec) {
  if (spec.name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: at most ", kMaxNameBytes, " bytes, got ", spec.name.size()));
  }
  RETURN_IF_ERROR(CheckPositive("length_m", spec.length_m, kMaxBodyDimension_m));
  RETURN_IF_ERROR(CheckPositive("width_m", spec.width_m, kMaxBodyDimension_m));
  RETURN_IF_ERROR(
      CheckInRange("initial_pose.x_m", spec.initial_pose.x_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  RETURN_IF_ERROR(
      CheckInRange("initial_pose.y_m", spec.initial_pose.y_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  RETURN_IF_ERROR(CheckFinite("initial_pose.yaw_rad", spec.initial_pose.yaw_rad));
  RETURN_IF_ERROR(CheckLimits(spec.limits));
  RETURN_IF_ERROR(CheckInRange("initial_speed_mps", spec.initial_speed_mps,
                               -spec.limits.max_reverse_speed_mps, spec.limits.max_speed_mps));
  RETURN_IF_ERROR(CheckSensors(spec));
  return std::visit([&spec](auto& model) { return ResolveModel(spec, model); }, spec.model);
}

}  // namespace pitlane::sim
