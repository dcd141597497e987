// A route raced as a track (docs/racing.md): its centre line (the route), its two edges at half
// the lane width either side, its start/finish line at the route's first point and its sectors.
//
// Where a vehicle is on it (TrackPosition): the arc length from the line, the signed offset
// from the centre line (positive left of the direction of travel), the heading relative to the
// centre line, and whether it is on the track. And what a beam from a point meets first of the
// edges (CastOnEdges), found through a grid of the edges' segments: the same distance a test of
// every segment gives, exactly.
//
// Only +, -, *, / and sqrt (and the simulation's own Atan2): the same results on every machine.
#ifndef PITLANE_SERVER_SIM_RACING_TRACK_H_
#define PITLANE_SERVER_SIM_RACING_TRACK_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/sim/drivers/route.h"
#include "server/sim/math/geometry.h"

namespace pitlane::sim {

// Most sectors a track may have.
inline constexpr std::size_t kMaxSectors = 64;

// A segment of an edge, from (x0, y0) to (x1, y1).
struct EdgeSegment {
  double x0_m = 0.0, y0_m = 0.0, x1_m = 0.0, y1_m = 0.0;
};

struct TrackGeometry {
  RouteParams route;  // The centre line: closed.
  double half_width_m = 0.0;
  // Arc lengths where sectors 1, 2, ... begin, ascending in (0, length); sector 0 begins at
  // the line. Empty: one sector, the lap.
  std::vector<double> sector_starts_m;
  // The two edges, as segments: each side of each centre-line segment at half the width,
  // joined round the outside of a corner by points on the arc at half the width from its
  // vertex (the chords within 1 cm of it), and on the inside at the point where the two sides
  // meet. So a point is between the edges exactly when it is within half the width of the
  // centre line (to that centimetre).
  std::vector<EdgeSegment> edges;
  // A uniform grid over the edges for casting beams: each cell lists the segments that pass
  // through it (or within a hair of it). Dense (cell_start: offsets into cell_items, grid_nx
  // x grid_ny cells from the origin, a cell of margin all round) unless the track spreads too
  // far for that, then sparse (sparse_cells: a cell's key to its items' offset and count).
  double grid_origin_x_m = 0.0, grid_origin_y_m = 0.0, cell_m = 1.0;
  std::int64_t grid_nx = 0, grid_ny = 0;
  std::vector<std::uint32_t> cell_start;
  std::vector<std::uint32_t> cell_items;
  absl::flat_hash_map<std::uint64_t, std::pair<std::uint32_t, std::uint32_t>> sparse_cells;
};

// Most edge segments a track may have by default: a grid of them costs about 50 bytes each.
inline constexpr std::size_t kMaxTrackEdges = 1'000'000;

// Shortest track, m.
inline constexpr double kMinTrackLength_m = 10.0;

// Builds a track from a validated route: closed, at least kMinTrackLength_m long, turning by
// less than 170 degrees at any point, and nowhere bending so tightly that an inside edge would
// fold over itself (about: a radius above half the width). `sector_starts_m`: ascending, each
// in (0, length) and at least 1 m from its neighbours and the line; at most kMaxSectors - 1.
// InvalidArgument naming the field ("closed: ...", "points[7]: ...", "sector_starts_m[2]: ...").
// `max_edges`: most edge segments it may have (the outside of each corner takes several);
// beyond, ResourceExhausted ("edges: ...") before anything large is built.
absl::StatusOr<TrackGeometry> MakeTrackGeometry(const RouteParams& route,
                                                absl::Span<const double> sector_starts_m,
                                                std::size_t max_edges = kMaxTrackEdges);

// A point's place on a track.
struct TrackPosition {
  std::uint32_t segment = 0;  // The centre line's segment nearest to it (a hint for the next).
  double s_m = 0.0;           // Arc length from the line, [0, length).
  double lateral_m = 0.0;     // Offset from the centre line, positive to its left, m.
  // The vehicle's heading minus the centre line's direction there, (-pi, pi].
  double heading_rad = 0.0;
  bool on_track = false;  // |lateral_m| <= half the width.
};

// `pose` on `track`, the nearest centre-line point found by walking from segment `hint`
// (continuous as a vehicle moves; see ProjectOntoRouteFrom).
TrackPosition PositionOnTrack(const TrackGeometry& track, const Pose2& pose, std::uint32_t hint);
// The same without heading_rad (left 0): what counting laps needs, without the arctangent
// that is half its cost.
TrackPosition PlaceOnTrack(const TrackGeometry& track, double x_m, double y_m, std::uint32_t hint);
// Heading `yaw_rad` minus the direction of the centre line's `segment`, (-pi, pi].
double HeadingOnTrack(const TrackGeometry& track, std::uint32_t segment, double yaw_rad);

// The distance from (x, y) along the unit direction (dx, dy) to the first edge segment the
// beam meets within `range_m` (its start included); `range_m` if none, or if any of them is
// not finite. `range_m` at most kMaxTrackBeamRange_m (track_sensors.h).
double CastOnEdges(const TrackGeometry& track, double x_m, double y_m, double dx, double dy,
                   double range_m);

// The same by testing every edge segment: the oracle of the tests and the benchmark's baseline.
double CastOnEdgesBruteForce(const TrackGeometry& track, double x_m, double y_m, double dx,
                             double dy, double range_m);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_RACING_TRACK_H_
