// PhysicsBody (seed 000, the AVL teaching simulator's replacement for Unity's Rigidbody):
// a point that moves along its heading with no momentum.
//
// Each tick, in this order (the seed's frame order):
//   1. position += forward(yaw) * v * dt      (the speed and heading from before the tick)
//   2. v *= k^(50 dt)                          (drag: the seed's factor k per 50 Hz frame)
//   3. v += dv, clamped to [-max_reverse_speed, max_speed]   (AddSpeed, see below)
//   4. yaw += yaw_rate * dt                    (Rotate: instant, no angular momentum)
// so the next tick moves in the new direction at the new speed, without sliding.
//
// dv comes from one of two inputs. With a target speed set, the "accelerator device" adds
// what takes the speed from its value before the tick, v0, towards the target: the net change
// v - v0 is at most max_acceleration * dt when it raises |v| and max_braking * dt when it
// lowers it, and the device makes up the drag first, so it holds any target within the speed
// limits exactly. Without one, dv = acceleration * dt with the same bounds on dv itself
// (AddSpeed at a steady rate, against drag).
//
// The seed's constants are per 50 Hz frame. At other tick rates the drag factor per tick is
// k^(50 dt), so that with no input the speed at time t is v0 * k^(50 t) at every tick rate:
// exponential decay with rate -50 ln k per second.
//
// Frame: right-handed, yaw counter-clockwise from +x, radians. Unity's is left-handed, y-up,
// with yaw clockwise about +y in degrees: Rotate(d degrees) in one 50 Hz frame is a yaw rate
// of -d * pi / 180 * 50 rad/s here.
#ifndef PITLANE_SERVER_SIM_VEHICLES_PHYSICS_BODY_H_
#define PITLANE_SERVER_SIM_VEHICLES_PHYSICS_BODY_H_

#include <optional>

#include "absl/status/status.h"
#include "server/sim/math/geometry.h"
#include "server/sim/vehicles/model_common.h"

namespace pitlane::sim {

// The rate the seed's per-frame constants are defined at, Hz.
inline constexpr double kPhysicsBodyFrameRate_hz = 50.0;

struct PhysicsBodySpec {
  // Speed kept per 50 Hz frame by drag, in (0, 1]: v *= drag_factor_per_frame each frame.
  // Default 0.98 (speed e-folds in 0.99 s and falls to 5% in 3 s: "slows to a stop after a
  // few seconds"). 1 means no drag.
  std::optional<double> drag_factor_per_frame = {};
};

// Uses limits.max_speed_mps, max_reverse_speed_mps (the AddSpeed clamp),
// max_acceleration_mps2 and max_braking_mps2 (how fast AddSpeed may change |v|). Steering
// limits do not apply: the model turns by yaw rate.
absl::Status ResolvePhysicsBodySpec(double length_m, double width_m, PhysicsBodySpec& spec);
VehicleLimits DefaultPhysicsBodyLimits(const PhysicsBodySpec& resolved);

struct PhysicsBodyParams {
  double drag_factor_per_tick = 1.0;   // k^(50 dt).
  double max_speed_change_up = 0.0;    // max_acceleration_mps2 * dt, m/s per tick.
  double max_speed_change_down = 0.0;  // max_braking_mps2 * dt, m/s per tick.
  double max_speed_mps = 0.0;
  double max_reverse_speed_mps = 0.0;
};
PhysicsBodyParams MakePhysicsBodyParams(const PhysicsBodySpec& resolved,
                                        const VehicleLimits& limits, double dt_s);

// Held controls.
struct PhysicsBodyInput {
  double holds_target = 0.0;        // 1 when the accelerator device holds target_speed_mps.
  double target_speed_mps = 0.0;    // Clamped to [-max_reverse_speed, max_speed].
  double acceleration_mps2 = 0.0;   // AddSpeed per second when no target is held, m/s².
  double yaw_rate_radps = 0.0;      // Rotate per second, rad/s, positive left.
};
// `target_speed_mps` engages the accelerator device (and `acceleration_mps2` is then unused).
PhysicsBodyInput MakePhysicsBodyInput(const PhysicsBodyParams& params,
                                      std::optional<double> target_speed_mps,
                                      double acceleration_mps2, double yaw_rate_radps);

struct PhysicsBodyState {
  Pose2 pose = {};                 // Body centre; yaw in (-pi, pi].
  double speed_mps = 0.0;          // Signed, along the heading.
  double acceleration_mps2 = 0.0;  // (v after the tick - v before) / dt.
  double cos_yaw = 1.0;            // SinCos(pose.yaw_rad), the direction of the next move.
  double sin_yaw = 0.0;
};
PhysicsBodyState MakePhysicsBodyState(const PhysicsBodyParams& params, const Pose2& pose,
                                      double speed_mps);

void StepPhysicsBody(const PhysicsBodyParams& params, const PhysicsBodyInput& input,
                     double dt_s, PhysicsBodyState& state);
VehicleReadout ReadPhysicsBody(const PhysicsBodyParams& params, const PhysicsBodyInput& input,
                               const PhysicsBodyState& state);
void HaltPhysicsBody(const PhysicsBodyParams& params, PhysicsBodyInput& input,
                     PhysicsBodyState& state);
// The reference point is the body centre.
inline double PhysicsBodyBodyCenterOffset(const PhysicsBodySpec&, double) { return 0.0; }

// The model's traits, for the fleet that keeps its vehicles (fleet.h): its types and
// functions under the names ModelFleet looks for.
struct PhysicsBodyModel {
  using Spec = PhysicsBodySpec;
  using Params = PhysicsBodyParams;
  using Input = PhysicsBodyInput;
  using State = PhysicsBodyState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakePhysicsBodyParams(spec, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakePhysicsBodyState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakePhysicsBodyInput(params, input.target_speed_mps, input.acceleration_mps2,
                                input.yaw_rate_radps);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltPhysicsBody(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepPhysicsBody(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadPhysicsBody(params, input, state);
  }
  // The controls it holds, as the client's input after the model's limits: a target speed
  // while its accelerator device holds one, else an acceleration; and the yaw rate.
  static VehicleInput Held(const Params& /*params*/, const Input& input) {
    VehicleInput held{.yaw_rate_radps = input.yaw_rate_radps};
    if (input.holds_target != 0.0) {
      held.target_speed_mps = input.target_speed_mps;
    } else {
      held.acceleration_mps2 = input.acceleration_mps2;
    }
    return held;
  }
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_PHYSICS_BODY_H_
