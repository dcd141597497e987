#include "server/sim/vehicles/axle_drive.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/sim/math/functions.h"
#include "server/sim/math/trig.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

constexpr double kDefaultWheelbase_m = 2.7;
constexpr double kDefaultGasToAcc_mps2 = 3.5;
constexpr double kDefaultBrakeToAcc_mps2 = 8.0;
constexpr double kDefaultDrag_1ps = 0.05;
constexpr double kDefaultFriction = 1.0;
constexpr double kDefaultCgHeight_m = 0.55;
constexpr double kDefaultCgToFrontFraction = 0.4;

constexpr double kMaxPedalAcceleration_mps2 = 100.0;
constexpr double kMaxDrag_1ps = 1.0;
constexpr double kMaxFriction = 3.0;
constexpr double kMaxCgHeight_m = 5.0;

}  // namespace

absl::Status ResolveAxleDriveSpec(absl::string_view wire_name, double length_m, double /*width_m*/,
                                  AxleDriveSpec& spec) {
  const auto field = [wire_name](absl::string_view name) {
    return absl::StrCat(wire_name, ".", name);
  };
  const double wheelbase_m = spec.wheelbase_m.value_or(std::min(kDefaultWheelbase_m, length_m));
  RETURN_IF_ERROR(CheckInRange(field("wheelbase_m"), wheelbase_m, kMinBodyDimension_m, length_m));
  spec.wheelbase_m = wheelbase_m;
  const double overhang_m = length_m - wheelbase_m;
  spec.rear_overhang_m = spec.rear_overhang_m.value_or(0.5 * overhang_m);
  RETURN_IF_ERROR(CheckInRange(field("rear_overhang_m"), *spec.rear_overhang_m, 0.0, overhang_m));
  spec.gas_to_acc_mps2 = spec.gas_to_acc_mps2.value_or(kDefaultGasToAcc_mps2);
  RETURN_IF_ERROR(
      CheckPositive(field("gas_to_acc_mps2"), *spec.gas_to_acc_mps2, kMaxPedalAcceleration_mps2));
  spec.brake_to_acc_mps2 = spec.brake_to_acc_mps2.value_or(kDefaultBrakeToAcc_mps2);
  RETURN_IF_ERROR(CheckPositive(field("brake_to_acc_mps2"), *spec.brake_to_acc_mps2,
                                kMaxPedalAcceleration_mps2));
  spec.drag_coefficient_1ps = spec.drag_coefficient_1ps.value_or(kDefaultDrag_1ps);
  RETURN_IF_ERROR(
      CheckInRange(field("drag_coefficient_1ps"), *spec.drag_coefficient_1ps, 0.0, kMaxDrag_1ps));
  spec.friction_coefficient = spec.friction_coefficient.value_or(kDefaultFriction);
  RETURN_IF_ERROR(
      CheckPositive(field("friction_coefficient"), *spec.friction_coefficient, kMaxFriction));
  spec.cg_height_m = spec.cg_height_m.value_or(kDefaultCgHeight_m);
  RETURN_IF_ERROR(CheckInRange(field("cg_height_m"), *spec.cg_height_m, 0.0, kMaxCgHeight_m));
  spec.cg_to_front_axle_m =
      spec.cg_to_front_axle_m.value_or(kDefaultCgToFrontFraction * wheelbase_m);
  return CheckInRange(field("cg_to_front_axle_m"), *spec.cg_to_front_axle_m, 0.0, wheelbase_m);
}

VehicleLimits DefaultAxleDriveLimits(const AxleDriveSpec& /*resolved*/) {
  VehicleLimits limits;
  limits.max_reverse_speed_mps = 0.0;
  return limits;
}

AxleDriveParams MakeAxleDriveParams(const AxleDriveSpec& resolved, DriveAxles axles,
                                    const VehicleLimits& limits, double /*dt_s*/) {
  const double wheelbase_m = *resolved.wheelbase_m;
  const double mu = *resolved.friction_coefficient;
  const double h_m = *resolved.cg_height_m;
  const double cg_to_rear_m = wheelbase_m - *resolved.cg_to_front_axle_m;  // l_r.
  // Front-wheel drive: the drive force m·a may not exceed μ times the front axle load
  // m (g l_r − a h) / L (the tyre force, pulling at road level, unloads the front axle by
  // m a h / L; drag is taken to act at the CG's height, so it moves no load). Solving
  // a = μ (g l_r − a h) / L for a gives the limit.
  const double front_limit_mps2 = mu * kGravity_mps2 * cg_to_rear_m / (wheelbase_m + mu * h_m);
  const double all_limit_mps2 = mu * kGravity_mps2;
  return AxleDriveParams{
      .axles = axles,
      .wheelbase_m = wheelbase_m,
      .gas_to_acc_mps2 = *resolved.gas_to_acc_mps2,
      .brake_to_acc_mps2 = *resolved.brake_to_acc_mps2,
      .drag_coefficient_1ps = *resolved.drag_coefficient_1ps,
      .drive_grip_limit_mps2 = axles == DriveAxles::kFront ? front_limit_mps2 : all_limit_mps2,
      .brake_grip_limit_mps2 = all_limit_mps2,
      .max_speed_mps = limits.max_speed_mps,
      .max_steering_angle_rad = limits.max_steering_angle_rad,
      .max_steering_rate_radps = limits.max_steering_rate_radps,
  };
}

AxleDriveInput MakeAxleDriveInput(const AxleDriveParams& params, double throttle, double brake,
                                  double steering_angle_rad) {
  AxleDriveInput input;
  input.throttle = std::clamp(throttle, 0.0, 1.0);
  input.brake = std::clamp(brake, 0.0, 1.0);
  input.steering_angle_rad =
      std::clamp(steering_angle_rad, -params.max_steering_angle_rad, params.max_steering_angle_rad);
  // Drive and brake are each limited by the grip of the wheels that carry them; with both
  // pedals down the tyres transmit the difference.
  input.tyre_acceleration_mps2 =
      std::min(input.throttle * params.gas_to_acc_mps2, params.drive_grip_limit_mps2) -
      std::min(input.brake * params.brake_to_acc_mps2, params.brake_grip_limit_mps2);
  SinCos(input.steering_angle_rad, &input.sin_steering, &input.cos_steering);
  return input;
}

AxleDriveState MakeAxleDriveState(const AxleDriveParams& params, const Pose2& pose,
                                  double speed_mps) {
  AxleDriveState state;
  state.pose = {.x_m = pose.x_m, .y_m = pose.y_m, .yaw_rad = WrapToPi(pose.yaw_rad)};
  state.speed_mps = std::clamp(speed_mps, 0.0, params.max_speed_mps);
  SinCos(state.pose.yaw_rad, &state.sin_yaw, &state.cos_yaw);
  return state;
}

void StepAxleDrive(const AxleDriveParams& params, const AxleDriveInput& input, double dt_s,
                   AxleDriveState& state) {
  // Steering: the wheels turn towards the command by at most rate·dt (+inf·dt: at once). Only
  // a wheel angle short of the command needs its own sine and cosine.
  double sin_steer = input.sin_steering;
  double cos_steer = input.cos_steering;
  if (state.steering_rad != input.steering_angle_rad &&
      !TurnWheelsTowards(input.steering_angle_rad, params.max_steering_rate_radps * dt_s,
                         state.steering_rad)) {
    SinCos(state.steering_rad, &sin_steer, &cos_steer);
  }

  // Speed (the seed's Euler step, drag from the old speed): braking stops at 0, no reverse.
  const double v0 = state.speed_mps;
  const double v_free =
      v0 + (input.tyre_acceleration_mps2 - params.drag_coefficient_1ps * v0) * dt_s;
  const double v = std::min(std::max(v_free, 0.0), params.max_speed_mps);
  state.acceleration_mps2 = (v - v0) / dt_s;

  // Move the axle points by s = v·dt, in body axes (x forward): the rear one by (s, 0), the
  // front one by s·(cos δ, sin δ). The front-to-rear vector becomes
  // (L + s(cos δ − 1), s sin δ) and the midpoint moves by (s/2)(1 + cos δ, sin δ).
  const double s_m = v * dt_s;
  const double turn_rad = Atan2(s_m * sin_steer, params.wheelbase_m + s_m * (cos_steer - 1.0));
  const double forward_m = 0.5 * s_m * (1.0 + cos_steer);
  const double left_m = 0.5 * s_m * sin_steer;
  state.pose.x_m += forward_m * state.cos_yaw - left_m * state.sin_yaw;
  state.pose.y_m += forward_m * state.sin_yaw + left_m * state.cos_yaw;
  if (turn_rad != 0.0) {
    state.pose.yaw_rad = WrapToPi(state.pose.yaw_rad + turn_rad);
    SinCos(state.pose.yaw_rad, &state.sin_yaw, &state.cos_yaw);
  }
  state.yaw_rate_radps = turn_rad / dt_s;
  state.speed_mps = v;
}

VehicleReadout ReadAxleDrive(const AxleDriveParams& /*params*/, const AxleDriveInput& /*input*/,
                             const AxleDriveState& state) {
  double sin_steer, cos_steer;
  SinCos(state.steering_rad, &sin_steer, &cos_steer);
  VehicleReadout readout;
  readout.steering_angle_rad = state.steering_rad;
  readout.acceleration_mps2 = state.acceleration_mps2;
  readout.yaw_rate_radps = state.yaw_rate_radps;
  readout.lateral_speed_mps = 0.5 * state.speed_mps * sin_steer;
  return readout;
}

void HaltAxleDrive(const AxleDriveParams& params, AxleDriveInput& input, AxleDriveState& state) {
  input = MakeAxleDriveInput(params, 0.0, 0.0, 0.0);
  state.speed_mps = 0.0;
  state.steering_rad = 0.0;
  state.acceleration_mps2 = 0.0;
  state.yaw_rate_radps = 0.0;
}

double AxleDriveBodyCenterOffset(const AxleDriveSpec& resolved, double length_m) {
  // The rear of the body lies rear_overhang behind the rear axle, itself L/2 behind the
  // midpoint.
  return 0.5 * length_m - *resolved.rear_overhang_m - 0.5 * *resolved.wheelbase_m;
}

}  // namespace pitlane::sim
