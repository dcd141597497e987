#include "server/sim/collision/center_grid.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <utility>

#include "absl/base/macros.h"
#include "server/sim/collision/radix_sort.h"

namespace pitlane::sim {

void CenterGrid::Build(double cell_size_m, absl::Span<const Aabb> boxes) {
  ABSL_ASSERT(cell_size_m > 0.0 && std::isfinite(cell_size_m));
  cell_size_m_ = cell_size_m;
  inverse_cell_size_ = 1.0 / cell_size_m;
  const auto count = static_cast<std::uint32_t>(boxes.size());
  object_count_ = count;

  // Each object's cell, packed (row in the high half), and the occupied extent. A box wider
  // or taller than a cell (or not finite) goes to the large list.
  large_.clear();
  large_boxes_.clear();
  keyed_.clear();
  std::int32_t min_x = std::numeric_limits<std::int32_t>::max();
  std::int32_t min_y = min_x;
  std::int32_t max_x = std::numeric_limits<std::int32_t>::min();
  std::int32_t max_y = max_x;
  for (std::uint32_t i = 0; i < count; ++i) {
    const Aabb& box = boxes[i];
    if (!Fits(box, cell_size_m)) {
      large_.push_back(i);
      large_boxes_.push_back(box);
      continue;
    }
    const GridCell cell = CellOf(CenterX(box), CenterY(box));
    min_x = std::min(min_x, cell.x);
    max_x = std::max(max_x, cell.x);
    min_y = std::min(min_y, cell.y);
    max_y = std::max(max_y, cell.y);
    keyed_.push_back({(std::uint64_t{static_cast<std::uint32_t>(cell.y)} << 32) |
                          static_cast<std::uint32_t>(cell.x),
                      i});
  }
  const std::size_t listed = keyed_.size();
  entries_.resize(listed);
  row_start_.clear();
  if (listed == 0) return;

  // Keys relative to the lowest occupied cell: row offset above the column offset's bits.
  // Sorted stably, so equal cells keep ascending object order.
  const int column_bits =
      std::bit_width(static_cast<std::uint32_t>(static_cast<std::int64_t>(max_x) - min_x));
  const int row_bits =
      std::bit_width(static_cast<std::uint32_t>(static_cast<std::int64_t>(max_y) - min_y));
  for (KeyedObject& keyed : keyed_) {
    const auto x = static_cast<std::int32_t>(static_cast<std::uint32_t>(keyed.key));
    const auto y = static_cast<std::int32_t>(static_cast<std::uint32_t>(keyed.key >> 32));
    keyed.key = (static_cast<std::uint64_t>(static_cast<std::int64_t>(y) - min_y) << column_bits) |
                static_cast<std::uint64_t>(static_cast<std::int64_t>(x) - min_x);
  }
  StableSortByKey(keyed_, column_bits + row_bits,
                  [](const KeyedObject& keyed) { return keyed.key; }, keyed_scratch_);

  // Entries in sorted order, each with a copy of its box; and the row index, unless the
  // occupied rows are far sparser than the objects.
  min_row_ = min_y;
  const std::uint64_t rows = static_cast<std::uint64_t>(static_cast<std::int64_t>(max_y) - min_y) + 1;
  const bool index_rows = rows <= 2 * listed + 16;
  if (index_rows) row_start_.resize(rows + 1);
  const std::uint64_t column_mask = (std::uint64_t{1} << column_bits) - 1;
  std::uint64_t next_row = 0;  // Rows below this one have their start filled in.
  for (std::size_t k = 0; k < listed; ++k) {
    const std::uint64_t key = keyed_[k].key;
    const std::uint32_t object = keyed_[k].object;
    const std::uint64_t row = key >> column_bits;
    const GridCell cell{static_cast<std::int32_t>(min_x + static_cast<std::int64_t>(key & column_mask)),
                        static_cast<std::int32_t>(min_y + static_cast<std::int64_t>(row))};
    entries_[k] = Entry{cell, object, boxes[object]};
    if (index_rows) {
      while (next_row <= row) row_start_[next_row++] = static_cast<std::uint32_t>(k);
    }
  }
  if (index_rows) {
    while (next_row <= rows) row_start_[next_row++] = static_cast<std::uint32_t>(listed);
  }
}

std::pair<std::uint32_t, std::uint32_t> CenterGrid::Row(std::int32_t y) const {
  if (!row_start_.empty()) {
    const std::int64_t r = static_cast<std::int64_t>(y) - min_row_;
    if (r < 0 || r + 1 >= static_cast<std::int64_t>(row_start_.size())) return {0, 0};
    return {row_start_[static_cast<std::size_t>(r)], row_start_[static_cast<std::size_t>(r) + 1]};
  }
  const auto below = [](const Entry& entry, std::int64_t row) { return entry.cell.y < row; };
  const auto first = std::lower_bound(entries_.begin(), entries_.end(), std::int64_t{y}, below);
  const auto last = std::lower_bound(first, entries_.end(), std::int64_t{y} + 1, below);
  return {static_cast<std::uint32_t>(first - entries_.begin()),
          static_cast<std::uint32_t>(last - entries_.begin())};
}

std::size_t CenterGrid::FindOverlappingPairs(std::vector<IndexPair>& pairs) const {
  return ForEachOverlappingPair(
      [&pairs](std::uint32_t first, std::uint32_t second) { pairs.emplace_back(first, second); });
}

}  // namespace pitlane::sim
