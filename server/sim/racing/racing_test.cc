// Track progress and track sensors against closed forms and a brute-force oracle: lap times of
// a car at constant speed (length / speed), sector splits, laps across the line forwards,
// backwards and reversing over it, excursions off the track on a scripted path, the edges'
// distances along beams against a test of every edge segment on random poses.
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/sim/racing/lap_tracker.h"
#include "server/sim/racing/track.h"
#include "server/sim/racing/track_sensors.h"
#include "server/sim/math/trig.h"
#include "server/sim/testing/test_routes.h"

namespace pitlane::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kDt = 0.02;  // 50 Hz.

// A 100 m x 50 m rectangle, counter-clockwise from (0, 0): 300 m round, 10 m wide.
TrackGeometry Rectangle(std::vector<double> sectors = {}) {
  const Route route{.points = {{0, 0}, {100, 0}, {100, 50}, {0, 50}}, .closed = true,
                    .lane_width_m = 10.0};
  return *MakeTrackGeometry(*MakeRouteParams(route), sectors);
}

// The pose at arc length s on the centre line, heading along it (offset `lateral` to the left).
Pose2 OnCentreLine(const TrackGeometry& track, double s, double lateral = 0.0) {
  std::uint32_t segment = 0;
  const RoutePoint p = RoutePointAt(track.route, s, segment);
  const RouteVertex& v = track.route.vertices[segment];
  return {.x_m = p.x_m - v.dir_y * lateral, .y_m = p.y_m + v.dir_x * lateral,
          .yaw_rad = std::atan2(v.dir_y, v.dir_x)};
}

// The distance from (x, y) to the segment.
double DistanceTo(const EdgeSegment& s, double x, double y) {
  const double ex = s.x1_m - s.x0_m, ey = s.y1_m - s.y0_m;
  double u = ((x - s.x0_m) * ex + (y - s.y0_m) * ey) / (ex * ex + ey * ey);
  u = std::clamp(u, 0.0, 1.0);
  return std::hypot(x - (s.x0_m + u * ex), y - (s.y0_m + u * ey));
}

TEST(TrackGeometry, EdgesLieHalfTheWidthFromTheCentreLine) {
  const TrackGeometry track = Rectangle();
  EXPECT_EQ(track.half_width_m, 5.0);
  // Every edge point is 5 m from the centre line: the inside corners where the sides meet
  // ((5, 5) inside the corner (0, 0)), the outside ones on arcs about the corner.
  for (const EdgeSegment& segment : track.edges) {
    for (const auto& [x, y] : {std::pair{segment.x0_m, segment.y0_m},
                               std::pair{segment.x1_m, segment.y1_m}}) {
      const RouteProjection nearest = ProjectOntoRoute(track.route, x, y);
      EXPECT_NEAR(std::abs(nearest.cross_track_m), 5.0, 1e-9) << x << "," << y;
    }
  }
  const auto has_point = [&](double x, double y) {
    for (const EdgeSegment& s : track.edges) {
      if (std::hypot(s.x0_m - x, s.y0_m - y) < 1e-9) return true;
    }
    return false;
  };
  EXPECT_TRUE(has_point(5, 5));
  EXPECT_TRUE(has_point(95, 45));
  EXPECT_TRUE(has_point(0, -5));
  EXPECT_TRUE(has_point(105, 0));
  EXPECT_FALSE(has_point(105, -5));  // The outside is rounded, not mitred.
  // A point within 5 m of the centre line is on the track, and no edge passes nearer to the
  // centre line than 5 m less the arcs' centimetre.
  const TrackPosition corner = PositionOnTrack(track, {.x_m = 103.5, .y_m = -3.5}, 0);
  EXPECT_TRUE(corner.on_track);
  for (const EdgeSegment& segment : track.edges) {
    EXPECT_GT(DistanceTo(segment, 100, 0), 5.0 - 0.0101);
  }
}

TEST(TrackGeometry, TracksThatCannotBeRacedAreRefused) {
  const struct {
    Route route;
    const char* message;
  } bad[] = {
      {{.points = {{0, 0}, {100, 0}, {100, 50}}, .closed = false}, "closed"},
      {{.points = {{0, 0}, {3, 0}, {3, 1}}, .closed = true}, "at least 10 m"},
      {{.points = {{0, 0}, {100, 0}, {0, 1}}, .closed = true}, "points[1]: the track turns back"},
      // A hairpin 4 m across on a lane 6 m wide.
      {{.points = {{0, 0}, {50, 0}, {52, 2}, {50, 4}, {0, 4}, {-2, 2}}, .closed = true,
        .lane_width_m = 6.0},
       "bends too tightly"},
  };
  for (const auto& c : bad) {
    const absl::StatusOr<RouteParams> route = MakeRouteParams(c.route);
    ASSERT_TRUE(route.ok()) << route.status();
    const absl::Status status = MakeTrackGeometry(*route, {}).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
}

TEST(TrackGeometry, SectorsAreCheckedNamingTheirIndex) {
  const RouteParams route = *MakeRouteParams(
      {.points = {{0, 0}, {100, 0}, {100, 50}, {0, 50}}, .closed = true, .lane_width_m = 10.0});
  EXPECT_TRUE(MakeTrackGeometry(route, {1.0, 150.0, 299.0}).ok());
  for (const std::vector<double>& bad : std::vector<std::vector<double>>{
           {0.5}, {150.0, 150.5}, {200.0, 100.0}, {299.5}, {NAN}, {1e300}}) {
    const absl::Status status = MakeTrackGeometry(route, bad).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("sector_starts_m["));
  }
  EXPECT_THAT(MakeTrackGeometry(route, std::vector<double>(kMaxSectors, 10.0)).status().message(),
              HasSubstr("sector_starts_m: at most"));
}

TEST(TrackPosition, ArcLengthOffsetAndHeading) {
  const TrackGeometry track = Rectangle();
  struct Case {
    Pose2 pose;
    double s, lateral, heading;
    bool on_track;
  };
  const Case cases[] = {
      {{30, 0, 0}, 30, 0, 0, true},
      {{30, 4, 0.25}, 30, 4, 0.25, true},
      {{30, -5, 0}, 30, -5, 0, true},      // On the edge is on the track.
      {{30, -5.5, 0}, 30, -5.5, 0, false},
      {{100, 20, kPi}, 120, 0, kPi / 2, true},  // Up the right side, facing -x.
      {{40, 52, -kPi / 2}, 210, -2, kPi / 2, true},  // Along the top, going -x.
  };
  for (const Case& c : cases) {
    const TrackPosition position = PositionOnTrack(
        track, c.pose, ProjectOntoRoute(track.route, c.pose.x_m, c.pose.y_m).segment);
    EXPECT_NEAR(position.s_m, c.s, 1e-9) << c.pose.x_m << "," << c.pose.y_m;
    EXPECT_NEAR(position.lateral_m, c.lateral, 1e-9);
    EXPECT_NEAR(position.heading_rad, c.heading, 1e-12);
    EXPECT_EQ(position.on_track, c.on_track);
  }
}

// Drives the centre line from arc length `s0` at `speed` m/s for `seconds`.
LapTracker DriveAtConstantSpeed(const TrackGeometry& track, double s0, double speed,
                                double seconds, std::vector<LapEvent>* events) {
  LapTracker tracker(track, OnCentreLine(track, s0));
  const int ticks = static_cast<int>(std::lround(seconds / kDt));
  for (int i = 1; i <= ticks; ++i) {
    tracker.Update(OnCentreLine(track, s0 + speed * kDt * i), kDt, events);
  }
  return tracker;
}

TEST(LapTracker, ALapAtConstantSpeedTakesLengthOverSpeed) {
  // Several tracks and speeds: lap 2 on is line to line; lap 1 starts 1 m past the line.
  const std::vector<std::vector<RoutePoint>> shapes = {
      {{0, 0}, {100, 0}, {100, 50}, {0, 50}}, Circle(80.0, 400), Oval(60.0, 30.0, 1.0)};
  for (const std::vector<RoutePoint>& points : shapes) {
    const TrackGeometry track =
        *MakeTrackGeometry(*MakeRouteParams({.points = points, .closed = true}), {});
    const double length = track.route.length_m;
    for (const double speed : {7.0, 23.3, 61.0}) {
      std::vector<LapEvent> events;
      const LapTracker tracker =
          DriveAtConstantSpeed(track, 1.0, speed, 3.5 * length / speed, &events);
      const LapProgress& progress = tracker.progress();
      ASSERT_EQ(progress.laps_completed, 3u) << length << " " << speed;
      const double lap = length / speed;
      EXPECT_NEAR(*progress.last_lap_s, lap, 1e-6);
      // Lap 1, from 1 m past the line, is partial: no lap time, though its event says how long.
      EXPECT_NEAR(*progress.best_lap_s, lap, 1e-6);
      ASSERT_EQ(events.size(), 6u);  // A sector and a lap each lap: one sector.
      EXPECT_NEAR(events[1].duration_s, (length - 1.0) / speed, 1e-6);  // Lap 1.
      EXPECT_NEAR(events[3].duration_s, lap, 1e-6);
      EXPECT_NEAR(events[5].time_s, (3 * length - 1.0) / speed, 1e-6);
      EXPECT_NEAR(progress.distance_m, 1.0 + speed * kDt * std::lround(3.5 * lap / kDt), 1e-6);
    }
  }
}

TEST(LapTracker, SectorSplits) {
  const TrackGeometry track = Rectangle({100.0, 150.0});
  std::vector<LapEvent> events;
  const LapTracker tracker = DriveAtConstantSpeed(track, 0.0, 10.0, 72.0, &events);
  // Sectors of 100, 50 and 150 m at 10 m/s, two laps, the third lap's first sector.
  std::vector<double> durations;
  for (const LapEvent& event : events) {
    if (event.kind == LapEvent::Kind::kSector) durations.push_back(event.duration_s);
  }
  ASSERT_EQ(durations.size(), 7u);
  const double expected[] = {10.0, 5.0, 15.0};
  for (std::size_t i = 0; i < durations.size(); ++i) {
    EXPECT_NEAR(durations[i], expected[i % 3], 1e-9) << i;
  }
  const LapProgress& progress = tracker.progress();
  EXPECT_EQ(progress.laps_completed, 2u);
  EXPECT_EQ(progress.sector, 1u);
  EXPECT_THAT(progress.sector_times_s, ElementsAre(::testing::DoubleNear(10.0, 1e-9)));
  EXPECT_EQ(progress.last_sector_times_s.size(), 3u);
  EXPECT_NEAR(progress.lap_time_s, 12.0, 1e-9);
}

// Follows a scripted list of arc lengths (and lateral offsets), a tick each.
LapTracker Script(const TrackGeometry& track, const std::vector<double>& s,
                  const std::vector<double>& lateral = {}) {
  LapTracker tracker(track, OnCentreLine(track, s[0], lateral.empty() ? 0.0 : lateral[0]));
  for (std::size_t i = 1; i < s.size(); ++i) {
    tracker.Update(OnCentreLine(track, s[i], lateral.empty() ? 0.0 : lateral[i]), kDt);
  }
  return tracker;
}

// Arc lengths from a to b in steps of at most 10 m.
std::vector<double> Path(std::vector<double> stops) {
  std::vector<double> s = {stops[0]};
  for (std::size_t k = 1; k < stops.size(); ++k) {
    const double from = stops[k - 1], to = stops[k];
    const int n = static_cast<int>(std::ceil(std::abs(to - from) / 10.0));
    for (int i = 1; i <= n; ++i) s.push_back(from + (to - from) * i / n);
  }
  return s;
}

TEST(LapTracker, LapsAcrossTheLineForwardsBackwardsAndReversingOverIt) {
  const TrackGeometry track = Rectangle();
  struct Case {
    const char* what;
    std::vector<double> stops;  // Arc lengths driven through, unwrapped.
    std::uint32_t laps;
    double distance;
  };
  const Case cases[] = {
      {"forwards over the line twice", {10, 610}, 2, 610},
      {"the wrong way round a whole lap", {10, -300}, 0, -300},
      {"the wrong way, then forwards again to where it started", {10, -300, 10}, 0, 10},
      {"over the line, back over it, over it again", {10, 310, 290, 320}, 1, 320},
      {"back and forth over the line many times", {10, 310, 290, 310, 290, 310}, 1, 310},
      {"a start in the second half counts from behind the line", {250, 310}, 0, 10},
      {"from behind the line (a grid): the first crossing is no lap", {-20, 5}, 0, 5},
      {"from behind the line, a whole lap", {-20, 300}, 1, 300},
      {"reversing out of lap 2 back into lap 1", {10, 320, 280}, 1, 280},
  };
  for (const Case& c : cases) {
    const LapTracker tracker = Script(track, Path(c.stops));
    EXPECT_EQ(tracker.progress().laps_completed, c.laps) << c.what;
    EXPECT_NEAR(tracker.progress().distance_m, c.distance, 1e-9) << c.what;
  }
}

TEST(LapTracker, ExcursionsOffTheTrackAreCountedAndTimed) {
  const TrackGeometry track = Rectangle();
  // Along the bottom straight, 1 m a tick, swerving: off (|lateral| > 5) for 3, 1 and 2 ticks.
  const std::vector<double> lateral = {0, 2, 4.99, 6, 7, 6, 4, 0, -5.5, 0, 0, 5.01, 5.01, 3};
  std::vector<double> s;
  for (std::size_t i = 0; i < lateral.size(); ++i) s.push_back(10.0 + i);
  const LapTracker tracker = Script(track, s, lateral);
  EXPECT_EQ(tracker.progress().off_track_count, 3u);
  EXPECT_NEAR(tracker.progress().off_track_s, 6 * kDt, 1e-12);
  EXPECT_TRUE(tracker.progress().position.on_track);
}

TEST(LapTracker, APoseThatIsNotFiniteIsSkipped) {
  const TrackGeometry track = Rectangle();
  LapTracker tracker(track, OnCentreLine(track, 140.0));
  tracker.Update({.x_m = NAN, .y_m = 0.0}, kDt);
  tracker.Update({.x_m = 0.0, .y_m = INFINITY}, kDt);
  EXPECT_EQ(tracker.progress().laps_completed, 0u);
  EXPECT_NEAR(tracker.progress().distance_m, 140.0, 1e-9);
  EXPECT_NEAR(tracker.progress().total_time_s, 2 * kDt, 1e-15);
  tracker.Update(OnCentreLine(track, 141.0), kDt);
  EXPECT_NEAR(tracker.progress().distance_m, 141.0, 1e-9);
}

TEST(TrackSensors, ClosedFormsOnTheRectangle) {
  const TrackGeometry track = Rectangle();
  const Pose2 pose{.x_m = 30, .y_m = 1, .yaw_rad = 0};
  const TrackPosition position = PositionOnTrack(track, pose, 0);
  const std::vector<double> angles = {kPi / 2, -kPi / 2, 0.0, kPi};
  const TrackSensorReading reading = ReadTrackSensors(track, position, pose, angles, 200.0);
  // Left: the inner edge at y = 5; right: the outer at y = -5; ahead: the outer edge of the
  // right side at x = 105; behind: the outer edge of the left side at x = -5.
  EXPECT_THAT(reading.edge_distances_m,
              ElementsAre(::testing::DoubleNear(4.0, 1e-9), ::testing::DoubleNear(6.0, 1e-9),
                          ::testing::DoubleNear(75.0, 1e-9), ::testing::DoubleNear(35.0, 1e-9)));
  EXPECT_NEAR(reading.track_position, 0.2, 1e-12);
  EXPECT_NEAR(reading.angle_rad, 0.0, 1e-15);
  // A short range: nothing that near.
  EXPECT_EQ(ReadTrackSensors(track, position, pose, {0.0}, 50.0).edge_distances_m[0], 50.0);
  EXPECT_EQ(DefaultTrackBeamAngles().size(), 19u);
  EXPECT_NEAR(DefaultTrackBeamAngles()[9], 0.0, 0.0);
  EXPECT_NEAR(DefaultTrackBeamAngles()[0], -kPi / 2, 1e-15);
}

TEST(TrackSensors, TheGridFindsWhatEverySegmentTestedFinds) {
  const std::vector<std::vector<RoutePoint>> shapes = {
      {{0, 0}, {100, 0}, {100, 50}, {0, 50}},
      Circle(80.0, 400),
      Oval(200.0, 60.0, 2.0),
      // A hairpin: beams from one side reach the other stretch.
      {{0, 0}, {200, 0}, {210, 5}, {210, 15}, {200, 20}, {0, 20}, {-10, 15}, {-10, 5}},
  };
  std::mt19937_64 random(42);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int hits = 0, misses = 0;
  for (const std::vector<RoutePoint>& points : shapes) {
    const TrackGeometry track = *MakeTrackGeometry(
        *MakeRouteParams({.points = points, .closed = true, .lane_width_m = 8.0}), {});
    for (int i = 0; i < 3000; ++i) {
      // Near the track mostly, on it or off it; some exactly on grid lines or axis-aligned.
      const double s = unit(random) * track.route.length_m;
      Pose2 pose = OnCentreLine(track, s, (unit(random) - 0.5) * 16.0);
      pose.yaw_rad = (unit(random) * 2 - 1) * kPi;
      if (i % 10 == 0) pose.yaw_rad = kPi / 2 * (i % 4);
      if (i % 7 == 0) {
        pose.x_m = track.grid_origin_x_m + track.cell_m * std::round((pose.x_m - track.grid_origin_x_m) / track.cell_m);
      }
      const double range = i % 3 == 0 ? 20.0 : 200.0;
      double sin_a = 0.0, cos_a = 0.0;
      SinCos(pose.yaw_rad, &sin_a, &cos_a);
      if (i % 10 == 0) {  // Exactly along an axis.
        cos_a = std::round(cos_a);
        sin_a = std::round(sin_a);
      }
      const double grid = CastOnEdges(track, pose.x_m, pose.y_m, cos_a, sin_a, range);
      const double oracle =
          CastOnEdgesBruteForce(track, pose.x_m, pose.y_m, cos_a, sin_a, range);
      ASSERT_EQ(grid, oracle) << "shape " << points.size() << " pose " << pose.x_m << ","
                              << pose.y_m << "," << pose.yaw_rad;
      (grid < range ? hits : misses) += 1;
    }
  }
  EXPECT_GT(hits, 5000);
  EXPECT_GT(misses, 100);
}

TEST(TrackSensors, BeamsAlongTheGridsOuterEdgeFindWhatEverySegmentTestedFinds) {
  // Beams skimming the outermost edges (the grid's bounds before it had a cell of room).
  const TrackGeometry track = *MakeTrackGeometry(
      *MakeRouteParams({.points = {{0, 0}, {100, 0}, {100, 50}, {0, 50}}, .closed = true,
                        .lane_width_m = 8.0}),
      {});
  const double cases[][4] = {
      {-4.0000000000000258, 188.40284443301141, 1.6880190131969964e-16, -1},
      {-4, 99.300201043886958, -1.3381220135122192e-16, -1},
      {-4, 20, 0, 1},
      {-4, 20, 0, -1},
      {104, -30, 0, 1},
      {-30, 54, 1, 0},
      {-30, -4, 1, -0.0},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(CastOnEdges(track, c[0], c[1], c[2], c[3], 200.0),
              CastOnEdgesBruteForce(track, c[0], c[1], c[2], c[3], 200.0))
        << c[0] << "," << c[1];
  }
  // Not finite: the range, nothing met.
  EXPECT_EQ(CastOnEdges(track, NAN, 0, 1, 0, 50.0), 50.0);
  EXPECT_EQ(CastOnEdges(track, 0, 0, INFINITY, 0, 50.0), 50.0);
}

TEST(TrackSensors, AFarPointLeavesTheGridSparseAndStillExact) {
  // A 200 m circle's three quarters, finely drawn, closed by a loop 900 km out: the grid
  // holds only the cells the edges cross, its cells grown so that their entries stay in
  // proportion to the segments (the loop's few long ones would otherwise cross millions).
  std::vector<RoutePoint> points;
  for (int i = 0; i <= 450; ++i) {
    const double a = kTwoPi * i / 600;
    points.push_back({200.0 * std::cos(a), 200.0 * std::sin(a)});
  }
  for (const RoutePoint far : {RoutePoint{0, -900000.0}, RoutePoint{900000.0, -900000.0},
                               RoutePoint{900000.0, 0}}) {
    points.push_back(far);
  }
  // (A lane 1 m wide: the loop meets the circle at right angles, close to its points.)
  const TrackGeometry track = *MakeTrackGeometry(
      *MakeRouteParams({.points = points, .closed = true, .lane_width_m = 1.0}), {});
  EXPECT_TRUE(track.cell_start.empty());  // Sparse.
  // Entries: up to sqrt(2) x length / cell for a diagonal segment, and a few at its ends.
  EXPECT_LE(track.cell_items.size(), 37 * track.edges.size() + 512);
  std::mt19937_64 random(7);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int i = 0; i < 2000; ++i) {
    const double angle = unit(random) * kTwoPi;
    const double r = 190.0 + unit(random) * 20.0;
    const double x = r * std::cos(angle), y = r * std::sin(angle);
    const double yaw = unit(random) * kTwoPi;
    ASSERT_EQ(CastOnEdges(track, x, y, std::cos(yaw), std::sin(yaw), 200.0),
              CastOnEdgesBruteForce(track, x, y, std::cos(yaw), std::sin(yaw), 200.0));
  }
}

TEST(TrackSensors, SpecsAreCheckedNamingTheirField) {
  EXPECT_TRUE(ValidateTrackSensorSpec({}).ok());
  EXPECT_TRUE(ValidateTrackSensorSpec({.beam_angles_rad = {-kPi, 0, kPi}, .range_m = 1000}).ok());
  const struct {
    TrackSensorSpec spec;
    const char* field;
  } bad[] = {
      {{.beam_angles_rad = {0, 3.5}}, "track_sensor.beam_angles_rad[1]"},
      {{.beam_angles_rad = {NAN}}, "track_sensor.beam_angles_rad[0]"},
      {{.beam_angles_rad = std::vector<double>(65, 0.0)}, "track_sensor.beam_angles_rad:"},
      {{.range_m = 0}, "track_sensor.range_m"},
      {{.range_m = 1001}, "track_sensor.range_m"},
      {{.range_m = NAN}, "track_sensor.range_m"},
  };
  for (const auto& c : bad) {
    const absl::Status status = ValidateTrackSensorSpec(c.spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace pitlane::sim
