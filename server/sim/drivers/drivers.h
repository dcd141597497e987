// Built-in drivers: the control laws behind driver_spec.h, as pure functions. The geometry of
// the routes they follow is in route.h.
//
// A driver states an intent (a DriverIntent: an acceleration and a path curvature) and
// ControlsForIntent maps it onto the inputs of the vehicle's model. World runs the drivers
// once per tick, before the dynamics (see World::Step); everything here is a function of its
// arguments, so the drivers are as deterministic as the rest of the step.
//
// The route follower, per tick:
//   1. Projection: the tracking point (the point of the body whose velocity lies along the
//      heading: the rear-axle centre, or the body centre for physics_body and force_based)
//      projected onto the route from the previous tick's segment: arc length s and the signed
//      cross-track error.
//   2. Steering, pure pursuit: the goal is the route point at s + L_d with
//      L_d = max(min_lookahead_m, lookahead_time_s |v|, 2 |v| dt) (the last term only matters
//      at coarse ticks: the goal stays two ticks of travel away). With the goal at distance d
//      and lateral offset y in the vehicle's frame, the arc through it tangent to the heading
//      has curvature k = 2 y / d² (= 2 sin(alpha) / d).
//   3. Speed: v_ref = min(target_speed, sqrt(a_lat E)), E the smaller of the route's corner
//      envelope (RouteVertex::envelope_m) at s and at the goal: braking at a_lat before every
//      corner, so the speed into a corner of curvature kappa is sqrt(a_lat / |kappa|); on an
//      open route also E <= 2 (length - s), to rest with the tracking point on the last point.
//      The acceleration tracks it: a = a_ff + k_v (v_ref - v), k_v = min(2/s, 1/dt), a_ff =
//      dv_ref/dt along a braking curve (-a_lat once on it), a <= a_lat (comfort).
//   4. Gap, to the vehicle ahead on the same route (the next route follower of that route
//      along s, round the loop on a closed route; FindLeaders), g the bumper-to-bumper gap
//      along the route, b = a_lat: the intelligent driver model's interaction term (IDM+,
//      Schakel et al. 2010), a_gap = a_max (1 - (s*/g)²),
//      s* = s0 + max(0, v T + v (v - v_lead) / (2 sqrt(a_max b))), which keeps T s and s0
//      behind a steady leader; and a braking curve v² <= v_lead² + 2 b (g - s0), tracked like
//      the corners', which stops s0 behind a stopped car without undershooting it (IDM alone
//      is underdamped there for T sqrt(a / (2 s0)) < 1). a = min of all three.
//   5. Style (DriverStyle): kTurtle scales v_ref by 0.4 and accelerates at half a_lat;
//      kSpeeder holds target_speed at full throttle and ignores the corners, and while its
//      tracking point is off the lane brakes (fully, but for the last metres per second) to
//      3 m/s, at which it steers back; kCautious lifts off (no drive) while the steering loses
//      effect: above force_based's slip speed, or while v² |k| exceeds a_lat.
#ifndef PITLANE_SERVER_SIM_DRIVERS_DRIVERS_H_
#define PITLANE_SERVER_SIM_DRIVERS_DRIVERS_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/sim/drivers/driver_spec.h"
#include "server/sim/drivers/route.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/ids.h"

namespace pitlane::sim {

// Bounds on the drivers' parameters (all far beyond any road use).
inline constexpr double kMaxLookahead_m = 1000.0;
inline constexpr double kMaxDriverTime_s = 60.0;
inline constexpr double kMaxStandstillGap_m = 1000.0;

// What a driver needs to know of the vehicle it drives, from its resolved spec.
struct DriverVehicleParams {
  ModelKind kind = ModelKind::kKinematicBicycle;
  double dt_s = 0.02;  // The world's tick, s.
  // The point the driver steers, whose velocity lies along the heading (the rear-axle centre;
  // the body centre for physics_body and force_based), is this far behind the model's
  // reference point, m.
  double tracking_offset_m = 0.0;
  // L in the model's steering law, m: the path curvature of the tracking point is tan(δ)/L
  // (kinematic_bicycle, single_track, four_wheel), sin(δ)/L (front/all_wheel_drive) or
  // sin(δ_eff)/L (force_based); physics_body turns by yaw rate.
  double wheelbase_m = 2.7;
  double max_steering_angle_rad = 0.6;
  // Body ahead of and behind the tracking point, m (the gap to the vehicle ahead is counted
  // from front_m to its rear_m).
  double front_m = 0.0;
  double rear_m = 0.0;
  // Most longitudinal acceleration and braking the vehicle can do, m/s²: its limits, or its
  // pedals' at full travel (front/all_wheel_drive, force_based: before grip and drag).
  double max_acceleration_mps2 = 3.0;
  double max_braking_mps2 = 8.0;
  double max_speed_mps = 30.0;  // Forward speed limit, m/s.
  // Pedal models: resistance while moving, r(v) = c0 + c1 v + c2 v², m/s², which the throttle
  // must make up; acceleration per unit throttle and deceleration per unit brake, m/s².
  double resistance_constant_mps2 = 0.0;
  double resistance_linear_1ps = 0.0;
  double resistance_quadratic_1pm = 0.0;
  // physics_body: speed kept per tick by drag (1 = none).
  double drag_factor_per_tick = 1.0;
  // force_based: above this speed the steering fades, δ_eff = δ exp((v_slip - v) fade_rate).
  double slip_speed_mps = std::numeric_limits<double>::infinity();
  double fade_rate_spm = 0.0;
};

// The driver's view of `resolved` (a spec ResolveVehicleSpec accepted) in a world of tick dt_s.
DriverVehicleParams MakeDriverVehicleParams(const VehicleSpec& resolved, double dt_s);

// What a driver wants for the next tick, before it is mapped onto a model's inputs.
struct DriverIntent {
  // Longitudinal acceleration, m/s²; +inf is full throttle, -inf full brake.
  double acceleration_mps2 = 0.0;
  // Path curvature of the tracking point, 1/m, positive left.
  double curvature_1pm = 0.0;
  // A speed to hold, m/s, for models with a speed device (physics_body: its accelerator device
  // ramps to it at its own limits); the others use acceleration_mps2.
  std::optional<double> hold_speed_mps = {};
  // Never drive through zero speed into reverse: braking stops at 0.
  bool forward_only = true;
};

// The controls of vehicle `id` that carry out `intent` at speed `speed_mps`, valid for its
// model (CheckControls accepts them):
//   - steering: kinematic_bicycle, single_track, four_wheel δ = atan(k L);
//     front/all_wheel_drive δ = asin(k L); force_based the same divided by the fade above the
//     slip speed; clamped to the steering limit. physics_body: yaw rate k v.
//   - acceleration models: acceleration_mps2 = a within the limits, and -v/dt where a full
//     tick of a would cross zero (forward_only). Pedal models: the pedal that gives
//     a + r(v): throttle (a + r)/a_throttle or brake -(a + r)/a_brake, within [0, 1].
//     physics_body: target_speed_mps = hold_speed, or v + a dt (not below 0 if forward_only).
VehicleInput ControlsForIntent(const DriverVehicleParams& vehicle, VehicleId id,
                               const DriverIntent& intent, double speed_mps);

// The deceleration a vehicle has with no drive and no brake at `speed_mps` (drag and rolling
// resistance; 0 for the acceleration models), as a (non-positive) acceleration, m/s².
double CoastAcceleration(const DriverVehicleParams& vehicle, double speed_mps);

// Cruise: holds target_speed_mps with the wheels straight. The acceleration models approach it
// at k (v_target - v) with k = min(5/s, 1/dt) (so a tick never overshoots), within their
// limits; physics_body hands the target to its accelerator device (seed 000).
DriverIntent CruiseIntent(const CruiseDriverSpec& spec, const DriverVehicleParams& vehicle,
                          double speed_mps);

// Where a route follower is on its route. Part of the world's state.
struct RouteFollowerState {
  std::uint32_t segment = 0;            // Segment nearest the tracking point.
  std::uint32_t lookahead_segment = 0;  // Segment of the last look-ahead point.
  double s_m = 0.0;                     // Arc length of the tracking point's projection, m.
  double cross_track_m = 0.0;           // Its signed distance from the route, m, left positive.
};

// The pose and speed of a driven vehicle's reference point.
struct DriverView {
  double x_m = 0.0;
  double y_m = 0.0;
  double cos_yaw = 1.0;
  double sin_yaw = 0.0;
  double speed_mps = 0.0;
};

// The state of a follower whose vehicle is at `view`: projected from scratch (at spawn) or
// from the previous state's segments (each tick).
RouteFollowerState StartFollowing(const RouteParams& route, const DriverVehicleParams& vehicle,
                                  const DriverView& view);
void TrackRoute(const RouteParams& route, const DriverVehicleParams& vehicle,
                const DriverView& view, RouteFollowerState& state);

// The vehicle ahead of a follower on its route.
struct RouteLeader {
  double gap_m = 0.0;      // Bumper to bumper along the route, m; <= 0 when they overlap.
  double speed_mps = 0.0;  // Its speed, m/s, >= 0.
};

// One vehicle on a route, for FindLeaders.
struct RouteOccupant {
  std::uint32_t route = 0;  // Index of the route.
  double s_m = 0.0;         // Arc length of its tracking point, m.
  double front_m = 0.0;     // Body ahead of and behind the tracking point, m.
  double rear_m = 0.0;
  double speed_mps = 0.0;
  std::uint32_t index = 0;  // The caller's index of the vehicle, into `leaders`.
};

// Sorts `occupants` by route, arc length and index, and sets leaders[o.index] of each to the
// next occupant ahead on the same route (round the loop on a closed route; none for the first
// of an open route or a vehicle alone on its route). O(n log n).
void FindLeaders(absl::Span<const RouteParams> routes, std::vector<RouteOccupant>& occupants,
                 absl::Span<std::optional<RouteLeader>> leaders);

// Route following (the top of this file): steering and acceleration for a follower at `view`
// whose state TrackRoute has just updated; updates state.lookahead_segment.
DriverIntent RouteFollowerIntent(const RouteFollowerSpec& spec, const RouteParams& route,
                                 const DriverVehicleParams& vehicle, const DriverView& view,
                                 const std::optional<RouteLeader>& leader,
                                 RouteFollowerState& state);

// Checks a driver's fields (not its route, which the world checks), given the vehicle's resolved
// limits. InvalidArgument naming the field as on the wire: "driver.cruise.target_speed_mps",
// "driver.route_follower.max_lateral_acceleration_mps2", ...
absl::Status CheckDriverSpec(const DriverSpec& driver, const VehicleLimitsSpec& resolved_limits,
                             ModelKind kind);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_DRIVERS_DRIVERS_H_
