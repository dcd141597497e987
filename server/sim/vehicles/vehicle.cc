#include "server/sim/vehicles/vehicle.h"

#include <cmath>
#include <iterator>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/sim/drivers/drivers.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

// Which of the common limits, and which control fields, each model uses.
enum LimitBit : unsigned {
  kSteeringAngle = 1u << 0,
  kAcceleration = 1u << 1,
  kBraking = 1u << 2,
  kSpeed = 1u << 3,
  kReverseSpeed = 1u << 4,
  kSteeringRate = 1u << 5,
  kAllLimits = (1u << 6) - 1,
};
enum ControlBit : unsigned {
  kControlAcceleration = 1u << 0,
  kControlSteering = 1u << 1,
  kControlPedals = 1u << 2,  // throttle and brake
  kControlTargetSpeed = 1u << 3,
  kControlYawRate = 1u << 4,
};

struct ModelTraits {
  const char* name;
  unsigned limits;
  unsigned controls;
};

constexpr ModelTraits kModelTraits[] = {
    // kKinematicBicycle
    {"kinematic_bicycle", kAllLimits, kControlAcceleration | kControlSteering},
    // kPhysicsBody
    {"physics_body", kAcceleration | kBraking | kSpeed | kReverseSpeed,
     kControlAcceleration | kControlTargetSpeed | kControlYawRate},
    // kSingleTrack
    {"single_track", kAllLimits, kControlAcceleration | kControlSteering},
    // kFrontWheelDrive
    {"front_wheel_drive", kSteeringAngle | kSteeringRate | kSpeed,
     kControlPedals | kControlSteering},
    // kAllWheelDrive
    {"all_wheel_drive", kSteeringAngle | kSteeringRate | kSpeed,
     kControlPedals | kControlSteering},
    // kForceBased
    {"force_based", kSteeringAngle | kSteeringRate | kSpeed, kControlPedals | kControlSteering},
    // kFourWheel
    {"four_wheel", kAllLimits, kControlAcceleration | kControlSteering},
};
static_assert(std::size(kModelTraits) == kModelKindCount);

const ModelTraits& TraitsOf(ModelKind kind) {
  return kModelTraits[static_cast<std::size_t>(kind)];
}

VehicleLimits DefaultLimits(const VehicleModelSpec& model) {
  struct Visitor {
    VehicleLimits operator()(const KinematicBicycleSpec&) const { return VehicleLimits{}; }
    VehicleLimits operator()(const PhysicsBodySpec& spec) const {
      return DefaultPhysicsBodyLimits(spec);
    }
    VehicleLimits operator()(const SingleTrackSpec& spec) const {
      return DefaultSingleTrackLimits(spec);
    }
    VehicleLimits operator()(const AxleDriveSpec& spec) const {
      return DefaultAxleDriveLimits(spec);
    }
    VehicleLimits operator()(const ForceBasedSpec& spec) const {
      return DefaultForceBasedLimits(spec);
    }
    VehicleLimits operator()(const FourWheelSpec& spec) const {
      return DefaultFourWheelLimits(spec);
    }
  };
  return std::visit(Visitor{}, model);
}

// Rejects limits the model ignores, then fills the unset ones it uses from its defaults and
// checks them.
absl::Status ResolveLimits(ModelKind kind, const VehicleLimits& defaults,
                           VehicleLimitsSpec& limits) {
  const unsigned used = TraitsOf(kind).limits;
  struct Field {
    unsigned bit;
    const char* name;
    std::optional<double> VehicleLimitsSpec::*spec;
    double VehicleLimits::*fallback;
  };
  static constexpr Field kFields[] = {
      {kSteeringAngle, "limits.max_steering_angle_rad", &VehicleLimitsSpec::max_steering_angle_rad,
       &VehicleLimits::max_steering_angle_rad},
      {kAcceleration, "limits.max_acceleration_mps2", &VehicleLimitsSpec::max_acceleration_mps2,
       &VehicleLimits::max_acceleration_mps2},
      {kBraking, "limits.max_braking_mps2", &VehicleLimitsSpec::max_braking_mps2,
       &VehicleLimits::max_braking_mps2},
      {kSpeed, "limits.max_speed_mps", &VehicleLimitsSpec::max_speed_mps,
       &VehicleLimits::max_speed_mps},
      {kReverseSpeed, "limits.max_reverse_speed_mps", &VehicleLimitsSpec::max_reverse_speed_mps,
       &VehicleLimits::max_reverse_speed_mps},
      {kSteeringRate, "limits.max_steering_rate_radps",
       &VehicleLimitsSpec::max_steering_rate_radps, &VehicleLimits::max_steering_rate_radps},
  };
  for (const Field& field : kFields) {
    std::optional<double>& value = limits.*field.spec;
    if ((used & field.bit) == 0) {
      if (value.has_value()) {
        return absl::InvalidArgumentError(absl::StrCat(field.name, ": not used by ",
                                                       TraitsOf(kind).name,
                                                       " vehicles; leave it unset"));
      }
      continue;
    }
    if (!value.has_value()) value = defaults.*field.fallback;
  }
  if (limits.max_steering_angle_rad.has_value()) {
    RETURN_IF_ERROR(CheckPositive("limits.max_steering_angle_rad",
                                  *limits.max_steering_angle_rad, kMaxSteeringLimit_rad));
  }
  if (limits.max_acceleration_mps2.has_value()) {
    RETURN_IF_ERROR(CheckPositive("limits.max_acceleration_mps2", *limits.max_acceleration_mps2,
                                  kMaxAccelerationLimit_mps2));
  }
  if (limits.max_braking_mps2.has_value()) {
    RETURN_IF_ERROR(CheckPositive("limits.max_braking_mps2", *limits.max_braking_mps2,
                                  kMaxAccelerationLimit_mps2));
  }
  if (limits.max_speed_mps.has_value()) {
    RETURN_IF_ERROR(
        CheckPositive("limits.max_speed_mps", *limits.max_speed_mps, kMaxSpeedLimit_mps));
  }
  if (limits.max_reverse_speed_mps.has_value()) {
    RETURN_IF_ERROR(CheckInRange("limits.max_reverse_speed_mps", *limits.max_reverse_speed_mps,
                                 0.0, kMaxSpeedLimit_mps));
  }
  if (limits.max_steering_rate_radps.has_value() &&
      *limits.max_steering_rate_radps != std::numeric_limits<double>::infinity()) {
    RETURN_IF_ERROR(CheckPositive("limits.max_steering_rate_radps",
                                  *limits.max_steering_rate_radps, kMaxSteeringRateLimit_radps));
  }
  return absl::OkStatus();
}

absl::Status ResolveModel(const VehicleSpec& spec, KinematicBicycleSpec& bicycle) {
  RETURN_IF_ERROR(CheckInRange("kinematic_bicycle.wheelbase_m", bicycle.wheelbase_m,
                               kMinBodyDimension_m, spec.length_m));
  const double overhang_m = spec.length_m - bicycle.wheelbase_m;
  if (!bicycle.rear_overhang_m.has_value()) bicycle.rear_overhang_m = 0.5 * overhang_m;
  return CheckInRange("kinematic_bicycle.rear_overhang_m", *bicycle.rear_overhang_m, 0.0,
                      overhang_m);
}

absl::Status ResolveModel(const VehicleSpec& spec, PhysicsBodySpec& body) {
  return ResolvePhysicsBodySpec(spec.length_m, spec.width_m, body);
}

absl::Status ResolveModel(const VehicleSpec& spec, SingleTrackSpec& car) {
  return ResolveSingleTrackSpec(spec.length_m, spec.width_m, car);
}

absl::Status ResolveModel(const VehicleSpec& spec, FrontWheelDriveSpec& car) {
  return ResolveAxleDriveSpec("front_wheel_drive", spec.length_m, spec.width_m, car);
}

absl::Status ResolveModel(const VehicleSpec& spec, AllWheelDriveSpec& car) {
  return ResolveAxleDriveSpec("all_wheel_drive", spec.length_m, spec.width_m, car);
}

absl::Status ResolveModel(const VehicleSpec& spec, ForceBasedSpec& car) {
  return ResolveForceBasedSpec(spec.length_m, spec.width_m, car);
}

absl::Status ResolveModel(const VehicleSpec& spec, FourWheelSpec& car) {
  return ResolveFourWheelSpec(spec.length_m, spec.width_m, car);
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
  if (spec.track_sensor.has_value()) RETURN_IF_ERROR(ValidateTrackSensorSpec(*spec.track_sensor));
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
  RETURN_IF_ERROR(
      CheckInRange("length_m", spec.length_m, kMinBodyDimension_m, kMaxBodyDimension_m));
  RETURN_IF_ERROR(
      CheckInRange("width_m", spec.width_m, kMinBodyDimension_m, kMaxBodyDimension_m));
  RETURN_IF_ERROR(
      CheckInRange("initial_pose.x_m", spec.initial_pose.x_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  RETURN_IF_ERROR(
      CheckInRange("initial_pose.y_m", spec.initial_pose.y_m, -kMaxCoordinate_m, kMaxCoordinate_m));
  RETURN_IF_ERROR(CheckFinite("initial_pose.yaw_rad", spec.initial_pose.yaw_rad));
  RETURN_IF_ERROR(CheckSensors(spec));
  if (spec.track_sensor.has_value() && spec.track_sensor->beam_angles_rad.empty()) {
    spec.track_sensor->beam_angles_rad = DefaultTrackBeamAngles();  // TORCS's 19.
  }
  RETURN_IF_ERROR(
      std::visit([&spec](auto& model) { return ResolveModel(spec, model); }, spec.model));
  const ModelKind kind = ModelKindOf(spec.model);
  RETURN_IF_ERROR(ResolveLimits(kind, DefaultLimits(spec.model), spec.limits));
  const double max_forward = spec.limits.max_speed_mps.value_or(kMaxSpeedLimit_mps);
  if (!spec.limits.max_reverse_speed_mps.has_value() && spec.initial_speed_mps < 0.0) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial_speed_mps: ", ModelName(kind),
                     " vehicles have no reverse, so it must be >= 0, got ",
                     spec.initial_speed_mps));
  }
  const double max_reverse = spec.limits.max_reverse_speed_mps.value_or(0.0);
  RETURN_IF_ERROR(
      CheckInRange("initial_speed_mps", spec.initial_speed_mps, -max_reverse, max_forward));
  if (spec.driver.has_value()) RETURN_IF_ERROR(CheckDriverSpec(*spec.driver, spec.limits, kind));
  return absl::OkStatus();
}

VehicleLimits LimitsOf(const VehicleSpec& resolved) {
  VehicleLimits limits = DefaultLimits(resolved.model);
  const VehicleLimitsSpec& set = resolved.limits;
  if (set.max_steering_angle_rad) limits.max_steering_angle_rad = *set.max_steering_angle_rad;
  if (set.max_acceleration_mps2) limits.max_acceleration_mps2 = *set.max_acceleration_mps2;
  if (set.max_braking_mps2) limits.max_braking_mps2 = *set.max_braking_mps2;
  if (set.max_speed_mps) limits.max_speed_mps = *set.max_speed_mps;
  if (set.max_reverse_speed_mps) limits.max_reverse_speed_mps = *set.max_reverse_speed_mps;
  if (set.max_steering_rate_radps) limits.max_steering_rate_radps = *set.max_steering_rate_radps;
  return limits;
}

BodyParams BodyOf(const VehicleSpec& resolved) {
  struct Visitor {
    const VehicleSpec& spec;
    double operator()(const KinematicBicycleSpec& bicycle) const {
      return 0.5 * spec.length_m - bicycle.rear_overhang_m.value_or(0.0);
    }
    double operator()(const PhysicsBodySpec& body) const {
      return PhysicsBodyBodyCenterOffset(body, spec.length_m);
    }
    double operator()(const SingleTrackSpec& car) const {
      return SingleTrackBodyCenterOffset(car, spec.length_m);
    }
    double operator()(const AxleDriveSpec& car) const {
      return AxleDriveBodyCenterOffset(car, spec.length_m);
    }
    double operator()(const ForceBasedSpec& car) const {
      return ForceBasedBodyCenterOffset(car, spec.length_m);
    }
    double operator()(const FourWheelSpec& car) const {
      return FourWheelBodyCenterOffset(car, spec.length_m);
    }
  };
  return BodyParams{.length_m = resolved.length_m,
                    .width_m = resolved.width_m,
                    .center_offset_m = std::visit(Visitor{resolved}, resolved.model)};
}

const char* ModelName(ModelKind kind) { return TraitsOf(kind).name; }

VehicleInput BrakeToStopInput(ModelKind kind, VehicleId id, double speed_mps, double dt_s) {
  switch (kind) {
    case ModelKind::kKinematicBicycle:
    case ModelKind::kSingleTrack:
    case ModelKind::kFourWheel:
      return {.id = id, .acceleration_mps2 = -speed_mps / dt_s};
    case ModelKind::kPhysicsBody:
      return {.id = id, .target_speed_mps = 0.0};
    case ModelKind::kFrontWheelDrive:
    case ModelKind::kAllWheelDrive:
    case ModelKind::kForceBased:
      return {.id = id, .brake = 1.0};
  }
  return {.id = id};
}

absl::Status CheckControls(ModelKind kind, const VehicleInput& input) {
  RETURN_IF_ERROR(CheckFinite("acceleration_mps2", input.acceleration_mps2));
  RETURN_IF_ERROR(CheckFinite("steering_angle_rad", input.steering_angle_rad));
  RETURN_IF_ERROR(CheckInRange("throttle", input.throttle, 0.0, 1.0));
  RETURN_IF_ERROR(CheckInRange("brake", input.brake, 0.0, 1.0));
  if (input.target_speed_mps.has_value()) {
    RETURN_IF_ERROR(CheckFinite("target_speed_mps", *input.target_speed_mps));
  }
  RETURN_IF_ERROR(CheckFinite("yaw_rate_radps", input.yaw_rate_radps));
  const ModelTraits& traits = TraitsOf(kind);
  const auto unused = [&traits](const char* field, const char* instead) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": not used by ", traits.name,
                                                   " vehicles (they take ", instead, ")"));
  };
  const char* takes = "";
  switch (kind) {
    case ModelKind::kKinematicBicycle:
    case ModelKind::kSingleTrack:
    case ModelKind::kFourWheel:
      takes = "acceleration_mps2 and steering_angle_rad";
      break;
    case ModelKind::kPhysicsBody:
      takes = "target_speed_mps or acceleration_mps2, and yaw_rate_radps";
      break;
    case ModelKind::kFrontWheelDrive:
    case ModelKind::kAllWheelDrive:
    case ModelKind::kForceBased:
      takes = "throttle, brake and steering_angle_rad";
      break;
  }
  const unsigned used = traits.controls;
  if (!(used & kControlAcceleration) && input.acceleration_mps2 != 0.0) {
    return unused("acceleration_mps2", takes);
  }
  if (!(used & kControlSteering) && input.steering_angle_rad != 0.0) {
    return unused("steering_angle_rad", takes);
  }
  if (!(used & kControlPedals) && input.throttle != 0.0) return unused("throttle", takes);
  if (!(used & kControlPedals) && input.brake != 0.0) return unused("brake", takes);
  if (!(used & kControlTargetSpeed) && input.target_speed_mps.has_value()) {
    return unused("target_speed_mps", takes);
  }
  if (!(used & kControlYawRate) && input.yaw_rate_radps != 0.0) {
    return unused("yaw_rate_radps", takes);
  }
  if ((used & kControlTargetSpeed) && input.target_speed_mps.has_value() &&
      input.acceleration_mps2 != 0.0) {
    return absl::InvalidArgumentError(
        "acceleration_mps2: must be 0 while target_speed_mps is set (the accelerator device "
        "sets the speed change)");
  }
  return absl::OkStatus();
}

}  // namespace pitlane::sim
