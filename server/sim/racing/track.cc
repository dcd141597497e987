#include "server/sim/racing/track.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/sim/math/functions.h"
#include "server/sim/math/trig.h"

namespace pitlane::sim {
namespace {

// Most cells a dense grid may have; beyond, the grid is sparse.
constexpr std::int64_t kMaxDenseCells = std::int64_t{4} << 20;
// The grid's (segment, cell) entries are kept under this many a segment, and its dense cells
// too (plus kGridSlack): the cell grows to keep them under, so a grid's memory follows its
// segments, not the area they span.
constexpr double kGridEntriesPerSegment = 16.0;
constexpr double kGridSlack = 256.0;
// The outside of a corner is drawn by chords at most this far inside its arc, m.
constexpr double kArcTolerance_m = 0.01;
// The sharpest turn a track may make at one point: its directions' dot product above this
// (cos 170 degrees).
constexpr double kMinTurnCosine = -0.98480775301220802;

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

std::int64_t CellOf(double value, double origin, double cell) {
  return static_cast<std::int64_t>(std::floor((value - origin) / cell));
}

std::uint64_t SparseKey(std::int64_t ix, std::int64_t iy) {
  return (static_cast<std::uint64_t>(ix + (std::int64_t{1} << 31)) << 32) |
         static_cast<std::uint32_t>(iy + (std::int64_t{1} << 31));
}

// Calls visit(ix, iy) for every cell that `s`, widened by `margin` on every side, passes
// through: row by row, the part of the segment within the row's band.
template <typename Visit>
void ForEachCellOf(const EdgeSegment& s, double origin_x, double origin_y, double cell,
                   double margin, Visit&& visit) {
  const double dx = s.x1_m - s.x0_m, dy = s.y1_m - s.y0_m;
  const std::int64_t iy0 = CellOf(std::min(s.y0_m, s.y1_m) - margin, origin_y, cell);
  const std::int64_t iy1 = CellOf(std::max(s.y0_m, s.y1_m) + margin, origin_y, cell);
  for (std::int64_t iy = iy0; iy <= iy1; ++iy) {
    double u0 = 0.0, u1 = 1.0;
    if (dy != 0.0) {
      const double band_low = origin_y + static_cast<double>(iy) * cell - margin;
      const double band_high = origin_y + static_cast<double>(iy + 1) * cell + margin;
      double ua = (band_low - s.y0_m) / dy, ub = (band_high - s.y0_m) / dy;
      if (ua > ub) std::swap(ua, ub);
      u0 = std::max(0.0, ua);
      u1 = std::min(1.0, ub);
      if (u0 > u1) continue;
    }
    const double xa = s.x0_m + dx * u0, xb = s.x0_m + dx * u1;
    const std::int64_t ix0 = CellOf(std::min(xa, xb) - margin, origin_x, cell);
    const std::int64_t ix1 = CellOf(std::max(xa, xb) + margin, origin_x, cell);
    for (std::int64_t ix = ix0; ix <= ix1; ++ix) visit(ix, iy);
  }
}

// Fills the grid of `track`'s edges.
void BuildGrid(TrackGeometry& track) {
  double min_x = std::numeric_limits<double>::infinity(), min_y = min_x;
  double max_x = -min_x, max_y = -min_x;
  double total_length = 0.0;
  for (const EdgeSegment& s : track.edges) {
    min_x = std::min({min_x, s.x0_m, s.x1_m});
    max_x = std::max({max_x, s.x0_m, s.x1_m});
    min_y = std::min({min_y, s.y0_m, s.y1_m});
    max_y = std::max({max_y, s.y0_m, s.y1_m});
    total_length += std::sqrt((s.x1_m - s.x0_m) * (s.x1_m - s.x0_m) +
                              (s.y1_m - s.y0_m) * (s.y1_m - s.y0_m));
  }
  const double count = static_cast<double>(track.edges.size());
  // Cells about as long as most segments (the median: a few far points do not stretch them),
  // larger if the entries would pass their bound: a segment is in about length / cell + 3.
  std::vector<double> lengths;
  lengths.reserve(track.edges.size());
  for (const EdgeSegment& s : track.edges) {
    lengths.push_back(std::sqrt((s.x1_m - s.x0_m) * (s.x1_m - s.x0_m) +
                                (s.y1_m - s.y0_m) * (s.y1_m - s.y0_m)));
  }
  std::nth_element(lengths.begin(), lengths.begin() + static_cast<std::ptrdiff_t>(lengths.size() / 2),
                   lengths.end());
  const double cell = std::max(std::clamp(lengths[lengths.size() / 2], 2.0, 50.0),
                               total_length / (kGridEntriesPerSegment * count + kGridSlack));
  // A segment is listed in every cell it passes within a hair of: a beam meeting it on a
  // cell's boundary (or a corner) finds it in either cell, whatever the rounding.
  const double margin = cell * 1e-6;
  track.cell_m = cell;
  // A cell of room all round: a beam along the outermost edge stays in listed cells.
  track.grid_origin_x_m = min_x - cell;
  track.grid_origin_y_m = min_y - cell;
  const double nx = std::floor((max_x - min_x) / cell) + 3;
  const double ny = std::floor((max_y - min_y) / cell) + 3;
  // Dense when its cells are few, against the cap and against the segments (a few long
  // segments far apart would otherwise fill megabytes of empty cells): memory in proportion
  // to the segments either way.
  const bool dense = nx * ny <= std::min(static_cast<double>(kMaxDenseCells),
                                         kGridEntriesPerSegment * count + kGridSlack);
  track.grid_nx = dense ? static_cast<std::int64_t>(nx) : 0;
  track.grid_ny = dense ? static_cast<std::int64_t>(ny) : 0;
  const double ox = track.grid_origin_x_m, oy = track.grid_origin_y_m;
  if (dense) {
    const std::size_t cells = static_cast<std::size_t>(track.grid_nx * track.grid_ny);
    std::vector<std::uint32_t> counts(cells + 1, 0);
    const auto index = [&](std::int64_t ix, std::int64_t iy) {
      return static_cast<std::size_t>(iy * track.grid_nx + ix);
    };
    for (const EdgeSegment& s : track.edges) {
      ForEachCellOf(s, ox, oy, cell, margin,
                    [&](std::int64_t ix, std::int64_t iy) { ++counts[index(ix, iy) + 1]; });
    }
    for (std::size_t c = 0; c < cells; ++c) counts[c + 1] += counts[c];
    track.cell_start = counts;
    track.cell_items.resize(counts[cells]);
    for (std::uint32_t i = 0; i < track.edges.size(); ++i) {
      ForEachCellOf(track.edges[i], ox, oy, cell, margin, [&](std::int64_t ix, std::int64_t iy) {
        track.cell_items[counts[index(ix, iy)]++] = i;
      });
    }
    return;
  }
  // Sparse: the (cell, segment) pairs sorted by cell.
  std::vector<std::pair<std::uint64_t, std::uint32_t>> pairs;
  for (std::uint32_t i = 0; i < track.edges.size(); ++i) {
    ForEachCellOf(track.edges[i], ox, oy, cell, margin, [&](std::int64_t ix, std::int64_t iy) {
      pairs.emplace_back(SparseKey(ix, iy), i);
    });
  }
  std::sort(pairs.begin(), pairs.end());
  track.cell_items.reserve(pairs.size());
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    auto& entry = track.sparse_cells[pairs[k].first];
    if (entry.second == 0) entry.first = static_cast<std::uint32_t>(k);
    ++entry.second;
    track.cell_items.push_back(pairs[k].second);
  }
}

// Adds to `points` the corner of one side (`side` +1 left, -1 right) at vertex `v`, from the
// segment before (left normal n0) to the one after (n1), at `h` from the centre line.
void AddCorner(std::vector<std::pair<double, double>>& points, const RouteVertex& v, double n0x,
               double n0y, double n1x, double n1y, double side, double h) {
  const double cosine = n0x * n1x + n0y * n1y;
  const double turn = Cross(n0x, n0y, n1x, n1y);  // > 0: the track turns left.
  if (turn * side > 0.0) {  // The inside: where the two sides meet.
    const double scale = side * h / (1.0 + cosine);
    points.emplace_back(v.x_m + (n0x + n1x) * scale, v.y_m + (n0y + n1y) * scale);
    return;
  }
  // The outside (or straight on): an arc about the vertex, in equal steps of angle, each
  // chord within kArcTolerance_m of it (a chord of angle a lies h (1 - cos(a/2)), about
  // h a^2 / 8, inside the arc).
  if (turn == 0.0) {
    points.emplace_back(v.x_m + side * h * n1x, v.y_m + side * h * n1y);
    return;
  }
  const double angle = Atan2(std::abs(turn), cosine);
  const int pieces =
      std::max(1, static_cast<int>(std::ceil(angle / std::sqrt(8.0 * kArcTolerance_m / h))));
  double sin_step = 0.0, cos_step = 0.0;
  SinCos((turn > 0.0 ? angle : -angle) / pieces, &sin_step, &cos_step);
  double nx = n0x, ny = n0y;
  for (int k = 0; k < pieces; ++k) {
    points.emplace_back(v.x_m + side * h * nx, v.y_m + side * h * ny);
    const double rx = nx * cos_step - ny * sin_step;
    ny = nx * sin_step + ny * cos_step;
    nx = rx;
  }
  points.emplace_back(v.x_m + side * h * n1x, v.y_m + side * h * n1y);  // Exactly the next side.
}

}  // namespace

absl::StatusOr<TrackGeometry> MakeTrackGeometry(const RouteParams& route,
                                                absl::Span<const double> sector_starts_m,
                                                std::size_t max_edges) {
  if (!route.closed) {
    return absl::InvalidArgumentError(
        "closed: a raced track must be closed (its laps are counted round it)");
  }
  if (!(route.length_m >= kMinTrackLength_m)) {
    return absl::InvalidArgumentError(absl::StrCat("points: a track must be at least ",
                                                   kMinTrackLength_m, " m round, got ",
                                                   route.length_m));
  }
  if (sector_starts_m.size() + 1 > kMaxSectors) {
    return absl::InvalidArgumentError(
        absl::StrCat("sector_starts_m: at most ", kMaxSectors - 1, " boundaries, got ",
                     sector_starts_m.size()));
  }
  double previous = 0.0;
  for (std::size_t k = 0; k < sector_starts_m.size(); ++k) {
    const double s = sector_starts_m[k];
    if (!(s >= previous + 1.0) || !(s <= route.length_m - 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sector_starts_m[", k, "]: must be at least 1 m past the line and the sector before it and 1 m "
          "before the line again (the track is ", route.length_m, " m long), got ", s));
    }
    previous = s;
  }
  TrackGeometry track;
  track.route = route;
  track.half_width_m = route.lane_width_m / 2;
  track.sector_starts_m.assign(sector_starts_m.begin(), sector_starts_m.end());
  const std::vector<RouteVertex>& v = route.vertices;
  const std::size_t m = route.segment_count();
  const double h = track.half_width_m;
  // Each corner's turn, and how far back along each segment its inside's meeting point
  // reaches: h tan(turn / 2). Two on the same side must fit in the segment between them.
  std::vector<double> setback(m, 0.0), turn(m, 0.0);  // At vertex j (between j - 1 and j).
  for (std::size_t j = 0; j < m; ++j) {
    const RouteVertex& before = v[j == 0 ? m - 1 : j - 1];
    const RouteVertex& after = v[j];
    const double cosine = before.dir_x * after.dir_x + before.dir_y * after.dir_y;
    if (!(cosine > kMinTurnCosine)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "points[", j, "]: the track turns back by more than 170 degrees here"));
    }
    turn[j] = Cross(before.dir_x, before.dir_y, after.dir_x, after.dir_y);
    setback[j] = h * std::abs(turn[j]) / (1.0 + cosine);
  }
  for (std::size_t i = 0; i < m; ++i) {
    const std::size_t next = i + 1 == m ? 0 : i + 1;
    const bool same_side = turn[i] * turn[next] > 0.0;
    const double needed = same_side ? setback[i] + setback[next]
                                    : std::max(setback[i], setback[next]);
    if (needed > v[i].length_m) {
      return absl::InvalidArgumentError(absl::StrCat(
          "points[", next, "]: the track bends too tightly for its width here (an inside edge "
          "would fold over itself): widen the bend or narrow the lane (lane_width_m ",
          route.lane_width_m, ")"));
    }
  }
  for (const double side : {1.0, -1.0}) {
    std::vector<std::pair<double, double>> points;
    for (std::size_t j = 0; j < m; ++j) {
      const RouteVertex& before = v[j == 0 ? m - 1 : j - 1];
      const RouteVertex& after = v[j];
      AddCorner(points, after, -before.dir_y, before.dir_x, -after.dir_y, after.dir_x, side, h);
      // Checked as they come: a long route of sharp bends would otherwise take gigabytes.
      if (track.edges.size() + points.size() > max_edges) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "edges: the track's edges would take more than ", max_edges,
            " segments (two a point, and more round the outside of each bend): fewer points "
            "or a narrower lane"));
      }
    }
    for (std::size_t k = 0; k < points.size(); ++k) {
      const auto& [x0, y0] = points[k];
      const auto& [x1, y1] = points[k + 1 == points.size() ? 0 : k + 1];
      if (x0 == x1 && y0 == y1) continue;
      track.edges.push_back({x0, y0, x1, y1});
    }
  }
  BuildGrid(track);
  return track;
}

TrackPosition PlaceOnTrack(const TrackGeometry& track, double x_m, double y_m, std::uint32_t hint) {
  const RouteProjection projection = ProjectOntoRouteFrom(track.route, x_m, y_m, hint);
  TrackPosition position;
  position.segment = projection.segment;
  position.s_m = WrapArcLength(track.route, projection.s_m);
  position.lateral_m = projection.cross_track_m;
  position.on_track = std::abs(position.lateral_m) <= track.half_width_m;
  return position;
}

double HeadingOnTrack(const TrackGeometry& track, std::uint32_t segment, double yaw_rad) {
  const RouteVertex& v = track.route.vertices[segment];
  return WrapToPi(yaw_rad - Atan2(v.dir_y, v.dir_x));
}

TrackPosition PositionOnTrack(const TrackGeometry& track, const Pose2& pose, std::uint32_t hint) {
  TrackPosition position = PlaceOnTrack(track, pose.x_m, pose.y_m, hint);
  position.heading_rad = HeadingOnTrack(track, position.segment, pose.yaw_rad);
  return position;
}

double CastOnEdges(const TrackGeometry& track, double x_m, double y_m, double dx, double dy,
                   double range_m) {
  if (!(std::isfinite(x_m) && std::isfinite(y_m) && std::isfinite(dx) && std::isfinite(dy) &&
        range_m >= 0.0 && range_m <= 1e6)) {
    return range_m;
  }
  // Cells along the beam in order (Amanatides and Woo), each one's segments tested, until a
  // hit nearer than the next cell's entry or the end of the range.
  const double cell = track.cell_m;
  const double ox = x_m - track.grid_origin_x_m, oy = y_m - track.grid_origin_y_m;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::int64_t ix = static_cast<std::int64_t>(std::floor(ox / cell));
  std::int64_t iy = static_cast<std::int64_t>(std::floor(oy / cell));
  const std::int64_t step_x = dx > 0.0 ? 1 : -1, step_y = dy > 0.0 ? 1 : -1;
  // The beam's distance to the next vertical (horizontal) cell boundary, and between two.
  const double delta_x = dx != 0.0 ? cell / std::abs(dx) : kInf;
  const double delta_y = dy != 0.0 ? cell / std::abs(dy) : kInf;
  double next_x = dx != 0.0 ? ((static_cast<double>(ix) + (dx > 0.0 ? 1 : 0)) * cell - ox) / dx : kInf;
  double next_y = dy != 0.0 ? ((static_cast<double>(iy) + (dy > 0.0 ? 1 : 0)) * cell - oy) / dy : kInf;
  const bool dense = !track.cell_start.empty();
  double best = kInf;
  while (true) {
    std::uint32_t first = 0, end = 0;
    if (dense) {
      if (ix >= 0 && iy >= 0 && ix < track.grid_nx && iy < track.grid_ny) {
        const std::size_t c = static_cast<std::size_t>(iy * track.grid_nx + ix);
        first = track.cell_start[c];
        end = track.cell_start[c + 1];
      }
    } else if (const auto found = track.sparse_cells.find(SparseKey(ix, iy));
               found != track.sparse_cells.end()) {
      first = found->second.first;
      end = first + found->second.second;
    }
    for (std::uint32_t k = first; k < end; ++k) {
      best = std::min(best, Hit(track.edges[track.cell_items[k]], x_m, y_m, dx, dy, range_m));
    }
    const double exit = std::min(next_x, next_y);
    if (best <= exit || exit > range_m) break;
    if (next_x < next_y) {
      ix += step_x;
      next_x += delta_x;
    } else {
      iy += step_y;
      next_y += delta_y;
    }
  }
  return best <= range_m ? best : range_m;
}

double CastOnEdgesBruteForce(const TrackGeometry& track, double x_m, double y_m, double dx,
                             double dy, double range_m) {
  double best = std::numeric_limits<double>::infinity();
  for (const EdgeSegment& segment : track.edges) {
    best = std::min(best, Hit(segment, x_m, y_m, dx, dy, range_m));
  }
  return best <= range_m ? best : range_m;
}

}  // namespace pitlane::sim
