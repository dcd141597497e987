#include "server/api/convert.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/status_matchers.h"

namespace pitlane::api {
namespace {

using ::testing::HasSubstr;

TEST(VehicleSpecFromProto, UnsetFieldsTakeTheCoreDefaults) {
  v1::VehicleSpec proto;
  proto.mutable_kinematic_bicycle();
  const auto spec = VehicleSpecFromProto(proto);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const sim::VehicleSpec defaults;
  EXPECT_EQ(spec->length_m, defaults.length_m);
  EXPECT_EQ(spec->width_m, defaults.width_m);
  EXPECT_EQ(spec->limits.max_speed_mps, defaults.limits.max_speed_mps);
  const auto& bicycle = std::get<sim::KinematicBicycleSpec>(spec->model);
  EXPECT_EQ(bicycle.wheelbase_m, 2.7);
  EXPECT_FALSE(bicycle.rear_overhang_m.has_value());
  EXPECT_EQ(bicycle.integrator, sim::BicycleIntegrator::kSemiImplicitEuler);
}

TEST(VehicleSpecFromProto, ExplicitZeroIsKeptForValidation) {
  v1::VehicleSpec proto;
  proto.set_length_m(0.0);
  proto.mutable_limits()->set_max_reverse_speed_mps(0.0);
  proto.mutable_kinematic_bicycle()->set_wheelbase_m(0.0);
  const auto spec = VehicleSpecFromProto(proto);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->length_m, 0.0);
  EXPECT_EQ(spec->limits.max_reverse_speed_mps, 0.0);
  EXPECT_EQ(std::get<sim::KinematicBicycleSpec>(spec->model).wheelbase_m, 0.0);
}

TEST(VehicleSpecFromProto, RejectsAMissingModelAndUnknownEnums) {
  v1::VehicleSpec no_model;
  EXPECT_THAT(std::string(VehicleSpecFromProto(no_model).status().message()),
              HasSubstr("model:"));
  v1::VehicleSpec bad_integrator;
  bad_integrator.mutable_kinematic_bicycle()->set_integrator(
      static_cast<v1::BicycleIntegrator>(42));
  const auto status = VehicleSpecFromProto(bad_integrator).status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr("kinematic_bicycle.integrator")));

  v1::SessionConfig config;
  config.set_clock_mode(static_cast<v1::ClockMode>(99));
  EXPECT_THAT(std::string(SessionRequestFromProto(config).status().message()),
              HasSubstr("clock_mode"));
}

TEST(VehicleSpecToProto, RoundTripsAResolvedSpec) {
  sim::VehicleSpec spec;
  spec.name = "ego";
  spec.initial_pose = {.x_m = 1, .y_m = 2, .yaw_rad = 3};
  spec.limits.max_speed_mps = 12;
  spec.model = sim::KinematicBicycleSpec{.wheelbase_m = 2.5,
                                         .rear_overhang_m = 0.7,
                                         .integrator = sim::BicycleIntegrator::kExactArc};
  v1::VehicleSpec proto;
  VehicleSpecToProto(spec, {}, &proto);
  const auto back = VehicleSpecFromProto(proto);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->name, "ego");
  EXPECT_EQ(back->initial_pose.yaw_rad, 3);
  EXPECT_EQ(back->limits.max_speed_mps, 12);
  const auto& bicycle = std::get<sim::KinematicBicycleSpec>(back->model);
  EXPECT_EQ(bicycle.wheelbase_m, 2.5);
  EXPECT_EQ(bicycle.rear_overhang_m, 0.7);
  EXPECT_EQ(bicycle.integrator, sim::BicycleIntegrator::kExactArc);
}

TEST(FrameToProto, CopiesEveryField) {
  const session::Frame frame{
      .time = {.tick = 7, .sim_time_s = 0.14},
      .vehicles = {{.id = 3,
                    .pose = {.x_m = 1, .y_m = 2, .yaw_rad = -1},
                    .speed_mps = 4,
                    .readout = {.steering_angle_rad = 0.1, .acceleration_mps2 = -2}}}};
  v1::WorldState state;
  FrameToProto(frame, &state);
  EXPECT_EQ(state.time().tick(), 7u);
  EXPECT_EQ(state.time().sim_time_s(), 0.14);
  ASSERT_EQ(state.vehicles_size(), 1);
  const v1::VehicleState& v = state.vehicles(0);
  EXPECT_EQ(v.vehicle_id(), 3u);
  EXPECT_EQ(v.x_m(), 1);
  EXPECT_EQ(v.y_m(), 2);
  EXPECT_EQ(v.yaw_rad(), -1);
  EXPECT_EQ(v.speed_mps(), 4);
  EXPECT_EQ(v.steering_angle_rad(), 0.1);
  EXPECT_EQ(v.acceleration_mps2(), -2);
}

}  // namespace
}  // namespace pitlane::api
