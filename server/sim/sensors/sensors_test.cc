#include "server/sim/sensors/sensors.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/sim/collision/collision.h"
#include "server/sim/collision/collision_stage.h"
#include "server/sim/math/geometry.h"
#include "server/sim/testing/sim_test_context.h"
#include "server/sim/vehicles/kinematic_bicycle.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/obstacle.h"
#include "server/sim/world/world.h"

namespace pitlane::sim {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every test car is 4.5 m x 1.8 m with its rear axle 0.5 m from the rear, so its body centre
// lies kCentreAhead_m = 2.25 - 0.5 = 1.75 m ahead of the reference point; all three numbers
// are exact in binary, so a car at yaw 0 has its centre exactly where a test puts it.
constexpr double kCarLength_m = 4.5;
constexpr double kCarWidth_m = 1.8;
constexpr double kRearOverhang_m = 0.5;
constexpr double kCentreAhead_m = 0.5 * kCarLength_m - kRearOverhang_m;

// Distances in the hand-built scenes are below 1000 m and come out of a handful of roundings
// (sin and cos of a heading to about 1 ulp, one rotation, one subtraction, one division), so
// they are within about 1e-12 m of the exact value. 1e-9 m is far above that and far below any
// geometric mistake (a wrong face, box or beam is off by centimetres at least).
constexpr double kTolerance_m = 1e-9;
// Angles: a few roundings of values below 2 pi (1 ulp is 9e-16 there).
constexpr double kAngleTolerance_rad = 1e-12;

// The test car with its body centre at (x_m, y_m) heading yaw_rad; the centre lies
// kCentreAhead_m ahead of its reference point.
VehicleSpec CarCentredAt(double x_m, double y_m, double yaw_rad, double speed_mps = 0.0) {
  VehicleSpec car;
  car.length_m = kCarLength_m;
  car.width_m = kCarWidth_m;
  car.model = KinematicBicycleSpec{.wheelbase_m = 2.7, .rear_overhang_m = kRearOverhang_m};
  return CarAt(x_m, y_m, yaw_rad, speed_mps, car);
}

ObstacleSpec Box(double x_m, double y_m, double length_m, double width_m, double yaw_rad = 0.0) {
  return ObstacleSpec{.center_x_m = x_m,
                      .center_y_m = y_m,
                      .yaw_rad = yaw_rad,
                      .length_m = length_m,
                      .width_m = width_m};
}

// The world of these tests: 50 Hz, seed 3, walls when given.
WorldSpec TestWorld(std::optional<WorldBounds> bounds = std::nullopt,
                    std::uint32_t max_vehicles = 1000) {
  return {.tick_rate_hz = 50, .seed = 3, .max_vehicles = max_vehicles, .bounds = bounds};
}

VehicleSnapshot SnapshotOf(const World& world, VehicleId id) {
  for (VehicleSnapshot& vehicle : world.Snapshot()) {
    if (vehicle.id == id) return std::move(vehicle);
  }
  ADD_FAILURE() << "no vehicle " << id;
  return {};
}

RangeScanReading ScanOf(const World& world, VehicleId id) {
  VehicleSnapshot vehicle = SnapshotOf(world, id);
  if (!vehicle.range_scan.has_value()) {
    ADD_FAILURE() << "vehicle " << id << " has no range scan";
    return {};
  }
  return *std::move(vehicle.range_scan);
}

std::vector<NearbyObject> NearestOf(const World& world, VehicleId id) {
  VehicleSnapshot vehicle = SnapshotOf(world, id);
  if (!vehicle.nearest_objects.has_value()) {
    ADD_FAILURE() << "vehicle " << id << " has no nearest-objects sensor";
    return {};
  }
  return *std::move(vehicle.nearest_objects);
}

// The beam angle vehicle.h documents, written out independently of the implementation.
double DocumentedBeamAngle(double fov_rad, std::uint32_t beams, std::uint32_t i) {
  if (fov_rad >= kTwoPi) return -kPi + i * (kTwoPi / beams);
  if (beams == 1) return 0.0;
  return -0.5 * fov_rad + i * (fov_rad / (beams - 1));
}

// A single beam straight ahead.
RangeScanSpec ForwardBeam(double max_range_m = 50.0) {
  return RangeScanSpec{.beam_count = 1, .field_of_view_rad = 0.1, .max_range_m = max_range_m};
}

// ---------------------------------------------------------------------------------------------
// Range scan: analytic distances.

// One small box planted on each beam, at a distance that names the beam; the scanner is away
// from the origin and turned, so a beam at the wrong angle, in the wrong order or in the wrong
// frame meets no box or the wrong one.
TEST(RangeScan, BeamsFanOutAsDocumented) {
  struct Case {
    double fov_rad;
    std::uint32_t beams;
  };
  const Case cases[] = {
      {kTwoPi, 1},        // Full circle, one beam: it points backwards (-pi).
      {kTwoPi, 4},        // -pi, -pi/2, 0, pi/2.
      {kTwoPi, 7},        // Steps of 2 pi / 7, not reaching +pi.
      {kTwoPi, 16},       //
      {kTwoPi - 0.1, 3},  // Just short of a full circle: -fov/2, 0, +fov/2.
      {kPi / 2, 5},       // -45, -22.5, 0, 22.5, 45 degrees.
      {kPi, 2},           // -90 and +90 degrees: the ends of the fan, inclusive.
      {1.0, 1},           // One beam: straight ahead.
  };
  constexpr double kCentreX_m = 100.0;
  constexpr double kCentreY_m = -50.0;
  constexpr double kYaw_rad = 0.7;
  // Neighbouring beams are at least 0.1 rad apart and the boxes at least 10 m away, so a box
  // is at least 10 sin(0.1) = 1.0 m off any other beam, beyond its 0.58 m half diagonal: each
  // beam meets only its own box.
  constexpr double kBoxLength_m = 1.0;
  constexpr double kBoxWidth_m = 0.6;
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("fov ", c.fov_rad, " rad, ", c.beams, " beams"));
    SimTestContext sim(TestWorld());
    World& world = sim.world();
    VehicleSpec scanner = CarCentredAt(kCentreX_m, kCentreY_m, kYaw_rad);
    scanner.range_scan =
        RangeScanSpec{.beam_count = c.beams, .field_of_view_rad = c.fov_rad, .max_range_m = 50.0};
    ASSERT_TRUE(world.Spawn({scanner}).ok());
    std::vector<ObstacleSpec> boxes;
    std::vector<double> expected;
    for (std::uint32_t i = 0; i < c.beams; ++i) {
      const double distance_m = 10.0 + 2.5 * i;
      const double heading_rad = kYaw_rad + DocumentedBeamAngle(c.fov_rad, c.beams, i);
      // The box's length runs along the beam, so the beam meets its near face square on.
      boxes.push_back(Box(kCentreX_m + distance_m * std::cos(heading_rad),
                          kCentreY_m + distance_m * std::sin(heading_rad), kBoxLength_m,
                          kBoxWidth_m, heading_rad));
      expected.push_back(distance_m - 0.5 * kBoxLength_m);
    }
    ASSERT_TRUE(world.AddObstacles(boxes).ok());

    const RangeScanReading scan = ScanOf(world, 1);
    ASSERT_EQ(scan.ranges_m.size(), c.beams);
    for (std::uint32_t i = 0; i < c.beams; ++i) {
      EXPECT_THAT(scan.angle_min_rad + i * scan.angle_increment_rad,
                  DoubleNear(DocumentedBeamAngle(c.fov_rad, c.beams, i), kAngleTolerance_rad))
          << "beam " << i;
      EXPECT_THAT(scan.ranges_m[i], DoubleNear(expected[i], kTolerance_m)) << "beam " << i;
    }
  }
}

TEST(RangeScan, BoxesAheadBesideAndBehindAtTheirNearFaces) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  VehicleSpec scanner = CarCentredAt(0, 0, 0);
  // Beams at -180, -135, -90, -45, 0, 45, 90, 135 degrees.
  scanner.range_scan = RangeScanSpec{.beam_count = 8, .max_range_m = 50.0};
  ASSERT_TRUE(world.Spawn({scanner}).ok());
  // 2 m squares: ahead at 20 m (near face 19 m), to the left at 10 m (9 m), behind at 15 m
  // (14 m). The diagonal beams pass them by metres: at x = 19 the 45-degree beam is at y = 19.
  ASSERT_TRUE(world.AddObstacles({Box(20, 0, 2, 2), Box(0, 10, 2, 2), Box(-15, 0, 2, 2)}).ok());
  const RangeScanReading scan = ScanOf(world, 1);
  const double expected[] = {14, kInf, kInf, kInf, 19, kInf, 9, kInf};
  ASSERT_EQ(scan.ranges_m.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_THAT(scan.ranges_m[i], DoubleNear(expected[i], kTolerance_m)) << "beam " << i;
  }
}

// One beam straight ahead from a scanner centred at the origin facing +x.
TEST(RangeScan, ForwardBeamMeetsTheNearestFace) {
  struct Case {
    std::string name;
    std::vector<ObstacleSpec> boxes;
    std::vector<VehicleSpec> cars;
    double expected_m;
  };
  const double kHalfDiagonal_m = std::sqrt(2.0);  // Of a 2 m square.
  const std::vector<Case> cases = {
      {"box ahead", {Box(20, 0, 2, 2)}, {}, 19},
      {"box ahead turned 45 degrees: its corner",
       {Box(20, 0, 2, 2, kPi / 4)},
       {},
       20 - kHalfDiagonal_m},
      {"thin wall across the beam", {Box(30, 0, 0.1, 40)}, {}, 29.95},
      {"box whose edge lies on the beam (boxes are closed)", {Box(20, 1, 2, 2)}, {}, 19},
      {"box beside the beam", {Box(20, 3, 2, 2)}, {}, kInf},
      {"box behind", {Box(-15, 0, 2, 2)}, {}, kInf},
      {"box exactly at max range", {Box(51, 0, 2, 2)}, {}, 50},
      {"box beyond max range", {Box(52, 0, 2, 2)}, {}, kInf},
      {"nearest of two boxes", {Box(30, 0, 2, 2), Box(20, 0, 2, 2)}, {}, 19},
      {"scanner inside a box", {Box(0, 0, 10, 10)}, {}, 0},
      {"car ahead: its rear face, not its reference point",
       {},
       {CarCentredAt(12, 0, 0)},
       12 - 0.5 * kCarLength_m},
      {"car ahead crosswise: its side", {}, {CarCentredAt(12, 0, kPi / 2)}, 12 - 0.5 * kCarWidth_m},
      {"car facing us", {}, {CarCentredAt(12, 0, kPi)}, 12 - 0.5 * kCarLength_m},
      {"car in front of a box",
       {Box(20, 0, 2, 2)},
       {CarCentredAt(12, 0, 0)},
       12 - 0.5 * kCarLength_m},
      {"box in front of a car", {Box(8, 0, 2, 2)}, {CarCentredAt(12, 0, 0)}, 7},
      {"car beside the beam", {}, {CarCentredAt(12, 2, 0)}, kInf},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    SimTestContext sim(TestWorld());
    World& world = sim.world();
    VehicleSpec scanner = CarCentredAt(0, 0, 0);
    scanner.range_scan = ForwardBeam();
    ASSERT_TRUE(world.Spawn({scanner}).ok());
    ASSERT_TRUE(world.Spawn(c.cars).ok());
    ASSERT_TRUE(world.AddObstacles(c.boxes).ok());
    const RangeScanReading scan = ScanOf(world, 1);
    ASSERT_EQ(scan.ranges_m.size(), 1u);
    if (std::isinf(c.expected_m)) {
      EXPECT_EQ(scan.ranges_m[0], kInf);
    } else {
      EXPECT_THAT(scan.ranges_m[0], DoubleNear(c.expected_m, kTolerance_m));
    }
  }
}

// A wall at x = X meets a beam at world angle a from the centre (cx, cy) at (X - cx) / cos a
// (and likewise y = Y at (Y - cy) / sin a); the beam stops at the first wall.
double ExpectedWallRange(const WorldBounds& b, double cx, double cy, double a) {
  const double c = std::cos(a);
  const double s = std::sin(a);
  double t = kInf;
  if (c > 0) t = std::min(t, (b.max_x_m - cx) / c);
  if (c < 0) t = std::min(t, (b.min_x_m - cx) / c);
  if (s > 0) t = std::min(t, (b.max_y_m - cy) / s);
  if (s < 0) t = std::min(t, (b.min_y_m - cy) / s);
  return t;
}

TEST(RangeScan, WallsAreMetWhereTheBeamCrossesTheirLines) {
  const WorldBounds bounds{.min_x_m = -30, .min_y_m = -25, .max_x_m = 40, .max_y_m = 35};
  // With a 45 m range some beams (towards the far corners) see no wall: +infinity.
  constexpr double kMaxRange_m = 45.0;
  struct Case {
    double cx, cy, yaw;
  };
  for (const Case& c : {Case{0, 0, 0}, Case{5, -3, 0.3}, Case{-20, 30, -2.0}}) {
    SCOPED_TRACE(absl::StrCat("centre (", c.cx, ", ", c.cy, ") yaw ", c.yaw));
    SimTestContext sim(TestWorld(bounds));
    World& world = sim.world();
    VehicleSpec scanner = CarCentredAt(c.cx, c.cy, c.yaw);
    scanner.range_scan = RangeScanSpec{.beam_count = 16, .max_range_m = kMaxRange_m};
    ASSERT_TRUE(world.Spawn({scanner}).ok());
    const RangeScanReading scan = ScanOf(world, 1);
    ASSERT_EQ(scan.ranges_m.size(), 16u);
    int misses = 0;
    for (std::uint32_t i = 0; i < 16; ++i) {
      const double wall_m =
          ExpectedWallRange(bounds, c.cx, c.cy, c.yaw + DocumentedBeamAngle(kTwoPi, 16, i));
      // Keep the cut at max range unambiguous.
      ASSERT_GT(std::abs(wall_m - kMaxRange_m), 1e-6) << "beam " << i;
      if (wall_m > kMaxRange_m) {
        ++misses;
        EXPECT_EQ(scan.ranges_m[i], kInf) << "beam " << i;
      } else {
        // The range is relative to wall distances of tens of metres; 1e-9 m still holds.
        EXPECT_THAT(scan.ranges_m[i], DoubleNear(wall_m, kTolerance_m)) << "beam " << i;
      }
    }
    EXPECT_LT(misses, 16);
  }
}

TEST(RangeScan, ScannerBeyondAWallReadsZeroOnEveryBeam) {
  // Walls are half planes: a body centre east of the east wall is inside that wall.
  SimTestContext sim(
      TestWorld(WorldBounds{.min_x_m = -30, .min_y_m = -25, .max_x_m = 40, .max_y_m = 35}));
  World& world = sim.world();
  VehicleSpec scanner = CarCentredAt(50, 0, 0.4);
  scanner.range_scan = RangeScanSpec{.beam_count = 12};
  ASSERT_TRUE(world.Spawn({scanner}).ok());
  for (const double range_m : ScanOf(world, 1).ranges_m) EXPECT_EQ(range_m, 0.0);
}

TEST(RangeScan, NeverSeesItsOwnBodyButSeesAnotherOnTheSameSpot) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  VehicleSpec scanner = CarCentredAt(3, 4, 1.0);
  scanner.range_scan = RangeScanSpec{.beam_count = 360, .max_range_m = 1000.0};
  ASSERT_TRUE(world.Spawn({scanner}).ok());
  const RangeScanReading alone = ScanOf(world, 1);
  ASSERT_EQ(alone.ranges_m.size(), 360u);
  for (const double range_m : alone.ranges_m) EXPECT_EQ(range_m, kInf);

  ASSERT_TRUE(world.Spawn({CarCentredAt(3, 4, 1.0)}).ok());
  for (const double range_m : ScanOf(world, 1).ranges_m) EXPECT_EQ(range_m, 0.0);
}

// ---------------------------------------------------------------------------------------------
// CastRay against brute force.

// The oracle for walls: each is a half plane, so an origin on or beyond one is inside it;
// otherwise the beam stops at the nearest wall line it heads towards.
double BruteForceWalls(double ox, double oy, double dx, double dy, const WorldBounds& b) {
  if (ox <= b.min_x_m || ox >= b.max_x_m || oy <= b.min_y_m || oy >= b.max_y_m) return 0.0;
  double t = kInf;
  if (dx > 0.0) t = std::min(t, (b.max_x_m - ox) / dx);
  if (dx < 0.0) t = std::min(t, (b.min_x_m - ox) / dx);
  if (dy > 0.0) t = std::min(t, (b.max_y_m - oy) / dy);
  if (dy < 0.0) t = std::min(t, (b.min_y_m - oy) / dy);
  return t;
}

struct Ray {
  double ox = 0.0;
  double oy = 0.0;
  double dx = 1.0;
  double dy = 0.0;
  double max_range_m = 50.0;
  std::uint32_t ignore = kNoVehicle;
};

std::string Describe(const Ray& ray) {
  return absl::StrCat("origin (", ray.ox, ", ", ray.oy, ") dir (", ray.dx, ", ", ray.dy, ") max ",
                      ray.max_range_m, " ignore ", ray.ignore);
}

struct RandomScene {
  VehicleTable fleet;
  std::vector<Obstacle> obstacles;
  std::optional<WorldBounds> bounds;
  CollisionScene scene;
  double min_x_m = 0.0;  // The square the objects were scattered in.
  double min_y_m = 0.0;
  double size_m = 0.0;
};

double BruteForceRay(const Ray& ray, const RandomScene& s) {
  double best =
      s.bounds.has_value() ? BruteForceWalls(ray.ox, ray.oy, ray.dx, ray.dy, *s.bounds) : kInf;
  for (std::uint32_t k = 0; k < s.scene.vehicle_boxes.size(); ++k) {
    if (k == ray.ignore) continue;
    best = std::min(best, RayToBox(ray.ox, ray.oy, ray.dx, ray.dy, s.scene.vehicle_boxes[k]));
  }
  for (const Obstacle& obstacle : s.obstacles) {
    best = std::min(best, RayToBox(ray.ox, ray.oy, ray.dx, ray.dy, obstacle.box));
  }
  return best <= ray.max_range_m ? best : kInf;
}

class Random {
 public:
  explicit Random(std::uint64_t seed) : rng_(seed) {}
  double Uniform(double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng_);
  }
  double LogUniform(double lo, double hi) { return lo * std::pow(hi / lo, Uniform(0.0, 1.0)); }
  bool Chance(double p) { return Uniform(0.0, 1.0) < p; }
  int Int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  double Yaw() { return Chance(0.3) ? Int(0, 3) * (kPi / 2) : Uniform(-kPi, kPi); }

 private:
  std::mt19937_64 rng_;
};

// Scenes mixing every path of the grid: cells from 0.2 m to 40 m; cars and odd bodies up to
// 100 m long; obstacles from 5 cm to 80 m, and now and then thin walls kilometres long (more
// than kMaxCellsPerObject cells: the grid's large list, as are the longest bodies in small
// cells); headings often axis-aligned; sometimes centres and sizes snapped to half cells so
// that edges lie on cell borders; sometimes boundary walls; coordinates near the origin,
// negative, or millions of metres out (still far from the grid's 2^30-cell clamp).
RandomScene MakeRandomScene(Random& random) {
  RandomScene s;
  const double cell_m = random.LogUniform(0.2, 40.0);
  s.size_m = random.LogUniform(10.0, 300.0);
  const double offsets_m[] = {0.0, -1234.5, 2.5e6, -3.1e6};
  s.min_x_m = offsets_m[random.Int(0, 3)];
  s.min_y_m = offsets_m[random.Int(0, 3)];
  const bool snap = random.Chance(0.3);
  const double half_cell_m = 0.5 * cell_m;
  const auto coordinate = [&](double min_m) {
    const double v = min_m + random.Uniform(0.0, s.size_m);
    return snap ? std::round(v / half_cell_m) * half_cell_m : v;
  };

  // Up to one object per 100 m² of the square (and 60 vehicles, 50 obstacles): dense, but with
  // room for rays.
  const int most = static_cast<int>(s.size_m * s.size_m / 100.0);
  const int vehicles = random.Int(0, std::min(60, most));
  for (int i = 0; i < vehicles; ++i) {
    VehicleSpec spec;
    if (random.Chance(0.3)) {
      spec.length_m = random.LogUniform(0.3, 100.0);
      spec.width_m = random.LogUniform(0.2, 10.0);
    }
    spec.initial_pose = {coordinate(s.min_x_m), coordinate(s.min_y_m), random.Yaw()};
    auto& model = std::get<KinematicBicycleSpec>(spec.model);
    model.wheelbase_m = 0.6 * spec.length_m;
    EXPECT_TRUE(ResolveVehicleSpec(spec).ok());
    s.fleet.Append(static_cast<VehicleId>(i + 1), spec);
  }

  const int obstacles = random.Int(0, std::min(50, most));
  for (int i = 0; i < obstacles; ++i) {
    // Up to 80 m, but at most 30% of the square: the scene must leave room for rays.
    const double max_side_m = std::min(80.0, 0.3 * s.size_m);
    ObstacleSpec spec =
        Box(coordinate(s.min_x_m), coordinate(s.min_y_m), random.LogUniform(0.05, max_side_m),
            random.LogUniform(0.05, max_side_m), random.Yaw());
    if (snap) {
      spec.length_m = cell_m * random.Int(1, 4);
      spec.width_m = cell_m * random.Int(1, 4);
    }
    if (random.Chance(0.05)) {  // A long thin wall.
      spec.length_m = random.LogUniform(1e3, 2e4);
      spec.width_m = random.LogUniform(0.05, 2.0);
    }
    s.obstacles.push_back(Obstacle{
        .id = static_cast<ObstacleId>(i + 1),
        .spec = spec,
        .box = ToCollisionBox(OrientedBox{.center_x_m = spec.center_x_m,
                                          .center_y_m = spec.center_y_m,
                                          .yaw_rad = spec.yaw_rad,
                                          .half_length_m = 0.5 * spec.length_m,
                                          .half_width_m = 0.5 * spec.width_m}),
    });
  }

  if (random.Chance(0.4)) {
    // Margins may be negative: some ray origins then start inside a wall.
    s.bounds = WorldBounds{.min_x_m = s.min_x_m - random.Uniform(-5.0, 50.0),
                           .min_y_m = s.min_y_m - random.Uniform(-5.0, 50.0),
                           .max_x_m = s.min_x_m + s.size_m + random.Uniform(-5.0, 50.0),
                           .max_y_m = s.min_y_m + s.size_m + random.Uniform(-5.0, 50.0)};
  }

  s.scene.cell_size_m = cell_m;
  IndexVehicles(s.fleet, s.scene);
  IndexObstacles(s.obstacles, s.scene);
  return s;
}

Ray MakeRandomRay(Random& random, const RandomScene& s) {
  const double cell_m = s.scene.cell_size_m;
  Ray ray;
  const auto on_border = [&](double min_m) {
    return std::floor((min_m + random.Uniform(0.0, s.size_m)) / cell_m) * cell_m;
  };
  const auto anywhere = [&](double min_m) {
    return min_m + random.Uniform(-10.0, s.size_m + 10.0);
  };
  const std::size_t vehicles = s.scene.vehicle_boxes.size();
  switch (random.Int(0, 4)) {
    case 0:
      ray.ox = anywhere(s.min_x_m);
      ray.oy = anywhere(s.min_y_m);
      break;
    case 1:  // A cell corner.
      ray.ox = on_border(s.min_x_m);
      ray.oy = on_border(s.min_y_m);
      break;
    case 2:  // A vertical cell border.
      ray.ox = on_border(s.min_x_m);
      ray.oy = anywhere(s.min_y_m);
      break;
    case 3:  // A horizontal cell border.
      ray.ox = anywhere(s.min_x_m);
      ray.oy = on_border(s.min_y_m);
      break;
    case 4:  // The centre of a vehicle, usually ignored (as a scanner's own body is).
      if (vehicles == 0) break;
      ray.ignore = static_cast<std::uint32_t>(random.Int(0, static_cast<int>(vehicles) - 1));
      ray.ox = s.scene.vehicle_boxes[ray.ignore].center_x_m;
      ray.oy = s.scene.vehicle_boxes[ray.ignore].center_y_m;
      if (random.Chance(0.2)) ray.ignore = kNoVehicle;
      break;
  }
  if (ray.ignore == kNoVehicle && vehicles > 0 && random.Chance(0.3)) {
    ray.ignore = static_cast<std::uint32_t>(random.Int(0, static_cast<int>(vehicles) - 1));
  }
  const double h = std::sqrt(0.5);
  switch (random.Int(0, 3)) {
    case 0:
    case 1: {
      const double a = random.Uniform(-kPi, kPi);
      ray.dx = std::cos(a);
      ray.dy = std::sin(a);
      break;
    }
    case 2: {  // Along an axis: from a border origin, the ray runs along the border.
      const double axes[4][2] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
      const int k = random.Int(0, 3);
      ray.dx = axes[k][0];
      ray.dy = axes[k][1];
      break;
    }
    case 3: {  // Diagonal: from a corner origin, the ray passes through cell corners.
      ray.dx = random.Chance(0.5) ? h : -h;
      ray.dy = random.Chance(0.5) ? h : -h;
      break;
    }
  }
  // Up to 1000 m: past 2048 cells per beam CastRay tests every object instead of walking.
  ray.max_range_m = random.LogUniform(0.5, 1000.0);
  return ray;
}

TEST(CastRay, GridWalkEqualsBruteForceOnRandomScenes) {
  Random random(0x5eed5ca1ab1e);
  constexpr int kScenes = 1000;
  constexpr int kRaysPerScene = 40;
  int failures = 0;
  int hits = 0;
  int zero_hits = 0;
  int scenes_with_large_objects = 0;
  int rays_past_the_walk_limit = 0;
  for (int scene_index = 0; scene_index < kScenes; ++scene_index) {
    const RandomScene s = MakeRandomScene(random);
    if (!s.scene.vehicle_grid.large_objects().empty() ||
        !s.scene.obstacle_grid.large_objects().empty()) {
      ++scenes_with_large_objects;
    }
    for (int r = 0; r < kRaysPerScene; ++r) {
      const Ray ray = MakeRandomRay(random, s);
      const double got = CastRay(ray.ox, ray.oy, ray.dx, ray.dy, ray.max_range_m, ray.ignore,
                                 s.scene, s.obstacles, s.bounds);
      const double want = BruteForceRay(ray, s);
      // Both take the minimum of the same RayToBox values (and the same wall formula): equal
      // to the bit, whatever the grid's path.
      if (!(got == want) && ++failures <= 5) {
        ADD_FAILURE() << "scene " << scene_index << " (cell " << s.scene.cell_size_m << " m, "
                      << s.fleet.size() << " vehicles, " << s.obstacles.size()
                      << " obstacles): " << Describe(ray) << ": CastRay " << got << ", brute force "
                      << want;
      }
      if (std::isfinite(want)) ++hits;
      if (want == 0.0) ++zero_hits;
      if (ray.max_range_m / s.scene.cell_size_m > 2048) ++rays_past_the_walk_limit;
    }
  }
  EXPECT_EQ(failures, 0);
  // The scenes exercise what they claim to.
  constexpr int kRays = kScenes * kRaysPerScene;
  EXPECT_GT(hits, kRays / 4);
  EXPECT_LT(hits, kRays - kRays / 10);
  EXPECT_GT(zero_hits, kRays / 50);
  EXPECT_GT(scenes_with_large_objects, kScenes / 20);
  EXPECT_GT(rays_past_the_walk_limit, kRays / 200);
}

// The grid clamps cell coordinates to +-2^30. With cars a few millimetres long (valid: any
// length in [0.001, 100] m) the cell is that small too, and 2^30 cells end near 5.4e6 m, inside
// the valid +-1e7 m. A body 2.6 cm away must be seen there as it is near the origin.
TEST(RangeScan, SeesTinyNeighboursFarFromTheOrigin) {
  constexpr double kLength_m = 0.005;  // The cell size GridCellSize picks: 2^30 cells = 5.4e6 m.
  constexpr double kWidth_m = 0.003;
  const auto tiny_car = [&](double x_m, double y_m) {
    VehicleSpec spec;
    spec.length_m = kLength_m;
    spec.width_m = kWidth_m;
    spec.model = KinematicBicycleSpec{.wheelbase_m = 0.004};
    spec.initial_pose = {.x_m = x_m, .y_m = y_m, .yaw_rad = 0.0};
    return spec;
  };
  struct Case {
    double x_m;          // Of the scanner.
    double target_dx_m;  // Of the other car, relative; it is 2 cm to the left.
  };
  const Case cases[] = {
      {1000.0, 0.02},   // Near the origin, ahead-left (beam at +45 degrees).
      {1000.0, -0.02},  // Near the origin, behind-left (+135 degrees).
      {6.0e6, -0.02},   // Beyond 2^30 cells, behind-left.
      {6.0e6, 0.02},    // Beyond 2^30 cells, ahead-left.
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(absl::StrCat("scanner at x = ", c.x_m, ", target dx = ", c.target_dx_m));
    SimTestContext sim(TestWorld());
    World& world = sim.world();
    VehicleSpec scanner = tiny_car(c.x_m, 0.0);
    // 8 beams: beam 5 at +45 degrees, beam 7 at +135 degrees. A range of 1 m is 200 cells, so
    // CastRay walks the grid rather than testing every object.
    scanner.range_scan = RangeScanSpec{.beam_count = 8, .max_range_m = 1.0};
    ASSERT_TRUE(world.Spawn({scanner, tiny_car(c.x_m + c.target_dx_m, 0.02)}).ok());
    const VehicleTable& fleet = world.state().vehicles;
    const CollisionBox self = VehicleBox(fleet, 0);
    const CollisionBox other = VehicleBox(fleet, 1);
    // The beam at 45 (or 135) degrees meets the other car's lower face y = other.y - w/2 at
    // sqrt(2) times the height of that face above the scanner's centre: the car is 5 mm long
    // and centred 2 cm to the side, so the beam crosses that face within it.
    const double expected_m =
        std::sqrt(2.0) * (other.center_y_m - 0.5 * kWidth_m - self.center_y_m);
    const int beam = c.target_dx_m > 0 ? 5 : 7;
    const RangeScanReading scan = ScanOf(world, 1);
    ASSERT_EQ(scan.ranges_m.size(), 8u);
    // At 6e6 m one ulp is 9.3e-10 m; a few of them stay far below 1e-7 m, and a miss is
    // +infinity.
    EXPECT_THAT(scan.ranges_m[beam], DoubleNear(expected_m, 1e-7)) << "beam " << beam;
  }
}

// ---------------------------------------------------------------------------------------------
// Nearest objects.

TEST(NearestObjects, ReportsTheFrameYawAndSpeedOfEachInRadius) {
  // The sensing car is centred at (100, -40) heading 2 rad; others are placed by their offset
  // in its frame (forward, left).
  constexpr double kCx = 100.0;
  constexpr double kCy = -40.0;
  constexpr double kYaw = 2.0;
  const auto world_x = [](double f, double l) {
    return kCx + f * std::cos(kYaw) - l * std::sin(kYaw);
  };
  const auto world_y = [](double f, double l) {
    return kCy + f * std::sin(kYaw) + l * std::cos(kYaw);
  };

  struct Expected {
    ObjectKind kind;
    std::uint64_t id;
    double x_m, y_m, relative_yaw_rad, speed_mps;
  };
  // Vehicle 2: 10 m ahead heading -2.5 rad: relative -4.5 rad, wrapped to 2 pi - 4.5.
  // Vehicle 3: 6 m to the right heading 5.0 rad (stored wrapped, 5 - 2 pi): relative 3.0 rad,
  // reversing at 2 m/s. Vehicle 4: 24.9 m to the left, inside the 25 m radius. Vehicle 5:
  // 25.1 m behind, outside. Obstacle 1: at (-3, 4), 5 m away, yaw 10 rad: relative 8 rad,
  // wrapped to 8 - 2 pi. Obstacle 2: at (20, 20), 28.3 m away, outside.
  for (const std::uint32_t count : {8u, 2u}) {
    SCOPED_TRACE(absl::StrCat("count ", count));
    SimTestContext sim(TestWorld());
    World& world = sim.world();
    VehicleSpec sensing = CarCentredAt(kCx, kCy, kYaw);
    sensing.nearest_objects = NearestObjectsSpec{.count = count, .radius_m = 25.0};
    ASSERT_TRUE(world
                    .Spawn({sensing, CarCentredAt(world_x(10, 0), world_y(10, 0), -2.5, 7.5),
                            CarCentredAt(world_x(0, -6), world_y(0, -6), 5.0, -2.0),
                            CarCentredAt(world_x(0, 24.9), world_y(0, 24.9), kYaw, 1.0),
                            CarCentredAt(world_x(-25.1, 0), world_y(-25.1, 0), kYaw, 1.0)})
                    .ok());
    ASSERT_TRUE(world
                    .AddObstacles({Box(world_x(-3, 4), world_y(-3, 4), 1, 1, 10.0),
                                   Box(world_x(20, 20), world_y(20, 20), 1, 1)})
                    .ok());
    std::vector<Expected> expected = {
        {ObjectKind::kObstacle, 1, -3, 4, 8.0 - kTwoPi, 0.0},
        {ObjectKind::kVehicle, 3, 0, -6, 3.0, -2.0},
        {ObjectKind::kVehicle, 2, 10, 0, kTwoPi - 4.5, 7.5},
        {ObjectKind::kVehicle, 4, 0, 24.9, 0.0, 1.0},
    };
    expected.resize(std::min<std::size_t>(count, expected.size()));

    const std::vector<NearbyObject> found = NearestOf(world, 1);
    ASSERT_EQ(found.size(), expected.size());
    for (std::size_t i = 0; i < found.size(); ++i) {
      SCOPED_TRACE(absl::StrCat("entry ", i));
      const NearbyObject& got = found[i];
      const Expected& want = expected[i];
      EXPECT_EQ(got.kind, want.kind);
      EXPECT_EQ(got.id, want.id);
      EXPECT_THAT(got.x_m, DoubleNear(want.x_m, kTolerance_m));
      EXPECT_THAT(got.y_m, DoubleNear(want.y_m, kTolerance_m));
      EXPECT_THAT(got.distance_m, DoubleNear(std::hypot(want.x_m, want.y_m), kTolerance_m));
      EXPECT_THAT(got.relative_yaw_rad, DoubleNear(want.relative_yaw_rad, kAngleTolerance_rad));
      EXPECT_EQ(got.speed_mps, want.speed_mps);
    }
  }
}

TEST(NearestObjects, TiesPutVehiclesFirstThenLowerIds) {
  // The sensing car is centred exactly at the origin heading +x; eight objects lie exactly
  // 10 m away (3-4-5 triangles and axis points: every coordinate is exact, so every distance
  // is exactly 10), one at 5 m. Obstacles are added in an order unrelated to their places.
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  VehicleSpec sensing = CarCentredAt(0, 0, 0);
  // The radius clears the ties by 0.5 m: the tie rule is tested, not the radius's edge.
  sensing.nearest_objects = NearestObjectsSpec{.count = 8, .radius_m = 10.5};
  ASSERT_TRUE(
      world.Spawn({sensing, CarCentredAt(-6, -8, 0), CarCentredAt(6, 8, 0), CarCentredAt(-8, 6, 0)})
          .ok());
  ASSERT_TRUE(world
                  .AddObstacles({Box(0, -10, 1, 1), Box(10, 0, 1, 1), Box(-3, 4, 1, 1),
                                 Box(0, 10, 1, 1), Box(-10, 0, 1, 1), Box(8, -6, 1, 1)})
                  .ok());
  const std::vector<NearbyObject> found = NearestOf(world, 1);
  const std::vector<std::pair<ObjectKind, std::uint64_t>> expected = {
      {ObjectKind::kObstacle, 3},  // 5 m.
      {ObjectKind::kVehicle, 2},  {ObjectKind::kVehicle, 3},  {ObjectKind::kVehicle, 4},
      {ObjectKind::kObstacle, 1}, {ObjectKind::kObstacle, 2}, {ObjectKind::kObstacle, 4},
      {ObjectKind::kObstacle, 5},  // Obstacle 6 is the ninth: cut by count.
  };
  ASSERT_EQ(found.size(), expected.size());
  for (std::size_t i = 0; i < found.size(); ++i) {
    EXPECT_EQ(found[i].kind, expected[i].first) << "entry " << i;
    EXPECT_EQ(found[i].id, expected[i].second) << "entry " << i;
    EXPECT_EQ(found[i].distance_m, i == 0 ? 5.0 : 10.0) << "entry " << i;
  }
}

// Sorted by distance, then vehicles before obstacles, then id: what sensors.h documents.
bool Nearer(const NearbyObject& a, const NearbyObject& b) {
  return std::tie(a.distance_m, a.kind, a.id) < std::tie(b.distance_m, b.kind, b.id);
}

double WrapAngle(double a) {
  double r = std::remainder(a, kTwoPi);
  if (r <= -kPi) r += kTwoPi;
  return r;
}

// Every candidate sorted, from the world's state, with the body boxes the collision stage uses.
std::vector<NearbyObject> BruteForceNearest(const World& world, std::size_t self,
                                            const NearestObjectsSpec& spec) {
  const VehicleTable& fleet = world.state().vehicles;
  const CollisionBox body = VehicleBox(fleet, self);
  std::vector<NearbyObject> all;
  const auto add = [&](ObjectKind kind, std::uint64_t id, double x, double y, double yaw,
                       double speed) {
    const double dx = x - body.center_x_m;
    const double dy = y - body.center_y_m;
    const double distance_m = std::sqrt(dx * dx + dy * dy);
    if (distance_m > spec.radius_m) return;
    all.push_back({.kind = kind,
                   .id = id,
                   .x_m = dx * body.axis_x + dy * body.axis_y,
                   .y_m = dy * body.axis_x - dx * body.axis_y,
                   .distance_m = distance_m,
                   .relative_yaw_rad = WrapAngle(yaw - fleet.yaw_rad[self]),
                   .speed_mps = speed});
  };
  for (std::size_t k = 0; k < fleet.size(); ++k) {
    if (k == self) continue;
    const CollisionBox box = VehicleBox(fleet, k);
    add(ObjectKind::kVehicle, fleet.ids[k], box.center_x_m, box.center_y_m, fleet.yaw_rad[k],
        fleet.speed_mps[k]);
  }
  for (const Obstacle& obstacle : world.obstacles()) {
    add(ObjectKind::kObstacle, obstacle.id, obstacle.box.center_x_m, obstacle.box.center_y_m,
        obstacle.spec.yaw_rad, 0.0);
  }
  std::sort(all.begin(), all.end(), Nearer);
  if (all.size() > spec.count) all.resize(spec.count);
  return all;
}

// Compares every sensing vehicle's report with the brute force; returns how many reports had
// ties in distance (to check that the scenes test the tie rule).
int ExpectNearestMatchBruteForce(const World& world) {
  int ties = 0;
  const std::vector<VehicleSnapshot> snapshot = world.Snapshot();
  const VehicleTable& fleet = world.state().vehicles;
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    const std::optional<NearestObjectsSpec>& spec = fleet.specs[i].nearest_objects;
    if (!spec.has_value()) continue;
    SCOPED_TRACE(absl::StrCat("vehicle ", fleet.ids[i]));
    if (!snapshot[i].nearest_objects.has_value()) {
      ADD_FAILURE() << "no report";
      continue;
    }
    const std::vector<NearbyObject>& got = *snapshot[i].nearest_objects;
    const std::vector<NearbyObject> want = BruteForceNearest(world, i, *spec);
    if (got.size() != want.size()) {
      ADD_FAILURE() << "got " << got.size() << " objects, want " << want.size();
      continue;
    }
    for (std::size_t j = 0; j < got.size(); ++j) {
      // Same centres, same arithmetic: distances are equal to the bit, which the order by
      // distance then kind then id needs; the frame and yaw allow a few roundings.
      EXPECT_EQ(got[j].kind, want[j].kind) << "entry " << j;
      EXPECT_EQ(got[j].id, want[j].id) << "entry " << j;
      EXPECT_EQ(got[j].distance_m, want[j].distance_m) << "entry " << j;
      EXPECT_THAT(got[j].x_m, DoubleNear(want[j].x_m, kTolerance_m)) << "entry " << j;
      EXPECT_THAT(got[j].y_m, DoubleNear(want[j].y_m, kTolerance_m)) << "entry " << j;
      EXPECT_THAT(got[j].relative_yaw_rad,
                  DoubleNear(want[j].relative_yaw_rad, kAngleTolerance_rad))
          << "entry " << j;
      EXPECT_EQ(got[j].speed_mps, want[j].speed_mps) << "entry " << j;
      if (j > 0 && got[j].distance_m == got[j - 1].distance_m) ++ties;
    }
  }
  return ties;
}

TEST(NearestObjects, EqualBruteForceSortOnRandomWorlds) {
  Random random(42);
  int ties = 0;
  for (int w = 0; w < 12; ++w) {
    SimTestContext sim(TestWorld());
    World& world = sim.world();
    // Half the cars heading +x with centres on the integer lattice, half anywhere, and half
    // the obstacles at lattice points: exact integer offsets give many equal distances.
    std::vector<VehicleSpec> cars;
    for (int i = 0; i < 150; ++i) {
      VehicleSpec car =
          random.Chance(0.5)
              ? CarCentredAt(random.Int(0, 80), random.Int(0, 80), 0.0, random.Uniform(0, 20))
              : CarCentredAt(random.Uniform(0, 80), random.Uniform(0, 80), random.Uniform(-4, 4),
                             random.Uniform(-5, 30));
      if (i % 8 == 0) {
        car.nearest_objects =
            NearestObjectsSpec{.count = static_cast<std::uint32_t>(random.Int(1, 30)),
                               .radius_m = random.Uniform(3.0, 60.0)};
      }
      cars.push_back(car);
    }
    ASSERT_TRUE(world.Spawn(cars).ok());
    std::vector<ObstacleSpec> boxes;
    for (int i = 0; i < 80; ++i) {
      boxes.push_back(random.Chance(0.5)
                          ? Box(random.Int(0, 80), random.Int(0, 80), 1, 1, random.Uniform(-10, 10))
                          : Box(random.Uniform(0, 80), random.Uniform(0, 80),
                                random.LogUniform(0.1, 20), random.LogUniform(0.1, 20),
                                random.Uniform(-10, 10)));
    }
    ASSERT_TRUE(world.AddObstacles(boxes).ok());
    // Before any step (the snapshot indexes the state itself), then after steps with turning.
    ties += ExpectNearestMatchBruteForce(world);
    std::vector<VehicleInput> inputs;
    for (VehicleId id = 1; id <= cars.size(); ++id) {
      inputs.push_back({.id = id,
                        .acceleration_mps2 = random.Uniform(-3, 3),
                        .steering_angle_rad = random.Uniform(-0.5, 0.5)});
    }
    ASSERT_TRUE(world.SetInputs(inputs).ok());
    for (int t = 0; t < 5; ++t) world.Step();
    ties += ExpectNearestMatchBruteForce(world);
  }
  EXPECT_GT(ties, 20);
}

// ---------------------------------------------------------------------------------------------
// Sensors see the world as it is now.

// Each change comes right after a step, so it alone makes the world's index stale; the
// sensors must see it at once, and still after the next step (nothing moves).
TEST(Sensors, SeeChangesMadeSinceTheLastStep) {
  SimTestContext sim(TestWorld());
  World& world = sim.world();
  VehicleSpec sensing = CarCentredAt(0, 0, 0);
  sensing.range_scan = ForwardBeam();
  sensing.nearest_objects = NearestObjectsSpec{.count = 4, .radius_m = 50.0};
  ASSERT_TRUE(world.Spawn({sensing}).ok());

  VehicleSpec second = CarCentredAt(0, 30, -kPi / 2);  // 30 m to the left, looking right.
  second.range_scan = ForwardBeam();
  // A 60 m bus changes the mean length, so the grid's cell size. Its centre is 60 / 2 - 0.5 =
  // 29.5 m ahead of its reference point: at x = -40.5, 40.5 m away.
  VehicleSpec bus = CarCentredAt(0, 0, 0);
  bus.length_m = 60.0;
  bus.initial_pose = {.x_m = -70.0, .y_m = 0.0, .yaw_rad = 0.0};

  struct Change {
    std::string name;
    std::function<absl::Status(World&)> apply;
    VehicleId scanner;  // Whose forward beam to read.
    double range_m;
    std::vector<std::uint64_t> nearest_to_first;  // Ids vehicle 1 reports, nearest first.
  };
  const auto status = [](const auto& result) { return absl::Status(result.status()); };
  const std::vector<Change> changes = {
      {"nothing yet", [](World&) { return absl::OkStatus(); }, 1, kInf, {}},
      {"obstacle 1 centred 20 m ahead: near face at 19 m",
       [&](World& w) { return status(w.AddObstacles({Box(20, 0, 2, 2)})); },
       1,
       19,
       {1}},
      {"car 2 centred 12 m ahead: rear face at 12 - 2.25 m",
       [&](World& w) { return status(w.Spawn({CarCentredAt(12, 0, 0)})); },
       1,
       9.75,
       {2, 1}},
      {"sensing car 3 spawned: sees car 1's side at 30 - 0.9 m",
       [&](World& w) { return status(w.Spawn({second})); },
       3,
       29.1,
       {2, 1, 3}},
      {"bus 4 spawned: new cell size",
       [&](World& w) { return status(w.Spawn({bus})); },
       1,
       9.75,
       {2, 1, 3, 4}},
      {"car 2 removed", [](World& w) { return w.Remove(2); }, 1, 19, {1, 3, 4}},
      {"obstacle 1 removed", [](World& w) { return w.RemoveObstacle(1); }, 1, kInf, {3, 4}},
  };
  const auto ids = [](const std::vector<NearbyObject>& objects) {
    std::vector<std::uint64_t> out;
    for (const NearbyObject& object : objects) out.push_back(object.id);
    return out;
  };
  for (const Change& change : changes) {
    SCOPED_TRACE(change.name);
    world.Step();
    ASSERT_TRUE(change.apply(world).ok());
    for (const char* when : {"before the next step", "after it"}) {
      SCOPED_TRACE(when);
      const double range_m = ScanOf(world, change.scanner).ranges_m.at(0);
      if (std::isinf(change.range_m)) {
        EXPECT_EQ(range_m, kInf);
      } else {
        EXPECT_THAT(range_m, DoubleNear(change.range_m, kTolerance_m));
      }
      EXPECT_EQ(ids(NearestOf(world, 1)), change.nearest_to_first);
      world.Step();
    }
  }

  // And the state after a step: a car at 10 m/s is 0.2 m further after one 20 ms tick.
  ASSERT_TRUE(world.Spawn({CarCentredAt(0, 10, 0, 10.0)}).ok());
  const std::vector<NearbyObject> before = NearestOf(world, 1);
  world.Step();
  const std::vector<NearbyObject> after = NearestOf(world, 1);
  ASSERT_FALSE(before.empty());
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(before[0].id, 5u);
  EXPECT_EQ(after[0].id, 5u);
  EXPECT_THAT(after[0].x_m - before[0].x_m, DoubleNear(0.2, kTolerance_m));
}

}  // namespace
}  // namespace pitlane::sim
