#include "server/sim/racing/track.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/sim/math/functions.h"

namespace pitlane::sim {
namespace {

// How far a corner's edge point may move from its vertex, in half widths.
constexpr double kMaxMiter = 4.0;
// Most (segment, cell) entries the grid holds; beyond, its cells grow.
constexpr std::uint64_t kMaxGridEntries = std::uint64_t{8} << 20;
constexpr std::uint64_t kMaxGridCells = std::uint64_t{4} << 20;

// The unit left normal of the bisector of the corner at vertex j, and how far along it the
// edge point lies, in half widths (1 on a straight).
void CornerNormal(const RouteParams& route, std::size_t j, double* nx, double* ny,
                  double* scale) {
  const std::vector<RouteVertex>& v = route.vertices;
  const std::size_t m = route.segment_count();
  // The directions of the segments before and after vertex j.
  const RouteVertex& after = v[j < m ? j : (route.closed ? 0 : m - 1)];
  const RouteVertex* before = nullptr;
  if (j > 0) {
    before = &v[j - 1];
  } else if (route.closed) {
    before = &v[m - 1];
  }
  const double ax = -after.dir_y, ay = after.dir_x;  // Left normal after.
  if (before == nullptr || (j == m && !route.closed)) {
    const RouteVertex& only = j == m ? v[m - 1] : after;
    *nx = -only.dir_y;
    *ny = only.dir_x;
    *scale = 1.0;
    return;
  }
  const double bx = -before->dir_y, by = before->dir_x;  // Left normal before.
  double sx = ax + bx, sy = ay + by;
  const double norm = std::sqrt(sx * sx + sy * sy);
  if (norm < 1e-9) {  // A full turn back: the edge point beside the next segment.
    *nx = ax;
    *ny = ay;
    *scale = 1.0;
    return;
  }
  sx /= norm;
  sy /= norm;
  const double cos_half = sx * ax + sy * ay;
  *nx = sx;
  *ny = sy;
  *scale = cos_half > 1.0 / kMaxMiter ? 1.0 / cos_half : kMaxMiter;
}

double Cross(double ax, double ay, double bx, double by) { return ax * by - ay * bx; }

// The distance along the beam to `segment`, or +inf if it does not meet it within range.
double Hit(const EdgeSegment& segment, double x_m, double y_m, double dx, double dy,
           double range_m) {
  const double ex = segment.x1_m - segment.x0_m, ey = segment.y1_m - segment.y0_m;
  const double denominator = Cross(dx, dy, ex, ey);
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (denominator == 0.0) return kInf;  // Parallel: a beam along an edge does not stop on it.
  const double px = segment.x0_m - x_m, py = segment.y0_m - y_m;
  const double t = Cross(px, py, ex, ey) / denominator;
  const double u = Cross(px, py, dx, dy) / denominator;
  if (!(t >= 0.0 && t <= range_m && u >= 0.0 && u <= 1.0)) return kInf;
  return t;
}

std::int32_t CellIndex(double value, double origin, double cell, std::int32_t count) {
  const double index = std::floor((value - origin) / cell);
  return static_cast<std::int32_t>(std::clamp(index, 0.0, static_cast<double>(count - 1)));
}

// Fills the grid of `track`'s edge segments.
void BuildGrid(TrackGeometry& track) {
  const std::uint32_t m = track.route.segment_count();
  double min_x = std::numeric_limits<double>::infinity(), min_y = min_x;
  double max_x = -min_x, max_y = -min_x;
  double total_length = 0.0;
  for (std::uint32_t i = 0; i < 2 * m; ++i) {
    const EdgeSegment& s = track.edge_segment(i);
    min_x = std::min({min_x, s.x0_m, s.x1_m});
    max_x = std::max({max_x, s.x0_m, s.x1_m});
    min_y = std::min({min_y, s.y0_m, s.y1_m});
    max_y = std::max({max_y, s.y0_m, s.y1_m});
    total_length += std::sqrt((s.x1_m - s.x0_m) * (s.x1_m - s.x0_m) +
                              (s.y1_m - s.y0_m) * (s.y1_m - s.y0_m));
  }
  // Cells about as long as a segment, then larger while the grid would hold too much.
  double cell = std::clamp(total_length / (2.0 * m), 2.0, 50.0);
  // A segment is listed in every cell its box, grown by a hair, meets: a beam meeting it on a
  // cell's boundary (or a corner) finds it in either cell, whatever the rounding.
  double margin = 0.0;
  const auto entries = [&](double size) {
    std::uint64_t count = 0;
    const double pad = size * 1e-6;
    for (std::uint32_t i = 0; i < 2 * m; ++i) {
      const EdgeSegment& s = track.edge_segment(i);
      const double nx = std::floor((std::max(s.x0_m, s.x1_m) + pad - min_x) / size) -
                        std::floor((std::min(s.x0_m, s.x1_m) - pad - min_x) / size) + 1;
      const double ny = std::floor((std::max(s.y0_m, s.y1_m) + pad - min_y) / size) -
                        std::floor((std::min(s.y0_m, s.y1_m) - pad - min_y) / size) + 1;
      count += static_cast<std::uint64_t>(nx * ny);
      if (count > kMaxGridEntries) return count;
    }
    return count;
  };
  while (((max_x - min_x) / cell + 1) * ((max_y - min_y) / cell + 1) >
             static_cast<double>(kMaxGridCells) ||
         entries(cell) > kMaxGridEntries) {
    cell *= 2.0;
  }
  margin = cell * 1e-6;
  track.cell_m = cell;
  track.grid_origin_x_m = min_x;
  track.grid_origin_y_m = min_y;
  track.grid_nx = static_cast<std::int32_t>(std::floor((max_x - min_x) / cell)) + 1;
  track.grid_ny = static_cast<std::int32_t>(std::floor((max_y - min_y) / cell)) + 1;
  const std::size_t cells = static_cast<std::size_t>(track.grid_nx) * track.grid_ny;
  // Two passes: counts, then the items in place.
  std::vector<std::uint32_t> counts(cells + 1, 0);
  const auto for_each_cell = [&](std::uint32_t i, auto&& visit) {
    const EdgeSegment& s = track.edge_segment(i);
    const std::int32_t x0 = CellIndex(std::min(s.x0_m, s.x1_m) - margin, min_x, cell, track.grid_nx);
    const std::int32_t x1 = CellIndex(std::max(s.x0_m, s.x1_m) + margin, min_x, cell, track.grid_nx);
    const std::int32_t y0 = CellIndex(std::min(s.y0_m, s.y1_m) - margin, min_y, cell, track.grid_ny);
    const std::int32_t y1 = CellIndex(std::max(s.y0_m, s.y1_m) + margin, min_y, cell, track.grid_ny);
    for (std::int32_t y = y0; y <= y1; ++y) {
      for (std::int32_t x = x0; x <= x1; ++x) {
        visit(static_cast<std::size_t>(y) * track.grid_nx + x);
      }
    }
  };
  for (std::uint32_t i = 0; i < 2 * m; ++i) {
    for_each_cell(i, [&](std::size_t c) { ++counts[c + 1]; });
  }
  for (std::size_t c = 0; c < cells; ++c) counts[c + 1] += counts[c];
  track.cell_start = counts;
  track.cell_items.resize(counts[cells]);
  for (std::uint32_t i = 0; i < 2 * m; ++i) {
    for_each_cell(i, [&](std::size_t c) { track.cell_items[counts[c]++] = i; });
  }
}

}  // namespace

absl::StatusOr<TrackGeometry> MakeTrackGeometry(const RouteParams& route,
                                                absl::Span<const double> sector_starts_m) {
  if (route.vertices.size() < 2) return absl::InvalidArgumentError("points: at least 2");
  if (sector_starts_m.size() + 1 > kMaxSectors) {
    return absl::InvalidArgumentError(
        absl::StrCat("sectors: at most ", kMaxSectors - 1, " boundaries, got ",
                     sector_starts_m.size()));
  }
  double previous = 0.0;
  for (std::size_t k = 0; k < sector_starts_m.size(); ++k) {
    const double s = sector_starts_m[k];
    if (!(s >= previous + 1.0) || !(s <= route.length_m - 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sectors[", k, "]: must be at least 1 m past the line and the sector before it and 1 m "
          "before the line again (the track is ", route.length_m, " m long), got ", s));
    }
    previous = s;
  }
  TrackGeometry track;
  track.route = route;
  track.half_width_m = route.lane_width_m / 2;
  track.sector_starts_m.assign(sector_starts_m.begin(), sector_starts_m.end());
  const std::size_t m = route.segment_count();
  std::vector<double> left_x(m + 1), left_y(m + 1), right_x(m + 1), right_y(m + 1);
  for (std::size_t j = 0; j <= m; ++j) {
    double nx = 0.0, ny = 0.0, scale = 1.0;
    CornerNormal(route, j, &nx, &ny, &scale);
    const double reach = track.half_width_m * scale;
    const RouteVertex& v = route.vertices[j];
    left_x[j] = v.x_m + nx * reach;
    left_y[j] = v.y_m + ny * reach;
    right_x[j] = v.x_m - nx * reach;
    right_y[j] = v.y_m - ny * reach;
  }
  if (route.closed) {  // The last vertex is the first: the same edge points, exactly.
    left_x[m] = left_x[0];
    left_y[m] = left_y[0];
    right_x[m] = right_x[0];
    right_y[m] = right_y[0];
  }
  track.left_edge.resize(m);
  track.right_edge.resize(m);
  for (std::size_t i = 0; i < m; ++i) {
    track.left_edge[i] = {left_x[i], left_y[i], left_x[i + 1], left_y[i + 1]};
    track.right_edge[i] = {right_x[i], right_y[i], right_x[i + 1], right_y[i + 1]};
  }
  BuildGrid(track);
  return track;
}

TrackPosition PositionOnTrack(const TrackGeometry& track, const Pose2& pose, std::uint32_t hint) {
  const RouteProjection projection =
      ProjectOntoRouteFrom(track.route, pose.x_m, pose.y_m, hint);
  const RouteVertex& v = track.route.vertices[projection.segment];
  TrackPosition position;
  position.segment = projection.segment;
  position.s_m = WrapArcLength(track.route, projection.s_m);
  position.lateral_m = projection.cross_track_m;
  position.heading_rad = WrapToPi(pose.yaw_rad - Atan2(v.dir_y, v.dir_x));
  position.on_track = std::abs(position.lateral_m) <= track.half_width_m;
  return position;
}

double CastOnEdges(const TrackGeometry& track, double x_m, double y_m, double dx, double dy,
                   double range_m) {
  // Cells along the beam in order (Amanatides and Woo), each one's segments tested, until a
  // hit nearer than the next cell's entry.
  const double cell = track.cell_m;
  const double ox = x_m - track.grid_origin_x_m, oy = y_m - track.grid_origin_y_m;
  const double width = cell * track.grid_nx, height = cell * track.grid_ny;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // Where the beam is inside the grid: [t_in, t_out].
  double t_in = 0.0, t_out = range_m;
  const auto clip = [&](double origin, double direction, double size) {
    if (direction == 0.0) return origin >= 0.0 && origin <= size;
    double t0 = (0.0 - origin) / direction, t1 = (size - origin) / direction;
    if (t0 > t1) std::swap(t0, t1);
    t_in = std::max(t_in, t0);
    t_out = std::min(t_out, t1);
    return t_in <= t_out;
  };
  if (!clip(ox, dx, width) || !clip(oy, dy, height)) return range_m;
  const double ex = ox + dx * t_in, ey = oy + dy * t_in;
  std::int32_t ix = std::clamp(static_cast<std::int32_t>(std::floor(ex / cell)), 0, track.grid_nx - 1);
  std::int32_t iy = std::clamp(static_cast<std::int32_t>(std::floor(ey / cell)), 0, track.grid_ny - 1);
  const std::int32_t step_x = dx > 0.0 ? 1 : -1, step_y = dy > 0.0 ? 1 : -1;
  // The beam's distance to the next vertical (horizontal) cell boundary, and between two.
  const double delta_x = dx != 0.0 ? cell / std::abs(dx) : kInf;
  const double delta_y = dy != 0.0 ? cell / std::abs(dy) : kInf;
  double next_x = dx != 0.0 ? ((ix + (dx > 0.0 ? 1 : 0)) * cell - ox) / dx : kInf;
  double next_y = dy != 0.0 ? ((iy + (dy > 0.0 ? 1 : 0)) * cell - oy) / dy : kInf;
  double best = kInf;
  while (true) {
    const std::size_t c = static_cast<std::size_t>(iy) * track.grid_nx + ix;
    for (std::uint32_t k = track.cell_start[c]; k < track.cell_start[c + 1]; ++k) {
      best = std::min(best, Hit(track.edge_segment(track.cell_items[k]), x_m, y_m, dx, dy,
                                range_m));
    }
    const double exit = std::min(next_x, next_y);
    if (best <= exit || exit > t_out) break;
    if (next_x < next_y) {
      ix += step_x;
      next_x += delta_x;
      if (ix < 0 || ix >= track.grid_nx) break;
    } else {
      iy += step_y;
      next_y += delta_y;
      if (iy < 0 || iy >= track.grid_ny) break;
    }
  }
  return best <= range_m ? best : range_m;
}

double CastOnEdgesBruteForce(const TrackGeometry& track, double x_m, double y_m, double dx,
                             double dy, double range_m) {
  double best = std::numeric_limits<double>::infinity();
  for (std::uint32_t i = 0; i < 2 * track.route.segment_count(); ++i) {
    best = std::min(best, Hit(track.edge_segment(i), x_m, y_m, dx, dy, range_m));
  }
  return best <= range_m ? best : range_m;
}

}  // namespace pitlane::sim
