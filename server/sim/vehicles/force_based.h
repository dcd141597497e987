// The force-based car (seed 004, CarSimulatorMatlab `Car.m`): a point mass that moves along
// its heading, pushed by engine and brake forces against aerodynamic drag and rolling
// resistance, and turned by a steering angle whose effect fades above a slip speed.
//
//   m v' = throttle·F_engine − brake·F_brake − ½ C_d A ρ v² − c_rr v − C_rr m g   (v > 0)
//   ψ'   = v sin(δ_eff) / L        (turn radius L / sin δ_eff, L the axle distance)
//   δ_eff = δ                                    for v ≤ v_slip
//         = δ · exp(3 (1 − v / v_slip))          for v > v_slip (the wheels lose their grip)
//
// We implement the intended physics, not the original's bugs (reference notes §5): the brake
// opposes the motion and holds the car at standstill while it covers the engine (the original
// drove the car backwards after stopping); the drag ½ C_d A ρ v² is counted once (the
// original's m_cod already held ½ C_d A ρ and was multiplied by ½ A ρ again); the speed limit
// is applied before the move (the original moved first); heading in radians; kinetic energy
// and the energy dissipated since spawn in the readout (the original reported a per-tick value
// in degree-metres). There is no reverse: speed >= 0.
//
// One tick: the wheels turn towards the command (rate-limited); the forces at the speed v0 at
// the start of the tick give a constant acceleration a over the tick (Euler, first order),
// and the speed moves along v0 + a t until the tick ends, it reaches 0 (then it stays 0: the
// car stopped within the tick) or it reaches the speed limit (then it stays there); the
// distance d is the exact area under that speed profile. The heading turns by d sin(δ_eff)/L
// with δ_eff taken at v0, and the reference point follows the exact arc of that length and
// curvature. Energy: the losses of the tick are (brake + drag + rolling resistance at v0) × d,
// so that kinetic energy + dissipated = engine work holds to rounding for Euler's speed.
#ifndef PITLANE_SERVER_SIM_VEHICLES_FORCE_BASED_H_
#define PITLANE_SERVER_SIM_VEHICLES_FORCE_BASED_H_

#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "server/sim/math/geometry.h"
#include "server/sim/vehicles/model_common.h"

namespace pitlane::sim {

// What a client may set at spawn. Unset fields take the defaults below (ResolveForceBasedSpec);
// the defaults are the original's where it has them.
struct ForceBasedSpec {
  std::optional<double> mass_kg;  // m, kg, in (0, 100000]. Default 1200 (main.m: 660–1200).
  // Engine force at full throttle, N, in (0, 1e6]. Default 8000 (s_engineForce).
  std::optional<double> engine_force_n;
  // Brake force at full brake, N, in (0, 1e6]. Default 8000 (the original used the engine
  // force per unit of its brake coefficient, and its AI braked with up to 3.5 units).
  std::optional<double> brake_force_n;
  // Aerodynamic drag coefficient C_d, in [0, 10]. Default 0.35 (main.m's cof).
  std::optional<double> drag_coefficient;
  std::optional<double> frontal_area_m2;    // A, m², in [0, 100]. Default 2.2.
  std::optional<double> air_density_kgpm3;  // ρ, kg/m³, in [0, 10]. Default 1.29.
  // Linear rolling resistance c_rr: force c_rr·v, N per m/s, in [0, 1e5]. Default 10.5, the
  // original's m_rr = 30·cof with cof 0.35.
  std::optional<double> rolling_resistance_nspm;
  // Constant rolling resistance coefficient C_rr: force C_rr·m·g while moving (it also holds
  // a car at standstill against that much engine force), in [0, 1]. Default 0 (the original
  // has none; a tyre on asphalt is about 0.01).
  std::optional<double> rolling_resistance_coefficient;
  // L in the turn radius L / sin δ_eff, m, in (0, length_m]. Default 2.7 (length_m if the
  // body is shorter). main.m used 5 m for every car and drew the body from it; here the body
  // is length_m × width_m.
  std::optional<double> axle_distance_m;
  // Speed above which the effective steering angle fades, m/s, in (0, 1000]. Default 30.
  std::optional<double> slip_threshold_mps;
};

// Checks every field of `spec` and fills in every unset one; `length_m` is the validated body
// length (`width_m` is not used). Returns InvalidArgument "force_based.<field>: ..." for a
// non-finite or out-of-range value.
absl::Status ResolveForceBasedSpec(double length_m, double width_m, ForceBasedSpec& spec);

// The common limits' defaults for this model: max_steering_angle_rad π/3 (the original's
// 60°), max_speed_mps 60 (the original had no limit; above the 30 m/s slip threshold, so the
// fade shows), max_steering_rate_radps unlimited, max_reverse_speed_mps 0 (no reverse). The
// model uses max_steering_angle_rad, max_steering_rate_radps and max_speed_mps; forces replace
// max_acceleration_mps2 and max_braking_mps2, which it ignores, as it ignores
// max_reverse_speed_mps.
VehicleLimits DefaultForceBasedLimits(const ForceBasedSpec& resolved);

// Validated, immutable parameters of one vehicle, with derived constants.
struct ForceBasedParams {
  double mass_kg = 1200.0;
  double inverse_mass_1pkg = 1.0 / 1200.0;
  double engine_force_n = 8000.0;        // At full throttle, N.
  double brake_force_n = 8000.0;         // At full brake, N.
  double drag_nspm2 = 0.0;               // ½ C_d A ρ: drag force per (m/s)², N s²/m².
  double rolling_resistance_nspm = 0.0;  // c_rr, N per m/s.
  double rolling_resistance_n = 0.0;     // C_rr m g, N.
  double axle_distance_m = 2.7;          // L, m.
  double slip_threshold_mps = 30.0;      // v_slip, m/s.
  double fade_rate_spm = 0.1;            // 3 / v_slip, s/m: δ_eff = δ exp((v_slip − v)·this).
  double max_speed_mps = 60.0;           // m/s.
  double max_steering_angle_rad = kPi / 3;
  // rad/s; +infinity: no limit.
  double max_steering_rate_radps = std::numeric_limits<double>::infinity();
};

// Builds the parameters from a resolved spec and the validated limits. `dt_s` is the world's
// tick; nothing here depends on it.
ForceBasedParams MakeForceBasedParams(const ForceBasedSpec& resolved, const VehicleLimits& limits,
                                      double dt_s);

// The controls a vehicle holds between ticks, clamped, with what the step derives from them.
struct ForceBasedInput {
  double throttle = 0.0;            // In [0, 1].
  double brake = 0.0;               // In [0, 1].
  double steering_angle_rad = 0.0;  // Commanded wheel angle, within ±max_steering_angle_rad.
  double engine_force_n = 0.0;      // throttle · engine force, N.
  double brake_force_n = 0.0;       // brake · brake force, N.
  double curvature_1pm = 0.0;       // sin(steering_angle_rad) / L below the slip threshold, 1/m.
};

// Clamps the pedals to [0, 1] and the steering to ±max_steering_angle_rad (finite values).
ForceBasedInput MakeForceBasedInput(const ForceBasedParams& params, double throttle, double brake,
                                    double steering_angle_rad);

// The state of one vehicle.
struct ForceBasedState {
  Pose2 pose;                        // Centre of the body; yaw wrapped to (-pi, pi].
  double speed_mps = 0.0;            // Along the heading, m/s, in [0, max_speed_mps].
  double steering_rad = 0.0;         // Wheel angle in effect over the last tick, rad.
  double acceleration_mps2 = 0.0;    // (v_new − v_old) / dt over the last tick, m/s².
  double yaw_rate_radps = 0.0;       // Heading change over the last tick / dt, rad/s.
  double dissipated_energy_j = 0.0;  // Brakes, drag, rolling resistance (and crashes), J.
  // The heading's axes, within a few ulps of SinCos(pose.yaw_rad), for the next tick's move
  // and the collision stage. Whatever sets the pose must set these (MakeForceBasedState does).
  double cos_yaw = 1.0;
  double sin_yaw = 0.0;
};

// The state at spawn: `pose` (yaw wrapped, with its axes), the speed clamped to
// [0, max_speed_mps], wheels straight, nothing dissipated.
ForceBasedState MakeForceBasedState(const ForceBasedParams& params, const Pose2& pose,
                                    double speed_mps);

// Advances one vehicle by `dt_s` seconds (see the top of this file). Never fails; the speed
// stays in [0, max_speed_mps] and no tick moves farther than max_speed_mps · dt_s.
void StepForceBased(const ForceBasedParams& params, const ForceBasedInput& input, double dt_s,
                    ForceBasedState& state);

// Wheel angle (not the faded δ_eff: the yaw rate shows the fade), acceleration and yaw rate of
// the last tick, kinetic energy ½ m v² and the energy dissipated since spawn.
VehicleReadout ReadForceBased(const ForceBasedParams& params, const ForceBasedInput& input,
                              const ForceBasedState& state);

// Stops the vehicle for good: speed, acceleration, yaw rate, wheel angle and controls to 0. The
// crash takes the kinetic energy, which is added to the dissipated energy (so kinetic +
// dissipated energy still equals the engine's work).
void HaltForceBased(const ForceBasedParams& params, ForceBasedInput& input, ForceBasedState& state);

// The reference point is the centre of the body: 0.
double ForceBasedBodyCenterOffset(const ForceBasedSpec& resolved, double length_m);

// The model's traits, for the fleet that keeps its vehicles (fleet.h): its types and
// functions under the names ModelFleet looks for.
struct ForceBasedModel {
  using Spec = ForceBasedSpec;
  using Params = ForceBasedParams;
  using Input = ForceBasedInput;
  using State = ForceBasedState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakeForceBasedParams(spec, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakeForceBasedState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakeForceBasedInput(params, input.throttle, input.brake, input.steering_angle_rad);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltForceBased(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepForceBased(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadForceBased(params, input, state);
  }
  // The controls it holds, as the client's input after the model's limits.
  static VehicleInput Held(const Params& /*params*/, const Input& input) {
    return {.steering_angle_rad = input.steering_angle_rad, .throttle = input.throttle,
            .brake = input.brake};
  }
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_FORCE_BASED_H_
