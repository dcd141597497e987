// Race tracks in a world: which routes are tracks, which track each vehicle is timed on, its
// laps as the world steps it, its track sensors, and what removing a vehicle leaves.
#include <cmath>
#include <numbers>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/sim/world/world.h"

namespace pitlane::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kRadius_m = 100.0;
constexpr double kTickRate_hz = 50.0;

// A circle of radius kRadius_m as a closed polygon of `n` points, counter-clockwise from
// (0, 0) heading +x (its centre at (0, kRadius_m)).
Route Circle(int n = 72, std::vector<double> sectors = {}) {
  Route route{.closed = true, .lane_width_m = 10.0, .sector_starts_m = std::move(sectors)};
  for (int k = 0; k < n; ++k) {
    const double theta = -std::numbers::pi / 2 + 2 * std::numbers::pi * k / n;
    route.points.push_back({kRadius_m * std::cos(theta), kRadius_m + kRadius_m * std::sin(theta)});
  }
  return route;
}

Route Straight() { return Route{.points = {{0, -300}, {500, -300}}}; }

World MakeWorld(std::vector<Route> routes) {
  absl::StatusOr<World> world = World::Create(
      {.tick_rate_hz = kTickRate_hz, .max_vehicles = 10, .routes = std::move(routes)});
  EXPECT_TRUE(world.ok()) << world.status();
  return *std::move(world);
}

// A physics body that circles at `speed_mps` with the yaw rate that closes a circle of
// kRadius_m: it is back where it started every 2 pi r / v seconds, whatever its integration
// does to the radius.
VehicleSpec Circler(double speed_mps) {
  VehicleSpec spec;
  spec.model = PhysicsBodySpec{.drag_factor_per_frame = 1.0};
  spec.initial_speed_mps = speed_mps;
  return spec;
}
VehicleInput CirclerInput(VehicleId id, double speed_mps) {
  return {.id = id, .target_speed_mps = speed_mps, .yaw_rate_radps = speed_mps / kRadius_m};
}

TEST(WorldRacing, ClosedRoutesThatCanBeRacedAreTracks) {
  World world = MakeWorld({Straight(), Circle(), Route{.points = {{0, 0}, {2, 0}, {2, 2}},
                                                       .closed = true}});
  ASSERT_EQ(world.params().tracks.size(), 3u);
  EXPECT_EQ(world.params().tracks[0], nullptr);  // Open.
  ASSERT_NE(world.params().tracks[1], nullptr);
  EXPECT_EQ(world.params().tracks[2], nullptr);  // 6.8 m round: shorter than a track may be.

  // Sectors only on a closed route, each checked.
  const auto error = [](std::vector<Route> routes) {
    return World::Create({.routes = std::move(routes)}).status();
  };
  Route open_with_sectors = Straight();
  open_with_sectors.sector_starts_m = {100.0};
  EXPECT_THAT(error({Circle(), open_with_sectors}).message(),
              HasSubstr("routes[1].sector_starts_m: only a closed route"));
  EXPECT_THAT(error({Circle(72, {200.0, 100.0})}).message(),
              HasSubstr("routes[0].sector_starts_m[1]: must be at least 1 m past"));
  Route tiny = Route{.points = {{0, 0}, {2, 0}, {2, 2}}, .closed = true, .sector_starts_m = {1.5}};
  EXPECT_THAT(error({tiny}).message(), HasSubstr("routes[0].points: a track must be at least"));
}

// A square `side` metres a side, its corner at (x0, 0).
Route Square(double side, double x0 = 0.0) {
  return Route{.points = {{x0, 0}, {x0 + side, 0}, {x0 + side, side}, {x0, side}},
               .closed = true};
}

// What tracks may cost a world is bounded: a few long sides far apart do not fill megabytes
// of empty grid cells, and the tracks' edges together have a budget; closed routes beyond it
// are not raced (and say why), one given sectors is refused.
TEST(WorldRacing, TracksCostMemoryInProportionToTheirEdgesAndWithinABudget) {
  World big = MakeWorld({Square(4000.0)});
  ASSERT_NE(big.params().tracks[0], nullptr);
  const TrackGeometry& square = *big.params().tracks[0];
  // Cells: at most 16 a segment and 256 more; entries: as many again for a diagonal segment
  // (sqrt 2 x its length over the cell), and a few more at each segment's ends.
  EXPECT_LE(square.cell_start.size(), 16 * square.edges.size() + 257);
  EXPECT_LE(square.cell_items.size(), 37 * square.edges.size() + 512);
  EXPECT_LE(square.sparse_cells.size(), square.cell_items.size());

  // A zigzag of sharp bends, each drawn round its outside by many chords.
  Route zigzag{.closed = true, .lane_width_m = 100.0};
  constexpr int kTeeth = 5000;
  for (int k = 0; k < kTeeth; ++k) zigzag.points.push_back({1000.0 * k, k % 2 == 0 ? 0.0 : 3000.0});
  zigzag.points.push_back({1000.0 * kTeeth, -5000.0});
  zigzag.points.push_back({0.0, -5000.0});
  const absl::StatusOr<World> crowded = World::Create(
      {.max_vehicles = 1, .routes = {zigzag, Circle()}});
  ASSERT_TRUE(crowded.ok()) << crowded.status();
  EXPECT_EQ(crowded->params().tracks[0], nullptr);
  EXPECT_THAT(crowded->params().not_raced_because[0], HasSubstr("edges: "));
  EXPECT_NE(crowded->params().tracks[1], nullptr);  // The circle fits the budget.
  World named = *crowded;
  VehicleSpec spec;
  spec.timing_track = 0;
  const absl::Status refused = named.Spawn({spec}).status();
  EXPECT_THAT(refused.message(),
              HasSubstr("[0].timing_track: the session's track 0 is not a race track: edges: "));
  zigzag.sector_starts_m = {500.0};
  const absl::Status with_sectors = World::Create({.routes = {zigzag}}).status();
  EXPECT_EQ(with_sectors.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(with_sectors.message(), HasSubstr("routes[0].edges: "));

  // Made again from the same spec (a reset), a world shares the tracks.
  const WorldSpec circle_spec{.max_vehicles = 2, .routes = {Circle()}};
  const World first = *World::Create(circle_spec);
  const World again = *World::Create(circle_spec, first.next_ids(), &first);
  EXPECT_EQ(again.params().tracks[0], first.params().tracks[0]);
  EXPECT_EQ(again.params().routes[0].length_m, first.params().routes[0].length_m);
}

TEST(WorldRacing, EachVehicleIsTimedOnItsTrack) {
  Route second = Circle(36);
  for (RoutePoint& p : second.points) p.x_m += 1000.0;
  World world = MakeWorld({Straight(), Circle(), second});
  VehicleSpec plain;  // The world's first track.
  VehicleSpec follower;  // Its route's track.
  follower.driver = RouteFollowerSpec{.route = 2};
  follower.initial_pose = {.x_m = 1000.0};
  VehicleSpec named;
  named.timing_track = 2;
  VehicleSpec on_straight;  // Follows a route that is no track: the first track.
  on_straight.driver = RouteFollowerSpec{.route = 0};
  on_straight.initial_pose = {.y_m = -300.0};
  ASSERT_TRUE(world.Spawn({plain, follower, named, on_straight}).ok());
  std::vector<std::pair<VehicleId, std::uint32_t>> timed;
  for (const VehicleTrackReading& reading : world.TrackReadings()) {
    timed.emplace_back(reading.id, reading.route);
    EXPECT_FALSE(reading.sensor.has_value());
  }
  EXPECT_THAT(timed, ElementsAre(std::pair{1u, 1u}, std::pair{2u, 2u}, std::pair{3u, 2u},
                                 std::pair{4u, 1u}));

  // A route that is not a track, or none: the field and why. Nothing spawned.
  for (const std::uint32_t route : {0u, 7u}) {
    VehicleSpec bad;
    bad.timing_track = route;
    const absl::Status status = world.Spawn({VehicleSpec{}, bad}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("[1].timing_track: "));
  }
  VehicleSpec scanning;
  scanning.track_sensor = TrackSensorSpec{.beam_angles_rad = {0.0, 4.0}};
  EXPECT_THAT(world.Spawn({scanning}).status().message(),
              HasSubstr("track_sensor.beam_angles_rad[1]"));
  EXPECT_EQ(world.vehicle_count(), 4u);

  // No track in the world: nobody is timed, and track sensors have nothing to read.
  World trackless = MakeWorld({Straight()});
  ASSERT_TRUE(trackless.Spawn({VehicleSpec{}}).ok());
  EXPECT_TRUE(trackless.TrackReadings().empty());
  scanning.track_sensor = TrackSensorSpec{};
  EXPECT_THAT(trackless.Spawn({scanning}).status().message(),
              HasSubstr("track_sensor: the vehicle is timed on no track"));
}

// Lap time = 2 pi r / v for a car going round at constant speed, to well within a tick (the
// line's crossing is interpolated within its tick); sector splits by the same rule.
TEST(WorldRacing, LapsOfACarAtConstantSpeedTakeTheirClosedFormTime) {
  // Sectors at a quarter and a half of the polygon's length.
  const World probe = MakeWorld({Circle()});
  const double length = probe.params().routes[0].length_m;
  World world = MakeWorld({Circle(72, {length / 4, length / 2})});
  constexpr double kSpeed = 20.0;
  const absl::StatusOr<std::vector<VehicleId>> ids = world.Spawn({Circler(kSpeed)});
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_TRUE(world.SetInputs({CirclerInput((*ids)[0], kSpeed)}).ok());
  const double lap_s = 2 * std::numbers::pi * kRadius_m / kSpeed;  // 31.4 s.
  std::vector<VehicleLapEvent> events;
  while (world.sim_time_s() < 2.5 * lap_s) {
    world.Step();
    events.insert(events.end(), world.lap_events().begin(), world.lap_events().end());
  }
  const std::vector<VehicleTrackReading> readings = world.TrackReadings();
  ASSERT_EQ(readings.size(), 1u);
  const LapProgress& progress = readings[0].progress;
  EXPECT_EQ(progress.laps_completed, 2u);
  const double dt = 1.0 / kTickRate_hz;
  // The car's circle is not the polygon: the crossing's interpolation errs by the polygon's
  // sag over a tick's travel, far below a tick.
  ASSERT_TRUE(progress.last_lap_s.has_value());
  EXPECT_NEAR(*progress.last_lap_s, lap_s, 0.05 * dt);
  EXPECT_NEAR(*progress.best_lap_s, lap_s, 0.05 * dt);
  EXPECT_NEAR(progress.lap_time_s, 0.5 * lap_s, 2 * dt);
  EXPECT_TRUE(progress.position.on_track);
  EXPECT_EQ(progress.off_track_count, 0u);
  // 3 sectors a lap, each ended by an event, the last with the lap's; the first lap's at
  // its time.
  std::vector<std::pair<LapEvent::Kind, std::uint32_t>> kinds;
  for (const VehicleLapEvent& event : events) {
    EXPECT_EQ(event.id, (*ids)[0]);
    kinds.emplace_back(event.event.kind, event.event.sector);
  }
  using enum LapEvent::Kind;
  EXPECT_THAT(kinds, ElementsAre(std::pair{kSector, 0u}, std::pair{kSector, 1u},
                                 std::pair{kSector, 2u}, std::pair{kLap, 2u},
                                 std::pair{kSector, 0u}, std::pair{kSector, 1u},
                                 std::pair{kSector, 2u}, std::pair{kLap, 2u},
                                 std::pair{kSector, 0u}));
  EXPECT_NEAR(events[3].event.time_s, lap_s, 0.05 * dt);
  EXPECT_NEAR(events[3].event.duration_s, lap_s, 0.05 * dt);
  // The polygon is regular: a quarter of its length is a quarter of a turn. The car's circle
  // is the track's moved by up to half a tick's travel (its integration turns before it
  // moves), so each boundary is crossed up to half a tick early or late: a sector's time is
  // within a tick of its share of the lap (the lap itself ends where it began: exact).
  EXPECT_NEAR(events[0].event.duration_s, lap_s / 4, dt);
  EXPECT_NEAR(events[1].event.duration_s, lap_s / 4, dt);
  EXPECT_NEAR(events[2].event.duration_s, lap_s / 2, dt);
  EXPECT_NEAR(events[0].event.duration_s + events[1].event.duration_s +
                  events[2].event.duration_s, lap_s, 0.05 * dt);
  EXPECT_THAT(progress.last_sector_times_s.size(), 3u);
}

// The track sensors the world reads are those of the geometry for the vehicle's pose; a
// removed vehicle takes its tracker with it and leaves the others' alone.
TEST(WorldRacing, TrackSensorsAndRemovalsKeepEveryReadingWithItsVehicle) {
  World world = MakeWorld({Circle()});
  VehicleSpec plain = Circler(10.0);
  VehicleSpec sensing = Circler(10.0);
  sensing.track_sensor = TrackSensorSpec{};  // TORCS's 19 beams.
  sensing.initial_pose = {.x_m = 30.0, .y_m = 2.0, .yaw_rad = 0.1};
  const absl::StatusOr<std::vector<VehicleId>> ids = world.Spawn({plain, sensing, plain});
  ASSERT_TRUE(ids.ok()) << ids.status();
  for (const VehicleId id : *ids) ASSERT_TRUE(world.SetInputs({CirclerInput(id, 10.0)}).ok());
  for (int tick = 0; tick < 100; ++tick) world.Step();
  const std::vector<VehicleTrackReading> before = world.TrackReadings();
  ASSERT_EQ(before.size(), 3u);
  ASSERT_TRUE(before[1].sensor.has_value());
  EXPECT_FALSE(before[0].sensor.has_value());
  const std::ptrdiff_t row = world.state().vehicles.Find((*ids)[1]);
  const TrackSensorReading oracle =
      ReadTrackSensors(*world.params().tracks[0], before[1].progress.position,
                       world.state().vehicles.PoseAt(row), DefaultTrackBeamAngles(), 200.0);
  EXPECT_EQ(before[1].sensor->edge_distances_m, oracle.edge_distances_m);
  EXPECT_EQ(before[1].sensor->edge_distances_m.size(), 19u);
  EXPECT_EQ(before[1].sensor->angle_rad, oracle.angle_rad);
  // The heading relative to the track's axis, against libm's arctangent.
  const RouteVertex& axis = world.params().tracks[0]->route.vertices[before[1].progress.position.segment];
  double expected = world.state().vehicles.yaw_rad[row] - std::atan2(axis.dir_y, axis.dir_x);
  expected = std::remainder(expected, 2 * std::numbers::pi);
  EXPECT_NEAR(before[1].progress.position.heading_rad, expected, 1e-12);
  EXPECT_NEAR(before[1].sensor->angle_rad, expected, 1e-12);
  EXPECT_NE(expected, 0.0);
  EXPECT_EQ(before[1].sensor->track_position, oracle.track_position);
  const std::uint64_t beams = world.state().scan_beams;
  EXPECT_EQ(beams, 19u);

  // The same world, stepped on without a removal (the vehicles do not meet: the others' laps
  // are their own).
  World twin = world;
  ASSERT_TRUE(world.Remove((*ids)[0]).ok());
  for (int tick = 0; tick < 50; ++tick) {
    world.Step();
    twin.Step();
  }
  const std::vector<VehicleTrackReading> after = world.TrackReadings();
  const std::vector<VehicleTrackReading> unremoved = twin.TrackReadings();
  ASSERT_EQ(after.size(), 2u);
  ASSERT_EQ(unremoved.size(), 3u);
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].id, (*ids)[i + 1]);
    EXPECT_EQ(after[i].progress.distance_m, unremoved[i + 1].progress.distance_m);
    EXPECT_EQ(after[i].progress.position.lateral_m, unremoved[i + 1].progress.position.lateral_m);
    EXPECT_EQ(after[i].sensor.has_value(), i == 0);
  }
  EXPECT_GT(after[0].progress.distance_m, before[1].progress.distance_m + 9.0);  // 1 s at 10 m/s.
  ASSERT_TRUE(world.Remove((*ids)[1]).ok());
  EXPECT_EQ(world.state().scan_beams, 0u);
}

// A point `back_m` metres behind the line on the circle, heading along it.
Pose2 OnCircleBehindTheLine(double back_m) {
  const double theta = -std::numbers::pi / 2 - back_m / kRadius_m;
  return {kRadius_m * std::cos(theta), kRadius_m + kRadius_m * std::sin(theta),
          theta + std::numbers::pi / 2};
}

// A race called in a world: the countdown with a jump start, the start, the laps, the flag
// and the finish, with the standings the rules give; a copy of the world mid-race runs on to
// the same results.
TEST(WorldRacing, ARaceRunsFromItsCountdownToItsResults) {
  World world = MakeWorld({Circle()});
  const double length = world.params().routes[0].length_m;
  constexpr double kSpeed = 20.0;
  VehicleSpec jumper = Circler(kSpeed);  // Rolls through the countdown: it jumps the start.
  VehicleSpec waiter = Circler(0.0);
  waiter.initial_pose = OnCircleBehindTheLine(10.0);
  const absl::StatusOr<std::vector<VehicleId>> ids = world.Spawn({jumper, waiter});
  ASSERT_TRUE(ids.ok()) << ids.status();
  const VehicleId a = (*ids)[0], b = (*ids)[1];
  ASSERT_TRUE(world.SetInputs({CirclerInput(a, kSpeed)}).ok());
  const RaceRules rules{.laps = 1, .countdown_s = 1.0};
  ASSERT_TRUE(world.StartRace(0, rules, {}, false).ok());  // Both: every car timed on it.
  ASSERT_TRUE(world.RaceNow().has_value());
  EXPECT_EQ(world.RaceNow()->phase, RacePhase::kCountdown);
  EXPECT_DOUBLE_EQ(world.RaceNow()->start_time_s, 1.0);

  std::vector<RaceEvent> events;
  std::optional<World> copy;
  while (world.RaceNow()->phase != RacePhase::kFinished && world.sim_time_s() < 120.0) {
    world.Step();
    events.insert(events.end(), world.race_events().begin(), world.race_events().end());
    if (world.RaceNow()->phase != RacePhase::kCountdown) {
      // Green: b goes, turning at the rate that keeps it on the circle as it speeds up.
      VehicleInput go = CirclerInput(b, kSpeed);
      go.yaw_rate_radps = world.MotionOf(b)->speed_mps / kRadius_m;
      ASSERT_TRUE(world.SetInputs({go}).ok());
    }
    if (world.tick() == 500) copy.emplace(world);
  }
  const RaceStatus status = *world.RaceNow();
  ASSERT_EQ(status.phase, RacePhase::kFinished);

  std::vector<std::pair<RaceEvent::Kind, VehicleId>> kinds;
  for (const RaceEvent& event : events) kinds.emplace_back(event.kind, event.vehicle);
  using enum RaceEvent::Kind;
  EXPECT_THAT(kinds, ElementsAre(std::pair{kJumpStart, a}, std::pair{kPenalty, a},
                                 std::pair{kStart, VehicleId{0}}, std::pair{kSector, a},
                                 std::pair{kLap, a}, std::pair{kFinish, a},
                                 std::pair{kSector, b}, std::pair{kLap, b},
                                 std::pair{kFinish, b}, std::pair{kRaceFinished, VehicleId{0}}));
  // a is 20 m past the line at the start (its lap 1 is partial); b 10 m behind, from rest.
  const double dt = 1.0 / kTickRate_hz;
  const RaceEvent& lap_a = events[4];
  const RaceEvent& lap_b = events[7];
  EXPECT_NEAR(lap_a.time_s, (length - kSpeed * rules.countdown_s) / kSpeed, 2 * dt);
  EXPECT_GT(lap_b.time_s, (length + 10.0) / kSpeed);
  EXPECT_LT(lap_b.time_s, lap_a.time_s + rules.penalty_jump_start_s);
  // b wins: a's 10 s for the jump start outweigh its lead.
  ASSERT_EQ(status.standings.size(), 2u);
  EXPECT_EQ(status.standings[0].vehicle, b);
  EXPECT_EQ(status.standings[1].vehicle, a);
  EXPECT_EQ(status.standings[1].jump_starts, 1u);
  EXPECT_DOUBLE_EQ(status.standings[1].penalties_s, rules.penalty_jump_start_s);
  ASSERT_TRUE(status.standings[1].gap_s.has_value());
  EXPECT_NEAR(*status.standings[1].gap_s,
              lap_a.time_s + rules.penalty_jump_start_s - lap_b.time_s, 1e-9);
  EXPECT_EQ(status.standings[0].off_tracks + status.standings[0].contacts, 0u);

  // The copy taken mid-race, stepped on alone, ends the same.
  ASSERT_TRUE(copy.has_value());
  while (copy->RaceNow()->phase != RacePhase::kFinished && copy->sim_time_s() < 120.0) copy->Step();
  EXPECT_EQ(copy->tick(), world.tick());
  EXPECT_EQ(copy->StateHash(), world.StateHash());  // The race is in the hash.
  const RaceStatus copied = *copy->RaceNow();
  ASSERT_EQ(copied.standings.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(copied.standings[i].vehicle, status.standings[i].vehicle);
    EXPECT_EQ(copied.standings[i].race_time_s, status.standings[i].race_time_s);
  }
  // A race that finished gives way to the next one (and the hash sees the new race).
  const std::uint64_t finished = world.StateHash();
  EXPECT_TRUE(world.StartRace(0, rules, {b}, false).ok());
  EXPECT_NE(world.StateHash(), finished);
  EXPECT_EQ(world.RaceNow()->standings.size(), 1u);
}

// Contacts that begin during the race cost their penalty: a car through an obstacle on the
// track (the policy reports it and lets it through) gets one.
TEST(WorldRacing, AContactDuringTheRaceIsPenalized) {
  World world = MakeWorld({Circle()});
  constexpr double kSpeed = 20.0;
  const absl::StatusOr<std::vector<VehicleId>> ids = world.Spawn({Circler(kSpeed)});
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(world.SetInputs({CirclerInput((*ids)[0], kSpeed)}).ok());
  // A box on the track a quarter of the way round.
  ASSERT_TRUE(world.AddObstacles({{.center_x_m = kRadius_m, .center_y_m = kRadius_m}}).ok());
  ASSERT_TRUE(world.StartRace(0, {.laps = 1, .countdown_s = 0.0}, {}, false).ok());
  std::vector<RaceEvent> penalties;
  while (world.sim_time_s() < 10.0) {
    world.Step();
    for (const RaceEvent& event : world.race_events()) {
      if (event.kind == RaceEvent::Kind::kPenalty) penalties.push_back(event);
    }
  }
  ASSERT_EQ(penalties.size(), 1u);
  EXPECT_EQ(penalties[0].cause, RaceEvent::Cause::kContact);
  EXPECT_EQ(world.RaceNow()->standings[0].contacts, 1u);
  EXPECT_EQ(world.RaceNow()->standings[0].penalties_s, RaceRules{}.penalty_contact_s);
}

TEST(WorldRacing, StartRaceChecksItsTrackCarsAndRules) {
  World world = MakeWorld({Straight(), Circle()});
  const absl::StatusOr<std::vector<VehicleId>> ids = world.Spawn({Circler(0.0)});
  ASSERT_TRUE(ids.ok());
  const VehicleId car = (*ids)[0];
  struct Case {
    std::uint32_t route;
    RaceRules rules;
    std::vector<VehicleId> vehicles;
    absl::StatusCode code;
    const char* message;
  };
  for (const Case& c : std::vector<Case>{
           {0, {}, {}, absl::StatusCode::kInvalidArgument, "track: route 0 is not a race track"},
           {7, {}, {}, absl::StatusCode::kInvalidArgument, "track: route 7"},
           {1, {.laps = 0}, {}, absl::StatusCode::kInvalidArgument, "race.laps"},
           {1, {}, {car, 99}, absl::StatusCode::kNotFound, "vehicle_ids[1]: no vehicle 99"},
           {1, {}, {car, car}, absl::StatusCode::kInvalidArgument,
            "vehicle_ids[1]: vehicle 1 is named twice"},
       }) {
    const absl::Status status = world.StartRace(c.route, c.rules, c.vehicles, false);
    EXPECT_EQ(status.code(), c.code) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
    EXPECT_FALSE(world.RaceNow().has_value()) << "a failed call changes nothing";
  }
  ASSERT_TRUE(world.StartRace(1, {}, {}, false).ok());
  const absl::Status again = world.StartRace(1, {.laps = 5}, {}, false);
  EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(again.message(), HasSubstr("replace: a race is running"));
  EXPECT_EQ(world.RaceNow()->rules.laps, 3u);
  ASSERT_TRUE(world.StartRace(1, {.laps = 5}, {}, true).ok());
  EXPECT_EQ(world.RaceNow()->rules.laps, 5u);
}

// Placed on the grid: each car at rest on its slot in the order named, its lap timer started
// again there; a built-in driver waits for the start (no jump start), then races.
TEST(WorldRacing, CarsPlacedOnTheGridWaitForTheStart) {
  World world = MakeWorld({Circle()});
  VehicleSpec ai;
  ai.model = KinematicBicycleSpec{};
  ai.initial_pose = {0.0, 0.0, 0.0};
  ai.driver = RouteFollowerSpec{.route = 0, .target_speed_mps = 12.0};
  const absl::StatusOr<std::vector<VehicleId>> ids = world.Spawn({ai, Circler(0.0)});
  ASSERT_TRUE(ids.ok()) << ids.status();
  const VehicleId driven = (*ids)[0], student = (*ids)[1];
  for (int i = 0; i < 500; ++i) world.Step();  // The AI car is 10 s round the circle.
  ASSERT_GT(world.TrackReadings()[0].progress.distance_m, 50.0);

  // Grid: the student's car first (on the line), the AI car 8 m behind it.
  const std::vector<Pose2> grid = {OnCircleBehindTheLine(0.0), OnCircleBehindTheLine(8.0),
                                   OnCircleBehindTheLine(16.0)};
  const absl::Status too_few =
      world.StartRace(0, {}, {student, driven}, false, absl::MakeConstSpan(grid).first(1));
  EXPECT_THAT(too_few.message(), HasSubstr("grid: 2 cars, but only 1 grid slots"));
  ASSERT_TRUE(world.StartRace(0, {.laps = 1, .countdown_s = 2.0}, {student, driven}, false, grid)
                  .ok());
  std::vector<VehicleSnapshot> cars = world.Snapshot();
  EXPECT_NEAR(cars[0].pose.x_m, grid[1].x_m, 1e-9);  // The AI car (the lower id).
  EXPECT_NEAR(cars[0].pose.y_m, grid[1].y_m, 1e-9);
  EXPECT_EQ(cars[0].speed_mps, 0.0);
  EXPECT_NEAR(cars[1].pose.x_m, grid[0].x_m, 1e-9);
  // Its lap timer starts again on the grid: 8 m behind the line.
  EXPECT_NEAR(world.TrackReadings()[0].progress.distance_m, -8.0, 0.05);
  EXPECT_EQ(world.TrackReadings()[0].progress.laps_completed, 0u);

  std::vector<RaceEvent> events;
  while (world.RaceNow()->phase != RacePhase::kFinished && world.sim_time_s() < 400.0) {
    world.Step();
    if (world.RaceNow()->phase == RacePhase::kCountdown) {
      EXPECT_EQ(world.Snapshot()[0].speed_mps, 0.0) << "the AI car waits for the start";
    }
    events.insert(events.end(), world.race_events().begin(), world.race_events().end());
  }
  for (const RaceEvent& event : events) {
    EXPECT_NE(event.kind, RaceEvent::Kind::kJumpStart);
  }
  const RaceStatus status = *world.RaceNow();
  ASSERT_EQ(status.phase, RacePhase::kFinished);
  EXPECT_EQ(status.standings[0].vehicle, driven);
  EXPECT_TRUE(status.standings[0].finished);
  EXPECT_EQ(status.standings[1].vehicle, student);
  // The student's car never went: not finished 120 s after the flag, it retired then (its
  // time stops there).
  EXPECT_TRUE(status.standings[1].retired);
  EXPECT_NEAR(status.standings[1].race_time_s, status.standings[0].race_time_s + 120.0, 0.03);
}

// A car with a built-in driver is held by the server during the countdown: braking to a
// stop from where the race found it is no jump start. A slot another car stands on is
// refused, changing nothing; a crashed car put on the grid is repaired.
TEST(WorldRacing, HeldCarsJumpNoStartAndTheGridMustBeClear) {
  World world = MakeWorld({Circle()});
  VehicleSpec ai;
  ai.model = KinematicBicycleSpec{};
  ai.driver = RouteFollowerSpec{.route = 0, .target_speed_mps = 12.0};
  VehicleSpec parked = Circler(0.0);
  parked.initial_pose = OnCircleBehindTheLine(30.0);
  const absl::StatusOr<std::vector<VehicleId>> ids = world.Spawn({ai, parked});
  ASSERT_TRUE(ids.ok()) << ids.status();
  const VehicleId driven = (*ids)[0], other = (*ids)[1];
  for (int i = 0; i < 250; ++i) world.Step();  // 5 s: the AI car is at speed.
  ASSERT_GT(world.MotionOf(driven)->speed_mps, 5.0);
  ASSERT_TRUE(world.StartRace(0, {.laps = 1, .countdown_s = 10.0}, {driven}, false).ok());
  for (int i = 0; i < 400; ++i) {
    world.Step();
    for (const RaceEvent& event : world.race_events()) {
      EXPECT_NE(event.kind, RaceEvent::Kind::kJumpStart);
    }
  }
  EXPECT_EQ(world.MotionOf(driven)->speed_mps, 0.0);  // Stopped, waiting for green.

  // The parked car (not entered) stands 30 m behind the line: that slot is not free.
  const std::uint64_t before = world.StateHash();
  const absl::Status blocked = world.StartRace(
      0, {}, {driven}, true, std::vector<Pose2>{OnCircleBehindTheLine(31.0)});
  EXPECT_EQ(blocked.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(blocked.message(),
              HasSubstr(absl::StrCat("grid[0]: vehicle ", other, " (not in this race) stands")));
  EXPECT_EQ(world.StateHash(), before);
  // Two slots the cars would touch on.
  const absl::Status overlapping = world.StartRace(
      0, {}, {driven, other}, true,
      std::vector<Pose2>{OnCircleBehindTheLine(31.0), OnCircleBehindTheLine(33.0)});
  EXPECT_EQ(overlapping.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(overlapping.message(), HasSubstr("its slot overlaps grid["));
  EXPECT_EQ(world.RaceNow()->rules.countdown_s, 10.0);  // The race called first runs on.
  // Entered, it is placed too.
  ASSERT_TRUE(world.StartRace(0, {}, {driven, other}, true,
                              std::vector<Pose2>{OnCircleBehindTheLine(31.0),
                                                 OnCircleBehindTheLine(45.0)})
                  .ok());
}

// The grid's check compares bodies, not reference points: a kinematic bicycle's reference is
// its rear axle, 1.35 m behind its body's centre. Two such cars nose to nose, their axles
// 4.95 m apart, overlap by 1.8 m (bodies 4.5 m long); at 8 m they are clear.
TEST(WorldRacing, TheGridCheckComparesBodiesNotReferencePoints) {
  for (const auto& [gap_m, clear] : {std::pair{4.95, false}, std::pair{8.0, true}}) {
    World world = MakeWorld({Circle()});
    VehicleSpec racer, parked;
    racer.model = KinematicBicycleSpec{};
    parked.model = KinematicBicycleSpec{};
    parked.initial_pose = {gap_m, -60.0, std::numbers::pi};  // Facing the slot.
    const absl::StatusOr<std::vector<VehicleId>> ids = world.Spawn({racer, parked});
    ASSERT_TRUE(ids.ok());
    const absl::Status status = world.StartRace(0, {}, {(*ids)[0]}, false,
                                                std::vector<Pose2>{{0.0, -60.0, 0.0}});
    EXPECT_EQ(status.ok(), clear) << gap_m << ": " << status;
  }
}

TEST(WorldRacing, ACrashedCarPutOnTheGridIsRepaired) {
  absl::StatusOr<World> created = World::Create({.tick_rate_hz = kTickRate_hz, .max_vehicles = 10,
                                                 .collision_policy = CollisionPolicy::kStop,
                                                 .routes = {Circle()}});
  ASSERT_TRUE(created.ok());
  World& world = *created;
  VehicleSpec a = Circler(0.0), b = Circler(0.0);
  b.initial_pose = {1.0, 0.0, 0.0};  // Overlapping a: both crash at the first step.
  const absl::StatusOr<std::vector<VehicleId>> ids = world.Spawn({a, b});
  ASSERT_TRUE(ids.ok());
  world.Step();
  ASSERT_TRUE(world.Snapshot()[0].crashed && world.Snapshot()[1].crashed);
  ASSERT_TRUE(world.StartRace(0, {.laps = 1, .countdown_s = 0.0}, {}, false,
                              std::vector<Pose2>{OnCircleBehindTheLine(0.0),
                                                 OnCircleBehindTheLine(20.0)})
                  .ok());
  EXPECT_FALSE(world.Snapshot()[0].crashed);
  EXPECT_FALSE(world.Snapshot()[1].crashed);
  ASSERT_TRUE(world.SetInputs({CirclerInput((*ids)[0], 10.0)}).ok());
  for (int i = 0; i < 50; ++i) world.Step();
  // It goes again: 1 s at the body's 3 m/s² from rest.
  EXPECT_NEAR(world.MotionOf((*ids)[0])->speed_mps, 3.0, 1e-9);
}

}  // namespace
}  // namespace pitlane::sim
