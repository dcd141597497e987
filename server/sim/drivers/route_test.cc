// Route geometry: curvature, the corner envelope, projection and validation.
#include "server/sim/drivers/route.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/sim/math/geometry.h"
#include "server/sim/testing/test_routes.h"
#include "server/util/status_matchers.h"

namespace pitlane::sim {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(DriverRoute, CircleHasItsCurvatureAndEnvelopeEverywhere) {
  constexpr double kR = 30.0;
  constexpr int kN = 360;
  const RouteParams route = *MakeRouteParams({.points = Circle(kR, kN), .closed = true});
  ASSERT_EQ(route.segment_count(), static_cast<std::uint32_t>(kN));
  const double chord = 2 * kR * std::sin(kPi / kN);
  EXPECT_NEAR(route.length_m, kN * chord, 1e-9);
  // kappa = (2 pi / N) / chord: 1/R to (pi/N)²/6 relative.
  for (const RouteVertex& v : route.vertices) {
    EXPECT_NEAR(v.curvature_1pm, (kTwoPi / kN) / chord, 1e-12);
    EXPECT_NEAR(v.curvature_1pm * kR, 1.0, 2e-5);
    EXPECT_NEAR(v.envelope_m, chord / (kTwoPi / kN), 1e-9);
  }
}

TEST(DriverRoute, StraightOpenRouteHasNoCorners) {
  const RouteParams route =
      *MakeRouteParams({.points = {{0, 0}, {50, 0}, {100, 0}}, .closed = false});
  for (const RouteVertex& v : route.vertices) {
    EXPECT_EQ(v.curvature_1pm, 0.0);
    EXPECT_EQ(v.envelope_m, kInf);
  }
}

TEST(DriverRoute, SharpCornerIsSpreadOverFourMetres) {
  const RouteParams route =
      *MakeRouteParams({.points = {{0, 0}, {50, 0}, {50, 50}, {0, 50}}, .closed = true});
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(route.vertices[i].curvature_1pm, (kPi / 2) / (2 * kCornerHalfSpread_m), 1e-15);
  }
  // Braking for the corner at s = 50 at 2 m/s² per unit a_lat: E(s) = R + 2 (50 - s).
  std::uint32_t segment = 0;
  RoutePointAt(route, 30.0, segment);
  EXPECT_NEAR(CornerEnvelopeAt(route, segment, 30.0).envelope_m, 8 / kPi + 40.0, 1e-12);
  // Just past the corner its radius holds for the spread, then the next braking curve.
  RoutePointAt(route, 51.0, segment);
  EXPECT_EQ(segment, 1u);
  EXPECT_NEAR(CornerEnvelopeAt(route, segment, 51.0).envelope_m, 8 / kPi, 1e-12);
  EXPECT_EQ(CornerEnvelopeAt(route, segment, 51.0).slope, 0.0);
  EXPECT_NEAR(CornerEnvelopeAt(route, segment, 53.0).envelope_m, 8 / kPi + 2 * 47.0, 1e-12);
}

TEST(DriverRoute, ProjectionFromAHintFollowsAPointRoundTheLoop) {
  const RouteParams route = *MakeRouteParams({.points = Oval(40.0, 25.0, 2.0), .closed = true});
  std::uint32_t hint = 0;
  double last_s = 0.0;
  int laps = 0;
  // A point 0.7 m left of the line, 0.37 m further each step, for two laps. Near a point where
  // the route turns left it is nearer than 0.7 m to the next segment, by up to 0.7 (1 - cos)
  // of the turn, and its projection lies up to 0.7 tan(turn) from where it was placed.
  for (double s = 0.1; s < 2 * route.length_m; s += 0.37) {
    std::uint32_t segment = hint;
    const RoutePoint on = RoutePointAt(route, s, segment);
    const RouteVertex& v = route.vertices[segment];
    const double x = on.x_m - 0.7 * v.dir_y;
    const double y = on.y_m + 0.7 * v.dir_x;
    const RouteProjection near = ProjectOntoRouteFrom(route, x, y, hint);
    const RouteProjection global = ProjectOntoRoute(route, x, y);
    EXPECT_EQ(near.segment, global.segment) << s;
    EXPECT_DOUBLE_EQ(near.s_m, global.s_m) << s;
    EXPECT_NEAR(near.cross_track_m, 0.7, 0.01) << s;
    const double ahead_m = std::remainder(near.s_m - s, route.length_m);
    EXPECT_NEAR(ahead_m, 0.0, 0.06) << s;
    if (near.s_m < last_s - 0.5 * route.length_m) ++laps;
    last_s = near.s_m;
    hint = near.segment;
  }
  EXPECT_EQ(laps, 1);
  // Right of the line: negative.
  EXPECT_NEAR(ProjectOntoRoute(route, 0.0, -25.0 - 1.5).cross_track_m, -1.5, 1e-12);
}

TEST(DriverRoute, LookaheadPointWrapsOnClosedRoutesAndStopsAtTheEndOfOpenOnes) {
  const RouteParams loop =
      *MakeRouteParams({.points = {{0, 0}, {10, 0}, {10, 10}, {0, 10}}, .closed = true});
  std::uint32_t segment = 3;
  RoutePoint p = RoutePointAt(loop, 42.5, segment);  // 2.5 m into the second lap.
  EXPECT_EQ(segment, 0u);
  EXPECT_DOUBLE_EQ(p.x_m, 2.5);
  p = RoutePointAt(loop, -1.0, segment);  // Behind the start: the closing segment.
  EXPECT_EQ(segment, 3u);
  EXPECT_DOUBLE_EQ(p.y_m, 1.0);
  const RouteParams line = *MakeRouteParams({.points = {{0, 0}, {10, 0}}});
  segment = 0;
  p = RoutePointAt(line, 25.0, segment);
  EXPECT_DOUBLE_EQ(p.x_m, 10.0);
}

TEST(DriverRoute, ValidationNamesTheField) {
  const auto route = [](std::vector<RoutePoint> points, bool closed = false,
                        double lane_width_m = 3.5) {
    return Route{.points = std::move(points), .closed = closed, .lane_width_m = lane_width_m};
  };
  const std::vector<std::pair<Route, std::string>> cases = {
      {route({{0, 0}}), "points: at least 2"},
      {route({{0, 0}, {1, 0}}, true), "points: at least 3"},
      {route({{0, 0}, {std::nan(""), 0}}), "points[1].x_m"},
      {route({{0, 0}, {1, 2e7}}), "points[1].y_m"},
      {route({{0, 0}, {1, 0}, {1, 0.0005}}), "points[2]: 0.0005 m from the point before it"},
      {route({{0, 0}, {1, 0}, {0, 1}, {0, 0}}, true), "points[0]: 0 m from the last point"},
      {route({{0, 0}, {1, 0}}, false, 0.0), "lane_width_m"},
      {route({{0, 0}, {1, 0}}, false, 101.0), "lane_width_m"},
  };
  for (const auto& [bad, field] : cases) {
    const absl::StatusOr<RouteParams> params = MakeRouteParams(bad);
    EXPECT_THAT(params, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(field))) << field;
  }
}

}  // namespace
}  // namespace pitlane::sim
