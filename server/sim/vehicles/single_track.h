// The dynamic single-track model: CommonRoad "ST" (vehicle models 2020a) with its linear tyre
// model, made stable at every speed, at standstill and in reverse.
//
// Reference point: the centre of gravity (CoG). State, as in CommonRoad: position and heading
// psi of the CoG, the speed v of the CoG along its direction of travel psi + beta (signed:
// negative in reverse), the wheel angle delta, the yaw rate r = psi' and the slip angle beta
// (direction of travel minus heading):
//
//   x' = v cos(psi + beta),  y' = v sin(psi + beta),  psi' = r,  v' = a,
//   r'    = (m/I) [l_f k_f (delta - beta - l_f r / v) - l_r k_r (-beta + l_r r / v)],
//   beta' = [k_f (delta - beta - l_f r / v) + k_r (-beta + l_r r / v)] / v - r,
//
// where k_f = mu C_Sf (g l_r - a h) / l and k_r = mu C_Sr (g l_f + a h) / l are the axles'
// cornering stiffnesses per unit vehicle mass (m/s² per rad), with the longitudinal load
// transfer of the acceleration a. Written out this is CommonRoad's vehicle_dynamics_st.
//
// How a tick is taken (docs/vehicle-models.md, "Dynamic single track", has the derivations):
//   1. The wheels turn towards the commanded angle at <= max_steering_rate_radps; within the
//      tick they move linearly from delta_0 to delta_1, so the dynamics see the average angle.
//   2. The acceleration is clamped (raise |v|: max_acceleration_mps2, or the constant-power
//      limit max_acceleration_mps2 * v_switch / v above the switching speed; lower |v|:
//      max_braking_mps2), the speed moves within [-max_reverse, max_speed].
//   3. With v, a and delta held at their tick averages, (r, beta) obeys a linear ODE
//      x' = A x + b delta, advanced exactly with the closed-form 2x2 matrix exponential
//      (stable at any tick for every stable A; exact steady state). Below
//      kSingleTrackBlendHigh_mps the result is blended (smoothstep in v) towards the
//      kinematic single-track values at the CoG, beta_k = atan(tan(delta) l_r / l) and
//      r_k = v cos(beta_k) tan(delta) / l, which alone hold below kSingleTrackBlendLow_mps
//      and in reverse (where the linear tyre model is exponentially unstable).
//   4. The pose moves with the trapezoidal yaw rate and the mid-tick direction of travel.
// Second order in dt overall.
#ifndef PITLANE_SERVER_SIM_VEHICLES_SINGLE_TRACK_H_
#define PITLANE_SERVER_SIM_VEHICLES_SINGLE_TRACK_H_

#include <optional>

#include "absl/status/status.h"
#include "server/sim/math/geometry.h"
#include "server/sim/vehicles/model_common.h"

namespace pitlane::sim {

// The three passenger cars of CommonRoad's parameter sets (parameters_vehicle{1,2,3}).
enum class SingleTrackPreset {
  kBmw320i,     // parameters_vehicle2 (the default).
  kFordEscort,  // parameters_vehicle1.
  kVwVanagon,   // parameters_vehicle3.
};

// What a client may set at spawn. Every unset physical parameter takes the preset's value
// (CommonRoad's, converted from its imperial source data by its own factors).
struct SingleTrackSpec {
  SingleTrackPreset preset = SingleTrackPreset::kBmw320i;  // Default kBmw320i.
  // Vehicle mass, kg, in (0, 100000]. BMW 1093.3, Ford 1225.9, VW 1478.9.
  std::optional<double> mass_kg = {};
  // Yaw moment of inertia about the CoG, kg m², in (0, 1e7]; its radius of gyration
  // sqrt(I / m) must lie within [0.05, 2] x the wheelbase. BMW 1791.6, Ford 1538.9,
  // VW 2473.1.
  std::optional<double> yaw_inertia_kgm2 = {};
  // CoG to front axle (l_f), m, in [0.01, 100]. BMW 1.1562, Ford 0.88392, VW 1.1508.
  std::optional<double> cg_to_front_axle_m = {};
  // CoG to rear axle (l_r), m, in [0.01, 100]; l_f + l_r (the wheelbase) <= length_m.
  // BMW 1.4227, Ford 1.50876, VW 1.3211.
  std::optional<double> cg_to_rear_axle_m = {};
  // CoG height (h), m, in [0, 10]: the lever of the longitudinal load transfer. BMW 0.61373,
  // Ford 0.59436, VW 0.80449.
  std::optional<double> cg_height_m = {};
  // Tyre-road friction coefficient (mu), in [0.01, 3]. 1.0489 for every preset.
  std::optional<double> friction_coefficient = {};
  // Cornering stiffness of the front axle per unit vertical load and friction (CommonRoad's
  // C_Sf): lateral force / (mu x axle load) per radian of slip, 1/rad, in [0.1, 100].
  // 20.898 for every preset.
  std::optional<double> front_cornering_stiffness_1prad = {};
  // The same for the rear axle (C_Sr), 1/rad, in [0.1, 100]. 20.898 for every preset.
  std::optional<double> rear_cornering_stiffness_1prad = {};
  // Above this forward speed the drive is power-limited: the largest acceleration is
  // max_acceleration_mps2 * switching_speed_mps / v. m/s, in (0, 1000]. BMW 7.319,
  // Ford 4.755, VW 7.824.
  std::optional<double> switching_speed_mps = {};
  // Rear axle to the rear of the body, m, in [0, length_m - wheelbase]. Unset: the wheelbase
  // is centred in the body, (length_m - wheelbase) / 2.
  std::optional<double> rear_overhang_m = {};
};

// Body length and width of a preset's car as CommonRoad gives them, m: for clients that want
// the real car's box (BMW 4.508 x 1.610, Ford 4.298 x 1.674, VW 4.569 x 1.844).
struct SingleTrackBodySize {
  double length_m = 0.0;
  double width_m = 0.0;
};
SingleTrackBodySize SingleTrackPresetBodySize(SingleTrackPreset preset);

// Checks every field of `spec` and fills every unset one from its preset. `length_m` and
// `width_m` are the (already validated) body dimensions. Returns InvalidArgument whose
// message starts with "single_track.<field>: " on a non-finite, out-of-range or inconsistent
// value, or an unknown preset.
absl::Status ResolveSingleTrackSpec(double length_m, double width_m, SingleTrackSpec& spec);

// The preset's limits (CommonRoad's steering, longitudinal and speed constraints):
// max_steering_angle_rad = delta_max, max_steering_rate_radps = 0.4, max_acceleration_mps2 =
// max_braking_mps2 = a_max = 11.5, max_speed_mps = v_max, max_reverse_speed_mps = -v_min.
// The model uses every VehicleLimits field.
VehicleLimits DefaultSingleTrackLimits(const SingleTrackSpec& resolved);

// Below this forward speed (m/s), and in reverse, the lateral state is the kinematic one.
inline constexpr double kSingleTrackBlendLow_mps = 1.0;
// Above this forward speed (m/s) the lateral state is the dynamic (linear-tyre) one alone; in
// between the two are blended with a smoothstep weight of the speed.
inline constexpr double kSingleTrackBlendHigh_mps = 3.0;
// Largest |slip angle| the state may take, rad: the linear tyre model has no friction limit,
// so past an oversteering car's critical speed (e.g. braking hard at speed) it diverges
// exponentially; the state is held at this bound (and the yaw rate at max_yaw_rate_radps)
// so that it stays finite.
inline constexpr double kSingleTrackMaxSlipAngle_rad = kPi / 2;

// Validated, immutable parameters of one single-track vehicle, with the constants the step
// needs precomputed.
struct SingleTrackParams {
  VehicleLimits limits;             // As validated by the caller.
  double dt_s = 0.01;               // The world's tick, s.
  double inv_dt_s = 100.0;          // 1 / dt_s, 1/s.
  double mass_kg = 0.0;             // m, kg.
  double yaw_inertia_kgm2 = 0.0;    // I, kg m².
  double cg_to_front_axle_m = 0.0;  // l_f, m.
  double cg_to_rear_axle_m = 0.0;   // l_r, m.
  double inv_wheelbase_1pm = 0.0;   // 1 / (l_f + l_r), 1/m.
  double rear_fraction = 0.0;       // l_r / (l_f + l_r): tan(beta_k) / tan(delta).
  // Cornering stiffness per unit mass at longitudinal acceleration a, m/s² per rad:
  // k_f = max(front_static - front_per_accel * a, 0), k_r = max(rear_static + rear_per_accel *
  // a, 0). An axle whose load would turn negative has lifted off and has no stiffness.
  double front_stiffness_static_mps2 = 0.0;  // mu C_Sf g l_r / l, m/s² per rad.
  double front_stiffness_per_accel = 0.0;    // mu C_Sf h / l, 1/rad.
  double rear_stiffness_static_mps2 = 0.0;   // mu C_Sr g l_f / l, m/s² per rad.
  double rear_stiffness_per_accel = 0.0;     // mu C_Sr h / l, 1/rad.
  // (m / I) times l_f², l_r², l_f, l_r: the yaw equation's lever terms, 1 and 1/m.
  double front_lever_sq = 0.0;
  double rear_lever_sq = 0.0;
  double front_lever_1pm = 0.0;
  double rear_lever_1pm = 0.0;
  double switching_speed_mps = 0.0;  // v_switch, m/s.
  // max_acceleration_mps2 * v_switch: the power limit per unit mass, m²/s³.
  double power_per_mass_m2ps3 = 0.0;
  // Bound on |yaw rate|, rad/s: twice the kinematic yaw rate at full lock and the top speed
  // either way, 2 max(max_speed, max_reverse) tan(delta_max) / l. Only an unstable
  // (oversteering) linear-tyre car reaches it.
  double max_yaw_rate_radps = 0.0;
};

// Builds the parameters from a resolved spec, validated limits and the world's tick `dt_s`
// (s, in [1e-4, 1]).
SingleTrackParams MakeSingleTrackParams(const SingleTrackSpec& resolved,
                                        const VehicleLimits& limits, double dt_s);

// The controls held between ticks, already clamped, with what the step derives from the
// commanded wheel angle.
struct SingleTrackInput {
  // Commanded acceleration, m/s², clamped to +-max(max_acceleration, max_braking); clamped
  // again each tick by whether it raises or lowers |v| and by the power limit.
  double acceleration_mps2 = 0.0;
  double steering_angle_rad = 0.0;  // Commanded wheel angle, rad, within +-max_steering_angle.
  double steering_tan = 0.0;        // tan(steering_angle_rad).
  // Kinematic slip angle of the commanded angle, atan(tan(delta) l_r / l), rad.
  double kinematic_slip_rad = 0.0;
  // Kinematic yaw rate per unit speed of the commanded angle, cos(beta_k) tan(delta) / l, 1/m.
  double kinematic_yaw_rate_1pm = 0.0;
};

// Clamps a client's control (finite values) and derives the input's constants.
SingleTrackInput MakeSingleTrackInput(const SingleTrackParams& params, double acceleration_mps2,
                                      double steering_angle_rad);

// The state of one single-track vehicle.
struct SingleTrackState {
  Pose2 pose = {};  // CoG; yaw (heading psi) wrapped to (-pi, pi].
  // Speed of the CoG along its direction of travel psi + beta (CommonRoad's v), m/s, signed:
  // negative in reverse. Its component along the heading is v cos(beta).
  double speed_mps = 0.0;
  double steering_rad = 0.0;       // Wheel angle delta at the end of the last tick, rad.
  double yaw_rate_radps = 0.0;     // r = psi', rad/s, positive left.
  double slip_angle_rad = 0.0;     // beta, rad, positive: travelling left of the heading.
  double acceleration_mps2 = 0.0;  // Achieved over the last tick, (v_new - v_old) / dt, m/s².
  // Energy taken out by the brakes and by tyre slip since spawn, J (see ReadSingleTrack).
  double dissipated_energy_j = 0.0;
};

// The state at spawn: at rest or at `speed_mps` (already within the limits) straight ahead,
// wheels centred. `pose` is the CoG; its yaw is wrapped.
SingleTrackState MakeSingleTrackState(const SingleTrackParams& params, const Pose2& pose,
                                      double speed_mps);

// Advances one vehicle by `dt_s` seconds (params.dt_s). Never fails; never produces NaN or
// infinity; keeps the limits: |delta| <= max_steering_angle_rad, |delta change| <= rate * dt,
// speed within [-max_reverse_speed_mps, max_speed_mps], yaw within (-pi, pi].
void StepSingleTrack(const SingleTrackParams& params, const SingleTrackInput& input, double dt_s,
                     SingleTrackState& state);

// What clients see beyond pose and speed: the wheel angle, the achieved acceleration, the yaw
// rate, the lateral speed v sin(beta), the kinetic energy m v² / 2 + I r² / 2, and the energy
// dissipated by braking (m |a| |v| while a lowers |v|) and by tyre slip (m |v| (k_f alpha_f²
// + k_r alpha_r²), weighted by the dynamic share of the blend). Wheel loads stay 0.
VehicleReadout ReadSingleTrack(const SingleTrackParams& params, const SingleTrackInput& input,
                               const SingleTrackState& state);

// Halts a crashed vehicle for good: speed, acceleration, yaw rate, slip and wheel angle to 0,
// and the held controls to 0.
void HaltSingleTrack(const SingleTrackParams& params, SingleTrackInput& input,
                     SingleTrackState& state);

// Signed distance from the CoG forward to the centre of the body box (length_m long), m:
// length_m / 2 - rear_overhang_m - l_r.
double SingleTrackBodyCenterOffset(const SingleTrackSpec& resolved, double length_m);

// The model's traits, for the fleet that keeps its vehicles (fleet.h): its types and
// functions under the names ModelFleet looks for.
struct SingleTrackModel {
  using Spec = SingleTrackSpec;
  using Params = SingleTrackParams;
  using Input = SingleTrackInput;
  using State = SingleTrackState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakeSingleTrackParams(spec, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakeSingleTrackState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakeSingleTrackInput(params, input.acceleration_mps2, input.steering_angle_rad);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltSingleTrack(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepSingleTrack(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadSingleTrack(params, input, state);
  }
  // The controls it holds, as the client's input after the model's limits.
  static VehicleInput Held(const Params& /*params*/, const Input& input) {
    return {.acceleration_mps2 = input.acceleration_mps2,
            .steering_angle_rad = input.steering_angle_rad};
  }
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_SINGLE_TRACK_H_
