#include "server/sim/drivers/drivers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/sim/testing/sim_test_context.h"
#include "server/sim/testing/test_routes.h"
#include "server/sim/world/world.h"
#include "server/util/status_matchers.h"

namespace pitlane::sim {
namespace {

using ::testing::DoubleNear;
using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

VehicleSpec SpecOfKind(ModelKind kind) {
  VehicleSpec spec;
  switch (kind) {
    case ModelKind::kKinematicBicycle:
      spec.model = KinematicBicycleSpec{};
      break;
    case ModelKind::kPhysicsBody:
      spec.model = PhysicsBodySpec{};
      break;
    case ModelKind::kSingleTrack:
      spec.model = SingleTrackSpec{};
      break;
    case ModelKind::kFrontWheelDrive:
      spec.model = FrontWheelDriveSpec{};
      break;
    case ModelKind::kAllWheelDrive:
      spec.model = AllWheelDriveSpec{};
      break;
    case ModelKind::kForceBased:
      spec.model = ForceBasedSpec{};
      break;
    case ModelKind::kFourWheel:
      spec.model = FourWheelSpec{};
      break;
  }
  return spec;
}

std::vector<ModelKind> AllKinds() {
  std::vector<ModelKind> kinds;
  for (std::size_t k = 0; k < kModelKindCount; ++k) kinds.push_back(static_cast<ModelKind>(k));
  return kinds;
}

DriverVehicleParams DriverParamsOf(VehicleSpec spec, double dt_s = 0.02) {
  EXPECT_TRUE(ResolveVehicleSpec(spec).ok());
  return MakeDriverVehicleParams(spec, dt_s);
}

// Puts `spec` on `route` at arc length s, heading along it, its tracking point on the line.
void PlaceOnRoute(const RouteParams& route, double s_m, VehicleSpec& spec) {
  std::uint32_t segment = 0;
  const RoutePoint point = RoutePointAt(route, s_m, segment);
  const RouteVertex& v = route.vertices[segment];
  const double offset_m = DriverParamsOf(spec).tracking_offset_m;
  spec.initial_pose = {.x_m = point.x_m + offset_m * v.dir_x,
                       .y_m = point.y_m + offset_m * v.dir_y,
                       .yaw_rad = std::atan2(v.dir_y, v.dir_x)};
}

// The world of these tests: 50 Hz, with `routes` for the drivers.
WorldSpec TestWorld(std::vector<Route> routes, std::uint32_t max_vehicles = 20,
                    CollisionPolicy policy = CollisionPolicy::kReport) {
  return {.tick_rate_hz = 50,
          .max_vehicles = max_vehicles,
          .collision_policy = policy,
          .routes = std::move(routes)};
}

// The tracking point of a vehicle: its reference point moved back by the driver's offset.
RoutePoint TrackingPoint(const VehicleSnapshot& v, const DriverVehicleParams& params) {
  return {v.pose.x_m - params.tracking_offset_m * std::cos(v.pose.yaw_rad),
          v.pose.y_m - params.tracking_offset_m * std::sin(v.pose.yaw_rad)};
}

// ---------------------------------------------------------------------------------------------
// Mapping an intent onto each model's inputs.

TEST(DriverControls, EveryModelGetsControlsItAccepts) {
  for (const ModelKind kind : AllKinds()) {
    SCOPED_TRACE(ModelName(kind));
    const DriverVehicleParams params = DriverParamsOf(SpecOfKind(kind));
    for (const double a : {-kInf, -20.0, -1.0, 0.0, 0.5, 50.0, kInf}) {
      for (const double k : {-1.0, -0.05, 0.0, 0.2, 3.0}) {
        for (const double v : {0.0, 0.1, 10.0, 45.0}) {
          for (const bool forward_only : {true, false}) {
            const DriverIntent intent{
                .acceleration_mps2 = a, .curvature_1pm = k, .forward_only = forward_only};
            const VehicleInput input = ControlsForIntent(params, 3, intent, v);
            EXPECT_TRUE(CheckControls(kind, input).ok()) << a << " " << k << " " << v;
            EXPECT_EQ(input.id, 3u);
          }
        }
      }
    }
  }
}

TEST(DriverControls, SteeringGivesTheCurvatureOfEachModel) {
  const double k = 1.0 / 30.0;
  const DriverIntent intent{.curvature_1pm = k};
  // Bicycle-type models: tan δ / L.
  for (const ModelKind kind :
       {ModelKind::kKinematicBicycle, ModelKind::kSingleTrack, ModelKind::kFourWheel}) {
    const DriverVehicleParams params = DriverParamsOf(SpecOfKind(kind));
    EXPECT_NEAR(std::tan(ControlsForIntent(params, 1, intent, 10.0).steering_angle_rad) /
                    params.wheelbase_m,
                k, 1e-15)
        << ModelName(kind);
  }
  // Axle models: sin δ / L, and force_based's fade undone above its slip speed.
  for (const ModelKind kind : {ModelKind::kFrontWheelDrive, ModelKind::kForceBased}) {
    const DriverVehicleParams params = DriverParamsOf(SpecOfKind(kind));
    EXPECT_NEAR(std::sin(ControlsForIntent(params, 1, intent, 10.0).steering_angle_rad) /
                    params.wheelbase_m,
                k, 1e-15)
        << ModelName(kind);
  }
  const DriverVehicleParams force = DriverParamsOf(SpecOfKind(ModelKind::kForceBased));
  const double delta = ControlsForIntent(force, 1, intent, 40.0).steering_angle_rad;
  EXPECT_NEAR(std::sin(delta * std::exp(3.0 * (1.0 - 40.0 / 30.0))) / force.wheelbase_m, k, 1e-15);
  // physics_body: yaw rate k v.
  const DriverVehicleParams body = DriverParamsOf(SpecOfKind(ModelKind::kPhysicsBody));
  EXPECT_DOUBLE_EQ(ControlsForIntent(body, 1, intent, 10.0).yaw_rate_radps, 10.0 * k);
}

TEST(DriverControls, PedalsMakeUpTheResistanceAndSaturate) {
  const DriverVehicleParams axle = DriverParamsOf(SpecOfKind(ModelKind::kFrontWheelDrive));
  // Holding 10 m/s against the drag c v = 0.5 m/s² takes 0.5 / 3.5 throttle.
  VehicleInput input = ControlsForIntent(axle, 1, {.acceleration_mps2 = 0.0}, 10.0);
  EXPECT_DOUBLE_EQ(input.throttle, 0.05 * 10.0 / 3.5);
  EXPECT_EQ(input.brake, 0.0);
  input = ControlsForIntent(axle, 1, {.acceleration_mps2 = -4.5}, 10.0);
  EXPECT_DOUBLE_EQ(input.brake, 4.0 / 8.0);
  EXPECT_EQ(ControlsForIntent(axle, 1, {.acceleration_mps2 = kInf}, 10.0).throttle, 1.0);
  EXPECT_EQ(ControlsForIntent(axle, 1, {.acceleration_mps2 = -kInf}, 10.0).brake, 1.0);
  // Acceleration models stop at zero rather than reverse.
  const DriverVehicleParams bicycle = DriverParamsOf(SpecOfKind(ModelKind::kKinematicBicycle));
  EXPECT_DOUBLE_EQ(
      ControlsForIntent(bicycle, 1, {.acceleration_mps2 = -kInf}, 0.05).acceleration_mps2,
      -0.05 / 0.02);
  EXPECT_EQ(ControlsForIntent(bicycle, 1, {.acceleration_mps2 = -kInf}, 10.0).acceleration_mps2,
            -8.0);
  EXPECT_EQ(ControlsForIntent(bicycle, 1, {.acceleration_mps2 = -1.0}, 0.0).acceleration_mps2, 0.0);
}

// ---------------------------------------------------------------------------------------------
// Route following with every model.

struct Tracking {
  double max_cross_track_m = 0.0;  // |radius of the tracking point - R|, after the transient.
  double max_speed_error_mps = 0.0;
};

// A vehicle of `kind` following a closed circle of radius 30 m (720 points, 0.26 m apart) at
// 10 m/s from rest: its errors from t = 10 s to t = 40 s.
Tracking FollowCircle(ModelKind kind) {
  constexpr double kR = 30.0;
  SimTestContext sim(TestWorld({Route{.points = Circle(kR, 720), .closed = true}}));
  World& world = sim.world();
  VehicleSpec spec = SpecOfKind(kind);
  spec.driver = RouteFollowerSpec{.target_speed_mps = 10.0, .max_lateral_acceleration_mps2 = 4.0};
  PlaceOnRoute(world.params().routes[0], 0.0, spec);
  EXPECT_TRUE(world.Spawn({spec}).ok());
  const DriverVehicleParams params = DriverParamsOf(spec);
  Tracking result;
  for (int t = 0; t < 40 * 50; ++t) {
    world.Step();
    if (t < 10 * 50) continue;
    const VehicleSnapshot v = world.Snapshot()[0];
    const RoutePoint p = TrackingPoint(v, params);
    result.max_cross_track_m =
        std::max(result.max_cross_track_m, std::abs(std::hypot(p.x_m, p.y_m) - kR));
    result.max_speed_error_mps = std::max(result.max_speed_error_mps, std::abs(v.speed_mps - 10));
  }
  return result;
}

// Pure pursuit through the goal point has the circle itself as its steady state when the
// tracking point moves along the heading with the commanded curvature. A heading bias b (the
// path's direction minus the heading) moves the steady state sideways by e = b L_d (L_d = 6 m
// at 10 m/s): the goal then looks b L_d further aside, asking for 2 b / L_d more curvature,
// which an offset e takes back through 2 e / L_d². Hence, at 50 Hz:
//   - the semi-implicit integrators (kinematic_bicycle, physics_body, front/all_wheel_drive)
//     move along a heading half a tick's turn away, b = v dt / (2 R) = 3.3 mrad: 0.02 m
//     (measured 0.018-0.020 m); force_based's exact arc has none (0.0002 m, the polyline's
//     0.3 mm sag);
//   - single_track's rear axle slips at alpha_r = a_y / (mu C_S g) = 15.5 mrad: 0.093 m
//     (measured 0.093 m); four_wheel's at a_y / (c1 c2 c3 sigma v g) = 21 mrad: 0.127 m
//     (measured 0.126 m; its tyres also take 0.07 m/s², which the speed loop's gain of 2/s
//     leaves as 0.036 m/s below the target).
// All within 0.2 m of the circle after 10 s (the loop settles in about 4 / (zeta omega) =
// 2.4 s: omega = sqrt(2) v / L_d, zeta = 1 / sqrt(2)).
TEST(DriverFollower, TracksA30MetreCircleAt10MpsWithEveryModel) {
  for (const ModelKind kind : AllKinds()) {
    const Tracking tracking = FollowCircle(kind);
    SCOPED_TRACE(ModelName(kind));
    EXPECT_LT(tracking.max_cross_track_m, 0.2);
    EXPECT_LT(tracking.max_speed_error_mps, 0.1);
  }
}

// Cruise holds its speed with every model, wheels straight.
TEST(DriverCruise, HoldsItsSpeedWithEveryModel) {
  for (const ModelKind kind : AllKinds()) {
    SCOPED_TRACE(ModelName(kind));
    SimTestContext sim(TestWorld({}));
    World& world = sim.world();
    VehicleSpec spec = SpecOfKind(kind);
    spec.initial_pose.yaw_rad = 0.3;
    spec.driver = CruiseDriverSpec{.target_speed_mps = 8.0};
    ASSERT_TRUE(world.Spawn({spec}).ok());
    double max_error_mps = 0.0;
    for (int t = 0; t < 30 * 50; ++t) {
      world.Step();
      const VehicleSnapshot v = world.Snapshot()[0];
      if (t >= 10 * 50) max_error_mps = std::max(max_error_mps, std::abs(v.speed_mps - 8.0));
      EXPECT_NEAR(v.pose.yaw_rad, 0.3, 1e-12);
    }
    EXPECT_LT(max_error_mps, 0.01);
  }
  // In reverse, for a model that has one.
  SimTestContext sim(TestWorld({}));
  World& world = sim.world();
  VehicleSpec spec = SpecOfKind(ModelKind::kKinematicBicycle);
  spec.initial_speed_mps = 4.0;
  spec.driver = CruiseDriverSpec{.target_speed_mps = -3.0};
  ASSERT_TRUE(world.Spawn({spec}).ok());
  sim.RunFor(10.0);
  EXPECT_NEAR(world.Snapshot()[0].speed_mps, -3.0, 1e-9);
}

// The styles on the demo's oval (80 m straights, 25 m radius corners), each alone: the turtle
// is slowest (40 % of normal), the speeder fastest; cautious drives as normal where nothing
// makes its steering fade.
TEST(DriverStyles, TurtleIsSlowestAndSpeederFastest) {
  const auto mean_speed = [](DriverStyle style, double* max_lateral_mps2) {
    SimTestContext sim(
        TestWorld({Route{.points = Oval(40.0, 25.0, 2.0), .closed = true, .lane_width_m = 5.0}}));
    World& world = sim.world();
    VehicleSpec spec = SpecOfKind(ModelKind::kKinematicBicycle);
    spec.driver = RouteFollowerSpec{.target_speed_mps = 12.0, .style = style};
    PlaceOnRoute(world.params().routes[0], 0.0, spec);
    EXPECT_TRUE(world.Spawn({spec}).ok());
    double sum = 0.0;
    *max_lateral_mps2 = 0.0;
    for (int t = 0; t < 120 * 50; ++t) {
      world.Step();
      const VehicleSnapshot v = world.Snapshot()[0];
      sum += v.speed_mps;
      if (t > 20 * 50) {
        *max_lateral_mps2 =
            std::max(*max_lateral_mps2, std::abs(v.speed_mps * v.readout.yaw_rate_radps));
      }
    }
    return sum / (120 * 50);
  };
  double turtle_lateral = 0, normal_lateral = 0, cautious_lateral = 0, speeder_lateral = 0;
  const double turtle = mean_speed(DriverStyle::kTurtle, &turtle_lateral);
  const double normal = mean_speed(DriverStyle::kNormal, &normal_lateral);
  const double cautious = mean_speed(DriverStyle::kCautious, &cautious_lateral);
  const double speeder = mean_speed(DriverStyle::kSpeeder, &speeder_lateral);
  EXPECT_LT(turtle, 0.45 * normal);
  EXPECT_GT(turtle, 0.35 * normal);
  EXPECT_LE(cautious, normal + 1e-9);
  EXPECT_GT(cautious, 0.95 * normal);
  EXPECT_GT(speeder, 11.5);
  EXPECT_GT(speeder, normal + 2.0);
  // The lateral limit (2 m/s²) holds for all but the speeder (12²/25 = 5.8 m/s²).
  EXPECT_LT(normal_lateral, 2.0 * 1.1);
  EXPECT_LT(cautious_lateral, 2.0 * 1.1);
  EXPECT_LT(turtle_lateral, 0.16 * 2.0 * 1.1);
  EXPECT_GT(speeder_lateral, 5.0);
}

TEST(DriverStyles, SpeederBrakesFullyOffTheLane) {
  const RouteParams route =
      *MakeRouteParams({.points = {{0, 0}, {100, 0}}, .closed = false, .lane_width_m = 3.5});
  for (const ModelKind kind : AllKinds()) {
    SCOPED_TRACE(ModelName(kind));
    const DriverVehicleParams params = DriverParamsOf(SpecOfKind(kind));
    const RouteFollowerSpec spec{.target_speed_mps = 20.0, .style = DriverStyle::kSpeeder};
    for (const double y : {1.7, 1.8, -1.8}) {
      const DriverView view{.x_m = 20.0 + params.tracking_offset_m, .y_m = y, .speed_mps = 10.0};
      RouteFollowerState state = StartFollowing(route, params, view);
      const DriverIntent intent =
          RouteFollowerIntent(spec, route, params, view, std::nullopt, state);
      const VehicleInput input = ControlsForIntent(params, 1, intent, view.speed_mps);
      if (std::abs(y) < 1.75) {
        EXPECT_GT(intent.acceleration_mps2, 0.0) << y;  // On the lane: full throttle towards 20.
        continue;
      }
      // 7 m/s above its crawl: full brake.
      EXPECT_LE(intent.acceleration_mps2, -30.0) << y;
      switch (kind) {
        case ModelKind::kKinematicBicycle:
        case ModelKind::kSingleTrack:
        case ModelKind::kFourWheel:
          EXPECT_EQ(input.acceleration_mps2, -params.max_braking_mps2);
          break;
        case ModelKind::kPhysicsBody:
          EXPECT_DOUBLE_EQ(*input.target_speed_mps, 10.0 - params.max_braking_mps2 * 0.02);
          break;
        default:
          EXPECT_EQ(input.brake, 1.0);
          EXPECT_EQ(input.throttle, 0.0);
      }
    }
  }
}

// A speeder too fast for its tyres (four_wheel towards 25 m/s on a 30 m circle: it slides at
// about 17 m/s, 1 g) slides off the lane, brakes, crawls back and tries again.
TEST(DriverStyles, SpeederSlidesOffBrakesAndComesBack) {
  SimTestContext sim(TestWorld({Route{.points = Circle(30.0, 360), .closed = true}}));
  World& world = sim.world();
  VehicleSpec spec = SpecOfKind(ModelKind::kFourWheel);
  spec.driver = RouteFollowerSpec{.target_speed_mps = 25.0, .style = DriverStyle::kSpeeder};
  PlaceOnRoute(world.params().routes[0], 0.0, spec);
  ASSERT_TRUE(world.Spawn({spec}).ok());
  int departures = 0;
  bool off = false;
  double max_off_m = 0.0;
  double previous_speed_mps = 0.0;
  for (int t = 0; t < 120 * 50; ++t) {
    world.Step();
    // The cross-track error the driver saw at the start of this tick, and what it did.
    const double seen_m = std::abs(world.state().drivers[0].route.cross_track_m);
    const double speed_mps = world.Snapshot()[0].speed_mps;
    if (seen_m > 1.75 && !off) ++departures;
    // Off the lane and more than braking / gain above its 3 m/s crawl: full brake (8 m/s²).
    if (seen_m > 1.75 && previous_speed_mps > 3.0 + 8.0 / 5.0) {
      EXPECT_LT(speed_mps, previous_speed_mps - 0.1) << t;
    }
    off = seen_m > 1.75;
    max_off_m = std::max(max_off_m, seen_m);
    previous_speed_mps = speed_mps;
  }
  EXPECT_GE(departures, 2);
  EXPECT_LT(max_off_m, 6.0);
}

TEST(DriverStyles, CautiousLiftsAboveTheSlipSpeed) {
  const auto top_speed = [](DriverStyle style) {
    SimTestContext sim(TestWorld({Route{.points = {{0, 0}, {3000, 0}}}}));
    World& world = sim.world();
    VehicleSpec spec = SpecOfKind(ModelKind::kForceBased);
    spec.driver = RouteFollowerSpec{.target_speed_mps = 45.0, .style = style};
    EXPECT_TRUE(world.Spawn({spec}).ok());
    double top = 0.0;
    for (int t = 0; t < 50 * 50; ++t) {
      world.Step();
      top = std::max(top, world.Snapshot()[0].speed_mps);
    }
    return top;
  };
  const double normal = top_speed(DriverStyle::kNormal);
  const double cautious = top_speed(DriverStyle::kCautious);
  EXPECT_GT(normal, 44.0);
  EXPECT_LT(cautious, 30.5);
  EXPECT_GT(cautious, 29.0);
}

// Off its line the follower steers harder than the route bends: 1.5 m outside a 30 m circle
// at 10 m/s, the goal 6 m along the circle lies 2.10 m left and 5.96 m ahead, so pure pursuit
// asks for 2 x 2.10 / (2.10² + 5.96²) = 0.105 /m, 10.5 m/s² of lateral acceleration against a
// 4 m/s² limit. Normal still speeds up towards sqrt(4 x 30) = 11 m/s;
// cautious lifts off: no drive, the model's own coasting deceleration.
TEST(DriverStyles, CautiousLiftsBeyondTheLateralLimit) {
  const RouteParams route = *MakeRouteParams({.points = Circle(30.0, 720), .closed = true});
  for (const ModelKind kind : AllKinds()) {
    SCOPED_TRACE(ModelName(kind));
    const DriverVehicleParams params = DriverParamsOf(SpecOfKind(kind));
    const DriverView view{.x_m = 31.5,
                          .y_m = params.tracking_offset_m,
                          .cos_yaw = 0.0,
                          .sin_yaw = 1.0,
                          .speed_mps = 10.0};
    RouteFollowerSpec spec{.target_speed_mps = 15.0, .max_lateral_acceleration_mps2 = 4.0};
    RouteFollowerState state = StartFollowing(route, params, view);
    const DriverIntent normal = RouteFollowerIntent(spec, route, params, view, std::nullopt, state);
    EXPECT_GT(normal.acceleration_mps2, 0.0);
    EXPECT_NEAR(normal.curvature_1pm, 0.105, 0.001);
    spec.style = DriverStyle::kCautious;
    const DriverIntent cautious =
        RouteFollowerIntent(spec, route, params, view, std::nullopt, state);
    EXPECT_EQ(cautious.acceleration_mps2, CoastAcceleration(params, 10.0));
    const VehicleInput input = ControlsForIntent(params, 1, cautious, 10.0);
    EXPECT_EQ(input.throttle, 0.0);
    EXPECT_LE(input.acceleration_mps2, 0.0);
  }
}

// On a tight corner (10 m radius between 80 m straights, planning 2 m/s²) the speed comes down
// to sqrt(2 x 10) = 4.5 m/s before it, and the lateral acceleration stays within 15 % of the
// limit; on the straights each model gets up towards its 15 m/s.
TEST(DriverFollower, SlowsForTightCornersWithEveryModel) {
  for (const ModelKind kind : AllKinds()) {
    SCOPED_TRACE(ModelName(kind));
    SimTestContext sim(TestWorld({Route{.points = Oval(40.0, 10.0, 0.5), .closed = true}}));
    World& world = sim.world();
    VehicleSpec spec = SpecOfKind(kind);
    spec.driver = RouteFollowerSpec{.target_speed_mps = 15.0};
    PlaceOnRoute(world.params().routes[0], 0.0, spec);
    ASSERT_TRUE(world.Spawn({spec}).ok());
    double max_lateral_mps2 = 0.0, top_speed_mps = 0.0, max_cross_track_m = 0.0;
    for (int t = 0; t < 120 * 50; ++t) {
      world.Step();
      const VehicleSnapshot v = world.Snapshot()[0];
      max_lateral_mps2 =
          std::max(max_lateral_mps2, std::abs(v.speed_mps * v.readout.yaw_rate_radps));
      top_speed_mps = std::max(top_speed_mps, v.speed_mps);
      if (t > 10 * 50) {
        max_cross_track_m =
            std::max(max_cross_track_m, std::abs(world.state().drivers[0].route.cross_track_m));
      }
    }
    EXPECT_LT(max_lateral_mps2, 2.0 * 1.15);
    EXPECT_GT(top_speed_mps, 12.0);
    EXPECT_LT(max_cross_track_m, 1.0);
  }
}

// ---------------------------------------------------------------------------------------------
// Gap keeping.

// Bumper-to-bumper gaps between consecutive followers of route 0, along it.
std::vector<double> Gaps(const World& world) {
  std::vector<RouteOccupant> occupants;
  const std::vector<DrivenVehicle>& drivers = world.state().drivers;
  for (std::uint32_t k = 0; k < drivers.size(); ++k) {
    occupants.push_back({.route = 0,
                         .s_m = drivers[k].route.s_m,
                         .front_m = drivers[k].vehicle.front_m,
                         .rear_m = drivers[k].vehicle.rear_m,
                         .index = k});
  }
  std::vector<std::optional<RouteLeader>> leaders(drivers.size());
  FindLeaders(world.params().routes, occupants, absl::MakeSpan(leaders));
  std::vector<double> gaps;
  for (const auto& leader : leaders) {
    if (leader.has_value()) gaps.push_back(leader->gap_m);
  }
  return gaps;
}

TEST(DriverGap, FindLeadersWrapsRoundClosedRoutes) {
  const std::vector<RouteParams> routes = {
      *MakeRouteParams({.points = Circle(10.0, 100), .closed = true}),
      *MakeRouteParams({.points = {{0, 0}, {100, 0}}})};
  const double loop_m = routes[0].length_m;
  std::vector<RouteOccupant> occupants = {
      {.route = 1, .s_m = 50, .front_m = 3, .rear_m = 1, .speed_mps = 5, .index = 0},
      {.route = 0, .s_m = loop_m - 2, .front_m = 3, .rear_m = 1, .speed_mps = 7, .index = 1},
      {.route = 1, .s_m = 20, .front_m = 3, .rear_m = 1, .speed_mps = -1, .index = 2},
      {.route = 0, .s_m = 10, .front_m = 3, .rear_m = 1, .speed_mps = 6, .index = 3},
  };
  std::vector<std::optional<RouteLeader>> leaders(4);
  FindLeaders(routes, occupants, absl::MakeSpan(leaders));
  ASSERT_TRUE(leaders[1].has_value() && leaders[2].has_value() && leaders[3].has_value());
  EXPECT_FALSE(leaders[0].has_value());             // Front of an open route.
  EXPECT_DOUBLE_EQ(leaders[1]->gap_m, 12.0 - 4.0);  // Across the seam.
  EXPECT_EQ(leaders[1]->speed_mps, 6.0);
  EXPECT_DOUBLE_EQ(leaders[3]->gap_m, loop_m - 12.0 - 4.0);
  EXPECT_DOUBLE_EQ(leaders[2]->gap_m, 26.0);
  EXPECT_EQ(leaders[2]->speed_mps, 5.0);
}

// Six cars of six models on the demo's oval with top speeds from 8 to 15 m/s: the fast ones
// catch up and queue; none ever comes within the standstill gap of the car ahead, and no two
// touch.
TEST(DriverGap, CarsOnALoopKeepTheirGap) {
  SimTestContext sim(
      TestWorld({Route{.points = Oval(40.0, 25.0, 2.0), .closed = true, .lane_width_m = 5.0}}));
  World& world = sim.world();
  const std::vector<std::pair<ModelKind, double>> cars = {
      {ModelKind::kKinematicBicycle, 15.0}, {ModelKind::kPhysicsBody, 8.0},
      {ModelKind::kSingleTrack, 14.0},      {ModelKind::kFrontWheelDrive, 12.0},
      {ModelKind::kForceBased, 15.0},       {ModelKind::kFourWheel, 9.0},
  };
  std::vector<VehicleSpec> specs;
  for (std::size_t i = 0; i < cars.size(); ++i) {
    VehicleSpec spec = SpecOfKind(cars[i].first);
    spec.driver =
        RouteFollowerSpec{.target_speed_mps = cars[i].second, .max_lateral_acceleration_mps2 = 3.0};
    PlaceOnRoute(world.params().routes[0], world.params().routes[0].length_m * i / cars.size(),
                 spec);
    specs.push_back(spec);
  }
  ASSERT_TRUE(world.Spawn(specs).ok());
  double min_gap_m = kInf;
  int vehicle_contacts = 0;
  for (int t = 0; t < 300 * 50; ++t) {
    world.Step();
    for (const double gap : Gaps(world)) min_gap_m = std::min(min_gap_m, gap);
    for (const Contact& contact : world.contacts()) {
      vehicle_contacts += contact.pair.other_kind == ObjectKind::kVehicle ? 1 : 0;
    }
  }
  EXPECT_GE(min_gap_m, 4.0 - 0.05);
  EXPECT_EQ(vehicle_contacts, 0);
}

// Three cars on an open 300 m road: the first (a speeder, which ignores corners but not the
// road's end) stops at its end, the others stop the standstill gap behind the car ahead.
TEST(DriverGap, CarsStopBehindAStoppedCar) {
  SimTestContext sim(TestWorld({Route{.points = {{0, 0}, {150, 0}, {300, 0}}}}));
  World& world = sim.world();
  const std::vector<std::pair<ModelKind, double>> cars = {{ModelKind::kSingleTrack, 0.0},
                                                          {ModelKind::kForceBased, 60.0},
                                                          {ModelKind::kKinematicBicycle, 200.0}};
  std::vector<VehicleSpec> specs;
  for (const auto& [kind, s] : cars) {
    VehicleSpec spec = SpecOfKind(kind);
    spec.driver = RouteFollowerSpec{
        .target_speed_mps = 12.0,
        .style = s == 200.0 ? DriverStyle::kSpeeder : DriverStyle::kNormal};
    PlaceOnRoute(world.params().routes[0], s, spec);
    specs.push_back(spec);
  }
  ASSERT_TRUE(world.Spawn(specs).ok());
  double min_gap_m = kInf;
  for (int t = 0; t < 90 * 50; ++t) {
    world.Step();
    for (const double gap : Gaps(world)) min_gap_m = std::min(min_gap_m, gap);
    ASSERT_TRUE(world.contacts().empty());
  }
  const std::vector<DrivenVehicle>& drivers = world.state().drivers;
  for (const VehicleSnapshot& v : world.Snapshot()) EXPECT_NEAR(v.speed_mps, 0.0, 0.01);
  EXPECT_NEAR(drivers[2].route.s_m, 300.0, 0.5);
  const std::vector<double> gaps = Gaps(world);
  ASSERT_EQ(gaps.size(), 2u);
  for (const double gap : gaps) EXPECT_NEAR(gap, 4.0, 0.5);
  EXPECT_GE(min_gap_m, 4.0 - 0.05);
}

// Under STOP a follower that hits an obstacle on its lane is halted for good; the one behind
// stops behind it and does not crash.
TEST(DriverGap, StopsBehindACrashedCar) {
  SimTestContext sim(TestWorld({Route{.points = {{0, 0}, {500, 0}}}}, 5, CollisionPolicy::kStop));
  World& world = sim.world();
  ASSERT_TRUE(world.AddObstacles({{.center_x_m = 120.0, .length_m = 1.0, .width_m = 3.0}}).ok());
  std::vector<VehicleSpec> specs;
  for (const double s : {60.0, 0.0}) {
    VehicleSpec spec = SpecOfKind(ModelKind::kAllWheelDrive);
    spec.driver = RouteFollowerSpec{.target_speed_mps = 12.0};
    PlaceOnRoute(world.params().routes[0], s, spec);
    specs.push_back(spec);
  }
  ASSERT_TRUE(world.Spawn(specs).ok());
  sim.RunFor(60.0);
  const std::vector<VehicleSnapshot> vehicles = world.Snapshot();
  EXPECT_TRUE(vehicles[0].crashed);
  EXPECT_FALSE(vehicles[1].crashed);
  EXPECT_NEAR(vehicles[1].speed_mps, 0.0, 0.01);
  const std::vector<double> gaps = Gaps(world);
  ASSERT_EQ(gaps.size(), 1u);
  EXPECT_NEAR(gaps[0], 4.0, 0.5);
}

// ---------------------------------------------------------------------------------------------
// The world: specs, inputs, removal, determinism.

TEST(DriverWorld, ErrorsNameTheirFields) {
  const auto bad_world = World::Create(
      {.routes = {Route{.points = {{0, 0}, {1, 0}}}, Route{.points = {{0, 0}, {kInf, 0}}}}});
  EXPECT_THAT(bad_world,
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("routes[1].points[1].x_m")));

  SimTestContext sim(
      TestWorld({Route{.points = {{0, 0}, {100, 0}}}, Route{.points = {{0, 5}, {100, 5}}}}));

  World& world = sim.world();
  struct Case {
    DriverSpec driver;
    ModelKind kind;
    std::string message;
  };
  const std::vector<Case> cases = {
      {RouteFollowerSpec{.route = 3}, ModelKind::kKinematicBicycle,
       "[0].driver.route_follower.route: no route 3 (the world has 2)"},
      {RouteFollowerSpec{.target_speed_mps = 0.0}, ModelKind::kKinematicBicycle,
       "[0].driver.route_follower.target_speed_mps"},
      {RouteFollowerSpec{.target_speed_mps = 31.0}, ModelKind::kKinematicBicycle,
       "[0].driver.route_follower.target_speed_mps: must be in (0, 30]"},
      {RouteFollowerSpec{.max_lateral_acceleration_mps2 = -1}, ModelKind::kPhysicsBody,
       "[0].driver.route_follower.max_lateral_acceleration_mps2"},
      {RouteFollowerSpec{.min_lookahead_m = 0}, ModelKind::kSingleTrack,
       "[0].driver.route_follower.min_lookahead_m"},
      {RouteFollowerSpec{.lookahead_time_s = std::nan("")}, ModelKind::kFourWheel,
       "[0].driver.route_follower.lookahead_time_s"},
      {RouteFollowerSpec{.time_gap_s = -0.1}, ModelKind::kForceBased,
       "[0].driver.route_follower.time_gap_s"},
      {RouteFollowerSpec{.standstill_gap_m = kInf}, ModelKind::kFrontWheelDrive,
       "[0].driver.route_follower.standstill_gap_m"},
      {RouteFollowerSpec{.style = static_cast<DriverStyle>(9)}, ModelKind::kAllWheelDrive,
       "[0].driver.route_follower.style: unknown style 9"},
      {CruiseDriverSpec{.target_speed_mps = -1.0}, ModelKind::kFrontWheelDrive,
       "[0].driver.cruise.target_speed_mps: front_wheel_drive vehicles have no reverse"},
      {CruiseDriverSpec{.target_speed_mps = -6.0}, ModelKind::kKinematicBicycle,
       "[0].driver.cruise.target_speed_mps: must be in [-5, 30]"},
      {CruiseDriverSpec{.target_speed_mps = kInf}, ModelKind::kPhysicsBody,
       "[0].driver.cruise.target_speed_mps"},
  };
  for (const Case& c : cases) {
    VehicleSpec spec = SpecOfKind(c.kind);
    spec.driver = c.driver;
    const auto spawned = world.Spawn({spec});
    EXPECT_THAT(spawned, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.message;
  }
  EXPECT_EQ(world.vehicle_count(), 0u);
}

TEST(DriverWorld, ClientsCannotSetTheControlsOfADrivenVehicle) {
  SimTestContext sim(TestWorld({Route{.points = {{0, 0}, {100, 0}}}}));
  World& world = sim.world();
  VehicleSpec driven = SpecOfKind(ModelKind::kKinematicBicycle);
  driven.driver = RouteFollowerSpec{};
  VehicleSpec free = SpecOfKind(ModelKind::kKinematicBicycle);
  free.initial_pose.y_m = 10.0;
  ASSERT_TRUE(world.Spawn({free, driven}).ok());
  const absl::Status status =
      world.SetInputs({{.id = 1, .acceleration_mps2 = 1.0}, {.id = 2, .acceleration_mps2 = 1.0}});
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition,
                               HasSubstr("[1].vehicle_id: vehicle 2 has a built-in driver")));
  world.Step();
  EXPECT_EQ(world.Snapshot()[0].speed_mps, 0.0);  // All or none: vehicle 1 got nothing.
  EXPECT_GT(world.Snapshot()[1].speed_mps, 0.0);  // Its driver drives.
  EXPECT_TRUE(world.SetInputs({{.id = 1, .acceleration_mps2 = 1.0}}).ok());
}

// Removing vehicles keeps every driver on its own vehicle.
TEST(DriverWorld, RemovingVehiclesKeepsTheDriversAttached) {
  SimTestContext sim(TestWorld({Route{.points = Circle(30.0, 360), .closed = true},
                                Route{.points = Circle(60.0, 720), .closed = true}}));
  World& world = sim.world();
  std::vector<VehicleSpec> specs;
  for (int i = 0; i < 6; ++i) {
    VehicleSpec spec = SpecOfKind(static_cast<ModelKind>(i % kModelKindCount));
    const std::uint32_t route = i % 2;
    if (i != 2) spec.driver = RouteFollowerSpec{.route = route, .target_speed_mps = 7.0};
    PlaceOnRoute(world.params().routes[route], 20.0 * i, spec);
    specs.push_back(spec);
  }
  ASSERT_TRUE(world.Spawn(specs).ok());
  for (int t = 0; t < 100; ++t) world.Step();
  ASSERT_TRUE(world.Remove(2).ok());
  ASSERT_TRUE(world.Remove(4).ok());
  ASSERT_EQ(world.state().drivers.size(), 3u);
  sim.RunFor(20.0);
  for (const DrivenVehicle& driven : world.state().drivers) {
    const VehicleId id = world.state().vehicles.ids[driven.row];
    SCOPED_TRACE(id);
    EXPECT_NE(id, 3u);  // The undriven one.
    const VehicleSnapshot v = world.Snapshot()[driven.row];
    const double radius = std::get<RouteFollowerSpec>(driven.spec).route == 0 ? 30.0 : 60.0;
    const RoutePoint p = TrackingPoint(v, driven.vehicle);
    EXPECT_NEAR(std::hypot(p.x_m, p.y_m), radius, 0.2);
    EXPECT_NEAR(v.speed_mps, 7.0, 0.1);
  }
  EXPECT_TRUE(world.SetInputs({{.id = 3, .acceleration_mps2 = 1.0}}).ok());
}

// Box2D-style: the same world and calls give the same state hash; a copy evolves the same;
// the drivers' state is in the hash.
TEST(DriverWorld, IsDeterministic) {
  const auto make = [] {
    SimTestContext sim(TestWorld({Route{.points = Oval(40.0, 25.0, 2.0), .closed = true}}));
    World& world = sim.world();
    std::vector<VehicleSpec> specs;
    for (std::size_t i = 0; i < kModelKindCount; ++i) {
      VehicleSpec spec = SpecOfKind(static_cast<ModelKind>(i));
      spec.driver =
          RouteFollowerSpec{.target_speed_mps = 8.0 + i, .style = static_cast<DriverStyle>(i % 4)};
      PlaceOnRoute(world.params().routes[0], 40.0 * i, spec);
      specs.push_back(spec);
    }
    VehicleSpec cruiser = SpecOfKind(ModelKind::kPhysicsBody);
    cruiser.initial_pose.y_m = 100.0;
    cruiser.driver = CruiseDriverSpec{.target_speed_mps = 5.0};
    specs.push_back(cruiser);
    EXPECT_TRUE(world.Spawn(specs).ok());
    return world;
  };
  World a = make();
  World b = make();
  for (int t = 0; t < 1000; ++t) a.Step();
  World copy = a;
  for (int t = 0; t < 1000; ++t) b.Step();
  EXPECT_EQ(a.StateHash(), b.StateHash());
  for (int t = 0; t < 500; ++t) {
    a.Step();
    copy.Step();
  }
  EXPECT_EQ(a.StateHash(), copy.StateHash());
  copy.Step();
  EXPECT_NE(a.StateHash(), copy.StateHash());
}

// The demo scenario's layout (scenarios/generate.py): a 317 m oval with a 5 m lane, seven cars
// of every model and style evenly spaced from rest, obstacles in the infield and outside. In
// ten minutes no car touches another or an obstacle, and every car stays on its lane.
TEST(DriverWorld, DemoCarsNeverCollide) {
  World world = *World::Create(
      {.tick_rate_hz = 50,
       .max_vehicles = 20,
       .bounds = WorldBounds{.min_x_m = -90.0, .min_y_m = -60.0, .max_x_m = 90.0, .max_y_m = 60.0},
       .routes = {Route{.points = Oval(40.0, 25.0, 2.0), .closed = true, .lane_width_m = 5.0}}});
  ASSERT_TRUE(world
                  .AddObstacles({{.center_x_m = -20.0, .length_m = 3.0, .width_m = 3.0},
                                 {.center_x_m = 0.0, .length_m = 6.0, .width_m = 2.0},
                                 {.center_x_m = 20.0, .length_m = 3.0, .width_m = 3.0},
                                 {.center_y_m = -42.0, .length_m = 40.0, .width_m = 4.0},
                                 {.center_y_m = 40.0, .length_m = 40.0, .width_m = 1.0}})
                  .ok());
  const RouteParams& route = world.params().routes[0];
  const std::vector<std::tuple<ModelKind, DriverStyle, double>> lineup = {
      {ModelKind::kKinematicBicycle, DriverStyle::kNormal, 10.0},
      {ModelKind::kPhysicsBody, DriverStyle::kNormal, 9.0},
      {ModelKind::kFrontWheelDrive, DriverStyle::kCautious, 10.0},
      {ModelKind::kAllWheelDrive, DriverStyle::kNormal, 11.0},
      {ModelKind::kForceBased, DriverStyle::kSpeeder, 12.0},
      {ModelKind::kSingleTrack, DriverStyle::kTurtle, 10.0},
      {ModelKind::kFourWheel, DriverStyle::kNormal, 10.0},
  };
  std::vector<VehicleSpec> specs;
  for (std::size_t i = 0; i < lineup.size(); ++i) {
    const auto& [kind, style, speed] = lineup[i];
    VehicleSpec spec = SpecOfKind(kind);
    spec.driver = RouteFollowerSpec{.target_speed_mps = speed, .style = style};
    // As generate.py's along(): the reference point on the line.
    std::uint32_t segment = 0;
    const RoutePoint p = RoutePointAt(route, route.length_m * i / lineup.size(), segment);
    spec.initial_pose = {p.x_m, p.y_m,
                         std::atan2(route.vertices[segment].dir_y, route.vertices[segment].dir_x)};
    specs.push_back(spec);
  }
  ASSERT_TRUE(world.Spawn(specs).ok());
  double max_off_m = 0.0, min_gap_m = kInf;
  for (int t = 0; t < 600 * 50; ++t) {
    world.Step();
    ASSERT_TRUE(world.contacts().empty()) << "tick " << t;
    for (const DrivenVehicle& driven : world.state().drivers) {
      max_off_m = std::max(max_off_m, std::abs(driven.route.cross_track_m));
    }
    for (const double gap : Gaps(world)) min_gap_m = std::min(min_gap_m, gap);
  }
  EXPECT_LT(max_off_m, 2.5 - 0.9);  // Half the lane less half a body.
}

}  // namespace
}  // namespace pitlane::sim
