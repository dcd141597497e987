// The broad phase between vehicles: a uniform grid that lists each object once, in the cell
// that holds the centre of its bounding box, with the objects sorted by cell, row by row.
//
// Cells are at least as wide as every listed object, so two objects whose boxes overlap have
// their centres in the same or in neighbouring cells. Sorted by (row, column), a row's objects
// lie together in column order, and the next row's follow: the pairs come from one merge-like
// sweep that compares each object with the rest of its cell, the cell to its right and the
// three cells above, so every pair is met once, without a set or a dedupe rule, reading memory
// in order. An object wider or taller than a cell goes to a short "large" list that is
// checked against everything.
//
// The sort is a radix sort of the cell coordinates relative to the lowest occupied cell, so
// its cost depends on the number of objects and on how many bits the occupied extent needs
// (two passes for a city; a few more when one vehicle is 1000 km away), never on a table
// sized by the world: memory is linear in the number of objects. Cell coordinates clamp at
// +-2^30; every candidate is still checked against the real boxes.
//
// Lookups by cell (for sensors) find the row through a row index (when the occupied rows are
// not too sparse) or a binary search, then the column by binary search within the row.
//
// Deterministic: the same boxes in the same order give the same pairs in the same order.
#ifndef PITLANE_SERVER_SIM_COLLISION_CENTER_GRID_H_
#define PITLANE_SERVER_SIM_COLLISION_CENTER_GRID_H_

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "absl/types/span.h"
#include "server/sim/collision/collision.h"
#include "server/sim/collision/spatial_grid.h"

namespace pitlane::sim {

class CenterGrid {
 public:
  static constexpr double kMaxCellCoordinate = sim::kMaxCellCoordinate;
  // A query covering more rows than this checks every object instead.
  static constexpr std::int64_t kMaxQueryRows = 4096;

  // Rebuilds the grid over `boxes` (object i is boxes[i]) with square cells `cell_size_m`
  // wide (> 0, finite). Reuses its memory from build to build.
  void Build(double cell_size_m, absl::Span<const Aabb> boxes);

  double cell_size_m() const { return cell_size_m_; }
  std::size_t object_count() const { return object_count_; }
  // Objects too large for a cell, by ascending index.
  absl::Span<const std::uint32_t> large_objects() const { return large_; }

  // Appends every pair of objects whose boxes overlap, each once, first < second. Returns
  // how many pairs of boxes it compared (the broad phase's work, for benchmarks).
  std::size_t FindOverlappingPairs(std::vector<IndexPair>& pairs) const;
  // Calls visit(first, second) for every pair of objects whose boxes overlap, each once,
  // first < second, in the grid's order (the order FindOverlappingPairs appends them in), and
  // returns how many pairs of boxes it compared. Keeps nothing: memory stays constant however
  // many pairs there are.
  template <typename Visit>
  std::size_t ForEachOverlappingPair(Visit&& visit) const;

  // Calls visit(index) for every listed (not large) object whose centre lies in a cell of row
  // `cell.y` with column in [cell.x, last_x], by ascending column.
  template <typename Visit>
  void ForEachInRowSpan(GridCell cell, std::int32_t last_x, Visit&& visit) const;

  // Calls visit(index) once for every object, large ones included, whose centre lies in
  // `area`.
  template <typename Visit>
  void ForEachCenterIn(const Aabb& area, Visit&& visit) const;

  GridCell CellOf(double x_m, double y_m) const {
    return GridCell{ClampedCellCoordinate(x_m, inverse_cell_size_),
                    ClampedCellCoordinate(y_m, inverse_cell_size_)};
  }

  // Whether `box` is listed in cells `cell_size_m` wide (else it goes to the large list): it
  // must be narrower than a cell by a little room for rounding. Centres and cells are computed
  // with errors of a few ulps of the coordinates (about 6 eps |x| in all), and with that much
  // room two overlapping boxes still land in the same or neighbouring cells; 32 eps |x| is
  // taken. (Without it, two touching boxes exactly one cell wide could land two cells apart.)
  // Beyond twice the clamped edge cells stay put whatever the rounding: |x| counts up to there.
  static bool Fits(const Aabb& box, double cell_size_m) {
    const double magnitude_m =
        std::min(std::max({std::abs(box.min_x_m), std::abs(box.max_x_m), std::abs(box.min_y_m),
                           std::abs(box.max_y_m)}),
                 2.0 * kMaxCellCoordinate * cell_size_m);
    const double room_m = 32.0 * std::numeric_limits<double>::epsilon() * magnitude_m;
    const double limit_m = cell_size_m - room_m;
    return box.max_x_m - box.min_x_m <= limit_m && box.max_y_m - box.min_y_m <= limit_m;
  }

 private:
  struct Entry {
    GridCell cell;
    std::uint32_t object;
    Aabb box;
  };

  // Halved first, so that boxes near the largest doubles do not overflow.
  static double CenterX(const Aabb& box) { return 0.5 * box.min_x_m + 0.5 * box.max_x_m; }
  static double CenterY(const Aabb& box) { return 0.5 * box.min_y_m + 0.5 * box.max_y_m; }
  // The entries of row `y`: [first, last).
  std::pair<std::uint32_t, std::uint32_t> Row(std::int32_t y) const;

  double cell_size_m_ = 1.0;
  double inverse_cell_size_ = 1.0;
  std::size_t object_count_ = 0;
  std::vector<Entry> entries_;  // Sorted by (cell.y, cell.x), then object index.
  // Row index: row_start_[y - min_row_] is the first entry of row y or above; empty when the
  // occupied rows span too many for it (then rows are found by binary search).
  std::int32_t min_row_ = 0;
  std::vector<std::uint32_t> row_start_;
  std::vector<std::uint32_t> large_;
  std::vector<Aabb> large_boxes_;  // Boxes of large_, in the same order.
  // Build's scratch: each listed object with its cell's sort key.
  struct KeyedObject {
    std::uint64_t key;
    std::uint32_t object;
  };
  std::vector<KeyedObject> keyed_;
  std::vector<KeyedObject> keyed_scratch_;
};

template <typename Visit>
std::size_t CenterGrid::ForEachOverlappingPair(Visit&& visit) const {
  std::size_t compared = 0;
  const auto test = [&](const Entry& a, const Entry& b) {
    ++compared;
    if (Overlaps(a.box, b.box)) visit(std::min(a.object, b.object), std::max(a.object, b.object));
  };
  const std::size_t n = entries_.size();
  const auto row_end = [&](std::size_t begin) {
    std::size_t end = begin;
    while (end < n && entries_[end].cell.y == entries_[begin].cell.y) ++end;
    return end;
  };
  std::size_t begin = 0;
  std::size_t end = n == 0 ? 0 : row_end(0);
  while (begin < n) {
    // The row above, if occupied: the next run of entries when its row is one higher.
    const std::int32_t y = entries_[begin].cell.y;
    const bool above = end < n && entries_[end].cell.y == y + 1;
    const std::size_t above_end = end < n ? row_end(end) : n;
    std::size_t p = end;  // First entry above not left of the current column - 1.
    for (std::size_t i = begin; i < end; ++i) {
      const Entry& entry = entries_[i];
      const std::int32_t x = entry.cell.x;
      // The rest of this cell, then the cell to the right.
      for (std::size_t j = i + 1; j < end && entries_[j].cell.x <= x + 1; ++j) {
        test(entry, entries_[j]);
      }
      // The three cells above.
      if (above) {
        while (p < above_end && entries_[p].cell.x < x - 1) ++p;
        for (std::size_t j = p; j < above_end && entries_[j].cell.x <= x + 1; ++j) {
          test(entry, entries_[j]);
        }
      }
    }
    begin = end;
    end = above_end;
  }
  // Large objects against everything, each pair once.
  for (std::size_t k = 0; k < large_.size(); ++k) {
    const Entry big{GridCell{}, large_[k], large_boxes_[k]};
    for (const Entry& entry : entries_) test(big, entry);
    for (std::size_t j = k + 1; j < large_.size(); ++j) {
      test(big, Entry{GridCell{}, large_[j], large_boxes_[j]});
    }
  }
  return compared;
}

template <typename Visit>
void CenterGrid::ForEachInRowSpan(GridCell cell, std::int32_t last_x, Visit&& visit) const {
  const auto [first, last] = Row(cell.y);
  // The first entry at or right of cell.x.
  const auto it = std::lower_bound(
      entries_.begin() + first, entries_.begin() + last, cell.x,
      [](const Entry& entry, std::int32_t x) { return entry.cell.x < x; });
  for (auto e = it; e != entries_.begin() + last && e->cell.x <= last_x; ++e) visit(e->object);
}

template <typename Visit>
void CenterGrid::ForEachCenterIn(const Aabb& area, Visit&& visit) const {
  const auto inside = [&area](const Aabb& box) {
    const double x = CenterX(box);
    const double y = CenterY(box);
    return x >= area.min_x_m && x <= area.max_x_m && y >= area.min_y_m && y <= area.max_y_m;
  };
  const GridCell lo = CellOf(area.min_x_m, area.min_y_m);
  const GridCell hi = CellOf(area.max_x_m, area.max_y_m);
  if (std::int64_t{hi.y} - lo.y + 1 > kMaxQueryRows) {
    for (const Entry& entry : entries_) {
      if (inside(entry.box)) visit(entry.object);
    }
  } else {
    for (std::int32_t y = lo.y; y <= hi.y; ++y) {
      const auto [first, last] = Row(y);
      const auto it = std::lower_bound(
          entries_.begin() + first, entries_.begin() + last, lo.x,
          [](const Entry& entry, std::int32_t x) { return entry.cell.x < x; });
      for (auto e = it; e != entries_.begin() + last && e->cell.x <= hi.x; ++e) {
        if (inside(e->box)) visit(e->object);
      }
    }
  }
  for (std::size_t k = 0; k < large_.size(); ++k) {
    if (inside(large_boxes_[k])) visit(large_[k]);
  }
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_COLLISION_CENTER_GRID_H_
