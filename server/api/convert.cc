#include "server/api/convert.h"

#include "absl/strings/str_cat.h"

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

sim::VehicleLimits LimitsFromProto(const v1::VehicleLimits& limits) {
  sim::VehicleLimits out;
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
  return out;
}

}  // namespace

absl::StatusOr<session::SessionRequest> SessionRequestFromProto(const v1::SessionConfig& config) {
  session::SessionRequest request;
  request.name = config.name();
  request.seed = config.seed();
  if (config.has_tick_rate_hz()) request.tick_rate_hz = config.tick_rate_hz();
  if (config.has_max_vehicles()) request.max_vehicles = config.max_vehicles();
  switch (config.clock_mode()) {
    case v1::CLOCK_MODE_UNSPECIFIED:
    case v1::CLOCK_MODE_LOCKSTEP:
      request.clock_mode = session::ClockMode::kLockstep;
      break;
    default:
      return UnknownEnum("clock_mode", config.clock_mode());
  }
  return request;
}

absl::StatusOr<sim::VehicleSpec> VehicleSpecFromProto(const v1::VehicleSpec& spec) {
  sim::VehicleSpec out;
  out.name = spec.name();
  if (spec.has_length_m()) out.length_m = spec.length_m();
  if (spec.has_width_m()) out.width_m = spec.width_m();
  out.initial_pose = {.x_m = spec.initial_pose().x_m(),
                      .y_m = spec.initial_pose().y_m(),
                      .yaw_rad = spec.initial_pose().yaw_rad()};
  out.initial_speed_mps = spec.initial_speed_mps();
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
    case v1::VehicleSpec::MODEL_NOT_SET:
      return absl::InvalidArgumentError("model: required (set e.g. kinematic_bicycle)");
  }
  return out;
}

sim::VehicleInput VehicleInputFromProto(const v1::VehicleControl& control) {
  return sim::VehicleInput{.id = control.vehicle_id(),
                           .acceleration_mps2 = control.acceleration_mps2(),
                           .steering_angle_rad = control.steering_angle_rad()};
}

void SimTimeToProto(const session::SimTime& time, v1::SimTime* out) {
  out->set_tick(time.tick);
  out->set_sim_time_s(time.sim_time_s);
}

void SessionToProto(const session::SessionDescription& session, v1::SessionInfo* out) {
  out->set_session_id(session.id);
  v1::SessionConfig* config = out->mutable_config();
  config->set_name(session.config.name);
  config->set_tick_rate_hz(session.config.world.tick_rate_hz);
  config->set_seed(session.config.world.seed);
  config->set_max_vehicles(session.config.world.max_vehicles);
  switch (session.config.clock_mode) {
    case session::ClockMode::kLockstep:
      config->set_clock_mode(v1::CLOCK_MODE_LOCKSTEP);
      break;
  }
  SimTimeToProto(session.time, out->mutable_time());
  out->set_vehicle_count(static_cast<std::uint32_t>(session.vehicle_count));
  for (const sim::VehicleDescription& vehicle : session.vehicles) {
    v1::VehicleInfo* info = out->add_vehicles();
    info->set_vehicle_id(vehicle.id);
    VehicleSpecToProto(vehicle.spec, info->mutable_spec());
  }
}

void VehicleSpecToProto(const sim::VehicleSpec& spec, v1::VehicleSpec* out) {
  out->set_name(spec.name);
  out->set_length_m(spec.length_m);
  out->set_width_m(spec.width_m);
  out->mutable_initial_pose()->set_x_m(spec.initial_pose.x_m);
  out->mutable_initial_pose()->set_y_m(spec.initial_pose.y_m);
  out->mutable_initial_pose()->set_yaw_rad(spec.initial_pose.yaw_rad);
  out->set_initial_speed_mps(spec.initial_speed_mps);
  v1::VehicleLimits* limits = out->mutable_limits();
  limits->set_max_steering_angle_rad(spec.limits.max_steering_angle_rad);
  limits->set_max_acceleration_mps2(spec.limits.max_acceleration_mps2);
  limits->set_max_braking_mps2(spec.limits.max_braking_mps2);
  limits->set_max_speed_mps(spec.limits.max_speed_mps);
  limits->set_max_reverse_speed_mps(spec.limits.max_reverse_speed_mps);
  std::visit(
      [out](const sim::KinematicBicycleSpec& model) {
        v1::KinematicBicycle* bicycle = out->mutable_kinematic_bicycle();
        bicycle->set_wheelbase_m(model.wheelbase_m);
        if (model.rear_overhang_m.has_value()) {
          bicycle->set_rear_overhang_m(*model.rear_overhang_m);
        }
        bicycle->set_integrator(IntegratorToProto(model.integrator));
      },
      spec.model);
}

void FrameToProto(const session::Frame& frame, v1::WorldState* out) {
  SimTimeToProto(frame.time, out->mutable_time());
  auto* vehicles = out->mutable_vehicles();
  vehicles->Reserve(static_cast<int>(frame.vehicles.size()));
  for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
    v1::VehicleState* state = vehicles->Add();
    state->set_vehicle_id(vehicle.id);
    state->set_x_m(vehicle.pose.x_m);
    state->set_y_m(vehicle.pose.y_m);
    state->set_yaw_rad(vehicle.pose.yaw_rad);
    state->set_speed_mps(vehicle.speed_mps);
    state->set_steering_angle_rad(vehicle.steering_angle_rad);
    state->set_acceleration_mps2(vehicle.acceleration_mps2);
  }
}

}  // namespace pitlane::api
