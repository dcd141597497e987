// Cost of collision detection and of the range scan (issue "collision that scales"), on the
// workload of /work/shared/reference/collision.md: N cars of 4.5 m x 1.8 m with random
// headings at uniformly random positions in a square sized for the density (urban: one car per
// 150 m², parking: one per 15 m²), every scene from a fixed seed. Everything runs on one
// thread. Run (about 70 s on the 2-vCPU dev machine):
//   build/bin/collision_bench --benchmark_repetitions=3 --benchmark_report_aggregates_only=true
// or pick a group with --benchmark_filter='^BroadPhase/' (NarrowPhase/, Step/, RangeScan/).
//
// Counters:
//   per_vehicle, per_pair, per_beam  seconds per item (shown with an n or u suffix).
//   candidates     pairs the grid reported (AABBs overlap), per vehicle.
//   examined       same-cell entry pairs the grid looked at, per vehicle.
//   true_pairs     pairs whose boxes touch (CollideBoxes), per vehicle, counted once outside
//                  the timing: all pairs up to N = 10,000, a sort-and-sweep on x above.
//   cand_per_true  candidates / true_pairs. (The grid's candidates are checked against a
//                  brute-force count of overlapping AABBs; a mismatch fails the benchmark.)
//   pairs, touching_frac  candidate pairs the narrow phase tests, and the share that touch.
//   contacts       contacts in effect after the last step, per vehicle.
//   hit_frac       share of beams that meet something within range.
// Step/world times World::Step; Step/dynamics_only times StepFleet on a copy of the same fleet,
// so the collision stage costs the difference of the two.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/sim/collision/collision.h"
#include "server/sim/collision/collision_stage.h"
#include "server/sim/vehicles/kinematic_bicycle.h"
#include "server/sim/world/obstacle.h"
#include "server/sim/sensors/sensors.h"
#include "server/sim/collision/spatial_grid.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/world.h"

namespace pitlane::sim {
namespace {

constexpr double kTickRate_hz = 50.0;
constexpr double kDt_s = 1.0 / kTickRate_hz;
// 25 m/s at 50 Hz: each car moves about 0.5 m per step.
constexpr double kSpeed_mps = 25.0;

enum class Density { kUrban, kParking };

const char* Name(Density density) { return density == Density::kUrban ? "urban" : "parking"; }

double AreaPerVehicle_m2(Density density) { return density == Density::kUrban ? 150.0 : 15.0; }

benchmark::Counter PerItem(double items) {
  return benchmark::Counter(
      items, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// Pair counts by an independent method, for the counters.
struct Truth {
  std::size_t aabb_pairs = 0;      // Bounding boxes overlap.
  std::size_t touching_pairs = 0;  // Boxes touch.
};

// One scene: the cars as a client would spawn them, their boxes, and the steering each holds.
struct Scene {
  double side_m = 0.0;  // Of the square.
  std::vector<VehicleSpec> specs;
  std::vector<double> steering_rad;
  VehicleTable fleet;           // The same cars, appended directly.
  CollisionScene collision;     // Boxes, bounds and the cell size the world would choose.
  std::optional<Truth> truth;   // Computed on first use.
};

std::unique_ptr<Scene> MakeScene(Density density, std::size_t n) {
  auto scene = std::make_unique<Scene>();
  scene->side_m = std::sqrt(static_cast<double>(n) * AreaPerVehicle_m2(density));
  std::mt19937_64 rng(0xC0111DE + 2 * n + (density == Density::kParking ? 1 : 0));
  std::uniform_real_distribution<double> position(0.0, scene->side_m);
  std::uniform_real_distribution<double> heading(-kPi, kPi);
  // Steering between 0.15 and 0.3 rad either way: headings change by 0.03 to 0.06 rad per step
  // and every car circles (radius 9 to 18 m), so it stays within 36 m of where it started and
  // the density of even the smallest square (387 m for 10,000 parked cars) holds however many
  // steps a benchmark runs. (With gentler steering the cars drift out of the square: at
  // 0.02-0.06 rad the contacts of parking/10000 halved over a benchmark run.)
  std::uniform_real_distribution<double> steering(0.15, 0.3);
  for (std::size_t i = 0; i < n; ++i) {
    VehicleSpec spec;  // 4.5 m x 1.8 m by default.
    spec.initial_pose = {.x_m = position(rng), .y_m = position(rng), .yaw_rad = heading(rng)};
    spec.initial_speed_mps = kSpeed_mps;
    if (!ResolveVehicleSpec(spec).ok()) std::abort();
    scene->fleet.Append(static_cast<VehicleId>(i + 1), spec);
    scene->specs.push_back(std::move(spec));
    scene->steering_rad.push_back((rng() & 1 ? 1.0 : -1.0) * steering(rng));
  }
  scene->collision.cell_size_m = GridCellSize(scene->fleet);
  IndexVehicles(scene->fleet, scene->collision);
  IndexObstacles({}, scene->collision);
  return scene;
}

Scene& GetScene(Density density, std::size_t n) {
  static auto* const scenes = new std::map<std::pair<Density, std::size_t>, std::unique_ptr<Scene>>;
  std::unique_ptr<Scene>& scene = (*scenes)[{density, n}];
  if (scene == nullptr) scene = MakeScene(density, n);
  return *scene;
}

Truth CountPairs(const Scene& scene) {
  const std::vector<Aabb>& bounds = scene.collision.vehicle_bounds;
  const std::vector<CollisionBox>& boxes = scene.collision.vehicle_boxes;
  const std::size_t n = bounds.size();
  Truth truth;
  const auto check = [&](std::size_t a, std::size_t b) {
    if (!Overlaps(bounds[a], bounds[b])) return;
    ++truth.aabb_pairs;
    if (CollideBoxes(boxes[a], boxes[b]).touching) ++truth.touching_pairs;
  };
  if (n <= 10000) {
    for (std::size_t a = 0; a < n; ++a) {
      for (std::size_t b = a + 1; b < n; ++b) check(a, b);
    }
    return truth;
  }
  // Sort and sweep on x: every pair whose x intervals overlap, each once.
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return bounds[a].min_x_m < bounds[b].min_x_m;
  });
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = i + 1; j < n && bounds[order[j]].min_x_m <= bounds[order[i]].max_x_m;
         ++j) {
      check(order[i], order[j]);
    }
  }
  return truth;
}

const Truth& GetTruth(Scene& scene) {
  if (!scene.truth.has_value()) scene.truth = CountPairs(scene);
  return *scene.truth;
}

// ---------------------------------------------------------------------------------------------
// Broad phase.

// Grid is CenterGrid (what the world uses between vehicles: one entry per car) or
// SpatialHashGrid (what it uses for obstacles: one entry per covered cell), for comparison.
template <typename Grid>
void BM_BroadPhaseGrid(benchmark::State& state, Density density, std::size_t n) {
  Scene& scene = GetScene(density, n);
  const Truth& truth = GetTruth(scene);
  Grid grid;
  std::vector<IndexPair> pairs;
  std::size_t examined = 0;
  for (auto _ : state) {
    grid.Build(scene.collision.cell_size_m, scene.collision.vehicle_bounds);
    pairs.clear();
    examined = grid.FindOverlappingPairs(pairs);
    benchmark::DoNotOptimize(pairs.data());
    benchmark::ClobberMemory();
  }
  if (pairs.size() != truth.aabb_pairs) {
    state.SkipWithError(
        absl::StrCat("grid found ", pairs.size(), " pairs, brute force ", truth.aabb_pairs)
            .c_str());
    return;
  }
  const double count = static_cast<double>(n);
  state.counters["per_vehicle"] = PerItem(count);
  state.counters["candidates"] = static_cast<double>(pairs.size()) / count;
  state.counters["examined"] = static_cast<double>(examined) / count;
  state.counters["true_pairs"] = static_cast<double>(truth.touching_pairs) / count;
  state.counters["cand_per_true"] =
      static_cast<double>(pairs.size()) / static_cast<double>(truth.touching_pairs);
}

void BM_BroadPhaseBruteForce(benchmark::State& state, Density density, std::size_t n) {
  const Scene& scene = GetScene(density, n);
  const std::vector<Aabb>& bounds = scene.collision.vehicle_bounds;
  std::vector<IndexPair> pairs;
  for (auto _ : state) {
    pairs.clear();
    for (std::uint32_t a = 0; a < n; ++a) {
      for (std::uint32_t b = a + 1; b < n; ++b) {
        if (Overlaps(bounds[a], bounds[b])) pairs.emplace_back(a, b);
      }
    }
    benchmark::DoNotOptimize(pairs.data());
    benchmark::ClobberMemory();
  }
  state.counters["per_vehicle"] = PerItem(static_cast<double>(n));
  state.counters["candidates"] = static_cast<double>(pairs.size()) / static_cast<double>(n);
}

// ---------------------------------------------------------------------------------------------
// Narrow phase: the separating-axis test on the candidate pairs the grid produces for a scene
// of 10,000 cars (touching and not, in the grid's order), as CollideVehicles runs it.

void BM_NarrowPhase(benchmark::State& state, Density density, std::size_t n) {
  const Scene& scene = GetScene(density, n);
  CenterGrid grid;
  grid.Build(scene.collision.cell_size_m, scene.collision.vehicle_bounds);
  std::vector<IndexPair> pairs;
  grid.FindOverlappingPairs(pairs);
  const std::vector<CollisionBox>& boxes = scene.collision.vehicle_boxes;
  std::size_t touching = 0;
  for (auto _ : state) {
    touching = 0;
    double depth_m = 0.0;
    for (const auto& [a, b] : pairs) {
      const BoxContact contact = CollideBoxes(boxes[a], boxes[b]);
      touching += contact.touching ? 1 : 0;
      depth_m += contact.depth_m;
    }
    benchmark::DoNotOptimize(touching);
    benchmark::DoNotOptimize(depth_m);
  }
  state.counters["per_pair"] = PerItem(static_cast<double>(pairs.size()));
  state.counters["pairs"] = static_cast<double>(pairs.size());
  state.counters["touching_frac"] =
      static_cast<double>(touching) / static_cast<double>(pairs.size());
}

// ---------------------------------------------------------------------------------------------
// The whole step: dynamics, collision stage, contact bookkeeping.

// A world holding a scene's cars with their steering, and `obstacles` static boxes (1 to 10 m
// sides, random yaw) scattered over the same square. Worlds are kept and stepped on from run
// to run: the cars circle, so the workload does not drift.
World& GetWorld(Density density, std::size_t n, std::size_t obstacles) {
  static auto* const worlds =
      new std::map<std::tuple<Density, std::size_t, std::size_t>, std::unique_ptr<World>>;
  std::unique_ptr<World>& world = (*worlds)[{density, n, obstacles}];
  if (world != nullptr) return *world;
  const Scene& scene = GetScene(density, n);
  // The contact budget above the densest scene's ~1.4 contacts per car (the default, 100,000
  // a tick, would cut 100,000 parked cars' contacts short and time the cut instead).
  world = std::make_unique<World>(*World::Create({.tick_rate_hz = kTickRate_hz,
                                                  .seed = 1,
                                                  .max_vehicles = static_cast<std::uint32_t>(n),
                                                  .max_contacts = 1'000'000}));
  if (!world->Spawn(scene.specs).ok()) std::abort();
  std::vector<VehicleInput> inputs(n);
  for (std::size_t i = 0; i < n; ++i) {
    inputs[i] = {.id = static_cast<VehicleId>(i + 1), .steering_angle_rad = scene.steering_rad[i]};
  }
  if (!world->SetInputs(inputs).ok()) std::abort();
  std::mt19937_64 rng(0x0B57AC1E + obstacles);
  std::uniform_real_distribution<double> position(0.0, scene.side_m);
  std::uniform_real_distribution<double> side(1.0, 10.0);
  std::uniform_real_distribution<double> heading(-kPi, kPi);
  std::vector<ObstacleSpec> boxes(obstacles);
  for (ObstacleSpec& box : boxes) {
    box = {.center_x_m = position(rng),
           .center_y_m = position(rng),
           .yaw_rad = heading(rng),
           .length_m = side(rng),
           .width_m = side(rng)};
  }
  if (!world->AddObstacles(boxes).ok()) std::abort();
  world->Step();  // Builds the static index: steady state from the first timed step.
  return *world;
}

void BM_StepWorld(benchmark::State& state, Density density, std::size_t n, std::size_t obstacles) {
  World& world = GetWorld(density, n, obstacles);
  for (auto _ : state) {
    world.Step();
    benchmark::ClobberMemory();
  }
  state.counters["per_vehicle"] = PerItem(static_cast<double>(n));
  state.counters["contacts"] =
      static_cast<double>(world.contacts().size()) / static_cast<double>(n);
}

void BM_StepDynamicsOnly(benchmark::State& state, Density density, std::size_t n) {
  WorldState world_state = GetWorld(density, n, 0).state();
  KinematicBicycleFleet& fleet = world_state.fleets.Get<KinematicBicycleFleet>();
  for (auto _ : state) {
    fleet.Step(kDt_s, world_state.vehicles);
    benchmark::ClobberMemory();
  }
  state.counters["per_vehicle"] = PerItem(static_cast<double>(n));
}

// ---------------------------------------------------------------------------------------------
// Range scan: 360 beams over the full circle, 50 m range, from cars at least 60 m inside the
// square (so every beam's full range lies in the crowd), one scan per iteration, cycling over
// 64 such cars.

void BM_RangeScan(benchmark::State& state, Density density, std::size_t n) {
  const Scene& scene = GetScene(density, n);
  const RangeScanSpec spec{.beam_count = 360, .field_of_view_rad = kTwoPi, .max_range_m = 50.0};
  std::vector<std::uint32_t> scanners;
  for (std::uint32_t i = 0; i < n && scanners.size() < 64; ++i) {
    const CollisionBox& box = scene.collision.vehicle_boxes[i];
    const double margin_m = 60.0;
    if (std::min({box.center_x_m, box.center_y_m, scene.side_m - box.center_x_m,
                  scene.side_m - box.center_y_m}) >= margin_m) {
      scanners.push_back(i);
    }
  }
  std::size_t next = 0;
  std::size_t beams = 0;
  std::size_t hits = 0;
  for (auto _ : state) {
    const RangeScanReading reading =
        ScanRange(spec, scanners[next], scene.collision, {}, std::nullopt);
    next = next + 1 == scanners.size() ? 0 : next + 1;
    beams += reading.ranges_m.size();
    for (const double range_m : reading.ranges_m) hits += std::isfinite(range_m) ? 1 : 0;
    benchmark::DoNotOptimize(reading.ranges_m.data());
  }
  state.counters["per_beam"] = PerItem(spec.beam_count);
  state.counters["hit_frac"] = static_cast<double>(hits) / static_cast<double>(beams);
}

// ---------------------------------------------------------------------------------------------

void RegisterAll() {
  constexpr Density kUrban = Density::kUrban;
  constexpr Density kParking = Density::kParking;
  for (const Density density : {kUrban, kParking}) {
    for (const std::size_t n : {100, 1000, 10000, 100000}) {
      const std::string suffix = absl::StrCat(Name(density), "/", n);
      benchmark::RegisterBenchmark(("BroadPhase/grid/" + suffix).c_str(),
                                   BM_BroadPhaseGrid<CenterGrid>, density, n)
          ->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(("BroadPhase/multi_cell_hash/" + suffix).c_str(),
                                   BM_BroadPhaseGrid<SpatialHashGrid>, density, n)
          ->Unit(benchmark::kMicrosecond);
      if (n <= 10000) {
        benchmark::RegisterBenchmark(("BroadPhase/brute_force/" + suffix).c_str(),
                                     BM_BroadPhaseBruteForce, density, n)
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
  for (const Density density : {kUrban, kParking}) {
    benchmark::RegisterBenchmark(absl::StrCat("NarrowPhase/", Name(density), "/10000").c_str(),
                                 BM_NarrowPhase, density, 10000)
        ->Unit(benchmark::kMicrosecond);
  }
  const std::tuple<Density, std::size_t> steps[] = {
      {kUrban, 1000}, {kUrban, 10000}, {kUrban, 100000}, {kParking, 10000}, {kParking, 100000}};
  for (const auto& [density, n] : steps) {
    const std::string suffix = absl::StrCat(Name(density), "/", n);
    benchmark::RegisterBenchmark(("Step/world/" + suffix).c_str(), BM_StepWorld, density, n,
                                 std::size_t{0})
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("Step/dynamics_only/" + suffix).c_str(), BM_StepDynamicsOnly,
                                 density, n)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("Step/world_1000_obstacles/urban/10000", BM_StepWorld, kUrban,
                               std::size_t{10000}, std::size_t{1000})
      ->Unit(benchmark::kMicrosecond);
  for (const Density density : {kUrban, kParking}) {
    benchmark::RegisterBenchmark(
        absl::StrCat("RangeScan/360_beams/", Name(density), "/10000").c_str(), BM_RangeScan,
        density, 10000)
        ->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace pitlane::sim

int main(int argc, char** argv) {
  pitlane::sim::RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
