// A uniform grid over the plane, stored as a spatial hash, that lists an object in every cell
// it covers: the index of a world's static obstacles (which range from posts to kilometre
// walls), queried by the collision stage and by sensors. Vehicles use CenterGrid.
//
// Build() lists each object in every square cell its bounding box covers, then sorts that
// list by a hash of the cell (a counting sort: two linear passes). Memory and time are linear
// in the number of (object, cell) entries, whatever the coordinates: a vehicle a thousand
// kilometres away costs what a vehicle next door does. Cell coordinates are clamped to
// +-2^30 cells, so even an object at an absurd coordinate lands in some edge cell and is
// still compared exactly (every candidate is checked against the real bounding boxes).
//
// A pair of objects sharing several cells is reported once, by the cell holding the corner
// (max of the two min x, max of the two min y) of their overlap. An object covering more
// than kMaxCellsPerObject cells (a very long wall, say) is not listed in cells at all but
// kept on a short "large" list that every query checks directly.
//
// Everything is deterministic: the same boxes in the same order give the same entries, the
// same pairs in the same order.
#ifndef PITLANE_SERVER_SIM_COLLISION_SPATIAL_GRID_H_
#define PITLANE_SERVER_SIM_COLLISION_SPATIAL_GRID_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "server/sim/collision/collision.h"

namespace pitlane::sim {

// Integer coordinates of a grid cell: the cell spans [x, x+1) * cell_size_m east and likewise
// north.
struct GridCell {
  std::int32_t x = 0;
  std::int32_t y = 0;
  friend bool operator==(const GridCell&, const GridCell&) = default;
};

// An unordered pair of object indices, first < second.
using IndexPair = std::pair<std::uint32_t, std::uint32_t>;

// Cell coordinates farther than this from the origin (in cells) are clamped to it.
inline constexpr double kMaxCellCoordinate = 1 << 30;

// The coordinate of the cell holding `v_m`, in cells 1 / inverse_cell_size wide:
// floor(v * inverse_cell_size), clamped to +-kMaxCellCoordinate (NaN to the low edge).
inline std::int32_t ClampedCellCoordinate(double v_m, double inverse_cell_size) {
  double c = std::floor(v_m * inverse_cell_size);
  if (!(c >= -kMaxCellCoordinate)) c = -kMaxCellCoordinate;  // Also catches NaN.
  if (c > kMaxCellCoordinate) c = kMaxCellCoordinate;
  return static_cast<std::int32_t>(c);
}

class SpatialHashGrid {
 public:
  static constexpr double kMaxCellCoordinate = sim::kMaxCellCoordinate;
  // Objects covering more cells than this go to the large list.
  static constexpr std::int64_t kMaxCellsPerObject = 1024;
  // Entries allowed on average per object, plus a fixed allowance, before cells widen.
  static constexpr std::int64_t kMaxEntriesPerObject = 16;
  static constexpr std::int64_t kEntryAllowance = 4096;

  // Rebuilds the grid over `boxes` (object i is boxes[i]) with square cells at least
  // `min_cell_size_m` wide (> 0, finite): that size, doubled as often as needed to keep the
  // entries within kMaxEntriesPerObject per object on average and the large objects few, so
  // that memory stays linear in the object count whatever their sizes. Reuses its memory from
  // build to build.
  void Build(double min_cell_size_m, absl::Span<const Aabb> boxes);

  double cell_size_m() const { return cell_size_m_; }
  std::size_t object_count() const { return boxes_.size(); }
  const Aabb& box(std::uint32_t index) const { return boxes_[index]; }
  // (object, cell) entries listed; a measure of the grid's memory and build time.
  std::size_t entry_count() const { return entries_.size(); }
  std::size_t bucket_count() const { return bucket_start_.empty() ? 0 : bucket_start_.size() - 1; }
  // Objects too large to list cell by cell, by ascending index.
  absl::Span<const std::uint32_t> large_objects() const { return large_; }

  // Appends every pair of objects whose boxes overlap, each once. Returns how many pairs of
  // entries sharing a cell were examined. (Obstacles never collide with each other: the
  // server does not call this; collision_bench runs it as the baseline the vehicles'
  // CenterGrid is measured against.)
  std::size_t FindOverlappingPairs(std::vector<IndexPair>& pairs) const;

  // Calls visit(index) once for every object whose box overlaps `query`.
  template <typename Visit>
  void Query(const Aabb& query, Visit&& visit) const;

  // Calls visit(index) for every object listed in `cell` (not the large ones), in ascending
  // index order. An object appears in every cell its box covers.
  template <typename Visit>
  void ForEachInCell(GridCell cell, Visit&& visit) const;

  // The cell holding the point (x_m, y_m), clamped as the file comment says.
  GridCell CellOf(double x_m, double y_m) const {
    return GridCell{ClampedCellCoordinate(x_m, inverse_cell_size_),
                    ClampedCellCoordinate(y_m, inverse_cell_size_)};
  }

 private:
  struct Entry {
    GridCell cell;
    std::uint32_t object;
  };
  struct CellRange {
    GridCell min;
    GridCell max;
  };

  CellRange RangeOf(const Aabb& box) const {
    return CellRange{CellOf(box.min_x_m, box.min_y_m), CellOf(box.max_x_m, box.max_y_m)};
  }
  static std::int64_t CellCount(const CellRange& range) {
    return (std::int64_t{range.max.x} - range.min.x + 1) *
           (std::int64_t{range.max.y} - range.min.y + 1);
  }
  std::size_t Bucket(GridCell cell) const {
    // Fibonacci hashing of the packed coordinates: the top bits of the product.
    const std::uint64_t key = (std::uint64_t{static_cast<std::uint32_t>(cell.x)} << 32) |
                              static_cast<std::uint32_t>(cell.y);
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ULL) >> bucket_shift_);
  }
  // The cell that reports the overlap of `a` and `b`: where the corner of their overlap with
  // the largest min coordinates lies.
  GridCell ReportingCell(const Aabb& a, const Aabb& b) const {
    return CellOf(std::max(a.min_x_m, b.min_x_m), std::max(a.min_y_m, b.min_y_m));
  }

  double cell_size_m_ = 1.0;
  double inverse_cell_size_ = 1.0;
  int bucket_shift_ = 64;
  std::vector<Aabb> boxes_;
  std::vector<std::uint32_t> large_;      // Objects not listed in cells.
  std::vector<std::uint32_t> bucket_start_;  // Bucket b's entries: [start[b], start[b+1]).
  std::vector<Entry> entries_;            // Sorted by bucket, then object index.
  // Build's scratch: entries in object order, and the bucket of each.
  std::vector<Entry> unsorted_;
  std::vector<std::uint32_t> entry_bucket_;
};

template <typename Visit>
void SpatialHashGrid::Query(const Aabb& query, Visit&& visit) const {
  if (bucket_start_.empty()) return;  // Never built: nothing to find.
  const CellRange range = RangeOf(query);
  if (CellCount(range) > kMaxCellsPerObject) {
    // A huge query: checking every object is cheaper than visiting its cells.
    for (std::uint32_t i = 0; i < boxes_.size(); ++i) {
      if (Overlaps(query, boxes_[i])) visit(i);
    }
    return;
  }
  for (std::int32_t cy = range.min.y; cy <= range.max.y; ++cy) {
    for (std::int32_t cx = range.min.x; cx <= range.max.x; ++cx) {
      const GridCell cell{cx, cy};
      const std::size_t bucket = Bucket(cell);
      for (std::uint32_t e = bucket_start_[bucket]; e < bucket_start_[bucket + 1]; ++e) {
        const Entry& entry = entries_[e];
        if (!(entry.cell == cell)) continue;
        const Aabb& box = boxes_[entry.object];
        if (Overlaps(query, box) && ReportingCell(query, box) == cell) visit(entry.object);
      }
    }
  }
  for (const std::uint32_t i : large_) {
    if (Overlaps(query, boxes_[i])) visit(i);
  }
}

template <typename Visit>
void SpatialHashGrid::ForEachInCell(GridCell cell, Visit&& visit) const {
  if (entries_.empty()) return;
  const std::size_t bucket = Bucket(cell);
  for (std::uint32_t e = bucket_start_[bucket]; e < bucket_start_[bucket + 1]; ++e) {
    if (entries_[e].cell == cell) visit(entries_[e].object);
  }
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_COLLISION_SPATIAL_GRID_H_
