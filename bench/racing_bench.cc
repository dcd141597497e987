// What racing costs per vehicle per tick (issue 18). Run:
//   build/bin/racing_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// 10,000 vehicles spread round a 2.4 km oval (the shipped scenarios' shape, 12 m wide, points
// 2 m apart), each moving 0.5 m a tick along it with a lateral wobble:
// BM_TrackProgress: each one's LapTracker::Update (its place on the track, laps, sectors).
// BM_TrackSensors: each one's 19 TORCS beams cast on the edges through the grid, and
// BM_TrackSensorsBruteForce the same by testing every edge segment (100 vehicles: the
// baseline the grid is measured against).
// BM_WorldStepTimed: a world's whole step of 10,000 physics bodies driving straight on (and,
// at the bends, off) a 62 km oval, 6.2 m apart (no contacts), with (timed:1) and without
// (timed:0) the oval as the world's route: what timing every vehicle on its race track adds
// to a tick, side by side; and (racing:1) with every vehicle entered in a race on it as well
// (World::StartRace: its own lap timers, contacts, standings kept), what a race adds.
#include <cmath>
#include <vector>

#include "benchmark/benchmark.h"
#include "server/sim/racing/lap_tracker.h"
#include "server/sim/racing/track.h"
#include "server/sim/racing/track_sensors.h"
#include "server/sim/testing/test_routes.h"
#include "server/sim/world/world.h"

namespace pitlane::sim {
namespace {

const TrackGeometry& Oval() {
  static const TrackGeometry* track = new TrackGeometry(*MakeTrackGeometry(
      *MakeRouteParams({.points = ::pitlane::sim::Oval(800.0, 100.0, 2.0), .closed = true,
                        .lane_width_m = 12.0}),
      {800.0, 1600.0}));
  return *track;
}

// Vehicle i at tick t: on the centre line at arc length spread evenly plus 0.5 m a tick, a
// few metres to the side.
Pose2 PoseOf(int i, int n, int t) {
  const TrackGeometry& track = Oval();
  const double s = track.route.length_m * i / n + 0.5 * t;
  std::uint32_t segment = 0;
  const RoutePoint p = RoutePointAt(track.route, s, segment);
  const RouteVertex& v = track.route.vertices[segment];
  const double lateral = 4.0 * std::sin(0.01 * t + i);
  return {.x_m = p.x_m - v.dir_y * lateral, .y_m = p.y_m + v.dir_x * lateral,
          .yaw_rad = std::atan2(v.dir_y, v.dir_x) + 0.1 * std::sin(0.02 * t + i)};
}

void BM_TrackProgress(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  constexpr int kTicks = 64;
  std::vector<std::vector<Pose2>> poses(kTicks);
  for (int t = 0; t < kTicks; ++t) {
    for (int i = 0; i < n; ++i) poses[t].push_back(PoseOf(i, n, t));
  }
  std::vector<LapTracker> trackers;
  for (int i = 0; i < n; ++i) trackers.emplace_back(Oval(), poses[0][i]);
  int t = 1;
  std::vector<LapEvent> events;
  for (auto _ : state) {
    events.clear();
    for (int i = 0; i < n; ++i) trackers[i].Update(poses[t][i], 0.02, &events);
    t = t + 1 < kTicks ? t + 1 : 1;
    benchmark::DoNotOptimize(events.data());
  }
  state.counters["per_vehicle"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}
BENCHMARK(BM_TrackProgress)->Arg(10000)->Unit(benchmark::kMicrosecond);

template <bool kBruteForce>
void BM_Sensors(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const std::vector<double> beams = DefaultTrackBeamAngles();
  std::vector<Pose2> poses;
  std::vector<TrackPosition> positions;
  for (int i = 0; i < n; ++i) {
    poses.push_back(PoseOf(i, n, 7));
    positions.push_back(PositionOnTrack(
        Oval(), poses.back(),
        ProjectOntoRoute(Oval().route, poses.back().x_m, poses.back().y_m).segment));
  }
  double sum = 0.0;
  for (auto _ : state) {
    for (int i = 0; i < n; ++i) {
      if constexpr (kBruteForce) {
        for (const double angle : beams) {
          const double yaw = poses[i].yaw_rad + angle;
          sum += CastOnEdgesBruteForce(Oval(), poses[i].x_m, poses[i].y_m, std::cos(yaw),
                                       std::sin(yaw), 200.0);
        }
      } else {
        sum += ReadTrackSensors(Oval(), positions[i], poses[i], beams, 200.0)
                   .edge_distances_m[0];
      }
    }
  }
  benchmark::DoNotOptimize(sum);
  state.counters["per_vehicle"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}
void BM_TrackSensors(benchmark::State& state) { BM_Sensors<false>(state); }
void BM_TrackSensorsBruteForce(benchmark::State& state) { BM_Sensors<true>(state); }
BENCHMARK(BM_TrackSensors)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrackSensorsBruteForce)->Arg(100)->Unit(benchmark::kMillisecond);

// A world of `n` physics bodies on a 62 km oval, 6.2 m apart on its centre line, heading
// along it at 10 m/s (plus `speed_step` more each, one after another); the oval is the
// world's route (every vehicle timed on it) when `timed`.
World OvalWorld(int n, bool timed, double speed_step = 0.0) {
  const RouteParams oval = *MakeRouteParams(
      {.points = ::pitlane::sim::Oval(14000.0, 1000.0, 2.0), .closed = true, .lane_width_m = 12.0});
  WorldSpec spec{.tick_rate_hz = 50.0, .max_vehicles = static_cast<std::uint32_t>(n)};
  if (timed) {
    spec.routes.push_back({.points = ::pitlane::sim::Oval(14000.0, 1000.0, 2.0), .closed = true,
                           .lane_width_m = 12.0});
  }
  World world = *World::Create(spec);
  std::vector<VehicleSpec> specs(n);
  for (int i = 0; i < n; ++i) {
    std::uint32_t segment = 0;
    const RoutePoint p = RoutePointAt(oval, oval.length_m * i / n, segment);
    const RouteVertex& v = oval.vertices[segment];
    specs[i].model = PhysicsBodySpec{.drag_factor_per_frame = 1.0};
    specs[i].initial_speed_mps = 10.0 + speed_step * i;
    specs[i].initial_pose = {.x_m = p.x_m, .y_m = p.y_m, .yaw_rad = std::atan2(v.dir_y, v.dir_x)};
  }
  const std::vector<VehicleId> ids = *world.Spawn(specs);
  std::vector<VehicleInput> inputs;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    inputs.push_back({.id = ids[i], .target_speed_mps = specs[i].initial_speed_mps});
  }
  (void)world.SetInputs(inputs);
  return world;
}

void PerVehicle(benchmark::State& state, int n) {
  state.counters["per_vehicle"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}

void BM_WorldStepTimed(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool timed = state.range(1) != 0;
  const bool racing = state.range(2) != 0;
  World world = OvalWorld(n, timed);
  if (world.state().timed.size() != (timed ? static_cast<std::size_t>(n) : 0)) {
    state.SkipWithError("timing");
  }
  if (racing && !world.StartRace(0, {.laps = 1000, .countdown_s = 0.0}, {}, false).ok()) {
    state.SkipWithError("race");
  }
  world.Step();  // The start.
  for (auto _ : state) world.Step();
  if (racing && world.RaceNow()->standings.size() != static_cast<std::size_t>(n)) {
    state.SkipWithError("racing");
  }
  PerVehicle(state, n);
}
BENCHMARK(BM_WorldStepTimed)->ArgNames({"vehicles", "timed", "racing"})
    ->Args({10000, 0, 0})->Args({10000, 1, 0})->Args({10000, 1, 1})->Unit(benchmark::kMicrosecond);

// A race's standings for its n cars (sorted by the rules), as every published frame makes
// them while a race runs.
void BM_RaceStandings(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  World world = OvalWorld(n, /*timed=*/true, /*speed_step=*/0.001);
  if (!world.StartRace(0, {.laps = 1000, .countdown_s = 0.0}, {}, false).ok()) {
    state.SkipWithError("race");
  }
  for (int t = 0; t < 10; ++t) world.Step();
  for (auto _ : state) benchmark::DoNotOptimize(world.RaceNow());
  PerVehicle(state, n);
}
BENCHMARK(BM_RaceStandings)->Arg(20)->Arg(10000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace pitlane::sim

BENCHMARK_MAIN();
