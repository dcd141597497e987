#include "server/sim/world/world.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/sim/testing/sim_test_context.h"
#include "server/util/status_matchers.h"

namespace pitlane::sim {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The world of most tests here: 50 Hz, seed 7, room for `max_vehicles`.
WorldSpec TestWorld(std::uint32_t max_vehicles = 100) {
  return {.tick_rate_hz = 50, .seed = 7, .max_vehicles = max_vehicles};
}

VehicleSpec At(double x_m, double speed_mps = 0.0) {
  VehicleSpec spec;
  spec.initial_pose.x_m = x_m;
  spec.initial_speed_mps = speed_mps;
  return spec;
}

std::vector<VehicleId> Ids(const World& world) {
  std::vector<VehicleId> ids;
  for (const VehicleSnapshot& v : world.Snapshot()) ids.push_back(v.id);
  return ids;
}

TEST(World, CreateRejectsBadSpecsNamingTheField) {
  for (const double rate :
       {0.0, -50.0, 1e-310, 0.999, kNaN, std::numeric_limits<double>::infinity(), 10001.0}) {
    const auto world = World::Create({.tick_rate_hz = rate, .max_vehicles = 1});
    EXPECT_THAT(world, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("tick_rate_hz")))
        << rate;
  }
  const auto world = World::Create({.tick_rate_hz = 50, .max_vehicles = 0});
  EXPECT_THAT(world, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_vehicles")));
}

TEST(World, SimTimeIsTickOverRateNotASum) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  for (int i = 0; i < 3; ++i) world.Step();
  EXPECT_EQ(world.tick(), 3u);
  EXPECT_EQ(world.sim_time_s(), 3 / 50.0);
  EXPECT_EQ(world.params().dt_s, 1 / 50.0);
}

TEST(World, IdsStartAtOneAndAreNeverReused) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  EXPECT_THAT(*world.Spawn({At(0), At(10), At(20)}), ElementsAre(1, 2, 3));
  ASSERT_TRUE(world.Remove(2).ok());
  EXPECT_THAT(world.Remove(2), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(world.Remove(99), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(world.Remove(0), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(*world.Spawn({At(30)}), ElementsAre(4));
  EXPECT_THAT(Ids(world), ElementsAre(1, 3, 4));
}

// A world that replaces another (a session's reset) continues its counters: no id of the old
// world names anything in the new one.
TEST(World, IdsContinueFromTheCountersOfTheWorldReplaced) {
  SimTestContext old_world_sim(TestWorld());
  World& old_world = old_world_sim.world();
  EXPECT_THAT(*old_world.Spawn({At(0), At(10)}), ElementsAre(1, 2));
  EXPECT_THAT(*old_world.AddObstacles({{.center_x_m = 50}}), ElementsAre(1));
  EXPECT_EQ(old_world.next_ids().next_vehicle_id, 3u);
  EXPECT_EQ(old_world.next_ids().next_obstacle_id, 2u);

  World world = *World::Create(TestWorld(), old_world.next_ids());
  EXPECT_THAT(*world.Spawn({At(0)}), ElementsAre(3));
  EXPECT_THAT(*world.AddObstacles({{.center_x_m = 50}}), ElementsAre(2));
  EXPECT_THAT(world.Remove(1), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(world.RemoveObstacle(1), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(world.SetInputs({{.id = 2, .acceleration_mps2 = 1}}).code(),
            absl::StatusCode::kNotFound);
}

// A reset's world reproduces a run: its hash counts ids from its first ones.
TEST(World, StateHashCountsIdsFromTheFirstOnes) {
  const auto run = [](IdCounters first_ids) {
    World world = *World::Create(TestWorld(), first_ids);
    // Overlapping cars and an obstacle: contacts of both kinds, which name ids too.
    EXPECT_TRUE(world.AddObstacles({{.center_x_m = 3}}).ok());
    EXPECT_TRUE(world.Spawn({At(0, 1.0), At(1, 2.0), At(30)}).ok());
    for (int i = 0; i < 5; ++i) world.Step();
    EXPECT_EQ(world.contacts().size(), 3u);
    return world.StateHash();
  };
  EXPECT_EQ(run({.next_vehicle_id = 8, .next_obstacle_id = 3}), run({}));
}

// Rows renumber when a vehicle is removed; lookups by id follow them.
TEST(World, LookupsByIdFollowRowsAfterRemovals) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  ASSERT_TRUE(world.Spawn({At(0, 1.0), At(10, 2.0), At(20, 3.0), At(30, 4.0)}).ok());
  ASSERT_TRUE(world.Remove(2).ok());
  ASSERT_TRUE(world.Remove(1).ok());
  EXPECT_FALSE(world.Contains(1));
  EXPECT_FALSE(world.Contains(2));
  EXPECT_EQ(world.MotionOf(3)->speed_mps, 3.0);
  EXPECT_EQ(world.MotionOf(4)->speed_mps, 4.0);
  EXPECT_THAT(*world.Spawn({At(40, 5.0)}), ElementsAre(5));
  EXPECT_EQ(world.MotionOf(5)->speed_mps, 5.0);
  ASSERT_TRUE(world.Remove(4).ok());
  EXPECT_EQ(world.MotionOf(3)->speed_mps, 3.0);
  EXPECT_EQ(world.MotionOf(5)->speed_mps, 5.0);
}

TEST(World, SpawnIsAllOrNone) {
  SimTestContext sim(TestWorld(/*max_vehicles=*/3));
  World& world = sim.world();
  VehicleSpec bad = At(0);
  bad.width_m = -1;
  const auto failed = world.Spawn({At(0), bad});
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[1].width_m")));
  EXPECT_EQ(world.vehicle_count(), 0u);

  const auto too_many = world.Spawn({At(0), At(1), At(2), At(3)});
  EXPECT_THAT(too_many, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(world.vehicle_count(), 0u);
  // Failed spawns consume no ids.
  EXPECT_THAT(*world.Spawn({At(0), At(1), At(2)}), ElementsAre(1, 2, 3));
  EXPECT_THAT(world.Spawn({At(5)}), StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(World, InputsHoldUntilReplacedAndApplyFromTheNextTick) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  ASSERT_TRUE(world.Spawn({At(0)}).ok());
  ASSERT_TRUE(world.SetInputs({{.id = 1, .acceleration_mps2 = 1.0}}).ok());
  EXPECT_EQ(world.Snapshot()[0].speed_mps, 0.0);  // Nothing moves until the tick.
  for (int i = 0; i < 3; ++i) world.Step();
  EXPECT_THAT(world.Snapshot()[0].speed_mps, DoubleNear(3 * 0.02, 1e-15));
  ASSERT_TRUE(world.SetInputs({{.id = 1, .acceleration_mps2 = 0.0, .steering_angle_rad = 5}}).ok());
  world.Step();
  EXPECT_THAT(world.Snapshot()[0].speed_mps, DoubleNear(3 * 0.02, 1e-15));
  EXPECT_EQ(world.Snapshot()[0].readout.steering_angle_rad, 0.6);  // Clamped to the default limit.
}

TEST(World, HeldControlsAreEachModelsOwnAfterItsLimits) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  std::vector<VehicleSpec> specs(kModelKindCount);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    specs[i] = At(20.0 * static_cast<double>(i));
    specs[i].model = [i] {
      VehicleModelSpec model;
      switch (static_cast<ModelKind>(i)) {
        case ModelKind::kKinematicBicycle: model.emplace<KinematicBicycleSpec>(); break;
        case ModelKind::kPhysicsBody: model.emplace<PhysicsBodySpec>(); break;
        case ModelKind::kSingleTrack: model.emplace<SingleTrackSpec>(); break;
        case ModelKind::kFrontWheelDrive: model.emplace<FrontWheelDriveSpec>(); break;
        case ModelKind::kAllWheelDrive: model.emplace<AllWheelDriveSpec>(); break;
        case ModelKind::kForceBased: model.emplace<ForceBasedSpec>(); break;
        case ModelKind::kFourWheel: model.emplace<FourWheelSpec>(); break;
      }
      return model;
    }();
  }
  ASSERT_TRUE(world.Spawn(specs).ok());
  ASSERT_TRUE(world.SetInputs({{.id = 1, .acceleration_mps2 = 1.5, .steering_angle_rad = 0.1},
                               {.id = 2, .target_speed_mps = 4.0, .yaw_rate_radps = 0.2},
                               {.id = 3, .acceleration_mps2 = -2.0, .steering_angle_rad = -0.2},
                               {.id = 4, .steering_angle_rad = 0.05, .throttle = 0.4},
                               {.id = 5, .throttle = 0.0, .brake = 0.7},
                               {.id = 6, .steering_angle_rad = 0.3, .throttle = 1.0},
                               // Beyond four_wheel's steering limit: held at the limit.
                               {.id = 7, .acceleration_mps2 = 0.5, .steering_angle_rad = 3.0}})
                  .ok());
  const std::vector<VehicleId> ids = {1, 2, 3, 4, 5, 6, 7, 99};
  const std::vector<std::optional<VehicleInput>> held = world.HeldControls(ids);
  ASSERT_EQ(held.size(), ids.size());
  EXPECT_EQ(held[0]->acceleration_mps2, 1.5);
  EXPECT_EQ(held[0]->steering_angle_rad, 0.1);
  EXPECT_EQ(held[1]->target_speed_mps, 4.0);
  EXPECT_EQ(held[1]->yaw_rate_radps, 0.2);
  EXPECT_EQ(held[2]->acceleration_mps2, -2.0);
  EXPECT_EQ(held[2]->steering_angle_rad, -0.2);
  EXPECT_EQ(held[3]->throttle, 0.4);
  EXPECT_EQ(held[3]->steering_angle_rad, 0.05);
  EXPECT_EQ(held[4]->brake, 0.7);
  EXPECT_EQ(held[5]->throttle, 1.0);
  EXPECT_EQ(held[5]->steering_angle_rad, 0.3);
  EXPECT_EQ(held[6]->acceleration_mps2, 0.5);
  EXPECT_LT(held[6]->steering_angle_rad, 1.0);  // Clamped to the model's limit.
  EXPECT_GT(held[6]->steering_angle_rad, 0.1);
  for (std::size_t i = 0; i + 1 < ids.size(); ++i) EXPECT_EQ(held[i]->id, ids[i]);
  EXPECT_FALSE(held[7].has_value());  // No vehicle 99.
}

TEST(World, SetInputsIsAllOrNoneAndNamesTheEntry) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  ASSERT_TRUE(world.Spawn({At(0), At(10)}).ok());
  struct Case {
    std::vector<VehicleInput> inputs;
    absl::StatusCode code;
    std::string field;
  };
  const std::vector<Case> cases = {
      {{{.id = 1, .acceleration_mps2 = 1}, {.id = 2, .acceleration_mps2 = kNaN}},
       absl::StatusCode::kInvalidArgument,
       "[1].acceleration_mps2"},
      {{{.id = 1, .steering_angle_rad = -std::numeric_limits<double>::infinity()}},
       absl::StatusCode::kInvalidArgument,
       "[0].steering_angle_rad"},
      {{{.id = 1, .acceleration_mps2 = 1}, {.id = 3}},
       absl::StatusCode::kNotFound,
       "[1].vehicle_id"},
      {{{.id = 2, .acceleration_mps2 = 1}, {.id = 2}},
       absl::StatusCode::kInvalidArgument,
       "[1].vehicle_id"},
  };
  for (const Case& c : cases) {
    const absl::Status status = world.SetInputs(c.inputs);
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(c.field));
  }
  world.Step();
  for (const VehicleSnapshot& v : world.Snapshot()) EXPECT_EQ(v.speed_mps, 0.0) << v.id;
}

// A repeated id is found whether the inputs are few (compared pairwise) or many (a set), at
// any position; distinct ids pass either way.
TEST(World, SetInputsFindsARepeatedIdAmongFewOrMany) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  std::vector<VehicleSpec> specs;
  for (int i = 0; i < 40; ++i) specs.push_back(At(10.0 * i));
  ASSERT_TRUE(world.Spawn(specs).ok());
  for (const std::size_t count : {2, 3, 15, 16, 17, 40}) {
    SCOPED_TRACE(::testing::Message() << count << " inputs");
    std::vector<VehicleInput> inputs;
    for (std::size_t i = 0; i < count; ++i) {
      inputs.push_back({.id = static_cast<VehicleId>(i + 1), .acceleration_mps2 = 0.5});
    }
    EXPECT_TRUE(world.SetInputs(inputs).ok());
    for (const std::size_t repeat_of : {std::size_t{0}, count / 2, count - 1}) {
      std::vector<VehicleInput> repeated = inputs;
      repeated.push_back({.id = inputs[repeat_of].id});
      const absl::Status status = world.SetInputs(repeated);
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
      EXPECT_THAT(std::string(status.message()),
                  HasSubstr(absl::StrCat("[", count, "].vehicle_id: vehicle ",
                                         inputs[repeat_of].id, " appears more than once")));
    }
  }
}

TEST(World, RemovingKeepsTheOthersInOrderWithTheirState) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  ASSERT_TRUE(world.Spawn({At(0, 1.0), At(10, 2.0), At(20, 3.0)}).ok());
  ASSERT_TRUE(world.SetInputs({{.id = 3, .steering_angle_rad = 0.1}}).ok());
  ASSERT_TRUE(world.Remove(1).ok());
  const std::vector<VehicleSnapshot> vehicles = world.Snapshot();
  ASSERT_EQ(vehicles.size(), 2u);
  EXPECT_EQ(vehicles[0].id, 2u);
  EXPECT_EQ(vehicles[0].speed_mps, 2.0);
  EXPECT_EQ(vehicles[1].id, 3u);
  EXPECT_EQ(vehicles[1].pose.x_m, 20.0);
  EXPECT_EQ(world.DescribeVehicles()[1].spec.initial_speed_mps, 3.0);
  // Its held control survived the removal: the wheels take it at the next tick.
  EXPECT_EQ(vehicles[1].readout.steering_angle_rad, 0.0);
  world.Step();
  EXPECT_EQ(world.Snapshot()[1].readout.steering_angle_rad, 0.1);
}

// Box2D-style determinism check: the same spec and call sequence give the same state hash,
// and a copy of a world evolves exactly like the original.
// Sensors are bounded per world, not only per vehicle: at most kMaxScanBeamsPerWorld beams
// and kMaxNearestObjectsPerWorld nearest-object slots over all vehicles; removing a vehicle
// gives its share back.
TEST(World, SensorTotalsAreBounded) {
  SimTestContext sim(TestWorld(100000));
  World& world = sim.world();
  VehicleSpec scanner;
  scanner.range_scan = RangeScanSpec{.beam_count = 4000};
  const std::vector<VehicleSpec> fleet(kMaxScanBeamsPerWorld / 4000, scanner);
  const std::vector<VehicleId> ids = *world.Spawn(fleet);
  VehicleSpec one_more;
  one_more.range_scan = RangeScanSpec{.beam_count = 1};
  const auto refused = world.Spawn({one_more});
  EXPECT_THAT(refused, StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("vehicles: ")));
  EXPECT_EQ(world.vehicle_count(), fleet.size());
  ASSERT_TRUE(world.Remove(ids.front()).ok());
  EXPECT_TRUE(world.Spawn({one_more}).ok());

  VehicleSpec watcher;
  watcher.nearest_objects = NearestObjectsSpec{.count = 200};
  const std::vector<VehicleSpec> watchers(kMaxNearestObjectsPerWorld / 200, watcher);
  ASSERT_TRUE(world.Spawn(watchers).ok());
  EXPECT_THAT(world.Spawn({watcher}), StatusIs(absl::StatusCode::kResourceExhausted));
}

TEST(World, IsDeterministic) {
  const auto run = [](World& world, int ticks) {
    for (int t = 0; t < ticks; ++t) {
      if (t % 10 == 0) {
        std::vector<VehicleInput> inputs;
        for (VehicleId id = 1; id <= 50; ++id) {
          inputs.push_back({.id = id,
                            .acceleration_mps2 = std::sin(0.1 * t + id),
                            .steering_angle_rad = 0.5 * std::cos(0.07 * t * id)});
        }
        EXPECT_TRUE(world.SetInputs(inputs).ok());
      }
      world.Step();
    }
  };
  std::vector<VehicleSpec> specs;
  for (int i = 0; i < 50; ++i) {
    specs.push_back(At(i * 5.0, i % 10));
    if (i % 3 == 0) {
      std::get<KinematicBicycleSpec>(specs.back().model).integrator = BicycleIntegrator::kExactArc;
    }
  }
  SimTestContext a_sim(TestWorld());
  World& a = a_sim.world();
  SimTestContext b_sim(TestWorld());
  World& b = b_sim.world();
  ASSERT_TRUE(a.Spawn(specs).ok());
  ASSERT_TRUE(b.Spawn(specs).ok());
  run(a, 300);
  World copy = a;
  run(b, 300);
  EXPECT_EQ(a.StateHash(), b.StateHash());
  run(a, 100);
  run(copy, 100);
  EXPECT_EQ(a.StateHash(), copy.StateHash());
  copy.Step();
  EXPECT_NE(a.StateHash(), copy.StateHash());
}

}  // namespace
}  // namespace pitlane::sim

namespace pitlane::sim {
namespace {

// A vehicle of each model, and controls its model takes, for tests that mix the fleets.
VehicleSpec SpecOfKind(ModelKind kind, int i) {
  VehicleSpec spec;
  spec.initial_pose = {.x_m = 20.0 * i, .y_m = -3.0 * i, .yaw_rad = 0.4 * i};
  spec.initial_speed_mps = 1.0 + (i % 4);
  switch (kind) {
    case ModelKind::kKinematicBicycle: spec.model = KinematicBicycleSpec{}; break;
    case ModelKind::kPhysicsBody: spec.model = PhysicsBodySpec{}; break;
    case ModelKind::kSingleTrack: spec.model = SingleTrackSpec{}; break;
    case ModelKind::kFrontWheelDrive: spec.model = FrontWheelDriveSpec{}; break;
    case ModelKind::kAllWheelDrive: spec.model = AllWheelDriveSpec{}; break;
    case ModelKind::kForceBased: spec.model = ForceBasedSpec{}; break;
    case ModelKind::kFourWheel: spec.model = FourWheelSpec{}; break;
  }
  return spec;
}

VehicleInput ControlsOfKind(ModelKind kind, VehicleId id, int t) {
  const double s = std::sin(0.05 * t + static_cast<double>(id));
  switch (kind) {
    case ModelKind::kKinematicBicycle:
    case ModelKind::kSingleTrack:
    case ModelKind::kFourWheel:
      return {.id = id, .acceleration_mps2 = s, .steering_angle_rad = 0.3 * s};
    case ModelKind::kPhysicsBody:
      return {.id = id, .target_speed_mps = 4.0 + 2.0 * s, .yaw_rate_radps = 0.2 * s};
    case ModelKind::kFrontWheelDrive:
    case ModelKind::kAllWheelDrive:
    case ModelKind::kForceBased:
      return {.id = id, .steering_angle_rad = 0.3 * s, .throttle = 0.5 + 0.5 * s,
              .brake = 0.2 * (1 - s)};
  }
  return {.id = id};
}

// Controls that keep a vehicle of each model moving forward.
VehicleInput CruiseOfKind(ModelKind kind, VehicleId id) {
  switch (kind) {
    case ModelKind::kKinematicBicycle:
    case ModelKind::kSingleTrack:
    case ModelKind::kFourWheel:
      return {.id = id};
    case ModelKind::kPhysicsBody: return {.id = id, .target_speed_mps = 3.0};
    case ModelKind::kFrontWheelDrive:
    case ModelKind::kAllWheelDrive:
    case ModelKind::kForceBased:
      return {.id = id, .throttle = 0.3};
  }
  return {.id = id};
}

// Vehicles of every model, interleaved, some removed: each must move exactly as it would alone
// in its own world (REPORT policy, so nothing interacts). This checks that the table's rows and
// the fleets' slots stay matched through spawns and removals.
TEST(World, MixedModelsStepAsIfEachWereAlone) {
  constexpr int kVehicles = 24;
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  std::vector<VehicleSpec> specs;
  std::vector<ModelKind> kinds;
  for (int i = 0; i < kVehicles; ++i) {
    kinds.push_back(static_cast<ModelKind>(i % kModelKindCount));
    specs.push_back(SpecOfKind(kinds.back(), i));
  }
  ASSERT_TRUE(world.Spawn(specs).ok());
  std::vector<int> alive;
  for (int i = 0; i < kVehicles; ++i) {
    if (i % 5 == 1 || i % 7 == 3) {
      ASSERT_TRUE(world.Remove(static_cast<VehicleId>(i + 1)).ok());
    } else {
      alive.push_back(i);
    }
  }
  std::vector<SimTestContext> alone;
  for (const int i : alive) {
    alone.emplace_back(TestWorld());
    ASSERT_TRUE(alone.back().world().Spawn({specs[i]}).ok());
  }
  for (int t = 0; t < 300; ++t) {
    if (t % 25 == 0) {
      std::vector<VehicleInput> inputs;
      for (std::size_t k = 0; k < alive.size(); ++k) {
        const int i = alive[k];
        inputs.push_back(ControlsOfKind(kinds[i], static_cast<VehicleId>(i + 1), t));
        VehicleInput solo = inputs.back();
        solo.id = 1;
        ASSERT_TRUE(alone[k].world().SetInputs({solo}).ok());
      }
      ASSERT_TRUE(world.SetInputs(inputs).ok());
    }
    world.Step();
    for (SimTestContext& solo : alone) solo.StepOnce();
  }
  const std::vector<VehicleSnapshot> mixed = world.Snapshot();
  ASSERT_EQ(mixed.size(), alive.size());
  for (std::size_t k = 0; k < alive.size(); ++k) {
    const VehicleSnapshot solo = alone[k].world().Snapshot()[0];
    SCOPED_TRACE(::testing::Message() << "vehicle " << alive[k] + 1);
    EXPECT_EQ(mixed[k].id, static_cast<VehicleId>(alive[k] + 1));
    EXPECT_EQ(mixed[k].kind, kinds[alive[k]]);
    EXPECT_EQ(mixed[k].pose.x_m, solo.pose.x_m);
    EXPECT_EQ(mixed[k].pose.y_m, solo.pose.y_m);
    EXPECT_EQ(mixed[k].pose.yaw_rad, solo.pose.yaw_rad);
    EXPECT_EQ(mixed[k].speed_mps, solo.speed_mps);
    EXPECT_EQ(mixed[k].readout.acceleration_mps2, solo.readout.acceleration_mps2);
    EXPECT_NE(mixed[k].pose.x_m, specs[alive[k]].initial_pose.x_m);  // They did move.
  }
}

// Under STOP, a crash halts a vehicle of any model for good, and its controls are accepted and
// ignored.
TEST(World, CrashHaltsEveryModel) {
  for (std::size_t kind = 0; kind < kModelKindCount; ++kind) {
    SCOPED_TRACE(ModelName(static_cast<ModelKind>(kind)));
    SimTestContext sim({.max_vehicles = 4, .collision_policy = CollisionPolicy::kStop});
    World& world = sim.world();
    VehicleSpec spec = SpecOfKind(static_cast<ModelKind>(kind), 0);
    spec.initial_pose = {};
    spec.initial_speed_mps = 3.0;
    VehicleSpec wall;  // A parked bicycle 6 m ahead.
    wall.initial_pose = {.x_m = 6.0 + 4.5};
    ASSERT_TRUE(world.Spawn({spec, wall}).ok());
    ASSERT_TRUE(world.SetInputs({CruiseOfKind(static_cast<ModelKind>(kind), 1)}).ok());
    for (int t = 0; t < 200 && !world.Snapshot()[0].crashed; ++t) world.Step();
    const VehicleSnapshot crashed = world.Snapshot()[0];
    ASSERT_TRUE(crashed.crashed);
    EXPECT_EQ(crashed.speed_mps, 0.0);
    ASSERT_TRUE(world.SetInputs({ControlsOfKind(static_cast<ModelKind>(kind), 1, 3)}).ok());
    sim.RunFor(1.0);
    EXPECT_EQ(world.Snapshot()[0].pose.x_m, crashed.pose.x_m);
    EXPECT_EQ(world.Snapshot()[0].speed_mps, 0.0);
  }
}

// The contact budget: n cars stacked at the origin touch pairwise, n (n - 1) / 2 contacts. A
// tick keeps max_contacts of them, sorted by pair, counts the rest, and keeps the same ones for
// the same state. Table: few contacts over the budget (the sorted narrow phase, which keeps
// the lowest pairs) and far more candidate pairs than it holds (the streaming pass).
TEST(World, ContactsBeyondTheBudgetAreCountedNotKept) {
  struct Case {
    std::uint32_t cars;
    std::uint32_t max_contacts;
  };
  for (const Case c : {Case{20, 100}, Case{60, 10}, Case{60, 5000}}) {
    SCOPED_TRACE(testing::Message() << c.cars << " cars, budget " << c.max_contacts);
    const std::uint64_t all = std::uint64_t{c.cars} * (c.cars - 1) / 2;
    const auto run = [&](CollisionPolicy policy) {
      SimTestContext sim(
          {.max_vehicles = c.cars, .max_contacts = c.max_contacts, .collision_policy = policy});
      EXPECT_TRUE(sim.world().Spawn(std::vector<VehicleSpec>(c.cars, At(0.0))).ok());
      sim.StepOnce();
      return std::move(sim.world());
    };
    const World world = run(CollisionPolicy::kReport);
    const std::uint64_t kept = std::min<std::uint64_t>(all, c.max_contacts);
    ASSERT_EQ(world.contacts().size(), kept);
    EXPECT_EQ(world.contacts_dropped(), all - kept);
    EXPECT_TRUE(std::is_sorted(world.contacts().begin(), world.contacts().end(),
                               [](const Contact& a, const Contact& b) { return a.pair < b.pair; }));
    EXPECT_TRUE(std::adjacent_find(world.contacts().begin(), world.contacts().end(),
                                   [](const Contact& a, const Contact& b) {
                                     return a.pair == b.pair;
                                   }) == world.contacts().end());
    if (c.cars == 20) {
      // Sorted narrow phase: the lowest pairs, (1,2), (1,3), ... car by car: cars 1 to 6 have
      // 19 + 18 + ... + 14 = 99 pairs with higher ids, so the 100th is (7,8).
      EXPECT_EQ(world.contacts().front().pair, (ContactPair{1, ObjectKind::kVehicle, 2}));
      EXPECT_EQ(world.contacts().back().pair, (ContactPair{7, ObjectKind::kVehicle, 8}));
    }
    // The same state keeps the same contacts.
    const World again = run(CollisionPolicy::kReport);
    ASSERT_EQ(again.contacts().size(), world.contacts().size());
    for (std::size_t i = 0; i < world.contacts().size(); ++i) {
      EXPECT_EQ(again.contacts()[i].pair, world.contacts()[i].pair);
    }
    // Under STOP every car crashes, those of the dropped contacts too.
    const World stopped = run(CollisionPolicy::kStop);
    for (const VehicleSnapshot& v : stopped.Snapshot()) EXPECT_TRUE(v.crashed) << v.id;
  }
}

TEST(World, ObstacleContactsKeepToTheBudget) {
  SimTestContext sim({.max_vehicles = 20, .max_contacts = 100});
  World& world = sim.world();
  ASSERT_TRUE(world.AddObstacles(std::vector<ObstacleSpec>(1000, ObstacleSpec{})).ok());
  ASSERT_TRUE(world.Spawn(std::vector<VehicleSpec>(20, At(0.0))).ok());
  sim.StepOnce();
  // 20 x 1000 car-obstacle contacts and 190 car-car ones.
  EXPECT_EQ(world.contacts().size(), 100u);
  EXPECT_EQ(world.contacts_dropped(), 20u * 1000 + 190 - 100);
  for (const Contact& contact : world.contacts()) {
    EXPECT_EQ(contact.pair.other_kind, ObjectKind::kObstacle);
  }
  EXPECT_THAT(World::Create({.max_vehicles = 1, .max_contacts = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_contacts")));
}

// Every model at both ends of the tick-rate range (dt = 1 s and 0.1 ms): finite states, speeds
// within the limits, and at 1 Hz a car that is told to cruise still moves forward.
TEST(World, EveryModelRunsAtTheExtremeTickRates) {
  for (const double rate_hz : {kMinTickRate_hz, kMaxTickRate_hz}) {
    SimTestContext sim({.tick_rate_hz = rate_hz, .max_vehicles = 20});
    World& world = sim.world();
    std::vector<VehicleSpec> specs;
    std::vector<VehicleInput> inputs;
    for (std::size_t kind = 0; kind < kModelKindCount; ++kind) {
      specs.push_back(SpecOfKind(static_cast<ModelKind>(kind), static_cast<int>(kind)));
      inputs.push_back(ControlsOfKind(static_cast<ModelKind>(kind),
                                      static_cast<VehicleId>(kind + 1), 7));
    }
    ASSERT_TRUE(world.Spawn(specs).ok());
    ASSERT_TRUE(world.SetInputs(inputs).ok());
    for (int t = 0; t < 200; ++t) world.Step();
    for (const VehicleSnapshot& v : world.Snapshot()) {
      SCOPED_TRACE(::testing::Message() << rate_hz << " Hz, " << ModelName(v.kind));
      EXPECT_TRUE(std::isfinite(v.pose.x_m) && std::isfinite(v.pose.y_m) &&
                  std::isfinite(v.pose.yaw_rad) && std::isfinite(v.speed_mps));
      EXPECT_LE(std::abs(v.speed_mps), 60.0);
      EXPECT_LE(std::abs(v.readout.yaw_rate_radps), 100.0);
    }
  }
}

}  // namespace
}  // namespace pitlane::sim
