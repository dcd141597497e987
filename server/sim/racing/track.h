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
#include <vector>

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
  RouteParams route;  // The centre line. Closed for laps.
  double half_width_m = 0.0;
  // Arc lengths where sectors 1, 2, ... begin, ascending in (0, length); sector 0 begins at
  // the line. Empty: one sector, the lap.
  std::vector<double> sector_starts_m;
  // The edges: each vertex of the centre line moved half the width to its left (right) along
  // the bisector of its corner, as far as keeps both neighbouring segments' edges at half the
  // width (at most 4 half widths, for a very sharp corner); segment i of an edge runs beside
  // segment i of the route.
  std::vector<EdgeSegment> left_edge, right_edge;
  // A uniform grid over the edges' segments for casting beams: cell (ix, iy) lists the
  // segments whose bounding box meets it (left edge segments as i, right as m + i).
  double grid_origin_x_m = 0.0, grid_origin_y_m = 0.0, cell_m = 1.0;
  std::int32_t grid_nx = 0, grid_ny = 0;
  std::vector<std::uint32_t> cell_start;  // grid_nx * grid_ny + 1 offsets into cell_items.
  std::vector<std::uint32_t> cell_items;

  const EdgeSegment& edge_segment(std::uint32_t index) const {
    const std::uint32_t m = route.segment_count();
    return index < m ? left_edge[index] : right_edge[index - m];
  }
};

// Builds a track from a validated route. `sector_starts_m`: ascending, each in (0, length)
// and at least 1 m from its neighbours and the line; at most kMaxSectors - 1. InvalidArgument
// naming the field ("sectors[2]: ...").
absl::StatusOr<TrackGeometry> MakeTrackGeometry(const RouteParams& route,
                                                absl::Span<const double> sector_starts_m);

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

// The distance from (x, y) along the unit direction (dx, dy) to the first edge segment the
// beam meets within `range_m` (its start included); `range_m` if none.
double CastOnEdges(const TrackGeometry& track, double x_m, double y_m, double dx, double dy,
                   double range_m);

// The same by testing every edge segment: the oracle of the tests and the benchmark's baseline.
double CastOnEdgesBruteForce(const TrackGeometry& track, double x_m, double y_m, double dx,
                             double dy, double range_m);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_RACING_TRACK_H_
