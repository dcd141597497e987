// Routes for the built-in drivers: the polyline a client gives (Route), and its geometry,
// validated and precomputed once per world (RouteParams): arc lengths, directions, curvature
// and the corner envelope; the projection of a point onto a route and the point at an arc
// length. The control laws that use them are in drivers.h.
#ifndef PITLANE_SERVER_SIM_DRIVERS_ROUTE_H_
#define PITLANE_SERVER_SIM_DRIVERS_ROUTE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace pitlane::sim {

// A point of a route, metres, world frame.
struct RoutePoint {
  double x_m = 0.0;
  double y_m = 0.0;
};

// A polyline the drivers follow (a track's centre line, a lane): at least 2 points, no two
// consecutive points closer than 1 mm; closed routes loop from the last point back to the
// first. Routes belong to a world (WorldSpec::routes) and are named there by index.
struct Route {
  std::vector<RoutePoint> points;
  bool closed = false;
  double lane_width_m = 3.5;  // Width of the lane around the line, metres, in (0, 100].
  // Raced as a track (racing/track.h): arc lengths from the first point where sectors 1, 2,
  // ... begin, metres, ascending; empty: the lap is one sector. Closed routes only.
  std::vector<double> sector_starts_m = {};
};

// Most routes a world may hold, and most points over all of them (64 bytes each).
inline constexpr std::size_t kMaxRoutes = 10'000;
inline constexpr std::size_t kMaxRoutePointsPerWorld = 1'000'000;
// Closest two consecutive route points may be, m.
inline constexpr double kMinRoutePointSpacing_m = 1e-3;
inline constexpr double kMaxLaneWidth_m = 100.0;
// A corner's turn is spread over at most this far either side of its point when estimating the
// route's curvature, m: a polyline's sharp corner counts as an arc of 2 x this length (a 90°
// corner as a 2.5 m radius), a finely sampled curve keeps its own curvature.
inline constexpr double kCornerHalfSpread_m = 2.0;

// One point of a route with what the drivers need of its neighbourhood, computed once.
struct RouteVertex {
  double x_m = 0.0;  // Position, world frame, m.
  double y_m = 0.0;
  double s_m = 0.0;       // Arc length from the route's first point, m.
  double length_m = 0.0;  // Length of the segment from this point to the next, m (0 at the end).
  double dir_x = 1.0;     // Unit direction of that segment (of the one before, at the end).
  double dir_y = 0.0;
  // Curvature here, 1/m, positive turning left: the turn between the segments before and after,
  // over the stretch it is spread on (half of each segment, at most kCornerHalfSpread_m each
  // side). 0 at the ends of an open route.
  double curvature_1pm = 0.0;
  // How far past this point its turn is spread, m.
  double spread_after_m = 0.0;
  // The corner envelope, m: the most v² / a_lat a vehicle here may have and still brake at
  // a_lat to sqrt(a_lat / |kappa_j|) at every point j ahead (within a lap on a closed route):
  // min over j of 1/|kappa_j| + 2 (s_j - s); +inf where no corner lies ahead. (The stop at the
  // end of an open route is the driver's: RouteFollowerIntent.)
  double envelope_m = 0.0;
};

// A route's geometry, validated and precomputed (World::Create does it once per route).
// Segment i runs from vertices[i] to vertices[i + 1]; the last vertex ends the route (on a
// closed route it repeats the first point, at s = length_m).
struct RouteParams {
  bool closed = false;
  double lane_width_m = 3.5;  // m.
  double length_m = 0.0;      // Total arc length, m (the closing segment included).
  std::vector<RouteVertex> vertices;

  std::uint32_t segment_count() const { return static_cast<std::uint32_t>(vertices.size() - 1); }
};

// Validates `route` and precomputes its geometry. InvalidArgument naming the field:
// "points: at least 2 ...", "points[3].x_m: ...", "points[4]: ... from the point before it",
// "lane_width_m: ...".
absl::StatusOr<RouteParams> MakeRouteParams(const Route& route);

// The point of a route nearest to a given point.
struct RouteProjection {
  std::uint32_t segment = 0;   // The segment holding it.
  double s_m = 0.0;            // Its arc length, m: in [0, length_m), [0, length_m] if open.
  double cross_track_m = 0.0;  // Distance to it, m, positive when left of the route's direction.
};

// The nearest point over the whole route (the first segment wins a tie). O(points).
RouteProjection ProjectOntoRoute(const RouteParams& route, double x_m, double y_m);
// The nearest point found by walking from segment `hint` (forwards first) while the distance
// falls: a local minimum, which keeps s continuous where a route comes back near itself.
// O(1) amortised when the point moves little between calls.
RouteProjection ProjectOntoRouteFrom(const RouteParams& route, double x_m, double y_m,
                                     std::uint32_t hint);

// The arc length `s_m` taken modulo the length on a closed route, clamped to it on an open one.
double WrapArcLength(const RouteParams& route, double s_m);

// The point at arc length `s_m` (modulo length_m on a closed route, clamped to [0, length_m]
// on an open one). `segment` is a hint on entry and the segment holding the point on return;
// O(1) amortised when s_m changes little between calls.
RoutePoint RoutePointAt(const RouteParams& route, double s_m, std::uint32_t& segment);

// The corner envelope at arc length `s_m` on `segment` (which holds it), m, and how it changes
// along the route, dE/ds: -2 on a braking curve, 0 in a corner.
struct CornerEnvelope {
  double envelope_m = 0.0;
  double slope = 0.0;
};
CornerEnvelope CornerEnvelopeAt(const RouteParams& route, std::uint32_t segment, double s_m);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_DRIVERS_ROUTE_H_
