// Front-wheel and all-wheel drive (seed 001, the Python `two_wheel_drive`; its
// `four_wheel_drive` was never implemented): a kinematic two-axle car driven by throttle and
// brake pedals, whose drive is limited by the grip of the driven axle.
//
// Each tick, in the seed's order (reference notes §2):
//
//   v ← clamp(v + (a_tyre − c·v)·dt, 0, v_max)           (Euler; linear drag c, 1/s)
//   s = v·dt
//   front axle point += s·(cos(θ+δ), sin(θ+δ))           (rolls along the steered wheels)
//   rear axle point  += s·(cos θ, sin θ)                 (rolls along the heading)
//   reference ← midpoint of the axle points;  θ ← direction rear → front
//
// Both axle points move the same distance s, so the axle distance shrinks by about
// s·(1 − cos δ) within a tick; the next tick places the axles at ±L/2 from the midpoint again
// (re-normalised). In body axes the front-to-rear vector becomes (L + s(cos δ − 1), s sin δ), so
// the heading turns by Δθ = atan2(s sin δ, L + s(cos δ − 1)) and the midpoint moves by
// (s/2)(1 + cos δ, sin δ). For small dt: yaw rate v sin δ / L (not v tan δ / L), and at constant
// v and δ the midpoint circles with radius L / (2 sin(δ/2)).
//
// The tyre acceleration a_tyre = min(throttle·gas, drive limit) − min(brake·brake, μ g) is where
// front- and all-wheel drive differ. With the CG a distance l_r ahead of the rear axle at height
// h, a tyre force m·a_x shifts load (m a_x h / L) from the front axle to the rear, so the front
// axle carries m (g l_r − a_x h) / L. Front-wheel drive can push at most μ times that, hence
// a_x ≤ μ g l_r / (L + μ h); all four wheels together carry m g, so all-wheel drive (and
// braking, assuming an ideal brake balance) reaches μ g.
#ifndef PITLANE_SERVER_SIM_VEHICLES_AXLE_DRIVE_H_
#define PITLANE_SERVER_SIM_VEHICLES_AXLE_DRIVE_H_

#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "server/sim/math/geometry.h"
#include "server/sim/vehicles/model_common.h"

namespace pitlane::sim {

// What a client may set at spawn. Unset fields take the defaults below (ResolveAxleDriveSpec).
// The wire has two entries with this message, `front_wheel_drive` and `all_wheel_drive`.
struct AxleDriveSpec {
  // Front axle to rear axle, m, in (0, length_m]. Default 2.7 (length_m if the body is shorter).
  std::optional<double> wheelbase_m;
  // Rear axle to the rear of the body, m, in [0, length_m − wheelbase_m]. Default
  // (length_m − wheelbase_m) / 2: the wheelbase centred in the body.
  std::optional<double> rear_overhang_m;
  // Acceleration at full throttle before the grip limit (the seed's gas_to_acc), m/s², in
  // (0, 100]. Default 3.5 (the seed's default is 1).
  std::optional<double> gas_to_acc_mps2;
  // Deceleration at full brake before the grip limit (the seed's brake_to_acc), m/s², in
  // (0, 100]. Default 8 (the seed's default is 1).
  std::optional<double> brake_to_acc_mps2;
  // Linear drag c (the seed's DRAG_COEF): deceleration c·v, 1/s, in [0, 1]. Default 0.05
  // (full throttle then tops out at gas / c = 70 m/s). At most 1 so that c·dt ≤ 1 for any tick
  // up to 1 s: the Euler step of the drag then never overshoots.
  std::optional<double> drag_coefficient_1ps;
  // Tyre-road friction coefficient μ, in (0, 3]. Default 1.0 (dry asphalt; ~0.5 wet).
  std::optional<double> friction_coefficient;
  // Height of the centre of gravity above the road, m, in [0, 5]. Default 0.55.
  std::optional<double> cg_height_m;
  // Centre of gravity behind the front axle, m, in [0, wheelbase_m]. Default 0.4·wheelbase_m
  // (a front-heavy car: 60% of its weight on the front axle at rest).
  std::optional<double> cg_to_front_axle_m;
};

// Checks every field of `spec` and fills in every unset one. `wire_name` is the model's entry
// on the wire ("front_wheel_drive" or "all_wheel_drive"), used to name fields in errors;
// `length_m` is the validated body length (`width_m` is not used).
// Returns InvalidArgument "<wire_name>.<field>: ..." for a non-finite or out-of-range value.
absl::Status ResolveAxleDriveSpec(absl::string_view wire_name, double length_m, double width_m,
                                  AxleDriveSpec& spec);

// The common limits' defaults for this model: max_steering_angle_rad 0.6, max_speed_mps 30,
// max_steering_rate_radps unlimited, max_reverse_speed_mps 0 (there is no reverse). The model
// uses max_steering_angle_rad, max_steering_rate_radps and max_speed_mps; the pedals'
// gas_to_acc and brake_to_acc replace max_acceleration_mps2 and max_braking_mps2, which it
// ignores, as it ignores max_reverse_speed_mps.
VehicleLimits DefaultAxleDriveLimits(const AxleDriveSpec& resolved);

// Which axle the engine drives.
enum class DriveAxles {
  kFront,  // Front-wheel drive (`front_wheel_drive`, the seed's two_wheel_drive).
  kAll,    // All-wheel drive (`all_wheel_drive`, the seed's unimplemented four_wheel_drive).
};

// Validated, immutable parameters of one vehicle.
struct AxleDriveParams {
  DriveAxles axles = DriveAxles::kFront;
  double wheelbase_m = 2.7;            // L, m, > 0.
  double gas_to_acc_mps2 = 3.5;        // Full-throttle acceleration before grip, m/s².
  double brake_to_acc_mps2 = 8.0;      // Full-brake deceleration before grip, m/s².
  double drag_coefficient_1ps = 0.05;  // Linear drag c, 1/s, in [0, 1].
  // Most acceleration the driven wheels' grip allows: μ g l_r / (L + μ h) for front-wheel
  // drive, μ g for all-wheel drive, m/s² (here for the default spec, front-wheel drive).
  double drive_grip_limit_mps2 = kGravity_mps2 * 1.62 / 3.25;
  // Most deceleration four braked wheels allow, μ g, m/s².
  double brake_grip_limit_mps2 = kGravity_mps2;
  double max_speed_mps = 30.0;          // m/s.
  double max_steering_angle_rad = 0.6;  // rad.
  // rad/s; +infinity: no limit.
  double max_steering_rate_radps = std::numeric_limits<double>::infinity();
};

// Builds the parameters from a resolved spec, the drive layout (from the wire entry) and the
// validated limits. `dt_s` is the world's tick; nothing here depends on it.
AxleDriveParams MakeAxleDriveParams(const AxleDriveSpec& resolved, DriveAxles axles,
                                    const VehicleLimits& limits, double dt_s);

// The controls a vehicle holds between ticks, clamped, with what the step derives from them.
struct AxleDriveInput {
  double throttle = 0.0;            // Accelerator pedal, in [0, 1].
  double brake = 0.0;               // Brake pedal, in [0, 1].
  double steering_angle_rad = 0.0;  // Commanded wheel angle, within ±max_steering_angle_rad.
  // min(throttle·gas, drive grip) − min(brake·brake, brake grip), m/s².
  double tyre_acceleration_mps2 = 0.0;
  double sin_steering = 0.0;  // sin(steering_angle_rad).
  double cos_steering = 1.0;  // cos(steering_angle_rad).
};

// Clamps the pedals to [0, 1] and the steering to ±max_steering_angle_rad (finite values).
AxleDriveInput MakeAxleDriveInput(const AxleDriveParams& params, double throttle, double brake,
                                  double steering_angle_rad);

// The state of one vehicle.
struct AxleDriveState {
  Pose2 pose;                      // Midpoint of the axles; yaw wrapped to (-pi, pi].
  double speed_mps = 0.0;          // Speed of each axle point (the seed's speed), m/s, >= 0.
  double steering_rad = 0.0;       // Wheel angle in effect over the last tick, rad.
  double acceleration_mps2 = 0.0;  // (v_new − v_old) / dt over the last tick, m/s².
  double yaw_rate_radps = 0.0;     // Δθ / dt over the last tick, rad/s.
  // SinCos(pose.yaw_rad): the heading's axes, for the next tick's move and the collision
  // stage. Whatever sets the pose must set these (MakeAxleDriveState does).
  double cos_yaw = 1.0;
  double sin_yaw = 0.0;
};

// The state at spawn: reference point and heading from `pose` (yaw wrapped, with its axes),
// the speed clamped to [0, max_speed_mps], wheels straight.
AxleDriveState MakeAxleDriveState(const AxleDriveParams& params, const Pose2& pose,
                                  double speed_mps);

// Advances one vehicle by `dt_s` seconds: the wheels turn towards the command (by at most
// max_steering_rate_radps·dt), the speed takes the pedals and the drag, then the axle points
// move with the new speed. Never fails; speed stays in [0, max_speed_mps].
void StepAxleDrive(const AxleDriveParams& params, const AxleDriveInput& input, double dt_s,
                   AxleDriveState& state);

// Steering angle, acceleration and yaw rate of the last tick, and the sideways speed of the
// midpoint, v sin δ / 2 (its velocity points δ/2 off the heading). No mass: energies are 0.
VehicleReadout ReadAxleDrive(const AxleDriveParams& params, const AxleDriveInput& input,
                             const AxleDriveState& state);

// Stops the vehicle for good: speed, acceleration, yaw rate, wheel angle and controls to 0.
void HaltAxleDrive(const AxleDriveParams& params, AxleDriveInput& input, AxleDriveState& state);

// Distance from the axle midpoint forward to the centre of the body box, m:
// length_m / 2 − rear_overhang_m − wheelbase_m / 2 (0 for the default overhang).
double AxleDriveBodyCenterOffset(const AxleDriveSpec& resolved, double length_m);

// Seed 001's car with the engine on the front axle, and the all-wheel-drive variant the seed
// left unimplemented: one model (this file), two entries on the wire.
struct FrontWheelDriveSpec : AxleDriveSpec {};
struct AllWheelDriveSpec : AxleDriveSpec {};

// The model's traits, for the fleet that keeps its vehicles (fleet.h): its types and
// functions under the names ModelFleet looks for.
// Front- and all-wheel drive are one model, its axles fixed by the wire entry.
template <typename SpecType, DriveAxles kAxles>
struct AxleDriveModel {
  using Spec = SpecType;
  using Params = AxleDriveParams;
  using Input = AxleDriveInput;
  using State = AxleDriveState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakeAxleDriveParams(spec, kAxles, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakeAxleDriveState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakeAxleDriveInput(params, input.throttle, input.brake, input.steering_angle_rad);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltAxleDrive(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepAxleDrive(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadAxleDrive(params, input, state);
  }
  // The controls it holds, as the client's input after the model's limits.
  static VehicleInput Held(const Params& /*params*/, const Input& input) {
    return {.steering_angle_rad = input.steering_angle_rad, .throttle = input.throttle,
            .brake = input.brake};
  }
};
using FrontWheelDriveModel = AxleDriveModel<FrontWheelDriveSpec, DriveAxles::kFront>;
using AllWheelDriveModel = AxleDriveModel<AllWheelDriveSpec, DriveAxles::kAll>;

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_AXLE_DRIVE_H_
