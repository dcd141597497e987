#include "server/sim/vehicles/vehicle.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/status_matchers.h"

namespace pitlane::sim {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

KinematicBicycleSpec& Bicycle(VehicleSpec& spec) {
  return std::get<KinematicBicycleSpec>(spec.model);
}

TEST(ResolveVehicleSpec, FillsTheRearOverhangSoTheWheelbaseIsCentred) {
  VehicleSpec spec;  // 4.5 m long, 2.7 m wheelbase.
  ASSERT_TRUE(ResolveVehicleSpec(spec).ok());
  EXPECT_THAT(*Bicycle(spec).rear_overhang_m, DoubleNear(0.9, 1e-15));
}

struct BadSpec {
  std::string field;  // Expected in the message.
  std::function<void(VehicleSpec&)> corrupt;
};

class ResolveVehicleSpecRejects : public ::testing::TestWithParam<BadSpec> {};

TEST_P(ResolveVehicleSpecRejects, NamesTheField) {
  VehicleSpec spec;
  GetParam().corrupt(spec);
  const absl::Status status = ResolveVehicleSpec(spec);
  EXPECT_THAT(status,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().field + ":")));
}

INSTANTIATE_TEST_SUITE_P(
    Vehicle, ResolveVehicleSpecRejects,
    ::testing::Values(
        BadSpec{"length_m", [](VehicleSpec& s) { s.length_m = 0; }},
        BadSpec{"length_m", [](VehicleSpec& s) { s.length_m = -1; }},
        BadSpec{"length_m", [](VehicleSpec& s) { s.length_m = kNaN; }},
        BadSpec{"length_m", [](VehicleSpec& s) { s.length_m = 101; }},
        // Found by command_fuzzer: a subnormal length (8.8e-314) made a force-based car's
        // axle distance as short, its yaw rate infinite and its pose NaN.
        BadSpec{"length_m", [](VehicleSpec& s) { s.length_m = 8.76e-314; }},
        BadSpec{"length_m", [](VehicleSpec& s) { s.length_m = 0.00099; }},
        BadSpec{"width_m", [](VehicleSpec& s) { s.width_m = 6.4e-145; }},
        BadSpec{"width_m", [](VehicleSpec& s) { s.width_m = kInf; }},
        BadSpec{"initial_pose.x_m", [](VehicleSpec& s) { s.initial_pose.x_m = kNaN; }},
        BadSpec{"initial_pose.y_m", [](VehicleSpec& s) { s.initial_pose.y_m = 2e7; }},
        BadSpec{"initial_pose.yaw_rad", [](VehicleSpec& s) { s.initial_pose.yaw_rad = -kInf; }},
        BadSpec{"initial_speed_mps", [](VehicleSpec& s) { s.initial_speed_mps = 31; }},
        BadSpec{"initial_speed_mps", [](VehicleSpec& s) { s.initial_speed_mps = -6; }},
        BadSpec{"initial_speed_mps", [](VehicleSpec& s) { s.initial_speed_mps = kNaN; }},
        BadSpec{"limits.max_steering_angle_rad",
                [](VehicleSpec& s) { s.limits.max_steering_angle_rad = 0; }},
        BadSpec{"limits.max_steering_angle_rad",
                [](VehicleSpec& s) { s.limits.max_steering_angle_rad = 1.6; }},
        BadSpec{"limits.max_acceleration_mps2",
                [](VehicleSpec& s) { s.limits.max_acceleration_mps2 = -1; }},
        BadSpec{"limits.max_braking_mps2",
                [](VehicleSpec& s) { s.limits.max_braking_mps2 = kNaN; }},
        BadSpec{"limits.max_speed_mps", [](VehicleSpec& s) { s.limits.max_speed_mps = 0; }},
        BadSpec{"limits.max_speed_mps", [](VehicleSpec& s) { s.limits.max_speed_mps = 1000.5; }},
        BadSpec{"limits.max_reverse_speed_mps",
                [](VehicleSpec& s) { s.limits.max_reverse_speed_mps = -1; }},
        BadSpec{"limits.max_reverse_speed_mps",
                [](VehicleSpec& s) { s.limits.max_reverse_speed_mps = 1e300; }},
        BadSpec{"limits.max_acceleration_mps2",
                [](VehicleSpec& s) { s.limits.max_acceleration_mps2 = 1001; }},
        BadSpec{"limits.max_braking_mps2",
                [](VehicleSpec& s) { s.limits.max_braking_mps2 = kInf; }},
        BadSpec{"limits.max_steering_rate_radps",
                [](VehicleSpec& s) { s.limits.max_steering_rate_radps = 0.0; }},
        BadSpec{"limits.max_steering_rate_radps",
                [](VehicleSpec& s) { s.limits.max_steering_rate_radps = -kInf; }},
        BadSpec{"limits.max_steering_rate_radps",
                [](VehicleSpec& s) { s.limits.max_steering_rate_radps = kNaN; }},
        BadSpec{"limits.max_steering_rate_radps",
                [](VehicleSpec& s) { s.limits.max_steering_rate_radps = 101.0; }},
        BadSpec{"range_scan.beam_count", [](VehicleSpec& s) { s.range_scan.emplace().beam_count = 0; }},
        BadSpec{"range_scan.beam_count",
                [](VehicleSpec& s) { s.range_scan.emplace().beam_count = 4097; }},
        BadSpec{"range_scan.field_of_view_rad",
                [](VehicleSpec& s) { s.range_scan.emplace().field_of_view_rad = 6.3; }},
        BadSpec{"range_scan.max_range_m",
                [](VehicleSpec& s) { s.range_scan.emplace().max_range_m = 0; }},
        BadSpec{"nearest_objects.count",
                [](VehicleSpec& s) { s.nearest_objects.emplace().count = 257; }},
        BadSpec{"nearest_objects.radius_m",
                [](VehicleSpec& s) { s.nearest_objects.emplace().radius_m = kNaN; }},
        BadSpec{"kinematic_bicycle.wheelbase_m",
                [](VehicleSpec& s) { Bicycle(s).wheelbase_m = 0; }},
        BadSpec{"kinematic_bicycle.wheelbase_m",
                [](VehicleSpec& s) { Bicycle(s).wheelbase_m = 4.6; }},
        BadSpec{"kinematic_bicycle.wheelbase_m",
                [](VehicleSpec& s) { Bicycle(s).wheelbase_m = 1e-300; }},
        BadSpec{"force_based.axle_distance_m",
                [](VehicleSpec& s) { s.model.emplace<ForceBasedSpec>().axle_distance_m = 1e-9; }},
        BadSpec{"front_wheel_drive.wheelbase_m",
                [](VehicleSpec& s) { s.model.emplace<FrontWheelDriveSpec>().wheelbase_m = 1e-9; }},
        BadSpec{"four_wheel.front_track_m",
                [](VehicleSpec& s) { s.model.emplace<FourWheelSpec>().front_track_m = 1e-9; }},
        BadSpec{"kinematic_bicycle.rear_overhang_m",
                [](VehicleSpec& s) { Bicycle(s).rear_overhang_m = -0.1; }},
        BadSpec{"kinematic_bicycle.rear_overhang_m",
                [](VehicleSpec& s) { Bicycle(s).rear_overhang_m = 1.81; }},
        BadSpec{"name", [](VehicleSpec& s) { s.name = std::string(129, 'x'); }}));

TEST(ResolveVehicleSpec, AcceptsTheBoundaries) {
  VehicleSpec tiny;  // A millimetre-sized car, its wheelbase as long as its body.
  tiny.length_m = 0.001;
  tiny.width_m = 0.001;
  Bicycle(tiny).wheelbase_m = 0.001;
  EXPECT_TRUE(ResolveVehicleSpec(tiny).ok());
  VehicleSpec spec;
  spec.length_m = 100;
  spec.initial_speed_mps = -5;  // Exactly max reverse.
  spec.limits.max_steering_angle_rad = 1.5;
  spec.limits.max_reverse_speed_mps = 5;
  Bicycle(spec).wheelbase_m = 100;  // Equal to the length: no overhang.
  EXPECT_TRUE(ResolveVehicleSpec(spec).ok());
  EXPECT_EQ(*Bicycle(spec).rear_overhang_m, 0.0);
}

}  // namespace
}  // namespace pitlane::sim

namespace pitlane::sim {
namespace {

TEST(ResolveVehicleSpec, FillsTheLimitsTheModelUsesAndOnlyThose) {
  VehicleSpec bicycle;
  ASSERT_TRUE(ResolveVehicleSpec(bicycle).ok());
  EXPECT_EQ(bicycle.limits.max_steering_angle_rad, 0.6);
  EXPECT_EQ(bicycle.limits.max_steering_rate_radps, kInf);
  EXPECT_EQ(bicycle.limits.max_speed_mps, 30.0);

  VehicleSpec body;
  body.model = PhysicsBodySpec{};
  body.limits.max_speed_mps = 12.0;
  ASSERT_TRUE(ResolveVehicleSpec(body).ok());
  EXPECT_FALSE(body.limits.max_steering_angle_rad.has_value());
  EXPECT_FALSE(body.limits.max_steering_rate_radps.has_value());
  EXPECT_EQ(body.limits.max_speed_mps, 12.0);
  EXPECT_EQ(body.limits.max_acceleration_mps2, 3.0);
  EXPECT_EQ(LimitsOf(body).max_speed_mps, 12.0);
}

TEST(ResolveVehicleSpec, RejectsALimitTheModelDoesNotUse) {
  for (const auto set : {+[](VehicleLimitsSpec& l) { l.max_steering_angle_rad = 0.5; },
                         +[](VehicleLimitsSpec& l) { l.max_steering_rate_radps = 1.0; }}) {
    VehicleSpec spec;
    spec.model = PhysicsBodySpec{};
    set(spec.limits);
    const absl::Status status = ResolveVehicleSpec(spec);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("not used by physics_body")));
  }
}

TEST(ResolveVehicleSpec, InitialSpeedIsCheckedAgainstTheModelsLimits) {
  VehicleSpec spec;
  spec.model = PhysicsBodySpec{};
  spec.limits.max_reverse_speed_mps = 0.0;
  spec.initial_speed_mps = -0.5;
  EXPECT_THAT(std::string(ResolveVehicleSpec(spec).message()), HasSubstr("initial_speed_mps"));
}

struct ControlCase {
  ModelKind kind;
  VehicleInput input;
  std::string field;  // Empty: accepted.
};

class CheckControlsTest : public ::testing::TestWithParam<ControlCase> {};

TEST_P(CheckControlsTest, AcceptsTheModelsFieldsAndNamesAnyOther) {
  const absl::Status status = CheckControls(GetParam().kind, GetParam().input);
  if (GetParam().field.empty()) {
    EXPECT_TRUE(status.ok()) << status;
  } else {
    EXPECT_THAT(status,
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(GetParam().field + ":")));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Vehicle, CheckControlsTest,
    ::testing::Values(
        ControlCase{ModelKind::kKinematicBicycle,
                    {.acceleration_mps2 = -3, .steering_angle_rad = 9}, ""},
        ControlCase{ModelKind::kKinematicBicycle, {.throttle = 0.5}, "throttle"},
        ControlCase{ModelKind::kKinematicBicycle, {.brake = 0.5}, "brake"},
        ControlCase{ModelKind::kKinematicBicycle, {.target_speed_mps = 0.0}, "target_speed_mps"},
        ControlCase{ModelKind::kKinematicBicycle, {.yaw_rate_radps = 1}, "yaw_rate_radps"},
        ControlCase{ModelKind::kKinematicBicycle, {.acceleration_mps2 = kNaN},
                    "acceleration_mps2"},
        ControlCase{ModelKind::kKinematicBicycle, {.steering_angle_rad = kInf},
                    "steering_angle_rad"},
        ControlCase{ModelKind::kKinematicBicycle, {.throttle = 1.5}, "throttle"},
        ControlCase{ModelKind::kKinematicBicycle, {.brake = -0.1}, "brake"},
        ControlCase{ModelKind::kPhysicsBody, {.target_speed_mps = -2, .yaw_rate_radps = 3}, ""},
        ControlCase{ModelKind::kPhysicsBody, {.acceleration_mps2 = 1, .yaw_rate_radps = 3}, ""},
        ControlCase{ModelKind::kPhysicsBody, {.acceleration_mps2 = 1, .target_speed_mps = 2},
                    "acceleration_mps2"},
        ControlCase{ModelKind::kPhysicsBody, {.steering_angle_rad = 0.1}, "steering_angle_rad"},
        ControlCase{ModelKind::kPhysicsBody, {.target_speed_mps = kNaN}, "target_speed_mps"},
        ControlCase{ModelKind::kPhysicsBody, {.yaw_rate_radps = -kInf}, "yaw_rate_radps"}));

}  // namespace
}  // namespace pitlane::sim
