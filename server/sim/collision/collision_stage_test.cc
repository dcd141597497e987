// The collision stage inside a world's step: scripted contacts with closed-form ticks, the
// two policies, events, obstacles, walls, sweeping against thin obstacles, and the stage's
// contacts against an all-pairs oracle.
#include "server/sim/collision/collision_stage.h"

#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/sim/math/trig.h"
#include "server/sim/testing/sim_test_context.h"
#include "server/sim/world/world.h"
#include "server/util/status_matchers.h"

namespace pitlane::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr double kRate_hz = 50.0;
// Default body: 4.5 m x 1.8 m, wheelbase 2.7 m centred, so the body centre lies 1.35 m ahead of
// the rear-axle reference point.
constexpr double kLength_m = 4.5;
constexpr double kWidth_m = 1.8;
constexpr double kCenterOffset_m = 1.35;

// The world of these tests: room for the random scenes.
WorldSpec TestWorld(CollisionPolicy policy, std::optional<WorldBounds> bounds = std::nullopt) {
  return {.tick_rate_hz = kRate_hz,
          .seed = 7,
          .max_vehicles = 100000,
          .collision_policy = policy,
          .bounds = bounds};
}

// The default car, allowed 500 m/s either way: some scenes throw cars through walls.
VehicleSpec FastCar() {
  VehicleSpec spec;
  spec.limits.max_speed_mps = 500.0;
  spec.limits.max_reverse_speed_mps = 500.0;
  return spec;
}

// Steps until the first event or `max_ticks`; returns the events of that tick.
std::vector<ContactEvent> StepUntilEvent(World& world, int max_ticks) {
  std::vector<ContactEvent> events;
  for (int i = 0; i < max_ticks && events.empty(); ++i) world.Step(&events);
  return events;
}

// The body box sits (length / 2 - rear_overhang) ahead of the rear axle along the heading.
TEST(CollisionStageTest, BodyBoxIsPlacedFromTheRearAxle) {
  const BodyParams body{.length_m = 4.5, .width_m = 1.8, .center_offset_m = 2.25 - 0.9};
  const CollisionBox box = VehicleBoxAt(body, {.x_m = 10, .y_m = 5, .yaw_rad = kPi / 2});
  EXPECT_NEAR(box.center_x_m, 10, 1e-12);
  EXPECT_NEAR(box.center_y_m, 5 + 1.35, 1e-12);
  EXPECT_NEAR(box.axis_x, 0.0, 1e-16);
  EXPECT_EQ(box.axis_y, 1.0);
  EXPECT_EQ(box.half_length_m, 2.25);
  EXPECT_EQ(box.half_width_m, 0.9);
  // The rear edge is rear_overhang behind the axle, the front edge length - overhang ahead.
  EXPECT_NEAR(box.center_y_m - box.half_length_m, 5 - 0.9, 1e-12);
  EXPECT_NEAR(box.center_y_m + box.half_length_m, 5 + 3.6, 1e-12);
}

// Head-on at 5 m/s each, body centres 20 m apart: the centres close 0.2 m per tick and the
// boxes touch once the gap is at most one length, 20 - 0.2 t <= 4.5, first at t = 78 with
// 0.1 m overlap. Under REPORT they pass through each other and separate once
// |20 - 0.2 t| > 4.5, first at t = 123.
TEST(CollisionStageTest, HeadOnReportBeginsAndEndsAtTheClosedFormTicks) {
  SimTestContext sim(TestWorld(CollisionPolicy::kReport));
  World& world = sim.world();
  const VehicleId a = sim.Spawn(CarAt(0.0, 0.0, 0.0, 5.0, FastCar()));
  const VehicleId b = sim.Spawn(CarAt(20.0, 0.0, kPi, 5.0, FastCar()));

  const std::vector<ContactEvent> began = StepUntilEvent(world, 200);
  ASSERT_EQ(began.size(), 1u);
  EXPECT_EQ(began[0].tick, 78u);
  EXPECT_EQ(began[0].phase, ContactPhase::kBegan);
  EXPECT_EQ(began[0].contact.pair, (ContactPair{a, ObjectKind::kVehicle, b}));
  EXPECT_NEAR(began[0].contact.normal_x, 1.0, 1e-12);
  EXPECT_NEAR(began[0].contact.normal_y, 0.0, 1e-12);
  // Positions are sums of 0.1 m steps: rounding of order 1e-13 m.
  EXPECT_NEAR(began[0].contact.depth_m, 0.1, 1e-9);
  EXPECT_EQ(began[0].contact.began_tick, 78u);
  ASSERT_EQ(world.contacts().size(), 1u);

  const std::vector<ContactEvent> ended = StepUntilEvent(world, 200);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].tick, 123u);
  EXPECT_EQ(ended[0].phase, ContactPhase::kEnded);
  EXPECT_EQ(ended[0].contact.began_tick, 78u);
  EXPECT_THAT(world.contacts(), IsEmpty());
  // Both kept driving.
  for (const VehicleSnapshot& v : world.Snapshot()) {
    EXPECT_DOUBLE_EQ(std::abs(v.speed_mps), 5.0);
    EXPECT_FALSE(v.crashed);
  }
}

// Under STOP the same head-on halts both cars at tick 78, where they touched, for good: they
// ignore later controls, and the contact stays in effect.
TEST(CollisionStageTest, HeadOnStopHaltsBothCarsAndIgnoresControls) {
  SimTestContext sim(TestWorld(CollisionPolicy::kStop));
  World& world = sim.world();
  const VehicleId a = sim.Spawn(CarAt(0.0, 0.0, 0.0, 5.0, FastCar()));
  const VehicleId b = sim.Spawn(CarAt(20.0, 0.0, kPi, 5.0, FastCar()));
  const VehicleId bystander = sim.Spawn(CarAt(0.0, 30.0, 0.0, 5.0, FastCar()));
  ASSERT_EQ(StepUntilEvent(world, 200).size(), 1u);
  ASSERT_EQ(world.tick(), 78u);
  const std::vector<VehicleSnapshot> at_crash = world.Snapshot();
  EXPECT_TRUE(at_crash[0].crashed);
  EXPECT_TRUE(at_crash[1].crashed);
  EXPECT_FALSE(at_crash[2].crashed);
  EXPECT_EQ(at_crash[0].speed_mps, 0.0);
  EXPECT_EQ(at_crash[1].speed_mps, 0.0);

  ASSERT_TRUE(world.SetInputs({{.id = a, .acceleration_mps2 = 3.0, .steering_angle_rad = 0.3},
                               {.id = b, .acceleration_mps2 = 3.0}})
                  .ok());
  std::vector<ContactEvent> events;
  for (int i = 0; i < 50; ++i) world.Step(&events);
  EXPECT_THAT(events, IsEmpty());
  const std::vector<VehicleSnapshot> later = world.Snapshot();
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(later[k].pose.x_m, at_crash[k].pose.x_m);
    EXPECT_EQ(later[k].pose.y_m, at_crash[k].pose.y_m);
    EXPECT_EQ(later[k].pose.yaw_rad, at_crash[k].pose.yaw_rad);
    EXPECT_EQ(later[k].speed_mps, 0.0);
  }
  EXPECT_EQ(later[2].id, bystander);
  EXPECT_NEAR(later[2].pose.x_m, at_crash[2].pose.x_m + 50 * 0.1, 1e-9);
  ASSERT_EQ(world.contacts().size(), 1u);
  EXPECT_EQ(world.contacts()[0].began_tick, 78u);
}

// Rear-end: 10 m/s behind 5 m/s, 10 m between centres: the gap closes 0.1 m per tick and the
// cars touch when 10 - 0.1 t <= 4.5, first at t = 55 (overlap 0.0 +- rounding: 10 - 5.5 = 4.5
// exactly touching). Normal along +x from the follower (lower id) to the leader.
TEST(CollisionStageTest, RearEndTouchesExactlyAtTheClosedFormTick) {
  SimTestContext sim(TestWorld(CollisionPolicy::kReport));
  World& world = sim.world();
  sim.Spawn(CarAt(0.0, 0.0, 0.0, 10.0, FastCar()));
  sim.Spawn(CarAt(10.0, 0.0, 0.0, 5.0, FastCar()));
  const std::vector<ContactEvent> began = StepUntilEvent(world, 100);
  ASSERT_EQ(began.size(), 1u);
  // Touching happens at t = 55 up to the tolerance; the summed positions may land a few ulps
  // either side of exact, which the 1e-6 m tolerance absorbs.
  EXPECT_EQ(began[0].tick, 55u);
  EXPECT_NEAR(began[0].contact.depth_m, 0.0, 1e-9);
  EXPECT_NEAR(began[0].contact.normal_x, 1.0, 1e-12);
}

// T-bone: a car crossing northbound hits the side of a parked car. Only those two crash under
// STOP; the normal points from the lower id (the crossing car, south) to the parked one: +y.
TEST(CollisionStageTest, TBoneCrashesOnlyTheTwoInvolved) {
  SimTestContext sim(TestWorld(CollisionPolicy::kStop));
  World& world = sim.world();
  // Crossing car, id 1: centre at (0, -10), heading north at 10 m/s (0.2 m per tick).
  const VehicleId crossing = sim.Spawn(CarAt(0.0, -10.0, kPi / 2, 10.0, FastCar()));
  // Parked car, id 2: centre at origin, heading east; its south side is at y = -0.9.
  const VehicleId parked = sim.Spawn(CarAt(0.0, 0.0, 0.0, 0.0, FastCar()));
  const VehicleId other = sim.Spawn(CarAt(50.0, 0.0, 0.0, 0.0, FastCar()));
  // The crossing car's front reaches y = -10 + 2.25 + 0.2 t; touching when >= -0.9:
  // t >= 34.25, first at t = 35 with 0.15 m overlap.
  const std::vector<ContactEvent> began = StepUntilEvent(world, 100);
  ASSERT_EQ(began.size(), 1u);
  EXPECT_EQ(began[0].tick, 35u);
  EXPECT_EQ(began[0].contact.pair, (ContactPair{crossing, ObjectKind::kVehicle, parked}));
  // From the crossing car (south) towards the parked one (north).
  EXPECT_NEAR(began[0].contact.normal_x, 0.0, 1e-12);
  EXPECT_NEAR(began[0].contact.normal_y, 1.0, 1e-12);
  EXPECT_NEAR(began[0].contact.depth_m, 0.15, 1e-9);
  const std::vector<VehicleSnapshot> cars = world.Snapshot();
  EXPECT_TRUE(cars[0].crashed);
  EXPECT_TRUE(cars[1].crashed);
  EXPECT_FALSE(cars[2].crashed);
  EXPECT_EQ(cars[2].id, other);
}

// Parallel cars side by side: edges exactly touching are a contact (depth 0); a 1 cm gap is
// not.
TEST(CollisionStageTest, ParallelTouchingEdgesAreAContactANearMissIsNot) {
  struct Case {
    double gap_m;
    bool contact;
  };
  for (const Case& c : {Case{0.0, true}, Case{0.5e-6, true}, Case{0.01, false}}) {
    SimTestContext sim(TestWorld(CollisionPolicy::kReport));
    World& world = sim.world();
    sim.Spawn(CarAt(3.0, 0.0, 0.0, 0.0, FastCar()));
    sim.Spawn(CarAt(3.0, kWidth_m + c.gap_m, 0.0, 0.0, FastCar()));
    world.Step();
    EXPECT_EQ(world.contacts().size(), c.contact ? 1u : 0u) << "gap " << c.gap_m;
    if (c.contact) {
      EXPECT_EQ(world.contacts()[0].depth_m, 0.0);
      EXPECT_NEAR(world.contacts()[0].normal_y, 1.0, 1e-12);
    }
  }
}

// One car entirely inside a larger box obstacle, and a car inside another car: contacts with
// the full overlap along the least axis.
TEST(CollisionStageTest, BoxInsideAnotherIsAContact) {
  SimTestContext sim(TestWorld(CollisionPolicy::kReport));
  World& world = sim.world();
  const VehicleId car = sim.Spawn(CarAt(0.0, 0.0, 0.0, 0.0, FastCar()));
  const ObstacleId pad =
      world.AddObstacles({{.center_x_m = 0.0, .center_y_m = 0.0, .length_m = 10.0,
                           .width_m = 10.0}})
          ->front();
  world.Step();
  ASSERT_EQ(world.contacts().size(), 1u);
  EXPECT_EQ(world.contacts()[0].pair, (ContactPair{car, ObjectKind::kObstacle, pad}));
  // Least overlap: across the car's width, 0.9 + 5 = 5.9 m (its length axis gives 7.25 m).
  EXPECT_NEAR(world.contacts()[0].depth_m, 5.9, 1e-12);
}

// A car at 10 m/s into a 0.1 m thick wall obstacle whose near face is at x = 20: the front
// starts at 2.25 and gains 0.2 m per tick, touching at 2.25 + 0.2 t >= 20, t = 88.75 -> 89.
TEST(CollisionStageTest, CarIntoThinWallStopsAtTheWall) {
  SimTestContext sim(TestWorld(CollisionPolicy::kStop));
  World& world = sim.world();
  const VehicleId car = sim.Spawn(CarAt(0.0, 0.0, 0.0, 10.0, FastCar()));
  const ObstacleId wall = world.AddObstacles({{.center_x_m = 20.05, .center_y_m = 0.0,
                                                .length_m = 0.1, .width_m = 20.0}})
                              ->front();
  const std::vector<ContactEvent> began = StepUntilEvent(world, 200);
  ASSERT_EQ(began.size(), 1u);
  EXPECT_EQ(began[0].tick, 89u);
  EXPECT_EQ(began[0].contact.pair, (ContactPair{car, ObjectKind::kObstacle, wall}));
  EXPECT_NEAR(began[0].contact.normal_x, 1.0, 1e-12);
  EXPECT_NEAR(began[0].contact.depth_m, 0.05, 1e-9);
  EXPECT_TRUE(world.Snapshot()[0].crashed);
}

// A car at 350 m/s (7 m per tick, more than its length plus the wall's thickness) against a
// 0.05 m wall. Sampled only at tick ends it would jump the wall: at t = 2 its box spans
// [11.75, 16.25], at t = 3 [18.75, 23.25], and the wall occupies [17, 17.05]. The sweep finds
// the wall: under REPORT the contact begins at tick 3 and ends at tick 4; under STOP the car
// halts where a sample first touched: its front at most half its width (0.9 m, the sample
// spacing) past the near face.
TEST(CollisionStageTest, FastCarCannotTunnelThroughAThinWall) {
  const ObstacleSpec wall{.center_x_m = 17.025, .center_y_m = 0.0, .length_m = 0.05,
                          .width_m = 20.0};
  {
    SimTestContext sim(TestWorld(CollisionPolicy::kReport));
    World& world = sim.world();
    sim.Spawn(CarAt(0.0, 0.0, 0.0, 350.0, FastCar()));
    ASSERT_TRUE(world.AddObstacles({wall}).ok());
    std::vector<ContactEvent> events;
    for (int i = 0; i < 5; ++i) world.Step(&events);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].phase, ContactPhase::kBegan);
    EXPECT_EQ(events[0].tick, 3u);
    EXPECT_EQ(events[1].phase, ContactPhase::kEnded);
    EXPECT_EQ(events[1].tick, 4u);
  }
  {
    SimTestContext sim(TestWorld(CollisionPolicy::kStop));
    World& world = sim.world();
    sim.Spawn(CarAt(0.0, 0.0, 0.0, 350.0, FastCar()));
    ASSERT_TRUE(world.AddObstacles({wall}).ok());
    for (int i = 0; i < 5; ++i) world.Step();
    const VehicleSnapshot car = world.Snapshot()[0];
    EXPECT_TRUE(car.crashed);
    const double front_m = car.pose.x_m + kCenterOffset_m + 0.5 * kLength_m;
    EXPECT_GE(front_m, 17.0 - kContactTolerance_m);
    EXPECT_LE(front_m, 17.0 + 0.5 * kWidth_m + 1e-9);
    ASSERT_EQ(world.contacts().size(), 1u);
    EXPECT_EQ(world.contacts()[0].began_tick, 3u);
  }
}

// Under REPORT a fast car that crosses a thin wall and ends the same tick against a post has
// both contacts: the wall's from the first touching sample, the post's from its end pose. (At
// tick 3 its box spans [18.75, 23.25]; the post's near face is at 23.) Under STOP it halts at
// the wall and never reaches the post.
TEST(CollisionStageTest, FastCarUnderReportTouchesWhatItCrossesAndWhereItEnds) {
  const ObstacleSpec wall{.center_x_m = 17.025, .length_m = 0.05, .width_m = 20.0};
  const ObstacleSpec post{.center_x_m = 23.5, .length_m = 1.0, .width_m = 1.0};
  for (const CollisionPolicy policy : {CollisionPolicy::kReport, CollisionPolicy::kStop}) {
    SimTestContext sim(TestWorld(policy));
    World& world = sim.world();
    const VehicleId car = sim.Spawn(CarAt(0.0, 0.0, 0.0, 350.0, FastCar()));
    const std::vector<ObstacleId> ids = *world.AddObstacles({wall, post});
    for (int i = 0; i < 3; ++i) world.Step();
    std::vector<ContactPair> pairs;
    for (const Contact& contact : world.contacts()) pairs.push_back(contact.pair);
    if (policy == CollisionPolicy::kReport) {
      EXPECT_THAT(pairs, ElementsAre(ContactPair{car, ObjectKind::kObstacle, ids[0]},
                                     ContactPair{car, ObjectKind::kObstacle, ids[1]}));
      EXPECT_NEAR(world.contacts()[1].depth_m, 0.25, 1e-9);  // The post, at the end pose.
    } else {
      EXPECT_THAT(pairs, ElementsAre(ContactPair{car, ObjectKind::kObstacle, ids[0]}));
    }
  }
}

// Boundary walls: a car driving east at 10 m/s in a 100 m x 50 m world touches the east wall
// when its front 2.25 + 0.2 t >= 100, t = 488.75 -> 489, with depth 0.05 m; a car parked in
// the south-west corner touches two walls at once.
TEST(CollisionStageTest, BoundaryWalls) {
  const WorldBounds bounds{.min_x_m = -10.0, .min_y_m = -25.0, .max_x_m = 100.0,
                           .max_y_m = 25.0};
  SimTestContext sim(TestWorld(CollisionPolicy::kStop, bounds));
  World& world = sim.world();
  const VehicleId runner = sim.Spawn(CarAt(0.0, 0.0, 0.0, 10.0, FastCar()));
  const VehicleId corner = sim.Spawn(CarAt(-10.0 + 2.25, -25.0 + 0.9, 0.0, 0.0, FastCar()));
  world.Step();
  EXPECT_THAT(world.contacts(),
              ElementsAre(testing::Field(&Contact::pair,
                                         ContactPair{corner, ObjectKind::kWall,
                                                     static_cast<std::uint64_t>(Wall::kWest)}),
                          testing::Field(&Contact::pair,
                                         ContactPair{corner, ObjectKind::kWall,
                                                     static_cast<std::uint64_t>(Wall::kSouth)})));
  const std::vector<ContactEvent> began = StepUntilEvent(world, 1000);
  ASSERT_EQ(began.size(), 1u);
  EXPECT_EQ(began[0].tick, 489u);
  EXPECT_EQ(began[0].contact.pair,
            (ContactPair{runner, ObjectKind::kWall, static_cast<std::uint64_t>(Wall::kEast)}));
  EXPECT_EQ(began[0].contact.normal_x, 1.0);
  EXPECT_NEAR(began[0].contact.depth_m, 0.05, 1e-9);
  EXPECT_TRUE(world.Snapshot()[0].crashed);
}

// Removing a vehicle or obstacle in contact ends its contacts at the next step.
TEST(CollisionStageTest, RemovalEndsContacts) {
  SimTestContext sim(TestWorld(CollisionPolicy::kReport));
  World& world = sim.world();
  const VehicleId a = sim.Spawn(CarAt(0.0, 0.0, 0.0, 0.0, FastCar()));
  const VehicleId b = sim.Spawn(CarAt(1.0, 0.0, 0.0, 0.0, FastCar()));
  const ObstacleId rock =
      world.AddObstacles({{.center_x_m = -2.0, .length_m = 1.0, .width_m = 1.0}})->front();
  std::vector<ContactEvent> events;
  world.Step(&events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].contact.pair, (ContactPair{a, ObjectKind::kVehicle, b}));
  EXPECT_EQ(events[1].contact.pair, (ContactPair{a, ObjectKind::kObstacle, rock}));
  ASSERT_TRUE(world.Remove(b).ok());
  ASSERT_TRUE(world.RemoveObstacle(rock).ok());
  EXPECT_THAT(world.RemoveObstacle(rock), StatusIs(absl::StatusCode::kNotFound));
  events.clear();
  world.Step(&events);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0].phase, ContactPhase::kEnded);
  EXPECT_EQ(events[1].phase, ContactPhase::kEnded);
  EXPECT_THAT(world.contacts(), IsEmpty());
}

TEST(CollisionStageTest, RejectsBadObstaclesAndBounds) {
  SimTestContext sim(TestWorld(CollisionPolicy::kReport));
  World& world = sim.world();
  const auto bad = world.AddObstacles({{.length_m = 1.0, .width_m = 1.0},
                                       {.center_x_m = NAN, .length_m = 1.0, .width_m = 1.0}});
  EXPECT_THAT(bad,
              StatusIs(absl::StatusCode::kInvalidArgument, testing::StartsWith("[1].center_x_m")));
  EXPECT_THAT(world.obstacles(), IsEmpty());
  EXPECT_THAT(std::string(world.AddObstacles({{.length_m = 0.0}}).status().message()),
              testing::StartsWith("[0].length_m"));
  // The obstacle limit, all or none.
  const std::vector<ObstacleSpec> many(kMaxObstacles, ObstacleSpec{.length_m = 1.0, .width_m = 1.0});
  ASSERT_TRUE(world.AddObstacles(many).ok());
  const auto one_more = world.AddObstacles({{.length_m = 1.0, .width_m = 1.0}});
  EXPECT_THAT(one_more,
              StatusIs(absl::StatusCode::kResourceExhausted, testing::StartsWith("obstacles: ")));
  EXPECT_EQ(world.obstacles().size(), kMaxObstacles);
  const auto inverted = World::Create(
      {.max_vehicles = 1, .bounds = WorldBounds{.min_x_m = 0, .min_y_m = 0, .max_x_m = 0,
                                                .max_y_m = 1}});
  EXPECT_THAT(std::string(inverted.status().message()), testing::StartsWith("bounds.max_x_m"));
}

// An independent oracle for the whole stage: every tick of a busy random scene (parking
// density, turning cars, obstacles, walls), the world's contacts equal an all-pairs test
// over the snapshot's bodies, in pair order. The oracle uses VehicleBoxAt and the same SAT: it
// checks the broad phase, the bookkeeping and the order, not the SAT itself (see
// collision_test.cc for that). Half the scenes have more vehicles than obstacles (obstacle
// contacts found from the obstacles' side), half the reverse (from each vehicle's side).
TEST(CollisionStageTest, ContactsEqualAllPairsOracleOnRandomScenes) {
  std::mt19937_64 rng(12345);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int scene = 0; scene < 20; ++scene) {
    const double side_m = 120.0;
    SimTestContext sim(TestWorld(CollisionPolicy::kReport,
                                 WorldBounds{-side_m / 2, -side_m / 2, side_m / 2, side_m / 2}));
    World& world = sim.world();
    const bool many_vehicles = scene % 2 == 0;
    std::vector<VehicleSpec> specs(many_vehicles ? 300 : 60);
    for (VehicleSpec& spec : specs) {
      // Slow enough (<= 3 m/s) that no car moves half its width in a tick: every sweep is a
      // single sample at the end pose, which is what the oracle tests.
      spec = CarAt((unit(rng) - 0.5) * side_m, (unit(rng) - 0.5) * side_m, unit(rng) * 2 * kPi,
                   unit(rng) * 3.0, FastCar());
      spec.length_m = 2.0 + 6.0 * unit(rng);
      spec.width_m = 1.0 + 1.5 * unit(rng);
      spec.model = KinematicBicycleSpec{.wheelbase_m = 0.6 * spec.length_m};
    }
    const std::vector<VehicleId> ids = *world.Spawn(specs);
    std::vector<ObstacleSpec> rocks(many_vehicles ? 40 : 400);
    for (ObstacleSpec& rock : rocks) {
      rock = {.center_x_m = (unit(rng) - 0.5) * side_m,
              .center_y_m = (unit(rng) - 0.5) * side_m,
              .yaw_rad = unit(rng) * kPi,
              .length_m = 0.2 + 10.0 * unit(rng),
              .width_m = 0.2 + 2.0 * unit(rng)};
    }
    ASSERT_TRUE(world.AddObstacles(rocks).ok());
    std::vector<VehicleInput> inputs;
    for (const VehicleId id : ids) {
      inputs.push_back({.id = id, .steering_angle_rad = (unit(rng) - 0.5)});
    }
    ASSERT_TRUE(world.SetInputs(inputs).ok());

    for (int tick = 0; tick < 10; ++tick) {
      world.Step();
      const std::vector<VehicleSnapshot> cars = world.Snapshot();
      std::vector<CollisionBox> boxes;
      for (std::size_t i = 0; i < cars.size(); ++i) {
        const VehicleSpec& spec = specs[i];
        const auto& model = std::get<KinematicBicycleSpec>(spec.model);
        const double overhang_m = 0.5 * (spec.length_m - model.wheelbase_m);
        boxes.push_back(VehicleBoxAt({.length_m = spec.length_m,
                                      .width_m = spec.width_m,
                                      .center_offset_m = 0.5 * spec.length_m - overhang_m},
                                     cars[i].pose));
      }
      std::vector<ContactPair> expected;
      for (std::size_t i = 0; i < cars.size(); ++i) {
        for (std::size_t j = i + 1; j < cars.size(); ++j) {
          if (CollideBoxes(boxes[i], boxes[j]).touching) {
            expected.push_back({cars[i].id, ObjectKind::kVehicle, cars[j].id});
          }
        }
        for (const Obstacle& rock : world.obstacles()) {
          if (CollideBoxes(boxes[i], rock.box).touching) {
            expected.push_back({cars[i].id, ObjectKind::kObstacle, rock.id});
          }
        }
        const Aabb bounds = BoundingBox(boxes[i]);
        const double half = side_m / 2;
        const auto wall = [&](Wall w) {
          expected.push_back({cars[i].id, ObjectKind::kWall, static_cast<std::uint64_t>(w)});
        };
        if (bounds.min_x_m <= -half) wall(Wall::kWest);
        if (bounds.max_x_m >= half) wall(Wall::kEast);
        if (bounds.min_y_m <= -half) wall(Wall::kSouth);
        if (bounds.max_y_m >= half) wall(Wall::kNorth);
      }
      std::sort(expected.begin(), expected.end());
      std::vector<ContactPair> actual;
      for (const Contact& contact : world.contacts()) actual.push_back(contact.pair);
      ASSERT_EQ(actual, expected) << "scene " << scene << " tick " << world.tick();
      ASSERT_GT(actual.size(), 10u);  // The scene is busy enough to mean something.
    }
  }
}

// The fleet keeps cos and sin of every yaw for the collision stage: exactly SinCos(yaw) under
// the semi-implicit integrator, and within a few ulps (here 4e-16) under the exact arc, whose
// step rotates them from the mid-arc heading. Checked over many turning, accelerating ticks,
// so that an error that accumulated would show.
TEST(CollisionStageTest, FleetKeepsTheBodyAxisOfItsYaw) {
  for (const BicycleIntegrator integrator :
       {BicycleIntegrator::kSemiImplicitEuler, BicycleIntegrator::kExactArc}) {
    SimTestContext sim(TestWorld(CollisionPolicy::kReport));
    World& world = sim.world();
    std::vector<VehicleSpec> specs;
    for (int i = 0; i < 20; ++i) {
      VehicleSpec spec = CarAt(20.0 * i, 0.0, 0.3 * i, 2.0 + i, FastCar());
      std::get<KinematicBicycleSpec>(spec.model).integrator = integrator;
      specs.push_back(spec);
    }
    const std::vector<VehicleId> ids = *world.Spawn(specs);
    std::vector<VehicleInput> inputs;
    for (std::size_t i = 0; i < ids.size(); ++i) {
      inputs.push_back({.id = ids[i], .acceleration_mps2 = 0.1 * i - 1.0,
                        .steering_angle_rad = 0.05 * i - 0.5});
    }
    ASSERT_TRUE(world.SetInputs(inputs).ok());
    for (int tick = 0; tick < 2000; ++tick) world.Step();
    const VehicleTable& fleet = world.state().vehicles;
    for (std::size_t i = 0; i < fleet.size(); ++i) {
      double sin_yaw;
      double cos_yaw;
      SinCos(fleet.yaw_rad[i], &sin_yaw, &cos_yaw);
      if (integrator == BicycleIntegrator::kSemiImplicitEuler) {
        EXPECT_EQ(fleet.cos_yaw[i], cos_yaw);
        EXPECT_EQ(fleet.sin_yaw[i], sin_yaw);
      } else {
        EXPECT_NEAR(fleet.cos_yaw[i], cos_yaw, 4e-16);
        EXPECT_NEAR(fleet.sin_yaw[i], sin_yaw, 4e-16);
      }
    }
  }
}

// Same inputs, same events and state hash: the stage adds no order dependence.
TEST(CollisionStageTest, DeterministicEventsAndHash) {
  const auto run = [] {
    SimTestContext sim(TestWorld(CollisionPolicy::kStop));
    World& world = sim.world();
    std::mt19937_64 rng(99);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<VehicleSpec> specs(500);
    for (VehicleSpec& spec : specs) {
      spec = CarAt(unit(rng) * 100.0, unit(rng) * 100.0, unit(rng) * 2 * kPi, unit(rng) * 10.0,
                   FastCar());
    }
    (void)world.Spawn(specs);
    std::vector<ContactEvent> events;
    for (int i = 0; i < 100; ++i) world.Step(&events);
    return std::make_pair(events.size(), world.StateHash());
  };
  const auto first = run();
  EXPECT_GT(first.first, 100u);
  EXPECT_EQ(run(), first);
}

}  // namespace
}  // namespace pitlane::sim
