#include "server/api/convert.h"

#include <cmath>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "server/util/echo.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::api {
namespace {

absl::Status UnknownEnum(absl::string_view field, int value) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": unknown value ", value));
}

absl::StatusOr<sim::BicycleIntegrator> IntegratorFromProto(v1::BicycleIntegrator integrator) {
  switch (integrator) {
    case v1::BICYCLE_INTEGRATOR_UNSPECIFIED:
    case v1::BICYCLE_INTEGRATOR_SEMI_IMPLICIT_EULER:
      return sim::BicycleIntegrator::kSemiImplicitEuler;
    case v1::BICYCLE_INTEGRATOR_EXACT_ARC:
      return sim::BicycleIntegrator::kExactArc;
    default:
      return UnknownEnum("kinematic_bicycle.integrator", integrator);
  }
}

v1::BicycleIntegrator IntegratorToProto(sim::BicycleIntegrator integrator) {
  switch (integrator) {
    case sim::BicycleIntegrator::kSemiImplicitEuler:
      return v1::BICYCLE_INTEGRATOR_SEMI_IMPLICIT_EULER;
    case sim::BicycleIntegrator::kExactArc:
      return v1::BICYCLE_INTEGRATOR_EXACT_ARC;
  }
  return v1::BICYCLE_INTEGRATOR_UNSPECIFIED;
}

// Copies a proto `optional double` into the core's optional.
void CopyOptional(bool has, double value, std::optional<double>& out) {
  if (has) out = value;
}

sim::AxleDriveSpec AxleDriveFromProto(const v1::AxleDriveCar& car) {
  sim::AxleDriveSpec model;
  CopyOptional(car.has_wheelbase_m(), car.wheelbase_m(), model.wheelbase_m);
  CopyOptional(car.has_rear_overhang_m(), car.rear_overhang_m(), model.rear_overhang_m);
  CopyOptional(car.has_gas_to_acc_mps2(), car.gas_to_acc_mps2(), model.gas_to_acc_mps2);
  CopyOptional(car.has_brake_to_acc_mps2(), car.brake_to_acc_mps2(), model.brake_to_acc_mps2);
  CopyOptional(car.has_drag_coefficient_1ps(), car.drag_coefficient_1ps(),
               model.drag_coefficient_1ps);
  CopyOptional(car.has_friction_coefficient(), car.friction_coefficient(),
               model.friction_coefficient);
  CopyOptional(car.has_cg_height_m(), car.cg_height_m(), model.cg_height_m);
  CopyOptional(car.has_cg_to_front_axle_m(), car.cg_to_front_axle_m(), model.cg_to_front_axle_m);
  return model;
}

void AxleDriveToProto(const sim::AxleDriveSpec& model, v1::AxleDriveCar* car) {
  if (model.wheelbase_m) car->set_wheelbase_m(*model.wheelbase_m);
  if (model.rear_overhang_m) car->set_rear_overhang_m(*model.rear_overhang_m);
  if (model.gas_to_acc_mps2) car->set_gas_to_acc_mps2(*model.gas_to_acc_mps2);
  if (model.brake_to_acc_mps2) car->set_brake_to_acc_mps2(*model.brake_to_acc_mps2);
  if (model.drag_coefficient_1ps) car->set_drag_coefficient_1ps(*model.drag_coefficient_1ps);
  if (model.friction_coefficient) car->set_friction_coefficient(*model.friction_coefficient);
  if (model.cg_height_m) car->set_cg_height_m(*model.cg_height_m);
  if (model.cg_to_front_axle_m) car->set_cg_to_front_axle_m(*model.cg_to_front_axle_m);
}

sim::ForceBasedSpec ForceBasedFromProto(const v1::ForceBased& car) {
  sim::ForceBasedSpec model;
  CopyOptional(car.has_mass_kg(), car.mass_kg(), model.mass_kg);
  CopyOptional(car.has_engine_force_n(), car.engine_force_n(), model.engine_force_n);
  CopyOptional(car.has_brake_force_n(), car.brake_force_n(), model.brake_force_n);
  CopyOptional(car.has_drag_coefficient(), car.drag_coefficient(), model.drag_coefficient);
  CopyOptional(car.has_frontal_area_m2(), car.frontal_area_m2(), model.frontal_area_m2);
  CopyOptional(car.has_air_density_kgpm3(), car.air_density_kgpm3(), model.air_density_kgpm3);
  CopyOptional(car.has_rolling_resistance_nspm(), car.rolling_resistance_nspm(),
               model.rolling_resistance_nspm);
  CopyOptional(car.has_rolling_resistance_coefficient(), car.rolling_resistance_coefficient(),
               model.rolling_resistance_coefficient);
  CopyOptional(car.has_axle_distance_m(), car.axle_distance_m(), model.axle_distance_m);
  CopyOptional(car.has_slip_threshold_mps(), car.slip_threshold_mps(), model.slip_threshold_mps);
  return model;
}

void ForceBasedToProto(const sim::ForceBasedSpec& model, v1::ForceBased* car) {
  if (model.mass_kg) car->set_mass_kg(*model.mass_kg);
  if (model.engine_force_n) car->set_engine_force_n(*model.engine_force_n);
  if (model.brake_force_n) car->set_brake_force_n(*model.brake_force_n);
  if (model.drag_coefficient) car->set_drag_coefficient(*model.drag_coefficient);
  if (model.frontal_area_m2) car->set_frontal_area_m2(*model.frontal_area_m2);
  if (model.air_density_kgpm3) car->set_air_density_kgpm3(*model.air_density_kgpm3);
  if (model.rolling_resistance_nspm) {
    car->set_rolling_resistance_nspm(*model.rolling_resistance_nspm);
  }
  if (model.rolling_resistance_coefficient) {
    car->set_rolling_resistance_coefficient(*model.rolling_resistance_coefficient);
  }
  if (model.axle_distance_m) car->set_axle_distance_m(*model.axle_distance_m);
  if (model.slip_threshold_mps) car->set_slip_threshold_mps(*model.slip_threshold_mps);
}

sim::FourWheelSpec FourWheelFromProto(const v1::FourWheel& car) {
  sim::FourWheelSpec model;
  CopyOptional(car.has_mass_kg(), car.mass_kg(), model.mass_kg);
  CopyOptional(car.has_yaw_inertia_kgm2(), car.yaw_inertia_kgm2(), model.yaw_inertia_kgm2);
  CopyOptional(car.has_pitch_inertia_kgm2(), car.pitch_inertia_kgm2(), model.pitch_inertia_kgm2);
  CopyOptional(car.has_roll_inertia_kgm2(), car.roll_inertia_kgm2(), model.roll_inertia_kgm2);
  CopyOptional(car.has_cg_height_m(), car.cg_height_m(), model.cg_height_m);
  CopyOptional(car.has_wheelbase_m(), car.wheelbase_m(), model.wheelbase_m);
  CopyOptional(car.has_cg_to_front_axle_m(), car.cg_to_front_axle_m(), model.cg_to_front_axle_m);
  CopyOptional(car.has_front_track_m(), car.front_track_m(), model.front_track_m);
  CopyOptional(car.has_rear_track_m(), car.rear_track_m(), model.rear_track_m);
  CopyOptional(car.has_rear_overhang_m(), car.rear_overhang_m(), model.rear_overhang_m);
  CopyOptional(car.has_suspension_stiffness_npm(), car.suspension_stiffness_npm(), model.suspension_stiffness_npm);
  CopyOptional(car.has_suspension_damping_nspm(), car.suspension_damping_nspm(), model.suspension_damping_nspm);
  CopyOptional(car.has_suspension_rest_length_m(), car.suspension_rest_length_m(), model.suspension_rest_length_m);
  CopyOptional(car.has_suspension_travel_m(), car.suspension_travel_m(), model.suspension_travel_m);
  CopyOptional(car.has_lateral_friction_c1(), car.lateral_friction_c1(), model.lateral_friction_c1);
  CopyOptional(car.has_lateral_friction_c2(), car.lateral_friction_c2(), model.lateral_friction_c2);
  CopyOptional(car.has_lateral_friction_c3_spm(), car.lateral_friction_c3_spm(), model.lateral_friction_c3_spm);
  CopyOptional(car.has_lateral_slip_reference_speed_mps(), car.lateral_slip_reference_speed_mps(), model.lateral_slip_reference_speed_mps);
  CopyOptional(car.has_longitudinal_friction(), car.longitudinal_friction(), model.longitudinal_friction);
  CopyOptional(car.has_min_turn_radius_m(), car.min_turn_radius_m(), model.min_turn_radius_m);
  if (car.has_front_wheel_drive()) model.front_wheel_drive = car.front_wheel_drive();
  if (car.has_rear_wheel_drive()) model.rear_wheel_drive = car.rear_wheel_drive();
  return model;
}

void FourWheelToProto(const sim::FourWheelSpec& model, v1::FourWheel* car) {
  if (model.mass_kg) car->set_mass_kg(*model.mass_kg);
  if (model.yaw_inertia_kgm2) car->set_yaw_inertia_kgm2(*model.yaw_inertia_kgm2);
  if (model.pitch_inertia_kgm2) car->set_pitch_inertia_kgm2(*model.pitch_inertia_kgm2);
  if (model.roll_inertia_kgm2) car->set_roll_inertia_kgm2(*model.roll_inertia_kgm2);
  if (model.cg_height_m) car->set_cg_height_m(*model.cg_height_m);
  if (model.wheelbase_m) car->set_wheelbase_m(*model.wheelbase_m);
  if (model.cg_to_front_axle_m) car->set_cg_to_front_axle_m(*model.cg_to_front_axle_m);
  if (model.front_track_m) car->set_front_track_m(*model.front_track_m);
  if (model.rear_track_m) car->set_rear_track_m(*model.rear_track_m);
  if (model.rear_overhang_m) car->set_rear_overhang_m(*model.rear_overhang_m);
  if (model.suspension_stiffness_npm) car->set_suspension_stiffness_npm(*model.suspension_stiffness_npm);
  if (model.suspension_damping_nspm) car->set_suspension_damping_nspm(*model.suspension_damping_nspm);
  if (model.suspension_rest_length_m) car->set_suspension_rest_length_m(*model.suspension_rest_length_m);
  if (model.suspension_travel_m) car->set_suspension_travel_m(*model.suspension_travel_m);
  if (model.lateral_friction_c1) car->set_lateral_friction_c1(*model.lateral_friction_c1);
  if (model.lateral_friction_c2) car->set_lateral_friction_c2(*model.lateral_friction_c2);
  if (model.lateral_friction_c3_spm) car->set_lateral_friction_c3_spm(*model.lateral_friction_c3_spm);
  if (model.lateral_slip_reference_speed_mps) car->set_lateral_slip_reference_speed_mps(*model.lateral_slip_reference_speed_mps);
  if (model.longitudinal_friction) car->set_longitudinal_friction(*model.longitudinal_friction);
  if (model.min_turn_radius_m) car->set_min_turn_radius_m(*model.min_turn_radius_m);
  if (model.front_wheel_drive) car->set_front_wheel_drive(*model.front_wheel_drive);
  if (model.rear_wheel_drive) car->set_rear_wheel_drive(*model.rear_wheel_drive);
}

sim::VehicleLimitsSpec LimitsFromProto(const v1::VehicleLimits& limits) {
  sim::VehicleLimitsSpec out;
  if (limits.has_max_steering_angle_rad()) {
    out.max_steering_angle_rad = limits.max_steering_angle_rad();
  }
  if (limits.has_max_acceleration_mps2()) {
    out.max_acceleration_mps2 = limits.max_acceleration_mps2();
  }
  if (limits.has_max_braking_mps2()) out.max_braking_mps2 = limits.max_braking_mps2();
  if (limits.has_max_speed_mps()) out.max_speed_mps = limits.max_speed_mps();
  if (limits.has_max_reverse_speed_mps()) {
    out.max_reverse_speed_mps = limits.max_reverse_speed_mps();
  }
  if (limits.has_max_steering_rate_radps()) {
    out.max_steering_rate_radps = limits.max_steering_rate_radps();
  }
  return out;
}

// The core takes +infinity for "no steering-rate limit"; on the wire that is the field
// unset, so an explicit non-finite value is an error.
absl::Status CheckWireLimits(const v1::VehicleLimits& limits) {
  if (limits.has_max_steering_rate_radps() && !std::isfinite(limits.max_steering_rate_radps())) {
    return absl::InvalidArgumentError(
        absl::StrCat("limits.max_steering_rate_radps: must be finite (leave it unset for no "
                     "limit), got ",
                     limits.max_steering_rate_radps()));
  }
  return absl::OkStatus();
}

v1::ObjectKind ObjectKindToProto(sim::ObjectKind kind) {
  switch (kind) {
    case sim::ObjectKind::kVehicle:
      return v1::OBJECT_KIND_VEHICLE;
    case sim::ObjectKind::kObstacle:
      return v1::OBJECT_KIND_OBSTACLE;
    case sim::ObjectKind::kWall:
      return v1::OBJECT_KIND_WALL;
  }
  return v1::OBJECT_KIND_UNSPECIFIED;
}

v1::ContactPhase ContactPhaseToProto(sim::ContactPhase phase) {
  switch (phase) {
    case sim::ContactPhase::kBegan:
      return v1::CONTACT_PHASE_BEGAN;
    case sim::ContactPhase::kOngoing:
      return v1::CONTACT_PHASE_ONGOING;
    case sim::ContactPhase::kEnded:
      return v1::CONTACT_PHASE_ENDED;
  }
  return v1::CONTACT_PHASE_UNSPECIFIED;
}

}  // namespace

absl::StatusOr<session::ClockMode> ClockModeFromProto(int mode) {
  switch (mode) {
    case v1::CLOCK_MODE_UNSPECIFIED:
    case v1::CLOCK_MODE_LOCKSTEP:
      return session::ClockMode::kLockstep;
    case v1::CLOCK_MODE_REALTIME:
      return session::ClockMode::kRealtime;
    case v1::CLOCK_MODE_BARRIER:
      return session::ClockMode::kBarrier;
    default:
      return UnknownEnum("clock_mode", mode);
  }
}

v1::ClockMode ClockModeToProto(session::ClockMode mode) {
  switch (mode) {
    case session::ClockMode::kLockstep:
      return v1::CLOCK_MODE_LOCKSTEP;
    case session::ClockMode::kRealtime:
      return v1::CLOCK_MODE_REALTIME;
    case session::ClockMode::kBarrier:
      return v1::CLOCK_MODE_BARRIER;
  }
  return v1::CLOCK_MODE_UNSPECIFIED;
}

absl::StatusOr<session::SessionRequest> SessionRequestFromProto(const v1::SessionConfig& config) {
  session::SessionRequest request;
  request.name = config.name();
  request.seed = config.seed();
  if (config.has_tick_rate_hz()) request.tick_rate_hz = config.tick_rate_hz();
  if (config.has_max_vehicles()) request.max_vehicles = config.max_vehicles();
  const absl::StatusOr<session::ClockMode> mode = ClockModeFromProto(config.clock_mode());
  if (!mode.ok()) return mode.status();
  request.clock.mode = *mode;
  if (config.has_real_time_factor()) request.clock.real_time_factor = config.real_time_factor();
  request.clock.paused = config.paused();
  if (config.has_barrier_timeout_s()) request.clock.barrier_timeout_s = config.barrier_timeout_s();
  switch (config.collision_policy()) {
    case v1::COLLISION_POLICY_UNSPECIFIED:
    case v1::COLLISION_POLICY_REPORT:
      request.collision_policy = sim::CollisionPolicy::kReport;
      break;
    case v1::COLLISION_POLICY_STOP:
      request.collision_policy = sim::CollisionPolicy::kStop;
      break;
    default:
      return UnknownEnum("collision_policy", config.collision_policy());
  }
  if (config.has_bounds()) {
    const v1::WorldBounds& bounds = config.bounds();
    request.bounds = sim::WorldBounds{.min_x_m = bounds.min_x_m(),
                                      .min_y_m = bounds.min_y_m(),
                                      .max_x_m = bounds.max_x_m(),
                                      .max_y_m = bounds.max_y_m()};
  }
  request.obstacles.reserve(config.obstacles_size());
  for (const v1::ObstacleSpec& obstacle : config.obstacles()) {
    request.obstacles.push_back(ObstacleSpecFromProto(obstacle));
  }
  std::vector<std::string> route_names;
  for (int i = 0; i < config.tracks_size(); ++i) {
    const v1::Track& track = config.tracks(i);
    const std::string field = absl::StrCat("tracks[", i, "]");
    if (track.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".name: required"));
    }
    if (std::find(route_names.begin(), route_names.end(), track.name()) != route_names.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".name: \"", Echo(track.name()), "\" names two tracks"));
    }
    route_names.push_back(track.name());
    session::NamedRoute route{.name = track.name()};
    route.route.closed = track.closed();
    if (track.has_lane_width_m()) route.route.lane_width_m = track.lane_width_m();
    route.route.sector_starts_m.assign(track.sector_starts_m().begin(),
                                       track.sector_starts_m().end());
    for (const v1::Point2D& point : track.points()) {
      route.route.points.push_back({.x_m = point.x_m(), .y_m = point.y_m()});
    }
    request.routes.push_back(std::move(route));
  }
  for (int i = 0; i < config.spawn_points_size(); ++i) {
    const v1::SpawnPoint& point = config.spawn_points(i);
    if (point.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("spawn_points[", i, "].name: required"));
    }
    // A grid slot for a race (docs/racing.md): a pose a car can be put on.
    const v1::Pose2D& pose = point.pose();
    for (const auto& [field, value, limit] :
         {std::tuple{"x_m", pose.x_m(), sim::kMaxCoordinate_m},
          std::tuple{"y_m", pose.y_m(), sim::kMaxCoordinate_m},
          std::tuple{"yaw_rad", pose.yaw_rad(), 1e9}}) {
      if (!std::isfinite(value) || std::abs(value) > limit) {
        return absl::InvalidArgumentError(absl::StrCat("spawn_points[", i, "].pose.", field,
                                                       ": must be finite and within ", limit,
                                                       ", got ", value));
      }
    }
    request.spawn_points.push_back(
        {.name = point.name(), .pose = {pose.x_m(), pose.y_m(), pose.yaw_rad()}});
  }
  absl::StatusOr<std::vector<sim::VehicleSpec>> vehicles =
      VehicleSpecsFromProto(config.vehicles(), route_names);
  if (!vehicles.ok()) return vehicles.status();
  request.vehicles = *std::move(vehicles);
  ASSIGN_OR_RETURN(request.race_rules, RaceRulesFromProto(config.race(), {}, "race"));
  return request;
}

absl::StatusOr<std::vector<sim::VehicleSpec>> VehicleSpecsFromProto(
    const google::protobuf::RepeatedPtrField<v1::VehicleSpec>& specs,
    absl::Span<const std::string> route_names) {
  std::vector<sim::VehicleSpec> out;
  out.reserve(specs.size());
  for (int i = 0; i < specs.size(); ++i) {
    absl::StatusOr<sim::VehicleSpec> spec = VehicleSpecFromProto(specs[i], route_names);
    if (!spec.ok()) return PrefixField(absl::StrCat("vehicles[", i, "]"), spec.status());
    out.push_back(*std::move(spec));
  }
  return out;
}

absl::StatusOr<sim::DriverSpec> DriverFromProto(const v1::Driver& driver,
                                                absl::Span<const std::string> route_names) {
  switch (driver.driver_case()) {
    case v1::Driver::kCruise: {
      sim::CruiseDriverSpec cruise;
      if (driver.cruise().has_target_speed_mps()) {
        cruise.target_speed_mps = driver.cruise().target_speed_mps();
      }
      return cruise;
    }
    case v1::Driver::kRouteFollower: {
      const v1::RouteFollower& follower = driver.route_follower();
      const auto it = std::find(route_names.begin(), route_names.end(), follower.track());
      if (it == route_names.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "route_follower.track: no track \"", Echo(follower.track()),
            "\" in the session (tracks: ",
            route_names.empty() ? "none" : Echo(absl::StrJoin(route_names, ", ")), ")"));
      }
      sim::RouteFollowerSpec out{.route = static_cast<std::uint32_t>(it - route_names.begin())};
      if (follower.has_target_speed_mps()) out.target_speed_mps = follower.target_speed_mps();
      if (follower.has_max_lateral_acceleration_mps2()) {
        out.max_lateral_acceleration_mps2 = follower.max_lateral_acceleration_mps2();
      }
      if (follower.has_min_lookahead_m()) out.min_lookahead_m = follower.min_lookahead_m();
      if (follower.has_lookahead_time_s()) out.lookahead_time_s = follower.lookahead_time_s();
      if (follower.has_time_gap_s()) out.time_gap_s = follower.time_gap_s();
      if (follower.has_standstill_gap_m()) out.standstill_gap_m = follower.standstill_gap_m();
      switch (follower.style()) {
        case v1::DRIVER_STYLE_UNSPECIFIED:
        case v1::DRIVER_STYLE_NORMAL:
          out.style = sim::DriverStyle::kNormal;
          break;
        case v1::DRIVER_STYLE_SPEEDER:
          out.style = sim::DriverStyle::kSpeeder;
          break;
        case v1::DRIVER_STYLE_CAUTIOUS:
          out.style = sim::DriverStyle::kCautious;
          break;
        case v1::DRIVER_STYLE_TURTLE:
          out.style = sim::DriverStyle::kTurtle;
          break;
        default:
          return UnknownEnum("route_follower.style", follower.style());
      }
      return out;
    }
    case v1::Driver::DRIVER_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("driver: set cruise or route_follower");
}

void DriverToProto(const sim::DriverSpec& driver, absl::Span<const std::string> route_names,
                   v1::Driver* out) {
  if (const auto* cruise = std::get_if<sim::CruiseDriverSpec>(&driver)) {
    out->mutable_cruise()->set_target_speed_mps(cruise->target_speed_mps);
    return;
  }
  const auto& follower = std::get<sim::RouteFollowerSpec>(driver);
  v1::RouteFollower* route = out->mutable_route_follower();
  if (follower.route < route_names.size()) route->set_track(route_names[follower.route]);
  route->set_target_speed_mps(follower.target_speed_mps);
  route->set_max_lateral_acceleration_mps2(follower.max_lateral_acceleration_mps2);
  route->set_min_lookahead_m(follower.min_lookahead_m);
  route->set_lookahead_time_s(follower.lookahead_time_s);
  route->set_time_gap_s(follower.time_gap_s);
  route->set_standstill_gap_m(follower.standstill_gap_m);
  switch (follower.style) {
    case sim::DriverStyle::kNormal: route->set_style(v1::DRIVER_STYLE_NORMAL); break;
    case sim::DriverStyle::kSpeeder: route->set_style(v1::DRIVER_STYLE_SPEEDER); break;
    case sim::DriverStyle::kCautious: route->set_style(v1::DRIVER_STYLE_CAUTIOUS); break;
    case sim::DriverStyle::kTurtle: route->set_style(v1::DRIVER_STYLE_TURTLE); break;
  }
}

sim::ObstacleSpec ObstacleSpecFromProto(const v1::ObstacleSpec& spec) {
  return sim::ObstacleSpec{.name = spec.name(),
                           .center_x_m = spec.center_x_m(),
                           .center_y_m = spec.center_y_m(),
                           .yaw_rad = spec.yaw_rad(),
                           .length_m = spec.length_m(),
                           .width_m = spec.width_m()};
}

void ObstacleSpecToProto(const sim::ObstacleSpec& spec, v1::ObstacleSpec* out) {
  out->set_name(spec.name);
  out->set_center_x_m(spec.center_x_m);
  out->set_center_y_m(spec.center_y_m);
  out->set_yaw_rad(spec.yaw_rad);
  out->set_length_m(spec.length_m);
  out->set_width_m(spec.width_m);
}

absl::StatusOr<sim::DriverSpec> DriverFromProto(const v1::Driver& driver,
                                                absl::Span<const std::string> route_names);
void DriverToProto(const sim::DriverSpec& driver, absl::Span<const std::string> route_names,
                   v1::Driver* out);

absl::StatusOr<sim::VehicleSpec> VehicleSpecFromProto(const v1::VehicleSpec& spec,
                                                      absl::Span<const std::string> route_names) {
  sim::VehicleSpec out;
  out.name = spec.name();
  if (spec.has_length_m()) out.length_m = spec.length_m();
  if (spec.has_width_m()) out.width_m = spec.width_m();
  out.initial_pose = {.x_m = spec.initial_pose().x_m(),
                      .y_m = spec.initial_pose().y_m(),
                      .yaw_rad = spec.initial_pose().yaw_rad()};
  out.initial_speed_mps = spec.initial_speed_mps();
  if (absl::Status status = CheckWireLimits(spec.limits()); !status.ok()) return status;
  out.limits = LimitsFromProto(spec.limits());
  switch (spec.model_case()) {
    case v1::VehicleSpec::kKinematicBicycle: {
      const v1::KinematicBicycle& bicycle = spec.kinematic_bicycle();
      sim::KinematicBicycleSpec model;
      if (bicycle.has_wheelbase_m()) model.wheelbase_m = bicycle.wheelbase_m();
      if (bicycle.has_rear_overhang_m()) model.rear_overhang_m = bicycle.rear_overhang_m();
      auto integrator = IntegratorFromProto(bicycle.integrator());
      if (!integrator.ok()) return integrator.status();
      model.integrator = *integrator;
      out.model = model;
      break;
    }
    case v1::VehicleSpec::kPhysicsBody: {
      const v1::PhysicsBody& body = spec.physics_body();
      sim::PhysicsBodySpec model;
      if (body.has_drag_factor_per_frame()) {
        model.drag_factor_per_frame = body.drag_factor_per_frame();
      }
      out.model = model;
      break;
    }
    case v1::VehicleSpec::kSingleTrack: {
      const v1::SingleTrack& car = spec.single_track();
      sim::SingleTrackSpec model;
      switch (car.preset()) {
        case v1::SINGLE_TRACK_PRESET_UNSPECIFIED:
        case v1::SINGLE_TRACK_PRESET_BMW_320I:
          model.preset = sim::SingleTrackPreset::kBmw320i;
          break;
        case v1::SINGLE_TRACK_PRESET_FORD_ESCORT:
          model.preset = sim::SingleTrackPreset::kFordEscort;
          break;
        case v1::SINGLE_TRACK_PRESET_VW_VANAGON:
          model.preset = sim::SingleTrackPreset::kVwVanagon;
          break;
        default:
          return absl::InvalidArgumentError(
              absl::StrCat("single_track.preset: unknown value ", car.preset()));
      }
      CopyOptional(car.has_mass_kg(), car.mass_kg(), model.mass_kg);
      CopyOptional(car.has_yaw_inertia_kgm2(), car.yaw_inertia_kgm2(), model.yaw_inertia_kgm2);
      CopyOptional(car.has_cg_to_front_axle_m(), car.cg_to_front_axle_m(), model.cg_to_front_axle_m);
      CopyOptional(car.has_cg_to_rear_axle_m(), car.cg_to_rear_axle_m(), model.cg_to_rear_axle_m);
      CopyOptional(car.has_cg_height_m(), car.cg_height_m(), model.cg_height_m);
      CopyOptional(car.has_friction_coefficient(), car.friction_coefficient(),
           model.friction_coefficient);
      CopyOptional(car.has_front_cornering_stiffness_1prad(), car.front_cornering_stiffness_1prad(),
           model.front_cornering_stiffness_1prad);
      CopyOptional(car.has_rear_cornering_stiffness_1prad(), car.rear_cornering_stiffness_1prad(),
           model.rear_cornering_stiffness_1prad);
      CopyOptional(car.has_switching_speed_mps(), car.switching_speed_mps(), model.switching_speed_mps);
      CopyOptional(car.has_rear_overhang_m(), car.rear_overhang_m(), model.rear_overhang_m);
      out.model = model;
      break;
    }
    case v1::VehicleSpec::kFrontWheelDrive:
      out.model = sim::FrontWheelDriveSpec{AxleDriveFromProto(spec.front_wheel_drive())};
      break;
    case v1::VehicleSpec::kAllWheelDrive:
      out.model = sim::AllWheelDriveSpec{AxleDriveFromProto(spec.all_wheel_drive())};
      break;
    case v1::VehicleSpec::kForceBased:
      out.model = ForceBasedFromProto(spec.force_based());
      break;
    case v1::VehicleSpec::kFourWheel:
      out.model = FourWheelFromProto(spec.four_wheel());
      break;
    case v1::VehicleSpec::MODEL_NOT_SET:
      return absl::InvalidArgumentError("model: required (set e.g. kinematic_bicycle)");
  }
  if (spec.has_range_scan()) {
    const v1::RangeScanSpec& scan = spec.range_scan();
    sim::RangeScanSpec& out_scan = out.range_scan.emplace();
    if (scan.has_beam_count()) out_scan.beam_count = scan.beam_count();
    if (scan.has_field_of_view_rad()) out_scan.field_of_view_rad = scan.field_of_view_rad();
    if (scan.has_max_range_m()) out_scan.max_range_m = scan.max_range_m();
  }
  if (spec.has_nearest_objects()) {
    const v1::NearestObjectsSpec& nearest = spec.nearest_objects();
    sim::NearestObjectsSpec& out_nearest = out.nearest_objects.emplace();
    if (nearest.has_count()) out_nearest.count = nearest.count();
    if (nearest.has_radius_m()) out_nearest.radius_m = nearest.radius_m();
  }
  if (spec.has_driver()) {
    absl::StatusOr<sim::DriverSpec> driver = DriverFromProto(spec.driver(), route_names);
    if (!driver.ok()) return PrefixField("driver", driver.status());
    out.driver = *std::move(driver);
  }
  if (spec.has_timing_track()) {
    const auto it = std::find(route_names.begin(), route_names.end(), spec.timing_track());
    if (it == route_names.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "timing_track: no track \"", Echo(spec.timing_track()), "\" in the session (tracks: ",
          route_names.empty() ? "none" : Echo(absl::StrJoin(route_names, ", ")), ")"));
    }
    out.timing_track = static_cast<std::uint32_t>(it - route_names.begin());
  }
  if (spec.has_track_sensor()) {
    const v1::TrackSensorSpec& sensor = spec.track_sensor();
    if (static_cast<std::size_t>(sensor.beam_angles_rad_size()) > sim::kMaxTrackBeams) {
      return absl::InvalidArgumentError(absl::StrCat("track_sensor.beam_angles_rad: at most ",
                                                     sim::kMaxTrackBeams, " beams, got ",
                                                     sensor.beam_angles_rad_size()));
    }
    sim::TrackSensorSpec& out_sensor = out.track_sensor.emplace();
    out_sensor.beam_angles_rad.assign(sensor.beam_angles_rad().begin(),
                                      sensor.beam_angles_rad().end());
    if (sensor.has_range_m()) out_sensor.range_m = sensor.range_m();
  }
  return out;
}

sim::VehicleInput VehicleInputFromProto(const v1::VehicleControl& control) {
  return sim::VehicleInput{
      .id = control.vehicle_id(),
      .acceleration_mps2 = control.acceleration_mps2(),
      .steering_angle_rad = control.steering_angle_rad(),
      .throttle = control.throttle(),
      .brake = control.brake(),
      .target_speed_mps = control.has_target_speed_mps()
                              ? std::optional<double>(control.target_speed_mps())
                              : std::nullopt,
      .yaw_rate_radps = control.yaw_rate_radps(),
  };
}

void SimTimeToProto(const session::SimTime& time, v1::SimTime* out) {
  out->set_tick(time.tick);
  out->set_sim_time_s(time.sim_time_s);
}

void SessionConfigToProto(const session::SessionConfig& config, v1::SessionConfig* out,
                          bool with_contents) {
  out->set_name(config.name);
  out->set_tick_rate_hz(config.world.tick_rate_hz);
  out->set_seed(config.world.seed);
  out->set_max_vehicles(config.world.max_vehicles);
  out->set_clock_mode(ClockModeToProto(config.clock.mode));
  out->set_real_time_factor(config.clock.real_time_factor);
  out->set_paused(config.clock.paused);
  out->set_barrier_timeout_s(config.clock.barrier_timeout_s);
  switch (config.world.collision_policy) {
    case sim::CollisionPolicy::kReport:
      out->set_collision_policy(v1::COLLISION_POLICY_REPORT);
      break;
    case sim::CollisionPolicy::kStop:
      out->set_collision_policy(v1::COLLISION_POLICY_STOP);
      break;
  }
  if (config.world.bounds.has_value()) {
    const sim::WorldBounds& bounds = *config.world.bounds;
    v1::WorldBounds* out_bounds = out->mutable_bounds();
    out_bounds->set_min_x_m(bounds.min_x_m);
    out_bounds->set_min_y_m(bounds.min_y_m);
    out_bounds->set_max_x_m(bounds.max_x_m);
    out_bounds->set_max_y_m(bounds.max_y_m);
  }
  const std::vector<sim::Route>& routes = config.world.routes;
  for (std::size_t i = 0; i < routes.size(); ++i) {
    v1::Track* track = out->add_tracks();
    track->set_name(i < config.route_names.size() ? config.route_names[i] : "");
    track->set_closed(routes[i].closed);
    track->set_lane_width_m(routes[i].lane_width_m);
    track->mutable_sector_starts_m()->Add(routes[i].sector_starts_m.begin(),
                                          routes[i].sector_starts_m.end());
    for (const sim::RoutePoint& point : routes[i].points) {
      v1::Point2D* out_point = track->add_points();
      out_point->set_x_m(point.x_m);
      out_point->set_y_m(point.y_m);
    }
  }
  for (const session::SpawnPoint& point : config.spawn_points) {
    v1::SpawnPoint* out_point = out->add_spawn_points();
    out_point->set_name(point.name);
    out_point->mutable_pose()->set_x_m(point.pose.x_m);
    out_point->mutable_pose()->set_y_m(point.pose.y_m);
    out_point->mutable_pose()->set_yaw_rad(point.pose.yaw_rad);
  }
  RaceRulesToProto(config.race_rules, out->mutable_race());
  if (!with_contents) return;
  for (const sim::ObstacleSpec& obstacle : config.obstacles) {
    ObstacleSpecToProto(obstacle, out->add_obstacles());
  }
  for (const sim::VehicleSpec& vehicle : config.vehicles) {
    VehicleSpecToProto(vehicle, config.route_names, out->add_vehicles());
  }
}

void SessionToProto(const session::SessionDescription& session, v1::SessionInfo* out) {
  out->set_session_id(session.id);
  SessionConfigToProto(session.config, out->mutable_config(), /*with_contents=*/false);
  v1::ClockStats* stats = out->mutable_clock_stats();
  stats->set_paced_ticks(session.clock_stats.paced_ticks);
  stats->set_missed_deadlines(session.clock_stats.missed_deadlines);
  stats->set_lateness_p50_ms(session.clock_stats.lateness_p50_ms);
  stats->set_lateness_p99_ms(session.clock_stats.lateness_p99_ms);
  stats->set_lateness_max_ms(session.clock_stats.lateness_max_ms);
  stats->set_barrier_timeouts(session.clock_stats.barrier_timeouts);
  out->set_obstacle_count(static_cast<std::uint32_t>(session.obstacle_count));
  for (const sim::Obstacle& obstacle : session.obstacles) {
    v1::ObstacleInfo* info = out->add_obstacles();
    info->set_obstacle_id(obstacle.id);
    ObstacleSpecToProto(obstacle.spec, info->mutable_spec());
  }
  SimTimeToProto(session.time, out->mutable_time());
  out->set_vehicle_count(static_cast<std::uint32_t>(session.vehicle_count));
  for (const sim::VehicleDescription& vehicle : session.vehicles) {
    v1::VehicleInfo* info = out->add_vehicles();
    info->set_vehicle_id(vehicle.id);
    VehicleSpecToProto(vehicle.spec, session.config.route_names, info->mutable_spec());
  }
  if (session.playback.has_value()) PlaybackToProto(*session.playback, out->mutable_playback());
}

void PlaybackToProto(const session::PlaybackPosition& playback, v1::PlaybackInfo* out) {
  out->set_recording_id(playback.recording);
  out->set_position_s(static_cast<double>(playback.position_ns) * 1e-9);
  out->set_duration_s(static_cast<double>(playback.duration_ns) * 1e-9);
  out->set_frame(playback.frame);
  out->set_frame_count(playback.frame_count);
}

void VehicleInputToProto(const sim::VehicleInput& input, v1::VehicleControl* out) {
  out->set_vehicle_id(input.id);
  out->set_acceleration_mps2(input.acceleration_mps2);
  out->set_steering_angle_rad(input.steering_angle_rad);
  out->set_throttle(input.throttle);
  out->set_brake(input.brake);
  if (input.target_speed_mps.has_value()) out->set_target_speed_mps(*input.target_speed_mps);
  out->set_yaw_rate_radps(input.yaw_rate_radps);
}

void VehicleSpecToProto(const sim::VehicleSpec& spec, absl::Span<const std::string> route_names,
                        v1::VehicleSpec* out) {
  if (spec.driver.has_value()) DriverToProto(*spec.driver, route_names, out->mutable_driver());
  out->set_name(spec.name);
  out->set_length_m(spec.length_m);
  out->set_width_m(spec.width_m);
  out->mutable_initial_pose()->set_x_m(spec.initial_pose.x_m);
  out->mutable_initial_pose()->set_y_m(spec.initial_pose.y_m);
  out->mutable_initial_pose()->set_yaw_rad(spec.initial_pose.yaw_rad);
  out->set_initial_speed_mps(spec.initial_speed_mps);
  // The limits the model uses (set by ResolveVehicleSpec); "no limit" is the field unset.
  v1::VehicleLimits* limits = out->mutable_limits();
  const sim::VehicleLimitsSpec& set = spec.limits;
  if (set.max_steering_angle_rad) limits->set_max_steering_angle_rad(*set.max_steering_angle_rad);
  if (set.max_acceleration_mps2) limits->set_max_acceleration_mps2(*set.max_acceleration_mps2);
  if (set.max_braking_mps2) limits->set_max_braking_mps2(*set.max_braking_mps2);
  if (set.max_speed_mps) limits->set_max_speed_mps(*set.max_speed_mps);
  if (set.max_reverse_speed_mps) limits->set_max_reverse_speed_mps(*set.max_reverse_speed_mps);
  if (set.max_steering_rate_radps && std::isfinite(*set.max_steering_rate_radps)) {
    limits->set_max_steering_rate_radps(*set.max_steering_rate_radps);
  }
  struct ModelToProto {
    v1::VehicleSpec* out;
    void operator()(const sim::KinematicBicycleSpec& model) const {
      v1::KinematicBicycle* bicycle = out->mutable_kinematic_bicycle();
      bicycle->set_wheelbase_m(model.wheelbase_m);
      if (model.rear_overhang_m.has_value()) bicycle->set_rear_overhang_m(*model.rear_overhang_m);
      bicycle->set_integrator(IntegratorToProto(model.integrator));
    }
    void operator()(const sim::SingleTrackSpec& model) const {
      v1::SingleTrack* car = out->mutable_single_track();
      switch (model.preset) {
        case sim::SingleTrackPreset::kBmw320i:
          car->set_preset(v1::SINGLE_TRACK_PRESET_BMW_320I);
          break;
        case sim::SingleTrackPreset::kFordEscort:
          car->set_preset(v1::SINGLE_TRACK_PRESET_FORD_ESCORT);
          break;
        case sim::SingleTrackPreset::kVwVanagon:
          car->set_preset(v1::SINGLE_TRACK_PRESET_VW_VANAGON);
          break;
      }
      if (model.mass_kg) car->set_mass_kg(*model.mass_kg);
      if (model.yaw_inertia_kgm2) car->set_yaw_inertia_kgm2(*model.yaw_inertia_kgm2);
      if (model.cg_to_front_axle_m) car->set_cg_to_front_axle_m(*model.cg_to_front_axle_m);
      if (model.cg_to_rear_axle_m) car->set_cg_to_rear_axle_m(*model.cg_to_rear_axle_m);
      if (model.cg_height_m) car->set_cg_height_m(*model.cg_height_m);
      if (model.friction_coefficient) car->set_friction_coefficient(*model.friction_coefficient);
      if (model.front_cornering_stiffness_1prad) {
        car->set_front_cornering_stiffness_1prad(*model.front_cornering_stiffness_1prad);
      }
      if (model.rear_cornering_stiffness_1prad) {
        car->set_rear_cornering_stiffness_1prad(*model.rear_cornering_stiffness_1prad);
      }
      if (model.switching_speed_mps) car->set_switching_speed_mps(*model.switching_speed_mps);
      if (model.rear_overhang_m) car->set_rear_overhang_m(*model.rear_overhang_m);
    }
    void operator()(const sim::FrontWheelDriveSpec& model) const {
      AxleDriveToProto(model, out->mutable_front_wheel_drive());
    }
    void operator()(const sim::AllWheelDriveSpec& model) const {
      AxleDriveToProto(model, out->mutable_all_wheel_drive());
    }
    void operator()(const sim::ForceBasedSpec& model) const {
      ForceBasedToProto(model, out->mutable_force_based());
    }
    void operator()(const sim::FourWheelSpec& model) const {
      FourWheelToProto(model, out->mutable_four_wheel());
    }
    void operator()(const sim::PhysicsBodySpec& model) const {
      v1::PhysicsBody* body = out->mutable_physics_body();
      if (model.drag_factor_per_frame) {
        body->set_drag_factor_per_frame(*model.drag_factor_per_frame);
      }
    }
  };
  std::visit(ModelToProto{out}, spec.model);
  if (spec.range_scan.has_value()) {
    v1::RangeScanSpec* scan = out->mutable_range_scan();
    scan->set_beam_count(spec.range_scan->beam_count);
    scan->set_field_of_view_rad(spec.range_scan->field_of_view_rad);
    scan->set_max_range_m(spec.range_scan->max_range_m);
  }
  if (spec.nearest_objects.has_value()) {
    v1::NearestObjectsSpec* nearest = out->mutable_nearest_objects();
    nearest->set_count(spec.nearest_objects->count);
    nearest->set_radius_m(spec.nearest_objects->radius_m);
  }
  if (spec.timing_track.has_value() && *spec.timing_track < route_names.size()) {
    out->set_timing_track(route_names[*spec.timing_track]);
  }
  if (spec.track_sensor.has_value()) {
    v1::TrackSensorSpec* sensor = out->mutable_track_sensor();
    sensor->mutable_beam_angles_rad()->Add(spec.track_sensor->beam_angles_rad.begin(),
                                           spec.track_sensor->beam_angles_rad.end());
    sensor->set_range_m(spec.track_sensor->range_m);
  }
}

void ContactToProto(const sim::Contact& contact, v1::Contact* out) {
  v1::ContactPair* pair = out->mutable_pair();
  pair->set_vehicle_id(contact.pair.vehicle);
  pair->set_other_kind(ObjectKindToProto(contact.pair.other_kind));
  pair->set_other_id(contact.pair.other_id);
  out->set_normal_x(contact.normal_x);
  out->set_normal_y(contact.normal_y);
  out->set_depth_m(contact.depth_m);
  out->set_began_tick(contact.began_tick);
}

void EventsToProto(const session::FrameEvents& events,
                   google::protobuf::RepeatedPtrField<v1::ContactEvent>* out) {
  out->Reserve(static_cast<int>(events.events.size()));
  for (const sim::ContactEvent& event : events.events) {
    v1::ContactEvent* out_event = out->Add();
    out_event->set_tick(event.tick);
    out_event->set_phase(ContactPhaseToProto(event.phase));
    ContactToProto(event.contact, out_event->mutable_contact());
  }
}

namespace {

v1::RaceEventKind RaceEventKindToProto(sim::RaceEvent::Kind kind) {
  using K = sim::RaceEvent::Kind;
  switch (kind) {
    case K::kStart: return v1::RACE_EVENT_KIND_START;
    case K::kJumpStart: return v1::RACE_EVENT_KIND_JUMP_START;
    case K::kSector: return v1::RACE_EVENT_KIND_SECTOR;
    case K::kLap: return v1::RACE_EVENT_KIND_LAP;
    case K::kPenalty: return v1::RACE_EVENT_KIND_PENALTY;
    case K::kFinish: return v1::RACE_EVENT_KIND_FINISH;
    case K::kRetired: return v1::RACE_EVENT_KIND_RETIRED;
    case K::kRaceFinished: return v1::RACE_EVENT_KIND_RACE_FINISHED;
  }
  return v1::RACE_EVENT_KIND_UNSPECIFIED;
}

v1::PenaltyCause PenaltyCauseToProto(sim::RaceEvent::Cause cause) {
  using C = sim::RaceEvent::Cause;
  switch (cause) {
    case C::kNone: return v1::PENALTY_CAUSE_UNSPECIFIED;
    case C::kJumpStart: return v1::PENALTY_CAUSE_JUMP_START;
    case C::kContact: return v1::PENALTY_CAUSE_CONTACT;
    case C::kOffTrack: return v1::PENALTY_CAUSE_OFF_TRACK;
  }
  return v1::PENALTY_CAUSE_UNSPECIFIED;
}

v1::RacePhase RacePhaseToProto(sim::RacePhase phase) {
  switch (phase) {
    case sim::RacePhase::kCountdown: return v1::RACE_PHASE_COUNTDOWN;
    case sim::RacePhase::kRacing: return v1::RACE_PHASE_RACING;
    case sim::RacePhase::kFinished: return v1::RACE_PHASE_FINISHED;
  }
  return v1::RACE_PHASE_UNSPECIFIED;
}

}  // namespace

void TrackEventsToProto(const session::FrameEvents& events, const session::Frame& frame,
                        google::protobuf::RepeatedPtrField<v1::LapEvent>* laps,
                        google::protobuf::RepeatedPtrField<v1::RaceEvent>* races) {
  for (const session::TrackEvent& event : events.lap_events) {
    if (const auto* lap = std::get_if<sim::VehicleLapEvent>(&event.event)) {
      v1::LapEvent* out = laps->Add();
      out->set_tick(event.tick);
      out->set_vehicle_id(lap->id);
      if (frame.track_names != nullptr && lap->route < frame.track_names->size()) {
        out->set_track((*frame.track_names)[lap->route]);
      }
      out->set_lap_completed(lap->event.kind == sim::LapEvent::Kind::kLap);
      out->set_lap(lap->event.lap);
      out->set_sector(lap->event.sector);
      out->set_time_s(lap->event.time_s);
      out->set_duration_s(lap->event.duration_s);
    }
  }
  for (const session::TrackEvent& event : events.race_events) {
    const auto* found = std::get_if<sim::RaceEvent>(&event.event);
    if (found == nullptr) continue;
    const sim::RaceEvent& race = *found;
    v1::RaceEvent* out = races->Add();
    out->set_tick(event.tick);
    out->set_kind(RaceEventKindToProto(race.kind));
    out->set_vehicle_id(race.vehicle);
    out->set_race_time_s(race.time_s);
    out->set_lap(race.lap);
    out->set_sector(race.sector);
    if (race.kind == sim::RaceEvent::Kind::kPenalty) {
      out->set_penalty_s(race.value);
      out->set_cause(PenaltyCauseToProto(race.cause));
    } else {
      out->set_duration_s(race.value);
    }
  }
}

absl::StatusOr<sim::RaceRules> RaceRulesFromProto(const v1::RaceRules& rules,
                                                  const sim::RaceRules& defaults,
                                                  absl::string_view field) {
  sim::RaceRules out = defaults;
  if (rules.has_laps()) out.laps = rules.laps();
  if (rules.has_countdown_s()) out.countdown_s = rules.countdown_s();
  if (rules.has_jump_start_m()) out.jump_start_m = rules.jump_start_m();
  if (rules.has_penalty_jump_start_s()) out.penalty_jump_start_s = rules.penalty_jump_start_s();
  if (rules.has_penalty_contact_s()) out.penalty_contact_s = rules.penalty_contact_s();
  if (rules.has_penalty_off_track_s()) out.penalty_off_track_s = rules.penalty_off_track_s();
  if (rules.has_finish_timeout_s()) out.finish_timeout_s = rules.finish_timeout_s();
  if (absl::Status valid = sim::ValidateRaceRules(out); !valid.ok()) {
    // "race.laps: ..." names the rule; say where it was set.
    absl::string_view message = valid.message();
    absl::ConsumePrefix(&message, "race.");
    return absl::InvalidArgumentError(absl::StrCat(field, ".", message));
  }
  return out;
}

void RaceRulesToProto(const sim::RaceRules& rules, v1::RaceRules* out) {
  out->set_laps(rules.laps);
  out->set_countdown_s(rules.countdown_s);
  out->set_jump_start_m(rules.jump_start_m);
  out->set_penalty_jump_start_s(rules.penalty_jump_start_s);
  out->set_penalty_contact_s(rules.penalty_contact_s);
  out->set_penalty_off_track_s(rules.penalty_off_track_s);
  out->set_finish_timeout_s(rules.finish_timeout_s);
}

void RaceStatusToProto(const sim::RaceStatus& race, const std::string& track,
                       v1::RaceStatus* out) {
  out->set_track(track);
  out->set_phase(RacePhaseToProto(race.phase));
  RaceRulesToProto(race.rules, out->mutable_rules());
  out->set_race_time_s(race.race_time_s);
  out->set_start_time_s(race.start_time_s);
  out->mutable_standings()->Reserve(static_cast<int>(race.standings.size()));
  for (const sim::RaceStanding& standing : race.standings) {
    v1::RaceStanding* s = out->add_standings();
    s->set_vehicle_id(standing.vehicle);
    s->set_vehicle_name(standing.name);
    s->set_position(standing.position);
    s->set_grid_position(standing.grid_position);
    s->set_laps(standing.laps);
    s->set_distance_m(standing.distance_m);
    s->set_finished(standing.finished);
    s->set_retired(standing.retired);
    s->set_race_time_s(standing.race_time_s);
    s->set_penalties_s(standing.penalties_s);
    s->set_total_time_s(standing.race_time_s + standing.penalties_s);
    if (standing.best_lap_s.has_value()) s->set_best_lap_s(*standing.best_lap_s);
    if (standing.last_lap_s.has_value()) s->set_last_lap_s(*standing.last_lap_s);
    s->set_gap_laps(standing.gap_laps);
    s->set_gap_m(standing.gap_m);
    if (standing.gap_s.has_value()) s->set_gap_s(*standing.gap_s);
    s->set_jump_starts(standing.jump_starts);
    s->set_contacts(standing.contacts);
    s->set_off_tracks(standing.off_tracks);
  }
}

namespace {

void TrackReadingToProto(const sim::VehicleTrackReading& reading, const session::Frame& frame,
                         v1::VehicleState* state) {
  const sim::LapProgress& progress = reading.progress;
  v1::TrackProgress* out = state->mutable_track_progress();
  out->set_track(session::TrackNameOf(frame, reading));
  out->set_distance_m(progress.distance_m);
  out->set_s_m(progress.position.s_m);
  out->set_lateral_m(progress.position.lateral_m);
  out->set_heading_rad(progress.position.heading_rad);
  out->set_on_track(progress.position.on_track);
  out->set_laps_completed(progress.laps_completed);
  out->set_sector(progress.sector);
  out->set_lap_time_s(progress.lap_time_s);
  if (progress.last_lap_s.has_value()) out->set_last_lap_s(*progress.last_lap_s);
  if (progress.best_lap_s.has_value()) out->set_best_lap_s(*progress.best_lap_s);
  out->mutable_sector_times_s()->Add(progress.sector_times_s.begin(),
                                     progress.sector_times_s.end());
  out->mutable_last_sector_times_s()->Add(progress.last_sector_times_s.begin(),
                                          progress.last_sector_times_s.end());
  out->set_off_track_count(progress.off_track_count);
  out->set_off_track_s(progress.off_track_s);
  if (reading.sensor.has_value()) {
    v1::TrackSensorReading* sensor = state->mutable_track_sensor();
    sensor->mutable_edge_distances_m()->Add(reading.sensor->edge_distances_m.begin(),
                                            reading.sensor->edge_distances_m.end());
    sensor->set_angle_rad(reading.sensor->angle_rad);
    sensor->set_track_position(reading.sensor->track_position);
  }
}

void VehicleSnapshotToProto(const sim::VehicleSnapshot& vehicle, v1::VehicleState* state) {
  state->set_vehicle_id(vehicle.id);
  state->set_x_m(vehicle.pose.x_m);
  state->set_y_m(vehicle.pose.y_m);
  state->set_yaw_rad(vehicle.pose.yaw_rad);
  state->set_speed_mps(vehicle.speed_mps);
  const sim::VehicleReadout& readout = vehicle.readout;
  state->set_steering_angle_rad(readout.steering_angle_rad);
  state->set_acceleration_mps2(readout.acceleration_mps2);
  state->set_crashed(vehicle.crashed);
  state->set_yaw_rate_radps(readout.yaw_rate_radps);
  state->set_lateral_speed_mps(readout.lateral_speed_mps);
  state->set_kinetic_energy_j(readout.kinetic_energy_j);
  state->set_dissipated_energy_j(readout.dissipated_energy_j);
  if (vehicle.kind == sim::ModelKind::kFourWheel) {
    state->mutable_wheel_loads_n()->Add(readout.wheel_loads_n.begin(),
                                        readout.wheel_loads_n.end());
  }
  if (vehicle.range_scan.has_value()) {
    v1::RangeScan* scan = state->mutable_range_scan();
    scan->set_angle_min_rad(vehicle.range_scan->angle_min_rad);
    scan->set_angle_increment_rad(vehicle.range_scan->angle_increment_rad);
    scan->mutable_ranges_m()->Add(vehicle.range_scan->ranges_m.begin(),
                                  vehicle.range_scan->ranges_m.end());
  }
  if (vehicle.nearest_objects.has_value()) {
    for (const sim::NearbyObject& object : *vehicle.nearest_objects) {
      v1::NearbyObject* out_object = state->add_nearest_objects();
      out_object->set_kind(ObjectKindToProto(object.kind));
      out_object->set_id(object.id);
      out_object->set_x_m(object.x_m);
      out_object->set_y_m(object.y_m);
      out_object->set_distance_m(object.distance_m);
      out_object->set_relative_yaw_rad(object.relative_yaw_rad);
      out_object->set_speed_mps(object.speed_mps);
    }
  }
}

}  // namespace

void VehicleStateToProto(const session::Frame& frame, const sim::VehicleSnapshot& vehicle,
                         v1::VehicleState* state) {
  VehicleSnapshotToProto(vehicle, state);
  if (const sim::VehicleTrackReading* reading = session::TrackReadingOf(frame, vehicle.id)) {
    TrackReadingToProto(*reading, frame, state);
  }
}

void FrameToProto(const session::Frame& frame, v1::WorldState* out) {
  SimTimeToProto(frame.time, out->mutable_time());
  auto* vehicles = out->mutable_vehicles();
  vehicles->Reserve(static_cast<int>(frame.vehicles.size()));
  // Both by ascending id.
  auto reading = frame.track.begin();
  for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
    v1::VehicleState* state = vehicles->Add();
    VehicleSnapshotToProto(vehicle, state);
    while (reading != frame.track.end() && reading->id < vehicle.id) ++reading;
    if (reading != frame.track.end() && reading->id == vehicle.id) {
      TrackReadingToProto(*reading, frame, state);
    }
  }
  for (const sim::Contact& contact : frame.contacts) ContactToProto(contact, out->add_contacts());
  out->set_dropped_contacts(frame.contacts_dropped);
  if (frame.race != nullptr) {
    RaceStatusToProto(*frame.race, session::RaceTrackName(frame), out->mutable_race());
  }
}

}  // namespace pitlane::api
