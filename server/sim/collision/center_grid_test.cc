#include "server/sim/collision/center_grid.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "server/sim/collision/collision.h"
#include "server/sim/collision/spatial_grid.h"

namespace pitlane::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::int32_t kEdge = std::int32_t{1} << 30;  // Where cell coordinates clamp.
constexpr std::int32_t kMinInt = std::numeric_limits<std::int32_t>::min();
constexpr std::int32_t kMaxInt = std::numeric_limits<std::int32_t>::max();

// ---------------------------------------------------------------------------------------------
// Oracles: plain O(n^2) and O(n) scans over the boxes, sharing nothing with the grid but the
// documented cell function CellOf and the documented rule for large objects.

// Closed boxes: touching edges overlap. Any NaN makes a comparison false, so a NaN box
// overlaps nothing.
bool BoxesOverlap(const Aabb& a, const Aabb& b) {
  return a.min_x_m <= b.max_x_m && b.min_x_m <= a.max_x_m && a.min_y_m <= b.max_y_m &&
         b.min_y_m <= a.max_y_m;
}

constexpr double kEps = std::numeric_limits<double>::epsilon();

// The largest |coordinate| of finite boxes, 0 for none.
double MaxAbsCoordinate(absl::Span<const Aabb> boxes) {
  double largest = 0.0;
  for (const Aabb& b : boxes) {
    for (const double v : {b.min_x_m, b.min_y_m, b.max_x_m, b.max_y_m}) {
      if (std::isfinite(v)) largest = std::max(largest, std::abs(v));
    }
  }
  return largest;
}

// The centre as the grid documents it: each bound halved first (no overflow near DBL_MAX).
double MidX(const Aabb& box) { return box.min_x_m / 2 + box.max_x_m / 2; }
double MidY(const Aabb& box) { return box.min_y_m / 2 + box.max_y_m / 2; }

// Not narrower than a cell by 32 eps times its largest coordinate (counted up to 2^31 cells:
// room for rounding), or of no finite size: kept on the large list.
bool IsLarge(const Aabb& box, double cell_m) {
  const double width = box.max_x_m - box.min_x_m;
  const double height = box.max_y_m - box.min_y_m;
  const double largest =
      std::min(std::max(std::max(std::abs(box.min_x_m), std::abs(box.max_x_m)),
                        std::max(std::abs(box.min_y_m), std::abs(box.max_y_m))),
               std::exp2(31) * cell_m);
  const double limit = cell_m - 32 * std::numeric_limits<double>::epsilon() * largest;
  return !(width <= limit && height <= limit);
}

// The centre (midpoint) of `box` lies in the closed `area`.
bool CenterInside(const Aabb& box, const Aabb& area) {
  const double x = MidX(box);
  const double y = MidY(box);
  return area.min_x_m <= x && x <= area.max_x_m && area.min_y_m <= y && y <= area.max_y_m;
}

std::vector<IndexPair> BrutePairs(absl::Span<const Aabb> boxes) {
  std::vector<IndexPair> pairs;
  for (std::uint32_t i = 0; i < boxes.size(); ++i) {
    for (std::uint32_t j = i + 1; j < boxes.size(); ++j) {
      if (BoxesOverlap(boxes[i], boxes[j])) pairs.emplace_back(i, j);
    }
  }
  return pairs;  // Sorted by construction.
}

std::vector<std::uint32_t> BruteLarge(absl::Span<const Aabb> boxes, double cell_m) {
  std::vector<std::uint32_t> large;
  for (std::uint32_t i = 0; i < boxes.size(); ++i) {
    if (IsLarge(boxes[i], cell_m)) large.push_back(i);
  }
  return large;
}

std::vector<std::uint32_t> BruteCentersIn(absl::Span<const Aabb> boxes, const Aabb& area) {
  std::vector<std::uint32_t> hits;
  for (std::uint32_t i = 0; i < boxes.size(); ++i) {
    if (CenterInside(boxes[i], area)) hits.push_back(i);
  }
  return hits;
}

GridCell CenterCell(const CenterGrid& grid, const Aabb& box) {
  return grid.CellOf(MidX(box), MidY(box));
}

// The listed (not large) objects whose centre cell is in row cell.y with column in
// [cell.x, last_x], by column and then by index.
std::vector<std::uint32_t> BruteRowSpan(const CenterGrid& grid, absl::Span<const Aabb> boxes,
                                        GridCell cell, std::int32_t last_x) {
  std::vector<std::pair<std::int32_t, std::uint32_t>> found;
  for (std::uint32_t i = 0; i < boxes.size(); ++i) {
    if (IsLarge(boxes[i], grid.cell_size_m())) continue;
    const GridCell c = CenterCell(grid, boxes[i]);
    if (c.y == cell.y && cell.x <= c.x && c.x <= last_x) found.emplace_back(c.x, i);
  }
  std::sort(found.begin(), found.end());
  std::vector<std::uint32_t> objects;
  for (const auto& [x, i] : found) objects.push_back(i);
  return objects;
}

// The listed (not large) objects' count and the extent of their centre cells.
struct ListedExtent {
  std::int64_t listed = 0;
  std::int64_t min_x = kMaxInt;
  std::int64_t min_y = kMaxInt;
  std::int64_t max_x = kMinInt;
  std::int64_t max_y = kMinInt;
};

ListedExtent ListedExtentOf(const CenterGrid& grid, absl::Span<const Aabb> boxes) {
  ListedExtent extent;
  for (const Aabb& box : boxes) {
    if (IsLarge(box, grid.cell_size_m())) continue;
    const GridCell c = CenterCell(grid, box);
    ++extent.listed;
    extent.min_x = std::min<std::int64_t>(extent.min_x, c.x);
    extent.min_y = std::min<std::int64_t>(extent.min_y, c.y);
    extent.max_x = std::max<std::int64_t>(extent.max_x, c.x);
    extent.max_y = std::max<std::int64_t>(extent.max_y, c.y);
  }
  return extent;
}

// Whether Build indexes rows for these boxes: some objects are listed and their centre cells
// span at most 2 * listed + 16 rows. (Only used to check that both paths were exercised.)
bool ExpectsRowIndex(const CenterGrid& grid, absl::Span<const Aabb> boxes) {
  const ListedExtent e = ListedExtentOf(grid, boxes);
  return e.listed > 0 && e.max_y - e.min_y + 1 <= 2 * e.listed + 16;
}

// The comparisons the documented sweep makes: every pair of listed objects whose centre cells
// are the same or neighbours (8-connected), and every large object against every other object.
std::size_t ExpectedComparisons(const CenterGrid& grid, absl::Span<const Aabb> boxes) {
  const double cell_m = grid.cell_size_m();
  std::size_t large = 0;
  std::vector<GridCell> cells;
  for (const Aabb& box : boxes) {
    if (IsLarge(box, cell_m)) {
      ++large;
    } else {
      cells.push_back(CenterCell(grid, box));
    }
  }
  std::size_t neighbours = 0;
  for (std::size_t i = 0; i < cells.size(); ++i) {
    for (std::size_t j = i + 1; j < cells.size(); ++j) {
      neighbours += std::abs(std::int64_t{cells[i].x} - cells[j].x) <= 1 &&
                    std::abs(std::int64_t{cells[i].y} - cells[j].y) <= 1;
    }
  }
  return neighbours + large * cells.size() + (large < 2 ? 0 : large * (large - 1) / 2);
}

// ---------------------------------------------------------------------------------------------
// The grid's answers, checked for form.

// The grid's pairs: appended after what the vector held, first < second, indices in range, no
// duplicates, and a comparison count between the number of pairs found and the number of
// pairs of objects (each pair is compared at most once). Returns them sorted.
std::vector<IndexPair> GridPairs(const CenterGrid& grid, std::size_t* compared_out = nullptr) {
  const IndexPair sentinel{7, 3};
  std::vector<IndexPair> pairs = {sentinel};
  const std::size_t compared = grid.FindOverlappingPairs(pairs);
  EXPECT_EQ(pairs.front(), sentinel) << "FindOverlappingPairs must append";
  pairs.erase(pairs.begin());
  const std::size_t n = grid.object_count();
  for (const IndexPair& p : pairs) {
    EXPECT_LT(p.first, p.second);
    EXPECT_LT(p.second, n);
  }
  EXPECT_GE(compared, pairs.size());
  EXPECT_LE(compared, n < 2 ? 0 : n * (n - 1) / 2);
  std::sort(pairs.begin(), pairs.end());
  EXPECT_EQ(std::adjacent_find(pairs.begin(), pairs.end()), pairs.end()) << "duplicate pair";
  if (compared_out != nullptr) *compared_out = compared;
  return pairs;
}

// Visits in the grid's order.
std::vector<std::uint32_t> CentersInRaw(const CenterGrid& grid, const Aabb& area) {
  std::vector<std::uint32_t> hits;
  grid.ForEachCenterIn(area, [&](std::uint32_t i) { hits.push_back(i); });
  return hits;
}

// Visits sorted, after checking that none came twice.
std::vector<std::uint32_t> CentersIn(const CenterGrid& grid, const Aabb& area) {
  std::vector<std::uint32_t> hits = CentersInRaw(grid, area);
  std::sort(hits.begin(), hits.end());
  EXPECT_EQ(std::adjacent_find(hits.begin(), hits.end()), hits.end()) << "visited twice";
  return hits;
}

std::vector<std::uint32_t> RowSpan(const CenterGrid& grid, GridCell cell, std::int32_t last_x) {
  std::vector<std::uint32_t> objects;
  grid.ForEachInRowSpan(cell, last_x, [&](std::uint32_t i) { objects.push_back(i); });
  return objects;
}

std::vector<std::uint32_t> LargeOf(const CenterGrid& grid) {
  return {grid.large_objects().begin(), grid.large_objects().end()};
}

// For failure messages: the pairs one side has and the other lacks, with boxes and centre
// cells.
std::string DescribePairDiff(const CenterGrid& grid, absl::Span<const Aabb> boxes,
                             const std::vector<IndexPair>& got,
                             const std::vector<IndexPair>& want) {
  std::vector<IndexPair> missing;
  std::vector<IndexPair> extra;
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(),
                      std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  std::ostringstream out;
  out.precision(17);
  out << missing.size() << " pairs missing, " << extra.size() << " extra; cell "
      << grid.cell_size_m() << "\n";
  const auto describe = [&](const char* what, const std::vector<IndexPair>& list) {
    for (std::size_t k = 0; k < std::min<std::size_t>(list.size(), 4); ++k) {
      out << "  " << what << " (" << list[k].first << ", " << list[k].second << ")";
      for (const std::uint32_t i : {list[k].first, list[k].second}) {
        const Aabb& b = boxes[i];
        const GridCell c = CenterCell(grid, b);
        out << " [" << b.min_x_m << ", " << b.min_y_m << ", " << b.max_x_m << ", " << b.max_y_m
            << "] cell (" << c.x << ", " << c.y << ")"
            << (IsLarge(b, grid.cell_size_m()) ? " large" : "");
      }
      out << "\n";
    }
  };
  describe("missing", missing);
  describe("extra", extra);
  return out.str();
}

// ---------------------------------------------------------------------------------------------
// Random scenes.

struct Scene {
  double cell_size_m = 5.0;
  std::vector<Aabb> boxes;
  double origin_x_m = 0.0;  // Where the ordinary boxes are: a square `side_m` wide.
  double origin_y_m = 0.0;
  double side_m = 0.0;
};

// The bounding box of a `length` x `width` rectangle centred at (x, y), turned by `yaw`.
Aabb RotatedBox(double x, double y, double yaw, double length, double width) {
  const double c = std::abs(std::cos(yaw));
  const double s = std::abs(std::sin(yaw));
  const double extent_x = 0.5 * (length * c + width * s);
  const double extent_y = 0.5 * (length * s + width * c);
  return Aabb{x - extent_x, y - extent_y, x + extent_x, y + extent_y};
}

// Up to 300 ordinary boxes at urban (150 m^2 per box) or parking (15 m^2 per box) density:
// rotated cars and trucks, or boxes on an integer lattice so that edges are shared exactly;
// sometimes near +-1e7 m. The cell is exactly the widest ordinary box, up to 4x it, a power
// of two above it, or smaller (so that some ordinary boxes are large). Then, sometimes: walls
// and slabs larger than a cell; clusters of small boxes 1e6..1e9 m away (so that the occupied
// rows are far too many for a row index); boxes at +-1e300 m (clamped cells); a NaN box; an
// infinite box.
Scene RandomScene(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto chance = [&rng](int one_in) { return rng() % one_in == 0; };
  Scene scene;
  const int n = chance(8) ? static_cast<int>(rng() % 4) : static_cast<int>(rng() % 301);
  const double area_per_box = chance(2) ? 150.0 : 15.0;
  scene.side_m = std::sqrt(std::max(n, 1) * area_per_box);
  if (chance(4)) {
    scene.origin_x_m = chance(2) ? 1e7 : -1e7;
    scene.origin_y_m = chance(2) ? 1e7 : -1e7;
  }
  const double ox = scene.origin_x_m;
  const double oy = scene.origin_y_m;
  const bool lattice = chance(3);
  const double steps[] = {0.25, 0.5, 1.0, 0.37, 1.1};
  const double step = steps[rng() % std::size(steps)];
  const auto max_units = static_cast<std::uint64_t>(std::max(1.0, std::round(5.0 / step)));
  for (int i = 0; i < n; ++i) {
    if (lattice && chance(2)) {
      // Integer multiples of `step`: equal coordinates are computed identically.
      const auto units = static_cast<std::uint64_t>(scene.side_m / step) + 1;
      const auto x0 = static_cast<double>(rng() % units);
      const auto y0 = static_cast<double>(rng() % units);
      const auto w = static_cast<double>(1 + rng() % max_units);
      const auto h = static_cast<double>(1 + rng() % max_units);
      scene.boxes.push_back(
          Aabb{ox + x0 * step, oy + y0 * step, ox + (x0 + w) * step, oy + (y0 + h) * step});
      continue;
    }
    double length = 3.6 + 1.8 * unit(rng);
    double width = 1.5 + 0.6 * unit(rng);
    if (chance(10)) {  // A truck.
      length = 8.0 + 4.0 * unit(rng);
      width = 2.5;
    }
    const double yaw = chance(4) ? 0.5 * kPi * static_cast<double>(rng() % 4) : kTwoPi * unit(rng);
    scene.boxes.push_back(RotatedBox(ox + scene.side_m * unit(rng), oy + scene.side_m * unit(rng),
                                     yaw, length, width));
  }

  double extent = 0.0;
  for (const Aabb& b : scene.boxes) {
    extent = std::max({extent, b.max_x_m - b.min_x_m, b.max_y_m - b.min_y_m});
  }
  if (extent == 0.0) extent = 5.0;
  switch (rng() % 6) {
    case 0:
    case 1:
      // As wide as the widest box plus the least room the grid asks for rounding.
      scene.cell_size_m = extent * (1.0 + 64 * kEps) + 64 * kEps * MaxAbsCoordinate(scene.boxes);
      break;
    case 2:
    case 3:
      scene.cell_size_m = extent * (1.0 + 3.0 * unit(rng));
      break;
    case 4:
      scene.cell_size_m = extent * (0.4 + 0.6 * unit(rng));  // Some boxes go large.
      break;
    default:
      scene.cell_size_m = std::exp2(std::ceil(std::log2(extent)));
      break;
  }
  const double c = scene.cell_size_m;

  if (chance(5)) {  // Walls and slabs.
    for (int k = static_cast<int>(rng() % 3); k >= 0; --k) {
      const double x = ox + scene.side_m * unit(rng);
      const double y = oy + scene.side_m * unit(rng);
      const double length = c * (2.0 + 48.0 * unit(rng));
      switch (rng() % 3) {
        case 0:
          scene.boxes.push_back(Aabb{x - length / 2, y - 0.05, x + length / 2, y + 0.05});
          break;
        case 1:
          scene.boxes.push_back(Aabb{x - 0.05, y - length / 2, x + 0.05, y + length / 2});
          break;
        default:
          scene.boxes.push_back(
              Aabb{x - length / 8, y - length / 8, x + length / 8, y + length / 8});
          break;
      }
    }
  }
  if (chance(4)) {  // Clusters far away, of boxes that fit a cell, some overlapping.
    for (int k = static_cast<int>(rng() % 3); k >= 0; --k) {
      const double distance = std::pow(10.0, 6.0 + 3.0 * unit(rng));
      const double x = (chance(2) ? 1.0 : -1.0) * distance * unit(rng);
      const double y = (chance(2) ? 1.0 : -1.0) * distance * (0.5 + 0.5 * unit(rng));
      for (int m = static_cast<int>(rng() % 3); m >= 0; --m) {
        scene.boxes.push_back(RotatedBox(x + c * (unit(rng) - 0.5), y + c * (unit(rng) - 0.5),
                                         kTwoPi * unit(rng), 0.7 * c * unit(rng),
                                         0.7 * c * unit(rng)));
      }
    }
  }
  if (chance(8)) {  // Absurd coordinates: cells clamp to the edge.
    scene.boxes.push_back(Aabb{1e300, 1e300, 1e300, 1e300});
    scene.boxes.push_back(Aabb{1e300, 1e300, 1e300, 1e300});  // The same: a pair.
    scene.boxes.push_back(Aabb{2e300, 2e300, 2e300, 2e300});  // Same cell, no overlap.
    scene.boxes.push_back(Aabb{-1e300, 3.0, -1e300, 3.0 + 0.5 * c});
    scene.boxes.push_back(Aabb{-1e300, 3.0 + 0.5 * c, -1e300, 3.0 + c});  // Touches it.
    scene.boxes.push_back(Aabb{1e300, -1e300, 1e300, -1e300});
    scene.boxes.push_back(Aabb{-1e300, -1e300, -1e300, -1e300});
    if (chance(2)) scene.boxes.push_back(Aabb{1e300, 0.0, 2e300, 1.0});  // Large.
  }
  if (chance(10)) {  // NaN: large, overlapping nothing, its centre nowhere.
    scene.boxes.push_back(chance(2) ? Aabb{kNaN, kNaN, kNaN, kNaN} : Aabb{ox, oy, kNaN, oy + 1.0});
  }
  if (chance(20)) scene.boxes.push_back(Aabb{-kInf, -kInf, kInf, kInf});
  std::shuffle(scene.boxes.begin(), scene.boxes.end(), rng);
  return scene;
}

bool AnyClampedCell(const CenterGrid& grid, absl::Span<const Aabb> boxes) {
  for (const Aabb& box : boxes) {
    if (IsLarge(box, grid.cell_size_m())) continue;
    const GridCell c = CenterCell(grid, box);
    if (std::abs(c.x) == kEdge || std::abs(c.y) == kEdge) return true;
  }
  return false;
}

// ---------------------------------------------------------------------------------------------
// Tests.

// CellOf floors position / cell size, and clamps to +-2^30 cells (NaN to the low edge).
TEST(CenterGrid, CellOfFloorsAndClamps) {
  EXPECT_EQ(CenterGrid::kMaxCellCoordinate, static_cast<double>(kEdge));
  CenterGrid grid;
  grid.Build(0.5, {});
  EXPECT_EQ(grid.cell_size_m(), 0.5);
  EXPECT_EQ(grid.CellOf(0.0, 0.0), (GridCell{0, 0}));
  EXPECT_EQ(grid.CellOf(0.49, -0.01), (GridCell{0, -1}));
  EXPECT_EQ(grid.CellOf(1.5, -1.5), (GridCell{3, -3}));
  EXPECT_EQ(grid.CellOf(-0.5, -1.0), (GridCell{-1, -2}));
  EXPECT_EQ(grid.CellOf(9e6, -9e6), (GridCell{18'000'000, -18'000'000}));
  EXPECT_EQ(grid.CellOf(1e300, -1e300), (GridCell{kEdge, -kEdge}));
  EXPECT_EQ(grid.CellOf(kInf, -kInf), (GridCell{kEdge, -kEdge}));
  EXPECT_EQ(grid.CellOf(kNaN, 0.0), (GridCell{-kEdge, 0}));
  // Exactly at the clamp, just inside it, and one past it.
  EXPECT_EQ(grid.CellOf(0.5 * kEdge, -0.5 * kEdge), (GridCell{kEdge, -kEdge}));
  EXPECT_EQ(grid.CellOf(0.5 * (kEdge - 1), -0.5 * (kEdge - 1)),
            (GridCell{kEdge - 1, -(kEdge - 1)}));
  EXPECT_EQ(grid.CellOf(0.5 * (kEdge + 1.0), -0.5 * (kEdge + 1.0)), (GridCell{kEdge, -kEdge}));
}

// The broad phase against an all-pairs scan over 1200 random scenes (n from 0 to 300, plus
// walls, far clusters, absurd, NaN and infinite boxes), with one grid rebuilt scene after
// scene. Exact: both sides compare the same doubles with the same closed-interval rule, so
// every pair must match, shared edges included. Also checks the large list (and Fits) against
// the documented rule, the comparison count against the documented sweep (neighbouring cells
// plus large against all), and that the scenes really exercised cells exactly as wide as a
// box, large objects, far coordinates, clamped cells, the binary-search path (no row index),
// multi-digit radix sorts and shared edges.
TEST(CenterGrid, PairsMatchBruteForceOnRandomScenes) {
  std::mt19937_64 rng(0xce47e5'0001);
  CenterGrid grid;
  constexpr int kScenes = 1200;
  int mismatched = 0;
  int scenes_exact_cell = 0;
  int scenes_with_large = 0;
  int scenes_far = 0;
  int scenes_clamped = 0;
  int scenes_without_index = 0;
  int scenes_with_index = 0;
  int scenes_with_nan = 0;
  int scenes_multi_digit = 0;
  int shared_edge_pairs = 0;
  std::size_t total_pairs = 0;
  std::size_t total_compared = 0;
  for (int s = 0; s < kScenes; ++s) {
    SCOPED_TRACE(::testing::Message() << "scene " << s);
    const Scene scene = RandomScene(rng);
    grid.Build(scene.cell_size_m, scene.boxes);
    ASSERT_EQ(grid.object_count(), scene.boxes.size());
    ASSERT_EQ(grid.cell_size_m(), scene.cell_size_m);
    ASSERT_EQ(LargeOf(grid), BruteLarge(scene.boxes, scene.cell_size_m));
    for (const Aabb& b : scene.boxes) {
      ASSERT_EQ(CenterGrid::Fits(b, scene.cell_size_m), !IsLarge(b, scene.cell_size_m));
    }

    std::size_t compared = 0;
    const std::vector<IndexPair> got = GridPairs(grid, &compared);
    EXPECT_EQ(compared, ExpectedComparisons(grid, scene.boxes));
    const std::vector<IndexPair> want = BrutePairs(scene.boxes);
    if (got != want) {
      ++mismatched;
      if (mismatched <= 3) {
        ADD_FAILURE() << "pairs differ from brute force\n"
                      << DescribePairDiff(grid, scene.boxes, got, want);
      }
    }
    total_pairs += want.size();
    total_compared += compared;

    bool exact_cell = false;
    bool large = false;
    bool nan = false;
    for (const Aabb& b : scene.boxes) {
      // Listed, and within a few ulps of the cell width.
      const double room = 256 * kEps * (scene.cell_size_m + MaxAbsCoordinate({b}));
      exact_cell |= !IsLarge(b, scene.cell_size_m) &&
                    (scene.cell_size_m - (b.max_x_m - b.min_x_m) <= room ||
                     scene.cell_size_m - (b.max_y_m - b.min_y_m) <= room);
      large |= IsLarge(b, scene.cell_size_m) && !std::isnan(MidX(b));
      nan |= std::isnan(MidX(b)) || std::isnan(MidY(b));
    }
    scenes_exact_cell += exact_cell;
    scenes_with_large += large;
    scenes_with_nan += nan;
    scenes_far += std::abs(scene.origin_x_m) > 1e6;
    scenes_clamped += AnyClampedCell(grid, scene.boxes);
    const bool indexed = ExpectsRowIndex(grid, scene.boxes);
    const ListedExtent extent = ListedExtentOf(grid, scene.boxes);
    // Sorted by radix (256 or more listed), with keys of more than one 11-bit digit.
    scenes_multi_digit += extent.listed >= 256 && extent.max_x - extent.min_x >= 2048;
    scenes_with_index += indexed;
    scenes_without_index += !indexed && grid.object_count() > grid.large_objects().size();
    for (const auto& [i, j] : want) {
      const Aabb& a = scene.boxes[i];
      const Aabb& b = scene.boxes[j];
      shared_edge_pairs += a.max_x_m == b.min_x_m || b.max_x_m == a.min_x_m ||
                           a.max_y_m == b.min_y_m || b.max_y_m == a.min_y_m;
    }
  }
  EXPECT_EQ(mismatched, 0) << "scenes whose pairs differ from brute force";
  EXPECT_GT(scenes_exact_cell, kScenes / 5);
  EXPECT_GT(scenes_with_large, kScenes / 5);
  EXPECT_GT(scenes_far, kScenes / 8);
  EXPECT_GT(scenes_clamped, kScenes / 20);
  EXPECT_GT(scenes_with_index, kScenes / 2);
  EXPECT_GT(scenes_without_index, kScenes / 8);
  EXPECT_GT(scenes_with_nan, kScenes / 20);
  EXPECT_GT(scenes_multi_digit, 20);
  EXPECT_GT(shared_edge_pairs, 2000);
  EXPECT_GT(total_pairs, 50'000u);
  EXPECT_GE(total_compared, total_pairs);
}

// Pairs whose centres lie exactly on cell borders (multiples of the cell size, negative and
// positive) and in every neighbouring cell: the same cell, left/right, below/above and both
// diagonals ((+1,+1) and (-1,+1) from the lower object). Boxes exactly one cell wide touch
// along an edge or at a corner; moved apart by one ulp they do not. Cells are powers of two
// so that every coordinate here is exact. Then a dense scene of cell-wide boxes centred on
// every half cell against brute force.
TEST(CenterGrid, PairsAcrossCellBordersAndNeighbours) {
  CenterGrid grid;
  int touching = 0;
  for (const double c : {4.0, 0.5, 1.0}) {
    const double h = c / 2;
    const std::pair<int, int> bases[] = {{-3, -2}, {-1, -1}, {0, 0}, {-1, 0}, {2, -1}, {5, 3}};
    for (const auto& [kx, ky] : bases) {
      for (int dx = -1; dx <= 1; ++dx) {
        for (int dy = -1; dy <= 1; ++dy) {
          SCOPED_TRACE(::testing::Message() << "cell " << c << " at (" << kx << ", " << ky
                                            << ") offset (" << dx << ", " << dy << ")");
          const double ax = kx * c;
          const double ay = ky * c;
          const double bx = (kx + dx) * c;
          const double by = (ky + dy) * c;
          const Aabb a{ax - h, ay - h, ax + h, ay + h};
          const Aabb b{bx - h, by - h, bx + h, by + h};
          // Centres on the borders belong to the cell above/right of them.
          grid.Build(c, std::vector<Aabb>{a, b});
          ASSERT_EQ(CenterCell(grid, a), (GridCell{kx, ky}));
          ASSERT_EQ(CenterCell(grid, b), (GridCell{kx + dx, ky + dy}));
          // Exactly one cell wide leaves no room for rounding: such boxes are large (unless at
          // the origin) and meet everything; the pair must be found either way.
          ASSERT_EQ(LargeOf(grid), BruteLarge(std::vector<Aabb>{a, b}, c));
          EXPECT_EQ(GridPairs(grid), (std::vector<IndexPair>{{0, 1}}));
          grid.Build(c, std::vector<Aabb>{b, a});
          EXPECT_EQ(GridPairs(grid), (std::vector<IndexPair>{{0, 1}}));
          ++touching;

          // One ulp apart (along every axis that separates them): no pair.
          if (dx != 0 || dy != 0) {
            Aabb apart = b;
            if (dx != 0) {
              const double to = dx * kInf;
              apart.min_x_m = std::nextafter(apart.min_x_m, to);
              apart.max_x_m = std::nextafter(apart.max_x_m, to);
            }
            if (dy != 0) {
              const double to = dy * kInf;
              apart.min_y_m = std::nextafter(apart.min_y_m, to);
              apart.max_y_m = std::nextafter(apart.max_y_m, to);
            }
            const std::vector<Aabb> boxes = {a, apart};
            grid.Build(c, boxes);
            ASSERT_TRUE(BrutePairs(boxes).empty());
            EXPECT_TRUE(GridPairs(grid).empty());
          }
        }
      }
      // Smaller boxes just either side of the border corner at ((kx+1)c, (ky+1)c).
      const double q = c / 8;
      const double cx = (kx + 1) * c;
      const double cy = (ky + 1) * c;
      const auto box = [q](double x, double y) { return Aabb{x - q, y - q, x + q, y + q}; };
      const std::vector<Aabb> boxes = {
          box(cx - q, cy - q),  // Cell (kx, ky).
          box(cx + q, cy - q),  // (kx+1, ky): right of the first.
          box(cx - q, cy + q),  // (kx, ky+1): above the first, (-1,+1) from the second.
          box(cx + q, cy + q),  // (kx+1, ky+1): (+1,+1) from the first.
      };
      grid.Build(c, boxes);
      EXPECT_EQ(CenterCell(grid, boxes[0]), (GridCell{kx, ky}));
      EXPECT_EQ(CenterCell(grid, boxes[3]), (GridCell{kx + 1, ky + 1}));
      EXPECT_EQ(GridPairs(grid),
                (std::vector<IndexPair>{{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}, {2, 3}}));
    }
  }
  EXPECT_EQ(touching, 3 * 6 * 9);

  // Cell-wide boxes centred on every half cell in [-6c, 6c]^2: centres on borders and in
  // the middle of cells, edges shared everywhere.
  for (const double c : {2.0, 0.25}) {
    std::vector<Aabb> boxes;
    for (int i = -12; i <= 12; ++i) {
      for (int j = -12; j <= 12; ++j) {
        const double x = i * c / 2;
        const double y = j * c / 2;
        boxes.push_back(Aabb{x - c / 2, y - c / 2, x + c / 2, y + c / 2});
      }
    }
    grid.Build(c, boxes);
    ASSERT_EQ(LargeOf(grid), BruteLarge(boxes, c));  // Exactly cell-wide: large but the origin's.
    const std::vector<IndexPair> want = BrutePairs(boxes);
    const std::vector<IndexPair> got = GridPairs(grid);
    EXPECT_EQ(got, want) << DescribePairDiff(grid, boxes, got, want);
  }
}

// Regression: "no wider than a cell => overlapping boxes have centres in the same or
// neighbouring cells" holds in exact arithmetic but not in doubles for a box (to the ulp)
// exactly one cell wide: rounding of the centre (B's centre 4.4000000000000004 = 4 fl(1.1))
// or of the reciprocal (10.9 * fl(1 / 5.45) = 1.9999999999999998) put two touching boxes two
// cells apart, and the pair was never compared. CenterGrid::Fits now asks for room for
// rounding, so such boxes go to the large list. Then a sweep of touching cell-wide pairs 1 to
// 20 cells out, over many cell sizes (979 of 58859 were missed before).
TEST(CenterGrid, CellWideTouchingBoxesAcrossACellBorderArePaired) {
  CenterGrid grid;
  struct Repro {
    double cell_m;
    double x0, x1, x2;  // A = [x0, x1], B = [x1, x2].
  };
  for (const Repro& r : {Repro{5.45, 8.175, 13.625, 19.075}, Repro{1.1, 2.75, 3.85, 4.95}}) {
    const std::vector<Aabb> along_x = {{r.x0, 0.0, r.x1, 1.0}, {r.x1, 0.0, r.x2, 1.0}};
    const std::vector<Aabb> along_y = {{0.0, r.x0, 1.0, r.x1}, {0.0, r.x1, 1.0, r.x2}};
    for (const std::vector<Aabb>* boxes : {&along_x, &along_y}) {
      SCOPED_TRACE(::testing::Message()
                   << "cell " << r.cell_m << (boxes == &along_x ? " x" : " y"));
      ASSERT_EQ(BrutePairs(*boxes), (std::vector<IndexPair>{{0, 1}}));
      // Fixed: boxes this wide leave no room for rounding, so they go to the large list.
      grid.Build(r.cell_m, *boxes);
      const std::vector<IndexPair> got = GridPairs(grid);
      EXPECT_EQ(got, (std::vector<IndexPair>{{0, 1}}))
          << DescribePairDiff(grid, *boxes, got, BrutePairs(*boxes));
    }
  }

  // Counts the touching pairs (A = [x0, x1], B = [x1, x2], both listed) the grid misses.
  int cases = 0;
  int missed = 0;
  std::string first;
  const auto check = [&](double cell_m, double x0, double x1, double x2) {
    const std::vector<Aabb> boxes = {{x0, 0.0, x1, 1.0}, {x1, 0.0, x2, 1.0}};
    if (!BruteLarge(boxes, cell_m).empty()) return;
    ++cases;
    grid.Build(cell_m, boxes);
    std::vector<IndexPair> pairs;
    grid.FindOverlappingPairs(pairs);
    if (pairs.empty() && missed++ == 0) {
      first = DescribePairDiff(grid, boxes, {}, BrutePairs(boxes));
    }
  };
  for (int hundredths = 1; hundredths <= 2000; ++hundredths) {
    const double cell = hundredths / 100.0;
    for (int k = 1; k <= 20; ++k) {
      // A centred within two ulps of a border, B one cell further.
      double a = std::nextafter(std::nextafter(k * cell, 0.0), 0.0);
      for (int ulps = -2; ulps <= 2; ++ulps, a = std::nextafter(a, kInf)) {
        check(cell, a - cell / 2, a + cell / 2, a + cell / 2 + cell);
      }
    }
  }
  EXPECT_EQ(missed, 0) << "touching pairs missed, of " << cases << "; first:\n" << first;
}

// ForEachCenterIn visits exactly the objects, large ones included, whose centre lies in the
// closed area, each once: random areas, points and areas whose edges are exactly objects'
// centres, tiny areas, areas over everything (finite and infinite), areas just under, at and
// over kMaxQueryRows rows (the scan path), inverted and NaN areas.
TEST(CenterGrid, ForEachCenterInMatchesBruteForce) {
  std::mt19937_64 rng(0xce47e5'0002);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  CenterGrid grid;
  int queries = 0;
  int nonempty = 0;
  int scan_path = 0;
  int large_hits = 0;
  for (int s = 0; s < 300; ++s) {
    const Scene scene = RandomScene(rng);
    grid.Build(scene.cell_size_m, scene.boxes);
    const double c = scene.cell_size_m;
    const std::size_t n = scene.boxes.size();
    const auto some_box = [&]() -> const Aabb& { return scene.boxes[rng() % n]; };
    for (int q = 0; q < 30; ++q) {
      const double x = scene.origin_x_m + scene.side_m * (1.2 * unit(rng) - 0.1);
      const double y = scene.origin_y_m + scene.side_m * (1.2 * unit(rng) - 0.1);
      Aabb area{x, y, x + 4 * c * unit(rng), y + 4 * c * unit(rng)};
      switch (q % 12) {
        case 0:  // A random area, as above.
          break;
        case 1:  // A point exactly at an object's centre.
          if (n > 0) {
            const Aabb& b = some_box();
            area = {MidX(b), MidY(b), MidX(b), MidY(b)};
          }
          break;
        case 2:  // Edges exactly at two objects' centres.
          if (n > 0) {
            const Aabb& a = some_box();
            const Aabb& b = some_box();
            area = {std::min(MidX(a), MidX(b)), std::min(MidY(a), MidY(b)),
                    std::max(MidX(a), MidX(b)), std::max(MidY(a), MidY(b))};
          }
          break;
        case 3:  // Tiny: a nanometre.
          area = {x, y, x + 1e-9, y + 1e-9};
          break;
        case 4:  // Everything.
          area =
              rng() % 2 == 0 ? Aabb{-kInf, -kInf, kInf, kInf} : Aabb{-1e300, -1e300, 1e300, 1e300};
          break;
        case 5:  // Taller than kMaxQueryRows rows, narrow.
          area = {x, y - c * (CenterGrid::kMaxQueryRows / 2 + 10 * unit(rng)), x + 3 * c,
                  y + c * (CenterGrid::kMaxQueryRows / 2 + 10 * unit(rng))};
          break;
        case 6: {  // About kMaxQueryRows rows: either side of the threshold.
          const double rows = CenterGrid::kMaxQueryRows - 1.5 + 2.0 * unit(rng);
          area = {x - c, y, x + c, y + rows * c};
          break;
        }
        case 7:  // Around a large object's centre.
          if (!grid.large_objects().empty()) {
            const Aabb& b = scene.boxes[grid.large_objects()[rng() % grid.large_objects().size()]];
            area = {MidX(b) - c, MidY(b) - c, MidX(b) + c, MidY(b) + c};
          }
          break;
        case 8:  // Inverted: nothing.
          area = {x + c, y, x, y + c};
          break;
        case 9:  // Half the plane, or a NaN edge.
          area = rng() % 2 == 0 ? Aabb{x, -kInf, kInf, kInf} : Aabb{kNaN, y, x, y + c};
          break;
        case 10:  // The whole scene.
          area = {scene.origin_x_m - c, scene.origin_y_m - c, scene.origin_x_m + scene.side_m,
                  scene.origin_y_m + scene.side_m};
          break;
        default:  // Around an object, its own box.
          if (n > 0) area = some_box();
          break;
      }
      SCOPED_TRACE(::testing::Message() << "scene " << s << " query " << q);
      const std::vector<std::uint32_t> hits = CentersIn(grid, area);
      ASSERT_EQ(hits, BruteCentersIn(scene.boxes, area));
      ++queries;
      nonempty += !hits.empty();
      const GridCell lo = grid.CellOf(area.min_x_m, area.min_y_m);
      const GridCell hi = grid.CellOf(area.max_x_m, area.max_y_m);
      scan_path += std::int64_t{hi.y} - lo.y + 1 > CenterGrid::kMaxQueryRows;
      for (const std::uint32_t i : hits) large_hits += IsLarge(scene.boxes[i], c);
    }
  }
  EXPECT_GT(nonempty, queries / 2);
  EXPECT_GT(scan_path, queries / 10);
  EXPECT_GT(large_hits, 200);
}

// ForEachInRowSpan visits exactly the listed objects whose centre cell has row cell.y and a
// column in [cell.x, last_x], by ascending column (then index): spans around objects, single
// cells, empty spans, whole rows, unoccupied rows inside the occupied range, rows below and
// above it and at the clamp and int32 limits, and random cells, on scenes with and without a
// row index.
TEST(CenterGrid, ForEachInRowSpanMatchesBruteForce) {
  std::mt19937_64 rng(0xce47e5'0003);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  CenterGrid grid;
  int nonempty_indexed = 0;
  int nonempty_unindexed = 0;
  int empty_inside = 0;
  for (int s = 0; s < 300; ++s) {
    const Scene scene = RandomScene(rng);
    grid.Build(scene.cell_size_m, scene.boxes);
    const bool indexed = ExpectsRowIndex(grid, scene.boxes);
    std::vector<GridCell> cells;
    std::set<std::int32_t> rows;
    for (const Aabb& b : scene.boxes) {
      if (IsLarge(b, scene.cell_size_m)) continue;
      cells.push_back(CenterCell(grid, b));
      rows.insert(cells.back().y);
    }
    std::vector<std::pair<GridCell, std::int32_t>> probes;
    for (int k = 0; k < 12 && !cells.empty(); ++k) {
      const GridCell cell = cells[rng() % cells.size()];
      const std::int32_t x = cell.x;
      const std::int32_t y = cell.y;
      probes.insert(probes.end(), {{{x - 1, y}, x + 1},
                                   {{x, y}, x},
                                   {{x + 1, y}, x + 1},
                                   {{x, y}, x - 1},
                                   {{kMinInt, y}, kMaxInt},
                                   {{x - 1, y + 1}, x + 1},
                                   {{x - 1, y - 1}, x + 1},
                                   {{x - 2, y + 2}, x + 2}});
    }
    if (!rows.empty()) {
      const std::int32_t lo = *rows.begin();
      const std::int32_t hi = *rows.rbegin();
      for (const std::int32_t y : {lo - 1, lo, hi, hi + 1}) {
        probes.push_back({{kMinInt, y}, kMaxInt});
      }
      // Unoccupied rows inside the occupied range.
      const std::int64_t inside = std::int64_t{hi} - lo - 1;
      for (int k = 0; k < 10 && inside > 0; ++k) {
        const auto y = static_cast<std::int32_t>(
            lo + 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(inside)));
        if (!rows.contains(y)) {
          probes.push_back({{kMinInt, y}, kMaxInt});
          ++empty_inside;
        }
      }
    }
    for (const std::int32_t y : {-kEdge, kEdge, kMinInt, kMaxInt, 0}) {
      probes.push_back({{kMinInt, y}, kMaxInt});
      probes.push_back({{-kEdge, y}, kEdge});
    }
    for (int k = 0; k < 10; ++k) {
      const GridCell cell = grid.CellOf(scene.origin_x_m + scene.side_m * unit(rng),
                                        scene.origin_y_m + scene.side_m * unit(rng));
      probes.push_back({{cell.x - 2, cell.y}, cell.x + 2});
    }
    for (const auto& [cell, last_x] : probes) {
      const std::vector<std::uint32_t> want = BruteRowSpan(grid, scene.boxes, cell, last_x);
      ASSERT_EQ(RowSpan(grid, cell, last_x), want)
          << "scene " << s << " row " << cell.y << " columns " << cell.x << ".." << last_x
          << (indexed ? " (row index)" : " (binary search)");
      (indexed ? nonempty_indexed : nonempty_unindexed) += !want.empty();
    }
  }
  EXPECT_GT(nonempty_indexed, 3000);
  EXPECT_GT(nonempty_unindexed, 500);
  EXPECT_GT(empty_inside, 100);
}

// Around the row-index threshold (occupied rows <= 2 * listed + 16): scenes whose centre rows
// span 2 * listed + 15 .. 2 * listed + 18 rows, with a large object that must not count as
// listed. Every row from below to above the range, whole and cell by cell, and the pairs and
// centre queries, match brute force on both sides of the threshold.
TEST(CenterGrid, RowLookupAroundTheRowIndexThreshold) {
  std::mt19937_64 rng(0xce47e5'0004);
  CenterGrid grid;
  const double c = 2.0;
  int indexed = 0;
  int unindexed = 0;
  for (const int listed : {2, 3, 10, 40}) {
    for (int extra = -1; extra <= 2; ++extra) {
      const int rows = 2 * listed + 16 + extra;
      std::vector<Aabb> boxes;
      for (int i = 0; i < listed; ++i) {
        const int row = i == 0 ? 0 : i == listed - 1 ? rows - 1 : static_cast<int>(rng() % rows);
        const double x =
            (static_cast<int>(rng() % 7) - 3) * c + c * 0.25 * static_cast<double>(rng() % 4);
        const double y = row * c + 0.5 * c;
        boxes.push_back(Aabb{x - 0.9, y - 0.9, x + 0.9, y + 0.9});
      }
      boxes.push_back(Aabb{-10.0, -100.0, 10.0, 200.0});  // Large.
      std::shuffle(boxes.begin(), boxes.end(), rng);
      SCOPED_TRACE(::testing::Message() << listed << " listed over " << rows << " rows");
      grid.Build(c, boxes);
      ASSERT_EQ(grid.large_objects().size(), 1u);
      const bool index = ExpectsRowIndex(grid, boxes);
      ASSERT_EQ(index, extra <= 0);
      (index ? indexed : unindexed) += 1;
      for (int y = -2; y <= rows + 1; ++y) {
        ASSERT_EQ(RowSpan(grid, {kMinInt, y}, kMaxInt),
                  BruteRowSpan(grid, boxes, {kMinInt, y}, kMaxInt))
            << "row " << y;
        for (int x = -5; x <= 5; ++x) {
          ASSERT_EQ(RowSpan(grid, {x, y}, x), BruteRowSpan(grid, boxes, {x, y}, x))
              << "cell " << x << ", " << y;
        }
        const Aabb row_area{-1e9, y * c, 1e9, y * c + 0.75 * c};
        ASSERT_EQ(CentersIn(grid, row_area), BruteCentersIn(boxes, row_area)) << "row " << y;
      }
      EXPECT_EQ(GridPairs(grid), BrutePairs(boxes));
    }
  }
  EXPECT_EQ(indexed, 8);
  EXPECT_EQ(unindexed, 8);
}

// Entries sort by (row, column) and, within a cell, by object index, whichever sort Build
// uses (an insertion sort below 32 objects, a comparison sort below 256, a radix sort above;
// keys of one digit or several): 1 to 3000 objects crowded into 15
// cells (many equal keys), in random order, some scenes with one object in twenty up to 1e9 m
// away (keys of up to six 11-bit digits). Every occupied row, read whole, lists its objects by
// column and then index; the pairs and the comparison count match the oracles.
TEST(CenterGrid, SortOrdersByCellThenIndexForAnyCount) {
  std::mt19937_64 rng(0xce47e5'0008);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  CenterGrid grid;
  const double c = 4.0;
  for (const int n : {1, 2, 3, 17, 31, 32, 33, 100, 255, 256, 257, 3000}) {
    for (const bool far : {false, true}) {
      SCOPED_TRACE(::testing::Message() << n << " objects" << (far ? ", some far" : ""));
      std::vector<Aabb> boxes;
      for (int i = 0; i < n; ++i) {
        double x = c * static_cast<double>(rng() % 5) + c * unit(rng);
        double y = c * static_cast<double>(rng() % 3) + c * unit(rng);
        if (far && rng() % 20 == 0) {
          x += (rng() % 2 == 0 ? 1.0 : -1.0) * 1e9 * unit(rng);
          y += (rng() % 2 == 0 ? 1.0 : -1.0) * 1e9 * unit(rng);
        }
        boxes.push_back(Aabb{x - 1.0, y - 0.5, x + 1.0, y + 0.5});
      }
      grid.Build(c, boxes);
      ASSERT_TRUE(grid.large_objects().empty());
      std::set<std::int32_t> rows;
      for (const Aabb& b : boxes) rows.insert(CenterCell(grid, b).y);
      for (const std::int32_t y : rows) {
        ASSERT_EQ(RowSpan(grid, {kMinInt, y}, kMaxInt),
                  BruteRowSpan(grid, boxes, {kMinInt, y}, kMaxInt))
            << "row " << y;
      }
      std::size_t compared = 0;
      EXPECT_EQ(GridPairs(grid, &compared), BrutePairs(boxes));
      EXPECT_EQ(compared, ExpectedComparisons(grid, boxes));
    }
  }
}

// Same input, same output in the same order; and a grid rebuilt over new input (different
// size, cell size, large objects, with or without a row index) answers exactly like a fresh
// grid over that input, visit order included: no state leaks from build to build.
TEST(CenterGrid, DeterministicAndRebuildsCleanly) {
  std::mt19937_64 rng(0xce47e5'0005);
  CenterGrid reused;
  for (int s = 0; s < 150; ++s) {
    SCOPED_TRACE(::testing::Message() << "scene " << s);
    const Scene first = RandomScene(rng);
    const Scene second = RandomScene(rng);
    reused.Build(first.cell_size_m, first.boxes);
    std::vector<IndexPair> once;
    const std::size_t compared_once = reused.FindOverlappingPairs(once);
    reused.Build(first.cell_size_m, first.boxes);
    std::vector<IndexPair> twice;
    const std::size_t compared_twice = reused.FindOverlappingPairs(twice);
    ASSERT_EQ(once, twice);
    ASSERT_EQ(compared_once, compared_twice);

    reused.Build(second.cell_size_m, second.boxes);
    CenterGrid fresh;
    fresh.Build(second.cell_size_m, second.boxes);
    std::vector<IndexPair> from_reused;
    std::vector<IndexPair> from_fresh;
    const std::size_t compared_reused = reused.FindOverlappingPairs(from_reused);
    const std::size_t compared_fresh = fresh.FindOverlappingPairs(from_fresh);
    ASSERT_EQ(from_reused, from_fresh);
    EXPECT_EQ(compared_reused, compared_fresh);
    EXPECT_EQ(reused.object_count(), fresh.object_count());
    EXPECT_EQ(reused.cell_size_m(), fresh.cell_size_m());
    EXPECT_EQ(LargeOf(reused), LargeOf(fresh));
    const double x0 = second.origin_x_m;
    const double y0 = second.origin_y_m;
    const double side = second.side_m;
    for (const Aabb& area :
         {Aabb{x0, y0, x0 + side / 3, y0 + side / 3}, Aabb{x0, y0, x0 + side, y0 + side},
          Aabb{-kInf, -kInf, kInf, kInf}, Aabb{x0, y0 - 1e5, x0 + 10, y0 + 1e5}}) {
      EXPECT_EQ(CentersInRaw(reused, area), CentersInRaw(fresh, area));
    }
    const GridCell mid = fresh.CellOf(x0 + side / 2, y0 + side / 2);
    for (std::int32_t dy = -1; dy <= 1; ++dy) {
      EXPECT_EQ(RowSpan(reused, {mid.x - 1, mid.y + dy}, mid.x + 1),
                RowSpan(fresh, {mid.x - 1, mid.y + dy}, mid.x + 1));
      EXPECT_EQ(RowSpan(reused, {kMinInt, mid.y + dy}, kMaxInt),
                RowSpan(fresh, {kMinInt, mid.y + dy}, kMaxInt));
    }
    // Rows of the first scene's objects: the reused grid must not remember them.
    for (const Aabb& b : first.boxes) {
      const GridCell cell = reused.CellOf(MidX(b), MidY(b));
      EXPECT_EQ(RowSpan(reused, {kMinInt, cell.y}, kMaxInt),
                BruteRowSpan(reused, second.boxes, {kMinInt, cell.y}, kMaxInt));
    }
  }
}

// Nothing in, nothing out: a never-built grid and a grid rebuilt over no boxes (after holding
// many) find no pairs, compare nothing, visit nothing; a grid of only large objects pairs them
// with each other and finds their centres but lists none in rows.
TEST(CenterGrid, NeverBuiltAndEmptyGridsFindNothing) {
  const std::vector<Aabb> areas = {
      {0, 0, 1, 1}, {-kInf, -kInf, kInf, kInf}, {-1e300, -1e300, 1e300, 1e300}, {0, -1e6, 1, 1e6}};
  const std::vector<std::pair<GridCell, std::int32_t>> spans = {{{0, 0}, 0},
                                                                {{kMinInt, 0}, kMaxInt},
                                                                {{kMinInt, kMinInt}, kMaxInt},
                                                                {{kMinInt, kMaxInt}, kMaxInt},
                                                                {{-kEdge, kEdge}, kEdge}};
  const auto expect_nothing = [&](const CenterGrid& grid) {
    std::vector<IndexPair> pairs;
    EXPECT_EQ(grid.FindOverlappingPairs(pairs), 0u);
    EXPECT_TRUE(pairs.empty());
    EXPECT_EQ(grid.object_count(), 0u);
    EXPECT_TRUE(grid.large_objects().empty());
    for (const Aabb& area : areas) EXPECT_TRUE(CentersInRaw(grid, area).empty());
    for (const auto& [cell, last_x] : spans) EXPECT_TRUE(RowSpan(grid, cell, last_x).empty());
  };
  {
    SCOPED_TRACE("never built");
    const CenterGrid never_built;
    expect_nothing(never_built);
  }
  std::mt19937_64 rng(0xce47e5'0006);
  CenterGrid grid;
  for (int s = 0; s < 5; ++s) {
    const Scene scene = RandomScene(rng);
    grid.Build(scene.cell_size_m, scene.boxes);
    for (const double cell : {1.0, 0.125}) {
      SCOPED_TRACE(::testing::Message() << "empty after scene " << s << ", cell " << cell);
      grid.Build(cell, {});
      EXPECT_EQ(grid.cell_size_m(), cell);
      expect_nothing(grid);
    }
  }

  // Only large objects (and a NaN one).
  const std::vector<Aabb> large = {
      {0, 0, 10, 1}, {5, 0.5, 6, 20}, {100, 100, 120, 120}, {kNaN, 0, 1, 1}};
  grid.Build(2.0, large);
  EXPECT_EQ(LargeOf(grid), (std::vector<std::uint32_t>{0, 1, 2, 3}));
  EXPECT_EQ(GridPairs(grid), (std::vector<IndexPair>{{0, 1}}));
  EXPECT_EQ(CentersIn(grid, {-kInf, -kInf, kInf, kInf}), (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_EQ(CentersIn(grid, {5, 0.5, 5, 0.5}), (std::vector<std::uint32_t>{0}));
  for (const auto& [cell, last_x] : spans) EXPECT_TRUE(RowSpan(grid, cell, last_x).empty());
  EXPECT_TRUE(RowSpan(grid, grid.CellOf(5.0, 0.5), kMaxInt).empty());
}

// 1000 cars near the origin plus two overlapping ones at (9e6, -9e6) and a few boxes at
// +-1e300 m (clamped into edge cells): the occupied extent needs many radix digits and is far
// too sparse for a row index, yet Build stays linear (no table sized by the extent: this test
// would run out of memory or time otherwise) and the pairs equal brute force, including two
// clamped into the same cell that do not overlap. The far objects are found where queries
// expect them.
TEST(CenterGrid, FarObjectsKeepMemoryLinearAndPairsExact) {
  std::mt19937_64 rng(0xce47e5'0007);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<Aabb> boxes;
  for (int i = 0; i < 1000; ++i) {
    boxes.push_back(RotatedBox(500 * unit(rng), 500 * unit(rng), kTwoPi * unit(rng), 4.5, 1.8));
  }
  const auto far = static_cast<std::uint32_t>(boxes.size());
  boxes.push_back(RotatedBox(9e6, -9e6, 0.3, 4.5, 1.8));
  boxes.push_back(RotatedBox(9e6 + 3, -9e6 + 1, 1.2, 4.5, 1.8));
  const auto absurd = static_cast<std::uint32_t>(boxes.size());
  boxes.push_back({1e300, 1e300, 1e300, 1e300});
  boxes.push_back({1e300, 1e300, 1e300, 1e300});  // Overlaps the previous one.
  boxes.push_back({3e300, 3e300, 3e300, 3e300});  // Same clamped cell, no overlap.
  boxes.push_back({-1e300, 5, -1e300, 6});
  boxes.push_back({1e300, -1e300, 1e300, -1e300});

  CenterGrid grid;
  grid.Build(5.0, boxes);
  ASSERT_TRUE(grid.large_objects().empty());
  ASSERT_FALSE(ExpectsRowIndex(grid, boxes));
  const std::vector<IndexPair> pairs = GridPairs(grid);
  const std::vector<IndexPair> want = BrutePairs(boxes);
  EXPECT_EQ(pairs, want) << DescribePairDiff(grid, boxes, pairs, want);
  EXPECT_GT(pairs.size(), 100u);
  EXPECT_TRUE(std::binary_search(pairs.begin(), pairs.end(), IndexPair{far, far + 1}));
  EXPECT_TRUE(std::binary_search(pairs.begin(), pairs.end(), IndexPair{absurd, absurd + 1}));
  EXPECT_FALSE(std::binary_search(pairs.begin(), pairs.end(), IndexPair{absurd, absurd + 2}));

  EXPECT_EQ(CentersIn(grid, {9e6 - 1, -9e6 - 1, 9e6 + 1, -9e6 + 1}),
            (std::vector<std::uint32_t>{far}));
  EXPECT_EQ(CentersIn(grid, {1e300, 1e300, kInf, kInf}),
            (std::vector<std::uint32_t>{absurd, absurd + 1, absurd + 2}));
  const GridCell far_cell = grid.CellOf(9e6, -9e6);
  EXPECT_EQ(far_cell, (GridCell{1'800'000, -1'800'000}));
  EXPECT_EQ(RowSpan(grid, {far_cell.x - 1, far_cell.y}, far_cell.x + 1),
            BruteRowSpan(grid, boxes, {far_cell.x - 1, far_cell.y}, far_cell.x + 1));
  EXPECT_EQ(RowSpan(grid, {kEdge, kEdge}, kEdge),
            (std::vector<std::uint32_t>{absurd, absurd + 1, absurd + 2}));
  EXPECT_EQ(RowSpan(grid, {kMinInt, kEdge - 1}, kMaxInt), std::vector<std::uint32_t>{});
  EXPECT_EQ(RowSpan(grid, {-kEdge, 1}, -kEdge), (std::vector<std::uint32_t>{absurd + 3}));
  EXPECT_EQ(RowSpan(grid, {kEdge, -kEdge}, kEdge), (std::vector<std::uint32_t>{absurd + 4}));
}

}  // namespace
}  // namespace pitlane::sim
