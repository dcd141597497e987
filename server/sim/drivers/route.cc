#include "server/sim/drivers/route.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/sim/math/functions.h"
#include "server/sim/math/geometry.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Squared distance from (x, y) to segment `vertex` (from it to the next vertex), and the
// distance along the segment of the nearest point.
double SegmentDistance2(const RouteVertex& vertex, double x_m, double y_m, double* along_m) {
  const double rx = x_m - vertex.x_m;
  const double ry = y_m - vertex.y_m;
  const double along = std::clamp(rx * vertex.dir_x + ry * vertex.dir_y, 0.0, vertex.length_m);
  const double ex = rx - along * vertex.dir_x;
  const double ey = ry - along * vertex.dir_y;
  *along_m = along;
  return ex * ex + ey * ey;
}

RouteProjection ProjectionOn(const RouteParams& route, std::uint32_t segment, double x_m,
                             double y_m) {
  const RouteVertex& vertex = route.vertices[segment];
  double along_m = 0.0;
  const double distance_m = std::sqrt(SegmentDistance2(vertex, x_m, y_m, &along_m));
  const double cross = vertex.dir_x * (y_m - vertex.y_m) - vertex.dir_y * (x_m - vertex.x_m);
  RouteProjection projection{.segment = segment,
                             .s_m = vertex.s_m + along_m,
                             .cross_track_m = cross < 0.0 ? -distance_m : distance_m};
  if (route.closed && projection.s_m >= route.length_m) {
    projection.segment = 0;
    projection.s_m = 0.0;
  }
  return projection;
}

}  // namespace

absl::StatusOr<RouteParams> MakeRouteParams(const Route& route) {
  const std::size_t n = route.points.size();
  const std::size_t fewest = route.closed ? 3 : 2;
  if (n < fewest) {
    return absl::InvalidArgumentError(absl::StrCat("points: at least ", fewest, " points for ",
                                                   route.closed ? "a closed" : "an open",
                                                   " route, got ", n));
  }
  if (n > kMaxRoutePointsPerWorld) {
    return absl::InvalidArgumentError(
        absl::StrCat("points: at most ", kMaxRoutePointsPerWorld, " points, got ", n));
  }
  for (std::size_t i = 0; i < n; ++i) {
    RETURN_IF_ERROR(CheckInRange(absl::StrCat("points[", i, "].x_m"), route.points[i].x_m,
                                 -kMaxCoordinate_m, kMaxCoordinate_m));
    RETURN_IF_ERROR(CheckInRange(absl::StrCat("points[", i, "].y_m"), route.points[i].y_m,
                                 -kMaxCoordinate_m, kMaxCoordinate_m));
  }
  RETURN_IF_ERROR(CheckPositive("lane_width_m", route.lane_width_m, kMaxLaneWidth_m));

  RouteParams params{.closed = route.closed, .lane_width_m = route.lane_width_m};
  const std::size_t m = route.closed ? n : n - 1;  // Segments.
  std::vector<RouteVertex>& vertices = params.vertices;
  vertices.resize(m + 1);
  // Segments: lengths, directions, arc lengths.
  double s_m = 0.0;
  for (std::size_t i = 0; i < m; ++i) {
    const RoutePoint& from = route.points[i];
    const RoutePoint& to = route.points[(i + 1) % n];
    const double dx = to.x_m - from.x_m;
    const double dy = to.y_m - from.y_m;
    const double length_m = std::sqrt(dx * dx + dy * dy);
    if (!(length_m >= kMinRoutePointSpacing_m)) {
      const bool closing = i + 1 == n;
      return absl::InvalidArgumentError(absl::StrCat(
          "points[", (i + 1) % n, "]: ", length_m, " m from ",
          closing ? "the last point (a closed route joins its last point to its first: do not "
                    "repeat the first point)"
                  : "the point before it",
          "; consecutive points must be at least ", kMinRoutePointSpacing_m, " m apart"));
    }
    vertices[i] = RouteVertex{.x_m = from.x_m,
                              .y_m = from.y_m,
                              .s_m = s_m,
                              .length_m = length_m,
                              .dir_x = dx / length_m,
                              .dir_y = dy / length_m};
    s_m += length_m;
  }
  params.length_m = s_m;
  const RoutePoint& end = route.points[m % n];
  vertices[m] = RouteVertex{.x_m = end.x_m,
                            .y_m = end.y_m,
                            .s_m = s_m,
                            .dir_x = vertices[m - 1].dir_x,
                            .dir_y = vertices[m - 1].dir_y};

  // Curvature: each interior point's turn, spread over half of each neighbouring segment (at
  // most kCornerHalfSpread_m). For points sampled from a smooth curve this is the turn over the
  // arc between the segments' midpoints, which tends to the curve's curvature.
  for (std::size_t i = route.closed ? 0 : 1; i < m; ++i) {
    const RouteVertex& before = vertices[i == 0 ? m - 1 : i - 1];
    RouteVertex& vertex = vertices[i];
    const double turn_rad = Atan2(before.dir_x * vertex.dir_y - before.dir_y * vertex.dir_x,
                                  before.dir_x * vertex.dir_x + before.dir_y * vertex.dir_y);
    const double spread_before_m = std::min(kCornerHalfSpread_m, 0.5 * before.length_m);
    vertex.spread_after_m = std::min(kCornerHalfSpread_m, 0.5 * vertex.length_m);
    vertex.curvature_1pm = turn_rad / (spread_before_m + vertex.spread_after_m);
  }
  if (route.closed) {
    vertices[m].curvature_1pm = vertices[0].curvature_1pm;
    vertices[m].spread_after_m = vertices[0].spread_after_m;
  }

  // Corner envelope, backwards: E_i = min(1/|kappa_i|, E_{i+1} + 2 length_i). Round a closed
  // route two passes settle it: after the first, E_0 sees every point of the lap; the second
  // carries it round to the others.
  const auto radius_m = [](const RouteVertex& vertex) {
    return vertex.curvature_1pm != 0.0 ? 1.0 / std::abs(vertex.curvature_1pm) : kInfinity;
  };
  vertices[m].envelope_m = kInfinity;
  for (int pass = 0; pass < (route.closed ? 2 : 1); ++pass) {
    for (std::size_t i = m; i-- > 0;) {
      vertices[i].envelope_m =
          std::min(radius_m(vertices[i]), vertices[i + 1].envelope_m + 2.0 * vertices[i].length_m);
    }
    if (route.closed) vertices[m].envelope_m = vertices[0].envelope_m;
  }
  return params;
}

RouteProjection ProjectOntoRoute(const RouteParams& route, double x_m, double y_m) {
  std::uint32_t best = 0;
  double best_d2 = kInfinity;
  for (std::uint32_t i = 0; i < route.segment_count(); ++i) {
    double along_m = 0.0;
    const double d2 = SegmentDistance2(route.vertices[i], x_m, y_m, &along_m);
    if (d2 < best_d2) {
      best_d2 = d2;
      best = i;
    }
  }
  return ProjectionOn(route, best, x_m, y_m);
}

RouteProjection ProjectOntoRouteFrom(const RouteParams& route, double x_m, double y_m,
                                     std::uint32_t hint) {
  const std::uint32_t m = route.segment_count();
  std::uint32_t i = std::min(hint, m - 1);
  double along_m = 0.0;
  double best_d2 = SegmentDistance2(route.vertices[i], x_m, y_m, &along_m);
  // Walk forwards while the next segment is nearer, else backwards; at most one lap.
  std::uint32_t steps = 0;
  for (; steps < m; ++steps) {
    if (i + 1 == m && !route.closed) break;
    const std::uint32_t next = i + 1 == m ? 0 : i + 1;
    const double d2 = SegmentDistance2(route.vertices[next], x_m, y_m, &along_m);
    if (!(d2 < best_d2)) break;
    best_d2 = d2;
    i = next;
  }
  if (steps == 0) {
    for (; steps < m; ++steps) {
      if (i == 0 && !route.closed) break;
      const std::uint32_t previous = i == 0 ? m - 1 : i - 1;
      const double d2 = SegmentDistance2(route.vertices[previous], x_m, y_m, &along_m);
      if (!(d2 < best_d2)) break;
      best_d2 = d2;
      i = previous;
    }
  }
  return ProjectionOn(route, i, x_m, y_m);
}

double WrapArcLength(const RouteParams& route, double s_m) {
  if (!route.closed) return std::clamp(s_m, 0.0, route.length_m);
  if (s_m >= 0.0 && s_m < route.length_m) return s_m;
  s_m -= route.length_m * std::floor(s_m / route.length_m);
  return s_m < route.length_m ? s_m : 0.0;
}

RoutePoint RoutePointAt(const RouteParams& route, double s_m, std::uint32_t& segment) {
  s_m = WrapArcLength(route, s_m);
  const std::uint32_t m = route.segment_count();
  std::uint32_t i = std::min(segment, m - 1);
  const std::vector<RouteVertex>& v = route.vertices;
  if (route.closed) {
    // Across the seam, restart at the end that is nearer along the route.
    if (v[i].s_m - s_m > 0.5 * route.length_m) i = 0;
    if (s_m - v[i + 1].s_m > 0.5 * route.length_m) i = m - 1;
  }
  while (i > 0 && s_m < v[i].s_m) --i;
  while (i + 1 < m && s_m > v[i + 1].s_m) ++i;
  segment = i;
  const double along_m = std::clamp(s_m - v[i].s_m, 0.0, v[i].length_m);
  return {.x_m = v[i].x_m + along_m * v[i].dir_x, .y_m = v[i].y_m + along_m * v[i].dir_y};
}

CornerEnvelope CornerEnvelopeAt(const RouteParams& route, std::uint32_t segment, double s_m) {
  const RouteVertex& start = route.vertices[segment];
  const RouteVertex& end = route.vertices[segment + 1];
  const double along_m = std::clamp(s_m - start.s_m, 0.0, start.length_m);
  const double braking_m = end.envelope_m + 2.0 * (start.length_m - along_m);
  if (along_m <= start.spread_after_m && start.curvature_1pm != 0.0) {
    const double corner_m = 1.0 / std::abs(start.curvature_1pm);
    if (corner_m < braking_m) return {.envelope_m = corner_m, .slope = 0.0};
  }
  return {.envelope_m = braking_m, .slope = -2.0};
}

}  // namespace pitlane::sim
