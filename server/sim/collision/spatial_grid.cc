#include "server/sim/collision/spatial_grid.h"

#include <algorithm>
#include <bit>

#include "absl/base/macros.h"

namespace pitlane::sim {

void SpatialHashGrid::Build(double min_cell_size_m, absl::Span<const Aabb> boxes) {
  ABSL_ASSERT(min_cell_size_m > 0.0 && std::isfinite(min_cell_size_m));
  boxes_.assign(boxes.begin(), boxes.end());
  const auto count = static_cast<std::uint32_t>(boxes_.size());

  // The cell size: doubled while the finite boxes would make too many entries or too many
  // large objects (boxes that are not finite are large at any size).
  const std::int64_t max_entries = kMaxEntriesPerObject * count + kEntryAllowance;
  const std::int64_t max_large = 64 + count / 64;
  double cell_size_m = min_cell_size_m;
  for (int doublings = 0; doublings < 64; ++doublings, cell_size_m *= 2.0) {
    inverse_cell_size_ = 1.0 / cell_size_m;
    std::int64_t entries = 0;
    std::int64_t large = 0;
    for (const Aabb& box : boxes_) {
      if (!(std::isfinite(box.min_x_m) && std::isfinite(box.min_y_m) &&
            std::isfinite(box.max_x_m) && std::isfinite(box.max_y_m))) {
        continue;
      }
      const std::int64_t cells = CellCount(RangeOf(box));
      if (cells > kMaxCellsPerObject) {
        ++large;
      } else {
        entries += cells;
      }
    }
    if (entries <= max_entries && large <= max_large) break;
  }
  cell_size_m_ = cell_size_m;
  inverse_cell_size_ = 1.0 / cell_size_m;

  // List the (cell, object) entries in object order, each with its bucket.
  large_.clear();
  unsorted_.clear();
  for (std::uint32_t i = 0; i < count; ++i) {
    const CellRange range = RangeOf(boxes_[i]);
    if (CellCount(range) > kMaxCellsPerObject) {
      large_.push_back(i);
      continue;
    }
    for (std::int32_t cy = range.min.y; cy <= range.max.y; ++cy) {
      for (std::int32_t cx = range.min.x; cx <= range.max.x; ++cx) {
        unsorted_.push_back(Entry{GridCell{cx, cy}, i});
      }
    }
  }
  const std::size_t entry_count = unsorted_.size();

  // About one bucket per entry (at least two, so the shift stays below 64).
  const std::size_t buckets = std::max<std::size_t>(2, std::bit_ceil(entry_count));
  bucket_shift_ = 64 - std::countr_zero(buckets);

  // Counting sort by bucket. bucket_start_[b] first counts bucket b's entries, then (prefix
  // sums) the end of bucket b; filling each bucket from its end, in reverse object order,
  // leaves it holding its start and the entries by ascending object index.
  bucket_start_.assign(buckets + 1, 0);
  entry_bucket_.resize(entry_count);
  for (std::size_t e = 0; e < entry_count; ++e) {
    const auto bucket = static_cast<std::uint32_t>(Bucket(unsorted_[e].cell));
    entry_bucket_[e] = bucket;
    ++bucket_start_[bucket];
  }
  std::uint32_t running = 0;
  for (std::size_t b = 0; b < buckets; ++b) {
    running += bucket_start_[b];
    bucket_start_[b] = running;
  }
  bucket_start_[buckets] = running;
  entries_.resize(entry_count);
  for (std::size_t e = entry_count; e-- > 0;) {
    entries_[--bucket_start_[entry_bucket_[e]]] = unsorted_[e];
  }
}

std::size_t SpatialHashGrid::FindOverlappingPairs(std::vector<IndexPair>& pairs) const {
  std::size_t examined = 0;
  const std::size_t buckets = bucket_count();
  for (std::size_t b = 0; b < buckets; ++b) {
    const std::uint32_t end = bucket_start_[b + 1];
    // Most buckets hold one entry or none: skip them before touching any box.
    for (std::uint32_t e = bucket_start_[b]; e + 1 < end; ++e) {
      const Entry& first = entries_[e];
      for (std::uint32_t f = e + 1; f < end; ++f) {
        const Entry& second = entries_[f];
        if (!(second.cell == first.cell)) continue;  // Another cell in the same bucket.
        ++examined;
        const Aabb& first_box = boxes_[first.object];
        const Aabb& second_box = boxes_[second.object];
        if (Overlaps(first_box, second_box) &&
            ReportingCell(first_box, second_box) == first.cell) {
          pairs.emplace_back(first.object, second.object);  // first.object < second.object.
        }
      }
    }
  }
  // Large objects against everything: each pair once, the large object's index deciding
  // when both are large.
  for (std::size_t k = 0; k < large_.size(); ++k) {
    const std::uint32_t big = large_[k];
    const Aabb& big_box = boxes_[big];
    std::size_t next_large = 0;
    for (std::uint32_t i = 0; i < boxes_.size(); ++i) {
      while (next_large < large_.size() && large_[next_large] < i) ++next_large;
      const bool other_is_large = next_large < large_.size() && large_[next_large] == i;
      if (i == big || (other_is_large && i < big)) continue;
      ++examined;
      if (Overlaps(big_box, boxes_[i])) pairs.emplace_back(std::min(big, i), std::max(big, i));
    }
  }
  return examined;
}

}  // namespace pitlane::sim
