#include "server/sim/drivers/drivers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "server/sim/math/functions.h"
#include "server/sim/vehicles/four_wheel.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Speed gains of the drivers' longitudinal loops, 1/s: the error in speed decays as
// exp(-k t). Each is capped at 1/dt so that one tick never overshoots.
constexpr double kCruiseGain_1ps = 5.0;
constexpr double kFollowerGain_1ps = 2.0;
constexpr double kSpeederGain_1ps = 5.0;
// kTurtle: the share of kNormal's speed it drives at, and of its acceleration.
constexpr double kTurtleSpeedFactor = 0.4;
constexpr double kTurtleAccelerationFactor = 0.5;
// kSpeeder: the speed it slows to off the lane, to find its way back, m/s.
constexpr double kSpeederCrawlSpeed_mps = 3.0;

double Clamp(double value, double limit) { return std::clamp(value, -limit, limit); }

// The intelligent driver model's interaction term (IDM+): the acceleration that keeps
// s* = s0 + v T + v dv / (2 sqrt(a b)) to the vehicle ahead.
double GapAcceleration(double max_acceleration_mps2, double comfortable_braking_mps2,
                       double time_gap_s, double standstill_gap_m, double speed_mps,
                       const RouteLeader& leader) {
  if (!(leader.gap_m > 0.0)) return -kInfinity;
  const double closing_mps = speed_mps - leader.speed_mps;
  const double wanted_gap_m =
      standstill_gap_m +
      std::max(0.0, speed_mps * time_gap_s +
                        speed_mps * closing_mps /
                            (2.0 * std::sqrt(max_acceleration_mps2 * comfortable_braking_mps2)));
  const double ratio = wanted_gap_m / leader.gap_m;
  return max_acceleration_mps2 * (1.0 - ratio * ratio);
}

// Pedals that give acceleration `a` at speed `v`: the throttle or the brake that makes up the
// resistance, each within [0, 1].
void SetPedals(const DriverVehicleParams& vehicle, double acceleration_mps2, double speed_mps,
               VehicleInput& input) {
  const bool resisting = speed_mps > 0.0 || acceleration_mps2 > 0.0;
  const double needed_mps2 =
      acceleration_mps2 + (resisting
                               ? vehicle.resistance_constant_mps2 +
                                     speed_mps * (vehicle.resistance_linear_1ps +
                                                  speed_mps * vehicle.resistance_quadratic_1pm)
                               : 0.0);
  if (needed_mps2 > 0.0) {
    input.throttle = std::min(1.0, needed_mps2 / vehicle.max_acceleration_mps2);
  } else if (needed_mps2 < 0.0) {
    input.brake = std::min(1.0, -needed_mps2 / vehicle.max_braking_mps2);
  }
}

}  // namespace

DriverVehicleParams MakeDriverVehicleParams(const VehicleSpec& resolved, double dt_s) {
  const VehicleLimits limits = LimitsOf(resolved);
  DriverVehicleParams params{
      .kind = ModelKindOf(resolved.model),
      .dt_s = dt_s,
      .max_steering_angle_rad = limits.max_steering_angle_rad,
      .max_acceleration_mps2 = limits.max_acceleration_mps2,
      .max_braking_mps2 = limits.max_braking_mps2,
      .max_speed_mps = limits.max_speed_mps,
  };
  struct Visitor {
    const VehicleLimits& limits;
    double dt_s;
    DriverVehicleParams& params;
    void operator()(const KinematicBicycleSpec& bicycle) const {
      params.wheelbase_m = bicycle.wheelbase_m;
    }
    void operator()(const PhysicsBodySpec& body) const {
      params.drag_factor_per_tick = MakePhysicsBodyParams(body, limits, dt_s).drag_factor_per_tick;
    }
    void operator()(const SingleTrackSpec& car) const {
      params.tracking_offset_m = car.cg_to_rear_axle_m.value_or(0.0);
      params.wheelbase_m = car.cg_to_front_axle_m.value_or(0.0) + params.tracking_offset_m;
    }
    void operator()(const FrontWheelDriveSpec& car) const { Axles(car, DriveAxles::kFront); }
    void operator()(const AllWheelDriveSpec& car) const { Axles(car, DriveAxles::kAll); }
    void Axles(const AxleDriveSpec& car, DriveAxles axles) const {
      const AxleDriveParams axle = MakeAxleDriveParams(car, axles, limits, dt_s);
      params.wheelbase_m = axle.wheelbase_m;
      params.tracking_offset_m = 0.5 * axle.wheelbase_m;
      params.max_acceleration_mps2 = axle.gas_to_acc_mps2;
      params.max_braking_mps2 = axle.brake_to_acc_mps2;
      params.resistance_linear_1ps = axle.drag_coefficient_1ps;
    }
    void operator()(const ForceBasedSpec& car) const {
      const ForceBasedParams force = MakeForceBasedParams(car, limits, dt_s);
      params.wheelbase_m = force.axle_distance_m;
      params.max_acceleration_mps2 = force.engine_force_n * force.inverse_mass_1pkg;
      params.max_braking_mps2 = force.brake_force_n * force.inverse_mass_1pkg;
      params.resistance_constant_mps2 = force.rolling_resistance_n * force.inverse_mass_1pkg;
      params.resistance_linear_1ps = force.rolling_resistance_nspm * force.inverse_mass_1pkg;
      params.resistance_quadratic_1pm = force.drag_nspm2 * force.inverse_mass_1pkg;
      params.slip_speed_mps = force.slip_threshold_mps;
      params.fade_rate_spm = force.fade_rate_spm;
    }
    void operator()(const FourWheelSpec& car) const {
      params.wheelbase_m = car.wheelbase_m.value_or(0.0);
      params.tracking_offset_m = params.wheelbase_m - car.cg_to_front_axle_m.value_or(0.0);
    }
  };
  std::visit(Visitor{limits, dt_s, params}, resolved.model);
  // The body centre lies center_offset ahead of the reference point, which lies
  // tracking_offset ahead of the tracking point.
  const BodyParams body = BodyOf(resolved);
  const double center_ahead_m = body.center_offset_m + params.tracking_offset_m;
  params.front_m = center_ahead_m + 0.5 * body.length_m;
  params.rear_m = 0.5 * body.length_m - center_ahead_m;
  return params;
}

double CoastAcceleration(const DriverVehicleParams& vehicle, double speed_mps) {
  switch (vehicle.kind) {
    case ModelKind::kKinematicBicycle:
    case ModelKind::kSingleTrack:
    case ModelKind::kFourWheel:
      return 0.0;
    case ModelKind::kPhysicsBody:
      return -(1.0 - vehicle.drag_factor_per_tick) * speed_mps / vehicle.dt_s;
    case ModelKind::kFrontWheelDrive:
    case ModelKind::kAllWheelDrive:
    case ModelKind::kForceBased:
      if (speed_mps <= 0.0) return 0.0;
      return -(vehicle.resistance_constant_mps2 +
               speed_mps *
                   (vehicle.resistance_linear_1ps + speed_mps * vehicle.resistance_quadratic_1pm));
  }
  return 0.0;
}

VehicleInput ControlsForIntent(const DriverVehicleParams& vehicle, VehicleId id,
                               const DriverIntent& intent, double speed_mps) {
  VehicleInput input{.id = id};
  const double turn = intent.curvature_1pm * vehicle.wheelbase_m;  // tan δ or sin δ.
  // The acceleration within the vehicle's limits, and where it would carry a forward-only
  // driver through zero, the one that stops it there.
  double acceleration_mps2 = std::clamp(intent.acceleration_mps2, -vehicle.max_braking_mps2,
                                        vehicle.max_acceleration_mps2);
  if (intent.forward_only && speed_mps + acceleration_mps2 * vehicle.dt_s < 0.0) {
    acceleration_mps2 = std::clamp(-speed_mps / vehicle.dt_s, -vehicle.max_braking_mps2,
                                   vehicle.max_acceleration_mps2);
  }
  switch (vehicle.kind) {
    case ModelKind::kKinematicBicycle:
    case ModelKind::kSingleTrack:
    case ModelKind::kFourWheel:
      input.steering_angle_rad =
          Clamp(Atan(turn), vehicle.max_steering_angle_rad);
      input.acceleration_mps2 = acceleration_mps2;
      break;
    case ModelKind::kPhysicsBody:
      input.yaw_rate_radps = intent.curvature_1pm * speed_mps;
      if (intent.hold_speed_mps.has_value()) {
        input.target_speed_mps = *intent.hold_speed_mps;
      } else {
        input.target_speed_mps = speed_mps + acceleration_mps2 * vehicle.dt_s;
        if (intent.forward_only) input.target_speed_mps = std::max(0.0, *input.target_speed_mps);
      }
      break;
    case ModelKind::kFrontWheelDrive:
    case ModelKind::kAllWheelDrive:
    case ModelKind::kForceBased: {
      double steering_rad = Asin(std::clamp(turn, -1.0, 1.0));
      if (speed_mps > vehicle.slip_speed_mps) {
        // Undo force_based's fade: δ_eff = δ exp((v_slip - v) rate).
        steering_rad *= Exp((speed_mps - vehicle.slip_speed_mps) * vehicle.fade_rate_spm);
      }
      input.steering_angle_rad = Clamp(steering_rad, vehicle.max_steering_angle_rad);
      // Pedals from the wanted acceleration itself, so that ±inf saturate them (these models
      // have no reverse: the brake stops them at 0).
      SetPedals(vehicle, intent.acceleration_mps2, speed_mps, input);
      break;
    }
  }
  return input;
}

DriverIntent CruiseIntent(const CruiseDriverSpec& spec, const DriverVehicleParams& vehicle,
                          double speed_mps) {
  const double gain_1ps = std::min(kCruiseGain_1ps, 1.0 / vehicle.dt_s);
  return DriverIntent{.acceleration_mps2 = gain_1ps * (spec.target_speed_mps - speed_mps),
                      .hold_speed_mps = spec.target_speed_mps,
                      .forward_only = false};
}

RouteFollowerState StartFollowing(const RouteParams& route, const DriverVehicleParams& vehicle,
                                  const DriverView& view) {
  const RouteProjection projection =
      ProjectOntoRoute(route, view.x_m - vehicle.tracking_offset_m * view.cos_yaw,
                       view.y_m - vehicle.tracking_offset_m * view.sin_yaw);
  return RouteFollowerState{.segment = projection.segment,
                            .lookahead_segment = projection.segment,
                            .s_m = projection.s_m,
                            .cross_track_m = projection.cross_track_m};
}

void TrackRoute(const RouteParams& route, const DriverVehicleParams& vehicle,
                const DriverView& view, RouteFollowerState& state) {
  const RouteProjection projection =
      ProjectOntoRouteFrom(route, view.x_m - vehicle.tracking_offset_m * view.cos_yaw,
                           view.y_m - vehicle.tracking_offset_m * view.sin_yaw, state.segment);
  state.segment = projection.segment;
  state.s_m = projection.s_m;
  state.cross_track_m = projection.cross_track_m;
}

void FindLeaders(absl::Span<const RouteParams> routes, std::vector<RouteOccupant>& occupants,
                 absl::Span<std::optional<RouteLeader>> leaders) {
  std::sort(occupants.begin(), occupants.end(), [](const RouteOccupant& a, const RouteOccupant& b) {
    return std::tie(a.route, a.s_m, a.index) < std::tie(b.route, b.s_m, b.index);
  });
  for (std::size_t begin = 0; begin < occupants.size();) {
    const std::uint32_t route = occupants[begin].route;
    std::size_t end = begin + 1;
    while (end < occupants.size() && occupants[end].route == route) ++end;
    const bool closed = routes[route].closed;
    for (std::size_t k = begin; k < end; ++k) {
      const RouteOccupant& self = occupants[k];
      const bool last = k + 1 == end;
      if (last && (!closed || end - begin == 1)) {
        leaders[self.index] = std::nullopt;
        continue;
      }
      const RouteOccupant& ahead = occupants[last ? begin : k + 1];
      const double ahead_s_m = ahead.s_m + (last ? routes[route].length_m : 0.0);
      leaders[self.index] = RouteLeader{
          .gap_m = ahead_s_m - self.s_m - self.front_m - ahead.rear_m,
          .speed_mps = std::max(0.0, ahead.speed_mps),
      };
    }
    begin = end;
  }
}

DriverIntent RouteFollowerIntent(const RouteFollowerSpec& spec, const RouteParams& route,
                                 const DriverVehicleParams& vehicle, const DriverView& view,
                                 const std::optional<RouteLeader>& leader,
                                 RouteFollowerState& state) {
  const double speed_mps = view.speed_mps;
  const double forward_mps = std::max(0.0, speed_mps);
  const double dt_s = vehicle.dt_s;
  const DriverStyle style = spec.style;

  // Pure pursuit: the arc from the tracking point, tangent to the heading, through the goal.
  const double lookahead_m = std::max(
      {spec.min_lookahead_m, spec.lookahead_time_s * forward_mps, 2.0 * forward_mps * dt_s});
  const double goal_s_m = WrapArcLength(route, state.s_m + lookahead_m);
  const RoutePoint goal = RoutePointAt(route, goal_s_m, state.lookahead_segment);
  const double dx = goal.x_m - (view.x_m - vehicle.tracking_offset_m * view.cos_yaw);
  const double dy = goal.y_m - (view.y_m - vehicle.tracking_offset_m * view.sin_yaw);
  const double distance2_m2 = dx * dx + dy * dy;
  const double lateral_m = view.cos_yaw * dy - view.sin_yaw * dx;
  const double curvature_1pm = distance2_m2 > 1e-12 ? 2.0 * lateral_m / distance2_m2 : 0.0;

  // The speed to drive at and the acceleration that tracks it.
  const double lateral_limit_mps2 = spec.max_lateral_acceleration_mps2;
  const double speed_factor = style == DriverStyle::kTurtle ? kTurtleSpeedFactor : 1.0;
  double top_acceleration_mps2 = vehicle.max_acceleration_mps2;
  if (style != DriverStyle::kSpeeder) {
    top_acceleration_mps2 = std::min(
        top_acceleration_mps2,
        lateral_limit_mps2 * (style == DriverStyle::kTurtle ? kTurtleAccelerationFactor : 1.0));
  }
  const double gain_1ps =
      std::min(style == DriverStyle::kSpeeder ? kSpeederGain_1ps : kFollowerGain_1ps, 1.0 / dt_s);
  double reference_mps = speed_factor * spec.target_speed_mps;
  double feedforward_mps2 = 0.0;
  CornerEnvelope envelope{.envelope_m = kInfinity};
  if (style != DriverStyle::kSpeeder) {
    // The tighter of the envelopes under the vehicle and at the goal, where pure pursuit
    // already steers into what lies ahead.
    envelope = CornerEnvelopeAt(route, state.segment, state.s_m);
    const CornerEnvelope at_goal = CornerEnvelopeAt(route, state.lookahead_segment, goal_s_m);
    if (at_goal.envelope_m < envelope.envelope_m) envelope = at_goal;
  }
  // An open route ends at rest, with the tracking point on its last point (for every style).
  if (!route.closed && 2.0 * (route.length_m - state.s_m) < envelope.envelope_m) {
    envelope = {.envelope_m = 2.0 * (route.length_m - state.s_m), .slope = -2.0};
  }
  const double corner_mps = speed_factor * std::sqrt(lateral_limit_mps2 * envelope.envelope_m);
  if (corner_mps < reference_mps) {
    reference_mps = corner_mps;
    // Along the braking curve v_ref² = f² a_lat E, dv_ref/dt = f² a_lat (dE/ds) v / (2 v_ref):
    // -f² a_lat once v has come down onto it.
    const double on_curve = corner_mps > forward_mps ? forward_mps / corner_mps : 1.0;
    feedforward_mps2 =
        0.5 * envelope.slope * speed_factor * speed_factor * lateral_limit_mps2 * on_curve;
  }
  double acceleration_mps2 =
      std::min(feedforward_mps2 + gain_1ps * (reference_mps - speed_mps), top_acceleration_mps2);

  // Keep the gap to the vehicle ahead: IDM+, and under it a braking curve that stops
  // standstill_gap_m behind the leader should both brake at b (IDM's own approach to a stopped
  // car is underdamped for T sqrt(a / (2 s0)) < 1 and would end a little inside s0).
  if (leader.has_value()) {
    const double braking_mps2 = lateral_limit_mps2;
    acceleration_mps2 = std::min(
        acceleration_mps2, GapAcceleration(top_acceleration_mps2, braking_mps2, spec.time_gap_s,
                                           spec.standstill_gap_m, forward_mps, *leader));
    const double room_m = leader->gap_m - spec.standstill_gap_m;
    const double safe_mps = std::sqrt(
        std::max(0.0, leader->speed_mps * leader->speed_mps + 2.0 * braking_mps2 * room_m));
    double safe_acceleration_mps2 = -kInfinity;
    if (safe_mps > 0.0) {
      // Along the curve dv/dt = b (v_lead - v) / v_safe: -b once v is on it, v_lead = 0.
      const double closing = std::clamp((forward_mps - leader->speed_mps) / safe_mps, 0.0, 1.0);
      safe_acceleration_mps2 = -braking_mps2 * closing + gain_1ps * (safe_mps - speed_mps);
    }
    acceleration_mps2 = std::min(acceleration_mps2, safe_acceleration_mps2);
  }
  switch (style) {
    case DriverStyle::kNormal:
    case DriverStyle::kTurtle:
      break;
    case DriverStyle::kSpeeder:
      // Off the lane: brake (fully, beyond a few m/s above it) to a crawl, and crawl back.
      if (std::abs(state.cross_track_m) > 0.5 * route.lane_width_m) {
        const double crawl_mps = std::min(kSpeederCrawlSpeed_mps, spec.target_speed_mps);
        acceleration_mps2 = std::min(acceleration_mps2, gain_1ps * (crawl_mps - speed_mps));
      }
      break;
    case DriverStyle::kCautious: {
      const bool fading = forward_mps > vehicle.slip_speed_mps ||
                          forward_mps * forward_mps * std::abs(curvature_1pm) > lateral_limit_mps2;
      if (fading) {
        acceleration_mps2 = std::min(acceleration_mps2, CoastAcceleration(vehicle, speed_mps));
      }
      break;
    }
  }
  return DriverIntent{.acceleration_mps2 = acceleration_mps2, .curvature_1pm = curvature_1pm};
}

absl::Status CheckDriverSpec(const DriverSpec& driver, const VehicleLimitsSpec& resolved_limits,
                             ModelKind kind) {
  const double max_forward_mps = resolved_limits.max_speed_mps.value_or(kMaxSpeedLimit_mps);
  if (const auto* cruise = std::get_if<CruiseDriverSpec>(&driver)) {
    constexpr const char* kField = "driver.cruise.target_speed_mps";
    if (!resolved_limits.max_reverse_speed_mps.has_value() && cruise->target_speed_mps < 0.0) {
      return absl::InvalidArgumentError(absl::StrCat(kField, ": ", ModelName(kind),
                                                     " vehicles have no reverse, so it must be "
                                                     ">= 0, got ",
                                                     cruise->target_speed_mps));
    }
    return CheckInRange(kField, cruise->target_speed_mps,
                        -resolved_limits.max_reverse_speed_mps.value_or(0.0), max_forward_mps);
  }
  const auto& follower = std::get<RouteFollowerSpec>(driver);
  RETURN_IF_ERROR(CheckPositive("driver.route_follower.target_speed_mps", follower.target_speed_mps,
                                max_forward_mps));
  RETURN_IF_ERROR(CheckPositive("driver.route_follower.max_lateral_acceleration_mps2",
                                follower.max_lateral_acceleration_mps2,
                                kMaxAccelerationLimit_mps2));
  RETURN_IF_ERROR(CheckPositive("driver.route_follower.min_lookahead_m", follower.min_lookahead_m,
                                kMaxLookahead_m));
  RETURN_IF_ERROR(CheckInRange("driver.route_follower.lookahead_time_s", follower.lookahead_time_s,
                               0.0, kMaxDriverTime_s));
  RETURN_IF_ERROR(
      CheckInRange("driver.route_follower.time_gap_s", follower.time_gap_s, 0.0, kMaxDriverTime_s));
  RETURN_IF_ERROR(CheckInRange("driver.route_follower.standstill_gap_m", follower.standstill_gap_m,
                               0.0, kMaxStandstillGap_m));
  switch (follower.style) {
    case DriverStyle::kNormal:
    case DriverStyle::kSpeeder:
    case DriverStyle::kCautious:
    case DriverStyle::kTurtle:
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("driver.route_follower.style: unknown style ",
                                                 static_cast<int>(follower.style)));
}

}  // namespace pitlane::sim
