// What every vehicle model shares: the controls a client sends, its resolved limits and the
// readout it reports.
//
// A model lives in its own files (kinematic_bicycle.h, physics_body.h, ...) as a set of plain
// functions over value types: a Spec (what a client may set, unset = default), Params
// (validated, immutable, with the constants the step needs precomputed for the world's tick),
// an Input (the controls it holds between ticks), a State (all it integrates, the pose of its
// reference point first) and a Step that advances one vehicle by one tick. World keeps the
// vehicles of each model together (see fleet.h) and never looks inside those types.
#ifndef PITLANE_SERVER_SIM_VEHICLES_MODEL_COMMON_H_
#define PITLANE_SERVER_SIM_VEHICLES_MODEL_COMMON_H_

#include <array>
#include <cmath>
#include <limits>
#include <optional>

#include "server/sim/world/ids.h"

namespace pitlane::sim {

// A control for one vehicle, as a client sends it: the union of every model's natural
// inputs. A model reads its own fields; the others must be 0 (unset), else SetInputs rejects
// the control (CheckControls). Values must be finite; they are clamped to the vehicle's
// limits when applied, except throttle and brake, which must lie in [0, 1].
struct VehicleInput {
  VehicleId id = 0;
  double acceleration_mps2 = 0.0;   // Signed longitudinal acceleration, m/s².
  double steering_angle_rad = 0.0;  // Front-wheel angle, rad, positive turns left.
  double throttle = 0.0;            // Accelerator pedal, in [0, 1].
  double brake = 0.0;               // Brake pedal, in [0, 1].
  // Speed for physics_body's accelerator device to hold, m/s; unset: none.
  std::optional<double> target_speed_mps = {};
  double yaw_rate_radps = 0.0;  // Heading change per second (physics_body), rad/s.
};

// The shortest body side, wheelbase, axle distance or track, metres: a millimetre. A much
// shorter one (down to a subnormal 1e-314) divides a speed into an infinite yaw rate and the
// pose into NaN; no vehicle is that small.
inline constexpr double kMinBodyDimension_m = 0.001;

// Physical limits of a vehicle. Controls beyond them are clamped, never rejected.
struct VehicleLimits {
  double max_steering_angle_rad = 0.6;  // Largest steering angle either way, rad, in (0, 1.5].
  // Largest acceleration that raises |speed|, m/s², in (0, kMaxAccelerationLimit_mps2].
  double max_acceleration_mps2 = 3.0;
  // Largest deceleration that lowers |speed|, m/s², in (0, kMaxAccelerationLimit_mps2].
  double max_braking_mps2 = 8.0;
  double max_speed_mps = 30.0;         // Highest forward speed, m/s, in (0, kMaxSpeedLimit_mps].
  double max_reverse_speed_mps = 5.0;  // Highest reverse speed, m/s, in [0, kMaxSpeedLimit_mps].
  // Fastest the steered wheels turn towards the commanded angle, rad/s, in
  // (0, kMaxSteeringRateLimit_radps], or +infinity (the default): no limit, the wheels reach
  // the command at the next tick.
  double max_steering_rate_radps = std::numeric_limits<double>::infinity();
};

// What a model reports of one vehicle beyond its pose and speed. Models fill what they
// have; the rest stays 0 (documented per model in docs/vehicle-models.md).
struct VehicleReadout {
  // Steered-wheel angle in effect over the last tick, rad (the bicycle-equivalent angle for
  // models with two front wheels), positive left.
  double steering_angle_rad = 0.0;
  double acceleration_mps2 = 0.0;  // Longitudinal acceleration over the last tick, m/s².
  double yaw_rate_radps = 0.0;     // Heading change per second, rad/s, positive left.
  // Velocity of the reference point across the heading (positive left), m/s: from tyre slip,
  // or from where the reference point sits (an axle midpoint swings out in a turn).
  double lateral_speed_mps = 0.0;
  // ½ m v² (plus ½ I r² for models with yaw inertia), J; 0 for models without mass.
  double kinetic_energy_j = 0.0;
  // Energy taken out of the vehicle by brakes, drag, rolling resistance and tyre slip since
  // spawn, J; 0 for models without mass.
  double dissipated_energy_j = 0.0;
  // Vertical load on each wheel: front left, front right, rear left, rear right, N. Only the
  // four-wheel model has wheels with loads; 0 otherwise.
  std::array<double, 4> wheel_loads_n = {};
};

// The steering-rate rule every model with steered wheels shares: turns the wheel angle
// `current` towards `command` by at most `max_turn_rad` (the rate limit times dt; +infinity
// turns at once), never past it. Returns true when it reached the command, which `current`
// then equals exactly.
inline bool TurnWheelsTowards(double command, double max_turn_rad, double& current) {
  const double to_go = command - current;
  if (std::abs(to_go) <= max_turn_rad) {
    current = command;
    return true;
  }
  current += to_go > 0.0 ? max_turn_rad : -max_turn_rad;
  return false;
}

// Standard gravity, m/s².
inline constexpr double kGravity_mps2 = 9.80665;

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_MODEL_COMMON_H_
