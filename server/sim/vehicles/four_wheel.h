// The four-wheel dynamic model (seed 002, after the O3DE ROS2 VehicleDynamics description): a
// rigid body moving in the plane on four wheels, with a spring-damper per wheel carrying the
// body, Ackermann steering of the front wheels, a lateral friction curve per wheel and a
// driving force split among the driven wheels.
//
// Reference point: the centre of gravity, projected on the ground. Body axes: x forward, y left.
//
// Planar motion (body frame; vx = speed_mps, vy = lateral_speed_mps, r = yaw_rate_radps):
//
//   m (vx' - r vy) = sum_i Fx_i,   m (vy' + r vx) = sum_i Fy_i,   I_z r' = sum_i Mz_i
//
// with each wheel's force, in the wheel's own frame (steered by delta_i):
//   - lateral: F_lat = -F_z c1 sin(c2 atan(c3 v_lat sigma)), sigma = v_ref / max(|v_lon|,
//     v_ref): the seed's curve of the lateral velocity v_lat; above the reference speed v_ref
//     the lateral velocity is divided by the longitudinal one (the seed's inverse
//     proportionality), so the argument becomes the slip angle's tangent times c3 v_ref;
//   - longitudinal: the drive force m a (split among the driven wheels by load) or the brake
//     force (split among all four by load), each wheel limited by its friction ellipse
//     (F_lon / (mu_x F_z))^2 + (F_lat / (c1 F_z))^2 <= 1.
//
// Suspension: the body heaves, pitches (positive nose down) and rolls (positive left side up)
// about its centre of gravity, on a linear spring and damper at each wheel; the ground forces'
// moment about the centre of gravity (h * the planar force) drives pitch and roll. A wheel's
// load is its spring plus damper force, never negative (the wheel leaves the ground when the
// spring is fully extended); past the travel a bump stop (10 times stiffer) takes over.
//
// Integration: 4 substeps per tick (more for ticks over 20 ms, keeping them <= 5 ms), each
// linearly implicit Euler (first order): the tyre and brake forces as dampers with a secant
// coefficient (the tyre curve's, per unit load, evaluated once per tick; the brake's per
// substep), the suspension as linear springs and dampers; then the pose by semi-implicit
// Euler. See docs/vehicle-models.md.
#ifndef PITLANE_SERVER_SIM_VEHICLES_FOUR_WHEEL_H_
#define PITLANE_SERVER_SIM_VEHICLES_FOUR_WHEEL_H_

#include <array>
#include <optional>

#include "absl/status/status.h"
#include "server/sim/math/geometry.h"
#include "server/sim/vehicles/model_common.h"

namespace pitlane::sim {

// What a client may set at spawn (wire name `four_wheel`). Unset fields take the defaults of a
// mid-size car (4.5 x 1.8 m body); the valid ranges are checked by ResolveFourWheelSpec.
struct FourWheelSpec {
  // Body.
  std::optional<double> mass_kg;  // Mass, kg. Default 1500, in (0, 100000].
  // Moment of inertia about the vertical axis through the centre of gravity, kg m².
  // Default 2500, in (0, 1e7].
  std::optional<double> yaw_inertia_kgm2;
  // Moment of inertia about the lateral axis (pitch), kg m². Default yaw_inertia_kgm2 (within
  // about 10 % for cars), in (0, 1e7].
  std::optional<double> pitch_inertia_kgm2;
  // Moment of inertia about the longitudinal axis (roll), kg m². Default 0.2 yaw_inertia_kgm2
  // (500 for the default car), in (0, 1e7].
  std::optional<double> roll_inertia_kgm2;
  // Height of the centre of gravity above the ground, m. Default 0.55, in [0, 100] and below
  // the height at which the tyres' grip would tip the car rather than slide it (tipping is not
  // modelled): min(track) / (2 lateral_friction_c1) and min(cg_to_front_axle_m,
  // wheelbase_m - cg_to_front_axle_m) / longitudinal_friction (0.8 m for the default car).
  std::optional<double> cg_height_m;

  // Geometry.
  // Front axle to rear axle, m. Default 2.7 (length if the body is shorter), in (0, length].
  std::optional<double> wheelbase_m;
  // Centre of gravity behind the front axle, m. Default 4/9 of the wheelbase (1.2 m: 56 % of
  // the weight on the front axle), in (0, wheelbase).
  std::optional<double> cg_to_front_axle_m;
  // Between the front wheels, m. Default 1.6 (width if the body is narrower), in (0, width].
  std::optional<double> front_track_m;
  // Between the rear wheels, m. Default 1.6 (width if the body is narrower), in (0, width].
  std::optional<double> rear_track_m;
  // Rear axle to the rear of the body, m. Default (length - wheelbase) / 2 (wheelbase centred
  // in the body), in [0, length - wheelbase].
  std::optional<double> rear_overhang_m;

  // Suspension, the same at every wheel.
  // Spring stiffness, N/m. Default 33000 (1.5 Hz heave for 1500 kg), in (0, 1e8].
  std::optional<double> suspension_stiffness_npm;
  // Damper coefficient, N s/m. Default 2800 (damping ratio 0.4 in heave), in [0, 1e7].
  std::optional<double> suspension_damping_nspm;
  // Unloaded length of the spring, m. Default 0.4, in (0, 10]. It bounds the travel; the
  // planar dynamics do not depend on it.
  std::optional<double> suspension_rest_length_m;
  // Largest compression from the rest length before the bump stop, m. Default 0.25, in
  // (largest static compression, suspension_rest_length_m].
  std::optional<double> suspension_travel_m;

  // Tyres.
  // c1: peak of the lateral friction curve (the lateral friction coefficient). Default 1.0, in
  // (0, 10].
  std::optional<double> lateral_friction_c1;
  // c2: shape of the curve; above 1 the force falls past its peak (to c1 sin(c2 pi / 2) when
  // sliding). Default 1.6, in (0, 2] (beyond 2 the force would reverse).
  std::optional<double> lateral_friction_c2;
  // c3: scale of the lateral velocity, s/m. Default 2.0: below the reference speed the peak is
  // at a lateral velocity tan(pi / (2 c2)) / c3 = 0.75 m/s. In (0, 1000].
  std::optional<double> lateral_friction_c3_spm;
  // v_ref: above this longitudinal wheel speed the curve's argument is divided by the speed,
  // m/s. Default 5.0 (peak at a slip angle of atan(0.75 / 5) = 8.5 deg, cornering stiffness
  // c1 c2 c3 v_ref = 16 per rad per unit load), in (0, 1000].
  std::optional<double> lateral_slip_reference_speed_mps;
  // mu_x: longitudinal friction coefficient (the seed's "longitudinal force coefficient"):
  // a wheel drives or brakes with at most mu_x times its load. Default 1.0, in (0, 10].
  std::optional<double> longitudinal_friction;

  // Steering and drive.
  // Radius of the rear-axle centre's path at full lock, m: the default steering limit is
  // atan(wheelbase / min_turn_radius_m). Default 4.5 (about an 11.9 m kerb-to-kerb turning
  // circle), in (front_track_m / 2, 10000].
  std::optional<double> min_turn_radius_m;
  std::optional<bool> front_wheel_drive;  // Front wheels driven. Default true.
  std::optional<bool> rear_wheel_drive;   // Rear wheels driven. Default false. Not both false.
};

// Checks every field of `spec` against a body of length_m x width_m and fills every unset field
// with its default. Returns InvalidArgument "four_wheel.<field>: ..." naming the first offending
// field.
absl::Status ResolveFourWheelSpec(double length_m, double width_m, FourWheelSpec& spec);

// The common limits' defaults for this model: VehicleLimits' own, except the steering limit,
// atan(wheelbase / min_turn_radius_m) (at most 1.5 rad). The model uses every field.
VehicleLimits DefaultFourWheelLimits(const FourWheelSpec& resolved);

// Validated parameters of one vehicle with the constants its step needs; built once per
// vehicle. Wheels are indexed front left, front right, rear left, rear right.
struct FourWheelParams {
  VehicleLimits limits;
  double mass_kg = 0.0;
  double yaw_inertia_kgm2 = 0.0;
  double pitch_inertia_kgm2 = 0.0;
  double roll_inertia_kgm2 = 0.0;
  double cg_height_m = 0.0;
  double wheelbase_m = 0.0;
  double front_track_m = 0.0;
  std::array<double, 4> wheel_x_m = {};  // Wheel ahead of the centre of gravity, m.
  std::array<double, 4> wheel_y_m = {};  // Wheel left of the centre of gravity, m.
  // Spring compression of each wheel at rest, m: its static load / stiffness.
  std::array<double, 4> static_compression_m = {};
  double stiffness_npm = 0.0;
  double damping_nspm = 0.0;
  double bump_stiffness_npm = 0.0;  // Past the travel, N/m.
  double travel_m = 0.0;
  double c1 = 0.0;
  double c2 = 0.0;
  double c3_spm = 0.0;
  double slip_reference_speed_mps = 0.0;
  double longitudinal_friction = 0.0;
  bool front_drive = true;
  bool rear_drive = false;
  // Integration: the tick is split into `substeps` substeps of substep_s.
  double dt_s = 0.0;
  int substeps = 1;
  double substep_s = 0.0;
  // Suspension stiffness in (heave, pitch, roll) coordinates (symmetric; heave-roll and
  // pitch-roll terms vanish by left-right symmetry): K = k sum_i J_i^T J_i.
  double k_zz = 0.0, k_zp = 0.0, k_pp = 0.0, k_rr = 0.0;
  // Inverse of M + h C + h^2 K, the implicit suspension step's matrix when every spring is
  // within its travel and loaded (same sparsity as K).
  double s_inv_zz = 0.0, s_inv_zp = 0.0, s_inv_pp = 0.0, s_inv_rr = 0.0;
};

// `resolved` from ResolveFourWheelSpec, `limits` already validated, dt_s the world's tick in
// [1e-4, 1]; StepFourWheel must be called with the same dt_s.
FourWheelParams MakeFourWheelParams(const FourWheelSpec& resolved, const VehicleLimits& limits,
                                    double dt_s);

// The controls a vehicle holds until replaced, clamped where the clamp does not depend on the
// state, with the front wheels' Ackermann angles of the commanded steering precomputed.
struct FourWheelInput {
  // Commanded acceleration, m/s², within +-max(max_acceleration, max_braking); clamped again
  // each tick by whether it raises or lowers |speed|.
  double acceleration_mps2 = 0.0;
  // Commanded bicycle-equivalent steering angle, rad, within +-max_steering_angle_rad.
  double steering_angle_rad = 0.0;
  // cos and sin of the front-left and front-right wheel angles for steering_angle_rad.
  double cos_front_left = 1.0;
  double sin_front_left = 0.0;
  double cos_front_right = 1.0;
  double sin_front_right = 0.0;
};

FourWheelInput MakeFourWheelInput(const FourWheelParams& params, double acceleration_mps2,
                                  double steering_angle_rad);

// The state of one vehicle.
struct FourWheelState {
  Pose2 pose = {};                 // Centre of gravity on the ground; yaw wrapped to (-pi, pi].
  double speed_mps = 0.0;          // Velocity along the heading (body x), m/s.
  double lateral_speed_mps = 0.0;  // Velocity across the heading (body y, left), m/s.
  double yaw_rate_radps = 0.0;     // rad/s, positive left.
  // Suspension, relative to the static equilibrium.
  double heave_m = 0.0;           // Body up, m.
  double pitch_rad = 0.0;         // Nose down, rad.
  double roll_rad = 0.0;          // Left side up (right side down), rad.
  double heave_rate_mps = 0.0;    // m/s.
  double pitch_rate_radps = 0.0;  // rad/s.
  double roll_rate_radps = 0.0;   // rad/s.
  // Bicycle-equivalent steering angle in effect over the last tick, rad.
  double steering_rad = 0.0;
  double acceleration_mps2 = 0.0;  // (speed_mps after - before) / dt over the last tick, m/s².
  // Energy taken out by tyre slip, brakes and the speed limits since spawn, J.
  double dissipated_energy_j = 0.0;
};

// At rest on its springs (static equilibrium), moving at speed_mps along the heading.
FourWheelState MakeFourWheelState(const FourWheelParams& params, const Pose2& pose,
                                  double speed_mps);

// Advances one vehicle by dt_s (the dt given to MakeFourWheelParams). Order: the front wheels
// turn towards the command (by at most max_steering_rate_radps dt); the tick's drive or brake
// force is fixed from the sign of the speed at the start of the tick (as the kinematic
// bicycle's acceleration clamp: opposing the motion brakes, otherwise drives; braking stops
// the car and holds it at rest for the rest of the tick); the tyre curve is evaluated per unit
// load at the tick's start velocities; then `substeps` substeps of: wheel loads, tyre and brake
// forces, planar velocities (implicit), suspension (implicit), pose.
// Never fails; speed stays within [-max_reverse_speed_mps, max_speed_mps].
void StepFourWheel(const FourWheelParams& params, const FourWheelInput& input, double dt_s,
                   FourWheelState& state);

// Vertical load on each wheel (front left, front right, rear left, rear right), N: spring plus
// damper force, never negative.
std::array<double, 4> FourWheelLoads(const FourWheelParams& params, const FourWheelState& state);

// Front-left and front-right wheel angles of the bicycle-equivalent angle steering_rad, rad:
// atan2(L tan(steer), L -+ T/2 tan(steer)) with T the front track, as O3DE's Ackermann model.
struct FourWheelSteerAngles {
  double front_left_rad = 0.0;
  double front_right_rad = 0.0;
};
FourWheelSteerAngles FourWheelAckermann(const FourWheelParams& params, double steering_rad);

VehicleReadout ReadFourWheel(const FourWheelParams& params, const FourWheelInput& input,
                             const FourWheelState& state);

// The vehicle crashed: velocities, accelerations, suspension motion and held controls to 0 (the
// suspension back to its static equilibrium), so it stays put for good.
void HaltFourWheel(const FourWheelParams& params, FourWheelInput& input, FourWheelState& state);

// Signed distance from the centre of gravity forward to the centre of the body box, m:
// length / 2 - rear_overhang - (wheelbase - cg_to_front_axle).
double FourWheelBodyCenterOffset(const FourWheelSpec& resolved, double length_m);

// The model's traits, for the fleet that keeps its vehicles (fleet.h): its types and
// functions under the names ModelFleet looks for.
struct FourWheelModel {
  using Spec = FourWheelSpec;
  using Params = FourWheelParams;
  using Input = FourWheelInput;
  using State = FourWheelState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakeFourWheelParams(spec, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakeFourWheelState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakeFourWheelInput(params, input.acceleration_mps2, input.steering_angle_rad);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltFourWheel(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepFourWheel(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadFourWheel(params, input, state);
  }
  // The controls it holds, as the client's input after the model's limits.
  static VehicleInput Held(const Params& /*params*/, const Input& input) {
    return {.acceleration_mps2 = input.acceleration_mps2,
            .steering_angle_rad = input.steering_angle_rad};
  }
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_FOUR_WHEEL_H_
