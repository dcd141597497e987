#include "server/sim/vehicles/force_based.h"

#include <algorithm>
#include <cmath>

#include "server/sim/math/arc.h"
#include "server/sim/math/functions.h"
#include "server/sim/math/trig.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

constexpr double kDefaultMass_kg = 1200.0;
constexpr double kDefaultEngineForce_n = 8000.0;
constexpr double kDefaultBrakeForce_n = 8000.0;
constexpr double kDefaultDragCoefficient = 0.35;
constexpr double kDefaultFrontalArea_m2 = 2.2;
constexpr double kDefaultAirDensity_kgpm3 = 1.29;
constexpr double kDefaultRollingResistance_nspm = 10.5;  // 30 · cof, cof = 0.35.
constexpr double kDefaultRollingResistanceCoefficient = 0.0;
constexpr double kDefaultAxleDistance_m = 2.7;
constexpr double kDefaultSlipThreshold_mps = 30.0;
constexpr double kDefaultMaxSpeed_mps = 60.0;
constexpr double kDefaultMaxSteering_rad = kPi / 3;  // 60°.
// The original's fade: δ_eff = δ exp(kFadeExponent (1 − v / v_slip)).
constexpr double kFadeExponent = 3.0;

constexpr double kMaxMass_kg = 1e5;
constexpr double kMaxForce_n = 1e6;
constexpr double kMaxDragCoefficient = 10.0;
constexpr double kMaxFrontalArea_m2 = 100.0;
constexpr double kMaxAirDensity_kgpm3 = 10.0;
constexpr double kMaxRollingResistance_nspm = 1e5;
constexpr double kMaxRollingResistanceCoefficient = 1.0;
constexpr double kMaxSlipThreshold_mps = 1000.0;

// What the speed does over one tick of constant acceleration `a` from `v0`, within
// [0, v_max]: the new speed, the distance covered (the exact area under the speed profile) and
// the part of that distance covered at the speed limit.
struct Longitudinal {
  double speed_mps;
  double distance_m;
  double distance_at_limit_m;
};

inline Longitudinal AdvanceSpeed(double v0, double a, double dt, double v_max) {
  const double v_free = v0 + a * dt;
  if (v_free < 0.0) {
    // Stops after v0 / -a < dt seconds (a < 0 here, since v0 >= 0) and stays stopped: the
    // forces that stopped it hold it (see StepForceBased).
    return {0.0, 0.5 * v0 * (v0 / -a), 0.0};
  }
  if (v_free > v_max) {
    // Reaches the limit after t_hit (a > 0 here) and holds it for the rest of the tick.
    const double t_hit = std::clamp((v_max - v0) / a, 0.0, dt);
    const double at_limit_m = v_max * (dt - t_hit);
    return {v_max, 0.5 * (v0 + v_max) * t_hit + at_limit_m, at_limit_m};
  }
  return {v_free, 0.5 * (v0 + v_free) * dt, 0.0};
}

// sin(δ_eff) / L for wheel angle `steer_rad` at speed `speed_mps`: δ_eff = δ up to the slip
// threshold, δ exp(3 (1 − v / v_slip)) above it (the wheels slip and lose their effect), 1/m.
inline double EffectiveCurvature(const ForceBasedParams& params, double steer_rad,
                                 double speed_mps) {
  if (steer_rad == 0.0) return 0.0;
  if (speed_mps > params.slip_threshold_mps) {
    steer_rad *= Exp((params.slip_threshold_mps - speed_mps) * params.fade_rate_spm);
  }
  double sin_steer, cos_steer;
  SinCos(steer_rad, &sin_steer, &cos_steer);
  return sin_steer / params.axle_distance_m;
}

}  // namespace

absl::Status ResolveForceBasedSpec(double length_m, double /*width_m*/, ForceBasedSpec& spec) {
  spec.mass_kg = spec.mass_kg.value_or(kDefaultMass_kg);
  RETURN_IF_ERROR(CheckPositive("force_based.mass_kg", *spec.mass_kg, kMaxMass_kg));
  spec.engine_force_n = spec.engine_force_n.value_or(kDefaultEngineForce_n);
  RETURN_IF_ERROR(CheckPositive("force_based.engine_force_n", *spec.engine_force_n, kMaxForce_n));
  spec.brake_force_n = spec.brake_force_n.value_or(kDefaultBrakeForce_n);
  RETURN_IF_ERROR(CheckPositive("force_based.brake_force_n", *spec.brake_force_n, kMaxForce_n));
  spec.drag_coefficient = spec.drag_coefficient.value_or(kDefaultDragCoefficient);
  RETURN_IF_ERROR(CheckInRange("force_based.drag_coefficient", *spec.drag_coefficient, 0.0,
                               kMaxDragCoefficient));
  spec.frontal_area_m2 = spec.frontal_area_m2.value_or(kDefaultFrontalArea_m2);
  RETURN_IF_ERROR(
      CheckInRange("force_based.frontal_area_m2", *spec.frontal_area_m2, 0.0, kMaxFrontalArea_m2));
  spec.air_density_kgpm3 = spec.air_density_kgpm3.value_or(kDefaultAirDensity_kgpm3);
  RETURN_IF_ERROR(CheckInRange("force_based.air_density_kgpm3", *spec.air_density_kgpm3, 0.0,
                               kMaxAirDensity_kgpm3));
  spec.rolling_resistance_nspm =
      spec.rolling_resistance_nspm.value_or(kDefaultRollingResistance_nspm);
  RETURN_IF_ERROR(CheckInRange("force_based.rolling_resistance_nspm", *spec.rolling_resistance_nspm,
                               0.0, kMaxRollingResistance_nspm));
  spec.rolling_resistance_coefficient =
      spec.rolling_resistance_coefficient.value_or(kDefaultRollingResistanceCoefficient);
  RETURN_IF_ERROR(CheckInRange("force_based.rolling_resistance_coefficient",
                               *spec.rolling_resistance_coefficient, 0.0,
                               kMaxRollingResistanceCoefficient));
  spec.axle_distance_m = spec.axle_distance_m.value_or(std::min(kDefaultAxleDistance_m, length_m));
  RETURN_IF_ERROR(CheckInRange("force_based.axle_distance_m", *spec.axle_distance_m,
                               kMinBodyDimension_m, length_m));
  spec.slip_threshold_mps = spec.slip_threshold_mps.value_or(kDefaultSlipThreshold_mps);
  return CheckPositive("force_based.slip_threshold_mps", *spec.slip_threshold_mps,
                       kMaxSlipThreshold_mps);
}

VehicleLimits DefaultForceBasedLimits(const ForceBasedSpec& /*resolved*/) {
  VehicleLimits limits;
  limits.max_steering_angle_rad = kDefaultMaxSteering_rad;
  limits.max_speed_mps = kDefaultMaxSpeed_mps;
  limits.max_reverse_speed_mps = 0.0;
  return limits;
}

ForceBasedParams MakeForceBasedParams(const ForceBasedSpec& resolved, const VehicleLimits& limits,
                                      double /*dt_s*/) {
  const double mass_kg = *resolved.mass_kg;
  return ForceBasedParams{
      .mass_kg = mass_kg,
      .inverse_mass_1pkg = 1.0 / mass_kg,
      .engine_force_n = *resolved.engine_force_n,
      .brake_force_n = *resolved.brake_force_n,
      .drag_nspm2 = 0.5 * *resolved.drag_coefficient * *resolved.frontal_area_m2 *
                    *resolved.air_density_kgpm3,
      .rolling_resistance_nspm = *resolved.rolling_resistance_nspm,
      .rolling_resistance_n = *resolved.rolling_resistance_coefficient * mass_kg * kGravity_mps2,
      .axle_distance_m = *resolved.axle_distance_m,
      .slip_threshold_mps = *resolved.slip_threshold_mps,
      .fade_rate_spm = kFadeExponent / *resolved.slip_threshold_mps,
      .max_speed_mps = limits.max_speed_mps,
      .max_steering_angle_rad = limits.max_steering_angle_rad,
      .max_steering_rate_radps = limits.max_steering_rate_radps,
  };
}

ForceBasedInput MakeForceBasedInput(const ForceBasedParams& params, double throttle, double brake,
                                    double steering_angle_rad) {
  ForceBasedInput input;
  input.throttle = std::clamp(throttle, 0.0, 1.0);
  input.brake = std::clamp(brake, 0.0, 1.0);
  input.steering_angle_rad =
      std::clamp(steering_angle_rad, -params.max_steering_angle_rad, params.max_steering_angle_rad);
  input.engine_force_n = input.throttle * params.engine_force_n;
  input.brake_force_n = input.brake * params.brake_force_n;
  double sin_steer, cos_steer;
  SinCos(input.steering_angle_rad, &sin_steer, &cos_steer);
  input.curvature_1pm = sin_steer / params.axle_distance_m;
  return input;
}

ForceBasedState MakeForceBasedState(const ForceBasedParams& params, const Pose2& pose,
                                    double speed_mps) {
  ForceBasedState state;
  state.pose = {.x_m = pose.x_m, .y_m = pose.y_m, .yaw_rad = WrapToPi(pose.yaw_rad)};
  state.speed_mps = std::clamp(speed_mps, 0.0, params.max_speed_mps);
  SinCos(state.pose.yaw_rad, &state.sin_yaw, &state.cos_yaw);
  return state;
}

void StepForceBased(const ForceBasedParams& params, const ForceBasedInput& input, double dt_s,
                    ForceBasedState& state) {
  // Steering: the wheels turn towards the command by at most rate·dt (+inf·dt: at once).
  double curvature_1pm = input.curvature_1pm;
  bool at_command = true;
  if (state.steering_rad != input.steering_angle_rad) {
    at_command = TurnWheelsTowards(input.steering_angle_rad,
                                   params.max_steering_rate_radps * dt_s, state.steering_rad);
  }

  // Forces at the speed at the start of the tick, held over it. The brake opposes the motion;
  // at standstill the brake and the constant rolling resistance hold the car while they cover
  // the engine force (AdvanceSpeed then returns speed 0 and no distance).
  const double v0 = state.speed_mps;
  const double resistance_n =
      (params.drag_nspm2 * v0 + params.rolling_resistance_nspm) * v0 + params.rolling_resistance_n;
  const double losses_n = input.brake_force_n + resistance_n;
  const double acceleration_mps2 = (input.engine_force_n - losses_n) * params.inverse_mass_1pkg;
  const Longitudinal step = AdvanceSpeed(v0, acceleration_mps2, dt_s, params.max_speed_mps);

  // Energy. Before any limit, the work of the losses over the distance covered: with the
  // forces held over the tick, ½ m (v1² − v0²) = (engine − losses) · distance exactly, so
  // kinetic + dissipated energy grows by the engine's work. At the speed limit the engine is
  // throttled back to what holds the speed (at most its force), and that work is dissipated.
  const double before_limit_m = step.distance_m - step.distance_at_limit_m;
  double dissipated_j = losses_n * before_limit_m;
  if (step.distance_at_limit_m > 0.0) {
    const double v_max = params.max_speed_mps;
    const double losses_at_limit_n =
        input.brake_force_n + (params.drag_nspm2 * v_max + params.rolling_resistance_nspm) * v_max +
        params.rolling_resistance_n;
    dissipated_j += std::min(input.engine_force_n, losses_at_limit_n) * step.distance_at_limit_m;
  }
  state.dissipated_energy_j += dissipated_j;

  // Heading and position: the reference point follows the arc of curvature sin(δ_eff) / L
  // (from the speed at the start of the tick) and length `distance`, whose chord is
  // distance·sinc(turn / 2) along the mid-arc heading.
  // A car standing still (stopped by its brakes, or parked) keeps its pose as it is.
  if (step.distance_m != 0.0) {
    if (!at_command || v0 > params.slip_threshold_mps) {
      curvature_1pm = EffectiveCurvature(params, state.steering_rad, v0);
    }
    AdvanceAlongArc(step.distance_m, curvature_1pm, state.pose.x_m, state.pose.y_m,
                    state.pose.yaw_rad, state.cos_yaw, state.sin_yaw);
  }
  state.yaw_rate_radps = curvature_1pm * step.distance_m / dt_s;
  state.acceleration_mps2 = (step.speed_mps - v0) / dt_s;
  state.speed_mps = step.speed_mps;
}

VehicleReadout ReadForceBased(const ForceBasedParams& params, const ForceBasedInput& /*input*/,
                              const ForceBasedState& state) {
  VehicleReadout readout;
  readout.steering_angle_rad = state.steering_rad;
  readout.acceleration_mps2 = state.acceleration_mps2;
  readout.yaw_rate_radps = state.yaw_rate_radps;
  readout.kinetic_energy_j = 0.5 * params.mass_kg * state.speed_mps * state.speed_mps;
  readout.dissipated_energy_j = state.dissipated_energy_j;
  return readout;
}

void HaltForceBased(const ForceBasedParams& params, ForceBasedInput& input,
                    ForceBasedState& state) {
  input = MakeForceBasedInput(params, 0.0, 0.0, 0.0);
  state.dissipated_energy_j += 0.5 * params.mass_kg * state.speed_mps * state.speed_mps;
  state.speed_mps = 0.0;
  state.steering_rad = 0.0;
  state.acceleration_mps2 = 0.0;
  state.yaw_rate_radps = 0.0;
}

double ForceBasedBodyCenterOffset(const ForceBasedSpec& /*resolved*/, double /*length_m*/) {
  return 0.0;
}

}  // namespace pitlane::sim
