#include "server/sim/vehicles/physics_body.h"

#include <algorithm>
#include <cmath>

#include "server/sim/math/functions.h"
#include "server/sim/math/trig.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {

absl::Status ResolvePhysicsBodySpec(double /*length_m*/, double /*width_m*/,
                                    PhysicsBodySpec& spec) {
  if (!spec.drag_factor_per_frame.has_value()) spec.drag_factor_per_frame = 0.98;
  return CheckPositive("physics_body.drag_factor_per_frame", *spec.drag_factor_per_frame, 1.0);
}

VehicleLimits DefaultPhysicsBodyLimits(const PhysicsBodySpec& /*resolved*/) {
  return VehicleLimits{};
}

PhysicsBodyParams MakePhysicsBodyParams(const PhysicsBodySpec& resolved,
                                        const VehicleLimits& limits, double dt_s) {
  // k^(50 dt) as exp(50 dt ln k), from math/functions.h (the same bits on every machine);
  // computed once per vehicle.
  const double frames_per_tick = kPhysicsBodyFrameRate_hz * dt_s;
  return {
      .drag_factor_per_tick =
          frames_per_tick == 1.0
              ? *resolved.drag_factor_per_frame
              : Exp(frames_per_tick * Log(*resolved.drag_factor_per_frame)),
      .max_speed_change_up = limits.max_acceleration_mps2 * dt_s,
      .max_speed_change_down = limits.max_braking_mps2 * dt_s,
      .max_speed_mps = limits.max_speed_mps,
      .max_reverse_speed_mps = limits.max_reverse_speed_mps,
  };
}

PhysicsBodyInput MakePhysicsBodyInput(const PhysicsBodyParams& params,
                                      std::optional<double> target_speed_mps,
                                      double acceleration_mps2, double yaw_rate_radps) {
  PhysicsBodyInput input{.yaw_rate_radps = yaw_rate_radps};
  if (target_speed_mps.has_value()) {
    input.holds_target = 1.0;
    input.target_speed_mps =
        std::clamp(*target_speed_mps, -params.max_reverse_speed_mps, params.max_speed_mps);
  } else {
    input.acceleration_mps2 = acceleration_mps2;
  }
  return input;
}

PhysicsBodyState MakePhysicsBodyState(const PhysicsBodyParams& /*params*/, const Pose2& pose,
                                      double speed_mps) {
  PhysicsBodyState state{.pose = {pose.x_m, pose.y_m, WrapToPi(pose.yaw_rad)},
                         .speed_mps = speed_mps};
  SinCos(state.pose.yaw_rad, &state.sin_yaw, &state.cos_yaw);
  return state;
}

namespace {

// A speed change limited by how fast |v| may rise (up) or fall (down) in one tick. A change
// away from zero raises |v|; one towards zero lowers it until zero, and beyond zero raises
// it again, so it is split there.
double LimitSpeedChange(const PhysicsBodyParams& params, double v, double dv) {
  if (dv == 0.0) return 0.0;
  const bool towards_zero = (v > 0.0 && dv < 0.0) || (v < 0.0 && dv > 0.0);
  if (!towards_zero) {
    return std::clamp(dv, -params.max_speed_change_up, params.max_speed_change_up);
  }
  const double to_zero = -v;  // Same sign as dv.
  const double down = params.max_speed_change_down;
  if (std::abs(dv) <= std::abs(to_zero)) return std::clamp(dv, -down, down);
  // Crossing zero: first the braking part (all of it fits, or the budget ends before zero),
  // then whatever of the tick is left accelerates the other way, at the raising rate.
  if (std::abs(to_zero) >= down) return dv > 0.0 ? down : -down;
  const double fraction_left = 1.0 - std::abs(to_zero) / down;
  const double beyond = std::min(std::abs(dv + v), params.max_speed_change_up * fraction_left);
  return to_zero + (dv > 0.0 ? beyond : -beyond);
}

}  // namespace

void StepPhysicsBody(const PhysicsBodyParams& params, const PhysicsBodyInput& input,
                     double dt_s, PhysicsBodyState& state) {
  const double v0 = state.speed_mps;
  // 1. Move with the speed and heading from before the tick.
  state.pose.x_m += state.cos_yaw * v0 * dt_s;
  state.pose.y_m += state.sin_yaw * v0 * dt_s;
  // 2. Drag.
  double v = v0 * params.drag_factor_per_tick;
  // 3. AddSpeed. The accelerator device adds what takes the speed from v0 towards the target
  // at the limited rate (it makes up the drag first); otherwise the steady rate, limited.
  if (input.holds_target != 0.0) {
    v = v0 + LimitSpeedChange(params, v0, input.target_speed_mps - v0);
  } else {
    v += LimitSpeedChange(params, v, input.acceleration_mps2 * dt_s);
  }
  v = std::clamp(v, -params.max_reverse_speed_mps, params.max_speed_mps);
  state.speed_mps = v;
  state.acceleration_mps2 = (v - v0) / dt_s;
  // 4. Rotate.
  if (input.yaw_rate_radps != 0.0) {
    state.pose.yaw_rad = WrapToPi(state.pose.yaw_rad + input.yaw_rate_radps * dt_s);
    SinCos(state.pose.yaw_rad, &state.sin_yaw, &state.cos_yaw);
  }
}

VehicleReadout ReadPhysicsBody(const PhysicsBodyParams& /*params*/,
                               const PhysicsBodyInput& input, const PhysicsBodyState& state) {
  return {.acceleration_mps2 = state.acceleration_mps2, .yaw_rate_radps = input.yaw_rate_radps};
}

void HaltPhysicsBody(const PhysicsBodyParams& /*params*/, PhysicsBodyInput& input,
                     PhysicsBodyState& state) {
  input = PhysicsBodyInput{};
  state.speed_mps = 0.0;
  state.acceleration_mps2 = 0.0;
}

}  // namespace pitlane::sim
