#include "server/sim/collision/collision.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/sim/math/geometry.h"

namespace pitlane::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kTol = kContactTolerance_m;
// The separating-axis test measures gaps along the four face normals only. For two rectangles
// the Euclidean distance is at most sqrt(2) times the largest such gap (corner against corner
// of parallel boxes is the worst case), so SAT may call a pair up to sqrt(2) * tolerance apart
// a contact, never one farther.
const double kMaxContactDistance = std::sqrt(2.0) * kTol;

// ---------------------------------------------------------------------------------------------
// An independent oracle: boxes as explicit polygons, compared by plain 2D geometry (corners,
// segment distances, orientation tests, polygon clipping). Nothing here projects onto axes.

struct Vec {
  double x = 0.0;
  double y = 0.0;
};

Vec operator+(Vec a, Vec b) { return {a.x + b.x, a.y + b.y}; }
Vec operator-(Vec a, Vec b) { return {a.x - b.x, a.y - b.y}; }
Vec operator*(double s, Vec a) { return {s * a.x, s * a.y}; }
double Dot(Vec a, Vec b) { return a.x * b.x + a.y * b.y; }
double Cross(Vec a, Vec b) { return a.x * b.y - a.y * b.x; }
double Norm(Vec a) { return std::hypot(a.x, a.y); }

using Quad = std::array<Vec, 4>;

// The corners of `box`, counter-clockwise, relative to (origin_x, origin_y).
Quad Corners(const CollisionBox& box, double origin_x = 0.0, double origin_y = 0.0) {
  const Vec c{box.center_x_m - origin_x, box.center_y_m - origin_y};
  const Vec u = box.half_length_m * Vec{box.axis_x, box.axis_y};
  const Vec v = box.half_width_m * Vec{-box.axis_y, box.axis_x};
  return {c + u + v, c - u + v, c - u - v, c + u - v};
}

// Closed containment in a counter-clockwise convex polygon.
bool InsideConvex(Vec p, const Quad& poly) {
  for (int i = 0; i < 4; ++i) {
    if (Cross(poly[(i + 1) % 4] - poly[i], p - poly[i]) < 0.0) return false;
  }
  return true;
}

int Sign(double v) { return (v > 0.0) - (v < 0.0); }

bool OnSegment(Vec p, Vec a, Vec b) {
  return std::min(a.x, b.x) <= p.x && p.x <= std::max(a.x, b.x) && std::min(a.y, b.y) <= p.y &&
         p.y <= std::max(a.y, b.y);
}

// Closed segment intersection by orientation tests. Nearly parallel segments are left to the
// endpoint distances (orientation signs of collinear points are rounding noise, and parallel
// segments that meet put an endpoint on the other segment anyway).
bool SegmentsIntersect(Vec p1, Vec p2, Vec q1, Vec q2) {
  if (std::abs(Cross(p2 - p1, q2 - q1)) <= 1e-9 * Norm(p2 - p1) * Norm(q2 - q1)) return false;
  const int o1 = Sign(Cross(p2 - p1, q1 - p1));
  const int o2 = Sign(Cross(p2 - p1, q2 - p1));
  const int o3 = Sign(Cross(q2 - q1, p1 - q1));
  const int o4 = Sign(Cross(q2 - q1, p2 - q1));
  if (o1 != o2 && o3 != o4) return true;
  return (o1 == 0 && OnSegment(q1, p1, p2)) || (o2 == 0 && OnSegment(q2, p1, p2)) ||
         (o3 == 0 && OnSegment(p1, q1, q2)) || (o4 == 0 && OnSegment(p2, q1, q2));
}

double PointSegmentDistance(Vec p, Vec a, Vec b) {
  const Vec ab = b - a;
  const double len2 = Dot(ab, ab);
  const double t = len2 > 0.0 ? std::clamp(Dot(p - a, ab) / len2, 0.0, 1.0) : 0.0;
  return Norm(p - (a + t * ab));
}

// Euclidean distance between two convex quads: 0 when they share a point.
double PolygonDistance(const Quad& a, const Quad& b) {
  for (int i = 0; i < 4; ++i) {
    if (InsideConvex(a[i], b) || InsideConvex(b[i], a)) return 0.0;
  }
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      if (SegmentsIntersect(a[i], a[(i + 1) % 4], b[j], b[(j + 1) % 4])) return 0.0;
    }
  }
  // Disjoint segments: their distance is that of an endpoint to the other segment.
  double best = kInf;
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      best = std::min(best, PointSegmentDistance(a[i], b[j], b[(j + 1) % 4]));
      best = std::min(best, PointSegmentDistance(b[j], a[i], a[(i + 1) % 4]));
    }
  }
  return best;
}

// Area of the intersection of two convex counter-clockwise quads (Sutherland-Hodgman).
double IntersectionArea(const Quad& subject, const Quad& clip) {
  std::vector<Vec> poly(subject.begin(), subject.end());
  std::vector<Vec> next;
  for (int i = 0; i < 4 && !poly.empty(); ++i) {
    const Vec a = clip[i];
    const Vec edge = clip[(i + 1) % 4] - a;
    next.clear();
    for (std::size_t k = 0; k < poly.size(); ++k) {
      const Vec p = poly[k];
      const Vec q = poly[(k + 1) % poly.size()];
      const double sp = Cross(edge, p - a);
      const double sq = Cross(edge, q - a);
      if (sp >= 0.0) next.push_back(p);
      if ((sp >= 0.0) != (sq >= 0.0)) next.push_back(p + (sp / (sp - sq)) * (q - p));
    }
    poly.swap(next);
  }
  double twice_area = 0.0;
  for (std::size_t k = 0; k < poly.size(); ++k) {
    twice_area += Cross(poly[k], poly[(k + 1) % poly.size()]);
  }
  return 0.5 * std::abs(twice_area);
}

struct Oracle {
  double distance = 0.0;
  double area = 0.0;
};

// Both measured relative to a's centre, like any sane implementation would at large
// coordinates.
Oracle Measure(const CollisionBox& a, const CollisionBox& b) {
  const Quad qa = Corners(a, a.center_x_m, a.center_y_m);
  const Quad qb = Corners(b, a.center_x_m, a.center_y_m);
  return Oracle{PolygonDistance(qa, qb), IntersectionArea(qb, qa)};
}

CollisionBox Shifted(CollisionBox box, double dx, double dy) {
  box.center_x_m += dx;
  box.center_y_m += dy;
  return box;
}

CollisionBox Box(double x, double y, double yaw, double half_length = 2.25,
                 double half_width = 0.9) {
  return ToCollisionBox(OrientedBox{.center_x_m = x,
                                    .center_y_m = y,
                                    .yaw_rad = yaw,
                                    .half_length_m = half_length,
                                    .half_width_m = half_width});
}

// ---------------------------------------------------------------------------------------------
// Scripted separating-axis cases.

struct SatCase {
  std::string name;
  CollisionBox a;
  CollisionBox b;
  bool touching;
  double normal_x;
  double normal_y;
  double depth_m;
};

std::vector<SatCase> ScriptedSatCases() {
  const double s2 = std::sqrt(2.0);
  // 45 degrees: the car's lowest corner sits (hl + hw) / sqrt(2) below its centre and
  // (hl - hw) / sqrt(2) to the left of it.
  const double drop = (2.25 + 0.9) / s2;
  const double shift = (2.25 - 0.9) / s2;
  return {
      // Nose to nose, 0.5 m of overlap along x.
      {"HeadOn", Box(0, 0, 0), Box(4.0, 0, kPi), true, 1, 0, 0.5},
      {"HeadOnReversedOrder", Box(4.0, 0, kPi), Box(0, 0, 0), true, -1, 0, 0.5},
      // Same heading, 0.1 m into the rear bumper with a 0.3 m lateral offset.
      {"RearEnd", Box(0, 0, 0), Box(4.4, 0.3, 0), true, 1, 0, 0.1},
      // Nose (pointing south) 0.15 m into the left side: 0.9 + 2.25 - 3.0.
      {"TBone", Box(0, 0, 0), Box(0.5, 3.0, -kPi / 2), true, 0, 1, 0.15},
      // Centres 2 m apart across, both radii 0.9 + 2.25: overlap 1.15, tie between a's width
      // axis and b's length axis resolved to a's.
      {"TBoneDeep", Box(0, 0, 0), Box(0, 2.0, kPi / 2), true, 0, 1, 1.15},
      // A 45-degree car's lowest corner 5 cm into the top edge of an axis-aligned car.
      {"CornerIntoEdge", Box(0, 0, 0), Box(0.5 + shift, 0.9 - 0.05 + drop, kPi / 4), true, 0, 1,
       0.05},
      // The same with the rotated car first: the normal is b's width axis, pointing down.
      {"CornerIntoEdgeRotatedFirst", Box(0, 0, kPi / 4), Box(0, -drop + 0.05 - 0.9, 0), true, 0, -1,
       0.05},
      // Side by side, edges exactly shared (in doubles 0.9 + 0.9 == 1.8 and 2.25 + 2.25 == 4.5).
      {"ParallelTouchingSides", Box(0, 0, 0), Box(1.0, 1.8, 0), true, 0, 1, 0},
      {"ParallelTouchingEnds", Box(0, 0, 0), Box(4.5, 0.5, 0), true, 1, 0, 0},
      {"SeparatedOneCentimetre", Box(0, 0, 0), Box(0, 1.81, 0), false, 0, 0, 0},
      {"GapHalfTolerance", Box(0, 0, 0), Box(0, 1.8 + 0.5e-6, 0), true, 0, 1, 0},
      {"GapTwiceTolerance", Box(0, 0, 0), Box(0, 1.8 + 2e-6, 0), false, 0, 0, 0},
      {"GapTwiceToleranceAtEnd", Box(0, 0, 0), Box(-4.5 - 2e-6, 0, 0), false, 0, 0, 0},
      // A car inside a 10 x 6 box: lifting it 3.4 m puts its bottom on the big box's top.
      {"Contained", Box(0, 0, 0, 5, 3), Box(1, 0.5, 0), true, 0, 1, 3.4},
      // Turned across, to the left: 5 + 0.9 - 1 = 4.9 along x beats 3 + 2.25 - 0.2 along y.
      {"ContainedRotated", Box(0, 0, 0, 5, 3), Box(-1, 0.2, kPi / 2), true, -1, 0, 4.9},
      // Identical and concentric: all overlaps tie pairwise (4.5, 1.8, 4.5, 1.8); the rule picks
      // a's width axis, taken positive since d = 0.
      {"Concentric", Box(3, -2, 0), Box(3, -2, 0), true, 0, 1, 1.8},
      {"ConcentricYawed", Box(3, -2, 0.7), Box(3, -2, 0.7), true, -std::sin(0.7), std::cos(0.7),
       1.8},
      {"ConcentricReversed", Box(3, -2, kPi), Box(3, -2, kPi), true, 0, -1, 1.8},
      // A 4 x 2 box crossed by the same box turned exactly a quarter: all four overlaps are
      // exactly 3, and the first axis (a's length, +x since d = 0) wins.
      {"CrossedConcentric", CollisionBox{.half_length_m = 2, .half_width_m = 1},
       CollisionBox{.axis_x = 0, .axis_y = 1, .half_length_m = 2, .half_width_m = 1}, true, 1, 0,
       3},
      // The same with b 1 m to the left: a's length and b's width tie at 2, and the normal
      // turns to face b.
      {"CrossedOffset", CollisionBox{.half_length_m = 2, .half_width_m = 1},
       CollisionBox{
           .center_x_m = -1, .axis_x = 0, .axis_y = 1, .half_length_m = 2, .half_width_m = 1},
       true, -1, 0, 2},
      // A 20 x 0.1 m wall and a car straddling it: lifting the car 0.45 m clears it.
      {"ThinWallStraddled", Box(0, 0, 0, 10, 0.05), Box(3, 0.5, 0), true, 0, 1, 0.45},
      // The car's nose 0.75 m past the wall's end, centred on it.
      {"ThinWallEnd", Box(0, 0, 0, 10, 0.05), Box(11.5, 0, 0), true, 1, 0, 0.75},
      // Car first, wall 2 cm into its side from below.
      {"ThinWallIntoSide", Box(0, 0, 0), Box(0, -0.9 - 0.05 + 0.02, 0, 10, 0.05), true, 0, -1,
       0.02},
      {"ThinWallMissed", Box(0, 0, 0, 10, 0.05), Box(0, 0.96, 0), false, 0, 0, 0},
  };
}

// Every scripted case: verdict, normal and depth. The expected values are exact; the 1e-12 m
// allowance covers only the rounding of std::cos/std::sin (~1e-16) times lengths of a few
// metres, six orders of magnitude below the contact tolerance.
TEST(CollisionSat, ScriptedCases) {
  for (const SatCase& c : ScriptedSatCases()) {
    SCOPED_TRACE(c.name);
    const BoxContact contact = CollideBoxes(c.a, c.b);
    ASSERT_EQ(contact.touching, c.touching);
    EXPECT_NEAR(contact.normal_x, c.normal_x, 1e-12);
    EXPECT_NEAR(contact.normal_y, c.normal_y, 1e-12);
    EXPECT_NEAR(contact.depth_m, c.depth_m, 1e-12);
    if (c.touching) {
      // Unit length, pointing from a towards b (or along +normal when the centres coincide).
      EXPECT_NEAR(std::hypot(contact.normal_x, contact.normal_y), 1.0, 1e-15);
      const double along = (c.b.center_x_m - c.a.center_x_m) * contact.normal_x +
                           (c.b.center_y_m - c.a.center_y_m) * contact.normal_y;
      EXPECT_GE(along, 0.0);
    }
  }
}

// The contact verdict and depth do not depend on argument order (the normal flips unless the
// centres coincide). Exact equality: every quantity is computed from exactly negated inputs.
TEST(CollisionSat, ScriptedCasesAreSymmetric) {
  for (const SatCase& c : ScriptedSatCases()) {
    SCOPED_TRACE(c.name);
    const BoxContact ab = CollideBoxes(c.a, c.b);
    const BoxContact ba = CollideBoxes(c.b, c.a);
    EXPECT_EQ(ab.touching, ba.touching);
    EXPECT_EQ(ab.depth_m, ba.depth_m);
  }
}

// The tolerance boundary is inclusive: a gap of exactly kContactTolerance_m is a contact, one
// ulp more is not. Half widths of 2^-41 m make every sum and difference below exact in
// doubles, so the SAT overlap is exactly -kContactTolerance_m.
TEST(CollisionSat, ToleranceBoundaryIsInclusive) {
  const double half_width = 0x1p-41;
  const CollisionBox a{.half_length_m = 2.0, .half_width_m = half_width};
  CollisionBox b = a;
  b.center_y_m = 2 * half_width + kTol;
  ASSERT_EQ(b.center_y_m - 2 * half_width, kTol);
  const BoxContact at_tolerance = CollideBoxes(a, b);
  EXPECT_TRUE(at_tolerance.touching);
  EXPECT_EQ(at_tolerance.depth_m, 0.0);
  EXPECT_EQ(at_tolerance.normal_x, 0.0);
  EXPECT_EQ(at_tolerance.normal_y, 1.0);
  b.center_y_m = std::nextafter(b.center_y_m, 1.0);
  EXPECT_FALSE(CollideBoxes(a, b).touching);
}

// ---------------------------------------------------------------------------------------------
// Translation invariance.

// A deterministic set of pairs whose true separation is known exactly: b's nearest corner is
// placed on the interior of one of a's faces, `gap` outside it. Then the Euclidean distance,
// and the largest SAT gap, are both `gap`.
struct GapPair {
  CollisionBox a;
  CollisionBox b;
  double gap;
};

std::vector<GapPair> FaceGapPairs() {
  std::mt19937_64 rng(0x7261'6e73'6c61'7465);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const double factors[] = {-1e5, -0.5, 0.0, 0.5, 0.98, 1.02, 2.0, 10.0};
  std::vector<GapPair> pairs;
  for (int i = 0; i < 400; ++i) {
    const CollisionBox a = Box(20 * unit(rng) - 10, 20 * unit(rng) - 10, kTwoPi * unit(rng),
                               0.3 + 5 * unit(rng), 0.3 + 2 * unit(rng));
    CollisionBox b = Box(0, 0, kTwoPi * unit(rng), 0.3 + 5 * unit(rng), 0.3 + 2 * unit(rng));
    const double gap = factors[i % std::size(factors)] * kTol;
    // Face k of a: outward normal n, tangent t, half extents along n and t.
    const int face = static_cast<int>(unit(rng) * 4);
    Vec n{a.axis_x, a.axis_y};
    Vec t{-a.axis_y, a.axis_x};
    double h_n = a.half_length_m;
    double h_t = a.half_width_m;
    if (face % 2 == 1) {
      std::swap(n, t);
      n = -1.0 * n;
      std::swap(h_n, h_t);
    }
    if (face >= 2) n = -1.0 * n;
    // b's corner farthest along -n, relative to its centre.
    const Quad qb = Corners(b);
    Vec low = qb[0];
    for (const Vec& q : qb) {
      if (Dot(q, n) < Dot(low, n)) low = q;
    }
    const Vec target =
        Vec{a.center_x_m, a.center_y_m} + (h_n + gap) * n + (0.8 * h_t * (2 * unit(rng) - 1)) * t;
    b.center_x_m = target.x - low.x;
    b.center_y_m = target.y - low.y;
    pairs.push_back({a, b, gap});
  }
  return pairs;
}

// Shifting a pair by (1e7, -1e7) m does not change the verdict, normal or depth. At 1e7 m a
// coordinate rounds by up to 1e-9 m, which is why near pairs sit at least 2e-8 m from the
// tolerance (0.98 and 1.02 of it) and normal and depth are compared to 1e-8.
TEST(CollisionSat, TranslationInvariantAtLargeCoordinates) {
  std::vector<std::pair<CollisionBox, CollisionBox>> pairs;
  for (const SatCase& c : ScriptedSatCases()) pairs.emplace_back(c.a, c.b);
  const std::vector<GapPair> gap_pairs = FaceGapPairs();
  for (const GapPair& p : gap_pairs) pairs.emplace_back(p.a, p.b);
  int touching = 0;
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    SCOPED_TRACE(i);
    const auto& [a, b] = pairs[i];
    const BoxContact near_origin = CollideBoxes(a, b);
    for (const double sign : {1.0, -1.0}) {
      const BoxContact far =
          CollideBoxes(Shifted(a, sign * 1e7, -sign * 1e7), Shifted(b, sign * 1e7, -sign * 1e7));
      ASSERT_EQ(far.touching, near_origin.touching);
      EXPECT_NEAR(far.depth_m, near_origin.depth_m, 1e-8);
      EXPECT_NEAR(far.normal_x, near_origin.normal_x, 1e-8);
      EXPECT_NEAR(far.normal_y, near_origin.normal_y, 1e-8);
    }
    touching += near_origin.touching;
  }
  // And the constructed gaps are judged right in the first place.
  for (const GapPair& p : gap_pairs) {
    EXPECT_EQ(CollideBoxes(p.a, p.b).touching, p.gap <= kTol) << p.gap;
    EXPECT_NEAR(Measure(p.a, p.b).distance, std::max(p.gap, 0.0), 1e-12);
  }
  EXPECT_GT(touching, 100);
  EXPECT_LT(touching, static_cast<int>(pairs.size()) - 100);
}

// ---------------------------------------------------------------------------------------------
// Randomised comparison with the polygon oracle.

// Random box shapes: cars, arbitrary, 1 mm thin, 1 mm specks.
void RandomShape(std::mt19937_64& rng, CollisionBox& box) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  switch (rng() % 5) {
    case 0:
      box.half_length_m = 2.25;
      box.half_width_m = 0.9;
      break;
    case 1:
    case 2:
      box.half_length_m = 0.05 + 15 * unit(rng);
      box.half_width_m = 0.05 + 5 * unit(rng);
      break;
    case 3:
      box.half_length_m = 0.5 + 15 * unit(rng);
      box.half_width_m = 5e-4;
      break;
    default:
      box.half_length_m = 5e-4;
      box.half_width_m = 5e-4 + 1e-3 * unit(rng);
      break;
  }
}

// Random orientation: arbitrary, exact quarter turns, or quarter turns through cos/sin.
void RandomAxis(std::mt19937_64& rng, double reference_yaw, CollisionBox& box) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const int quarter = static_cast<int>(rng() % 4);
  double yaw = 0.0;
  switch (rng() % 5) {
    case 0: {
      static constexpr double kExact[4][2] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
      box.axis_x = kExact[quarter][0];
      box.axis_y = kExact[quarter][1];
      return;
    }
    case 1:
      yaw = quarter * kPi / 2;
      break;
    case 2:
      yaw = reference_yaw + quarter * kPi / 2;
      break;
    default:
      yaw = kTwoPi * unit(rng) - kPi;
      break;
  }
  box.axis_x = std::cos(yaw);
  box.axis_y = std::sin(yaw);
}

double Yaw(const CollisionBox& box) { return std::atan2(box.axis_y, box.axis_x); }

// A random pair: b placed at random, on a, at a chosen gap along a random or face direction,
// or corner to corner.
std::pair<CollisionBox, CollisionBox> RandomPair(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  CollisionBox a;
  a.center_x_m = 100 * unit(rng) - 50;
  a.center_y_m = 100 * unit(rng) - 50;
  RandomShape(rng, a);
  RandomAxis(rng, 0.0, a);
  CollisionBox b;
  RandomShape(rng, b);
  RandomAxis(rng, Yaw(a), b);
  const Vec ca{a.center_x_m, a.center_y_m};
  const auto place = [&](Vec center) {
    b.center_x_m = center.x;
    b.center_y_m = center.y;
  };
  static constexpr double kGapFactors[] = {-1e4, -2,  -1,  -0.5, 0,    0,   0.25, 0.5, 0.9, 0.99,
                                           1.01, 1.1, 1.3, 1.4,  1.42, 1.5, 2,    3,   10,  1e3};
  const double gap = rng() % 4 == 0 ? (6 * unit(rng) - 3) * kTol
                                    : kGapFactors[rng() % std::size(kGapFactors)] * kTol;
  const Quad qa = Corners(a, a.center_x_m, a.center_y_m);
  const Quad qb = Corners(b);
  switch (rng() % 6) {
    case 0: {  // Anywhere near a.
      const double reach = Norm(qa[0]) + Norm(qb[0]);
      const double angle = kTwoPi * unit(rng);
      place(ca + (1.2 * reach * std::sqrt(unit(rng))) * Vec{std::cos(angle), std::sin(angle)});
      break;
    }
    case 1:  // Equal or concentric.
      if (rng() % 2 == 0) {
        b = a;
      } else {
        place(ca);
      }
      break;
    case 2:
    case 3: {  // Supports `gap` apart along a face normal of a or b, or any direction.
      Vec n;
      const int pick = static_cast<int>(rng() % 3);
      if (pick == 2) {
        const double angle = kTwoPi * unit(rng);
        n = {std::cos(angle), std::sin(angle)};
      } else {
        const CollisionBox& owner = pick == 0 ? a : b;
        const Vec u{owner.axis_x, owner.axis_y};
        const Vec v{-owner.axis_y, owner.axis_x};
        n = (rng() % 2 == 0 ? 1.0 : -1.0) * (rng() % 2 == 0 ? u : v);
      }
      double high_a = -kInf;
      double high_b = -kInf;
      for (int k = 0; k < 4; ++k) {
        high_a = std::max(high_a, Dot(qa[k], n));
        high_b = std::max(high_b, -Dot(qb[k], n));
      }
      const Vec t{-n.y, n.x};
      const double slide =
          (rng() % 3 == 0 ? 0.0 : 1.0) * (2 * unit(rng) - 1) * (Norm(qa[0]) + Norm(qb[0]));
      place(ca + (high_a + high_b + gap) * n + slide * t);
      break;
    }
    default: {  // Corner to corner, `gap` apart along a random direction.
      const double angle = kTwoPi * unit(rng);
      const Vec n{std::cos(angle), std::sin(angle)};
      place(ca + qa[rng() % 4] - qb[rng() % 4] + gap * n);
      break;
    }
  }
  return {a, b};
}

// 200k random pairs against the polygon oracle. SAT gaps never exceed the Euclidean distance
// and are at least 1/sqrt(2) of it, so: a contact is at most sqrt(2) * tolerance apart, a
// non-contact more than the tolerance apart (tighter than "beyond 2 tolerances means no
// contact"). The 1e-12 m slack is the oracle's own rounding (coordinates of at most ~100 m).
// Contacts also overlap in the broad phase, have unit normals pointing from a to b, and their
// depth is the minimum translation distance (for convex polygons, attained along one of the
// four face normals): moving b by depth + 2e-6 m along the normal separates it by at least
// 2e-6 m (to 1e-12), while moving it by depth - 1e-4 m along any face normal leaves the
// interiors overlapping.
TEST(CollisionSat, MatchesPolygonOracleOnRandomPairs) {
  std::mt19937_64 rng(20220623);
  int contacts = 0;
  int overlapping = 0;
  int depth_checked = 0;
  int touching_beyond_tolerance = 0;  // Contacts with tolerance < distance <= sqrt(2) tol.
  int near_boundary = 0;              // Pairs within [0.5, 2] tolerances.
  constexpr int kPairs = 200'000;
  for (int i = 0; i < kPairs; ++i) {
    // Not a structured binding: clang 14 cannot capture one in `trace` (P1091, clang 16).
    const std::pair<CollisionBox, CollisionBox> pair = RandomPair(rng);
    const CollisionBox& a = pair.first;
    const CollisionBox& b = pair.second;
    const BoxContact contact = CollideBoxes(a, b);
    const Oracle oracle = Measure(a, b);
    const auto trace = [&] {
      return ::testing::Message() << std::setprecision(17) << "pair " << i << " a {" << a.center_x_m
                                  << ", " << a.center_y_m << ", " << a.axis_x << ", " << a.axis_y
                                  << ", " << a.half_length_m << ", " << a.half_width_m << "} b {"
                                  << b.center_x_m << ", " << b.center_y_m << ", " << b.axis_x
                                  << ", " << b.axis_y << ", " << b.half_length_m << ", "
                                  << b.half_width_m << "} normal " << contact.normal_x << ", "
                                  << contact.normal_y << " distance " << oracle.distance << " area "
                                  << oracle.area << " depth " << contact.depth_m;
    };
    near_boundary += oracle.distance >= 0.5 * kTol && oracle.distance <= 2 * kTol;
    if (!contact.touching) {
      ASSERT_GT(oracle.distance, kTol - 1e-12) << trace();
      ASSERT_EQ(contact.normal_x, 0.0);
      ASSERT_EQ(contact.normal_y, 0.0);
      ASSERT_EQ(contact.depth_m, 0.0);
      continue;
    }
    ++contacts;
    ASSERT_LE(oracle.distance, kMaxContactDistance + 1e-12) << trace();
    touching_beyond_tolerance += oracle.distance > kTol;
    ASSERT_TRUE(Overlaps(BoundingBox(a), BoundingBox(b))) << trace();
    ASSERT_NEAR(std::hypot(contact.normal_x, contact.normal_y), 1.0, 1e-14) << trace();
    const Vec normal{contact.normal_x, contact.normal_y};
    ASSERT_GE(Dot(normal, {b.center_x_m - a.center_x_m, b.center_y_m - a.center_y_m}), -1e-12)
        << trace();
    ASSERT_GE(contact.depth_m, 0.0);
    const BoxContact swapped = CollideBoxes(b, a);
    ASSERT_TRUE(swapped.touching);
    ASSERT_EQ(swapped.depth_m, contact.depth_m);
    if (oracle.area > 1e-9) {
      ++overlapping;
      ASSERT_GT(contact.depth_m, 0.0) << trace();
    }
    if (contact.depth_m == 0.0) continue;
    const double out = contact.depth_m + 2e-6;
    ASSERT_GT(Measure(a, Shifted(b, out * normal.x, out * normal.y)).distance, 2e-6 - 1e-12)
        << trace();
    if (contact.depth_m > 1e-3) {
      ++depth_checked;
      const double in = contact.depth_m - 1e-4;
      for (const Vec dir : {Vec{a.axis_x, a.axis_y}, Vec{-a.axis_y, a.axis_x},
                            Vec{b.axis_x, b.axis_y}, Vec{-b.axis_y, b.axis_x}}) {
        for (const double s : {in, -in}) {
          const Oracle moved = Measure(a, Shifted(b, s * dir.x, s * dir.y));
          ASSERT_EQ(moved.distance, 0.0) << trace();
          ASSERT_GT(moved.area, 0.0) << trace();
        }
      }
    }
  }
  // The generator must actually exercise every regime.
  EXPECT_GT(contacts, kPairs / 4);
  EXPECT_LT(contacts, kPairs * 3 / 4);
  EXPECT_GT(overlapping, kPairs / 10);
  EXPECT_GT(depth_checked, kPairs / 10);
  EXPECT_GT(near_boundary, kPairs / 20);
  EXPECT_GT(touching_beyond_tolerance, 50);
}

// Both sides of the sqrt(2) bound are reached: parallel boxes corner to corner along the
// diagonal are a contact at 1.4 tolerances (each axis gap is 0.99 tolerance) and not at 1.42.
TEST(CollisionSat, CornerToCornerDiagonalGap) {
  const CollisionBox a{.half_length_m = 2.25, .half_width_m = 0.9};
  for (const double factor : {1.4, 1.42}) {
    const double g = factor * kTol / std::sqrt(2.0);
    const CollisionBox b{
        .center_x_m = 4.5 + g, .center_y_m = 1.8 + g, .half_length_m = 2.25, .half_width_m = 0.9};
    EXPECT_NEAR(Measure(a, b).distance, factor * kTol, 1e-12);
    EXPECT_EQ(CollideBoxes(a, b).touching, factor < std::sqrt(2.0)) << factor;
    // The broad phase still sees the contact: the bounds are grown by the tolerance each.
    EXPECT_TRUE(Overlaps(BoundingBox(a), BoundingBox(b)));
  }
}

// ---------------------------------------------------------------------------------------------
// RayToBox.

struct RayCase {
  std::string name;
  double origin_x, origin_y, dir_x, dir_y;
  CollisionBox box;
  double distance;
};

// Known distances. Axis-aligned cases use exact axes and dyadic coordinates, so a grazing ray
// runs exactly along the edge; the rotated case is within rounding of cos/sin (1e-12).
TEST(RayToBox, ScriptedCases) {
  // 4.5 x 1.0 m, centred at (10, 4), exactly axis-aligned: x in [7.75, 12.25], y in [3.5, 4.5].
  const CollisionBox aligned{
      .center_x_m = 10, .center_y_m = 4, .half_length_m = 2.25, .half_width_m = 0.5};
  const CollisionBox square{
      .center_x_m = 5, .center_y_m = 5, .half_length_m = 1, .half_width_m = 1};
  const CollisionBox turned = Box(10, 0, kPi / 4);
  const CollisionBox upright{.center_x_m = 0,
                             .center_y_m = 20,
                             .axis_x = 0,
                             .axis_y = 1,
                             .half_length_m = 2.25,
                             .half_width_m = 0.9};
  const double r = std::sqrt(0.5);
  const std::vector<RayCase> cases = {
      {"FrontFace", 0, 4, 1, 0, aligned, 7.75},
      {"BackFace", 20, 4.25, -1, 0, aligned, 7.75},
      {"BottomFace", 10, 0, 0, 1, aligned, 3.5},
      {"TopFace", 8, 10, 0, -1, aligned, 5.5},
      // Crosses y = 3.5 at x = 7.5 (outside), then enters the front face at (7.75, 3.75).
      {"DiagonalIntoFrontFace", 7, 3, r, r, aligned, 0.75 * std::sqrt(2.0)},
      {"CornerOfSquare", 0, 0, r, r, square, 4 * std::sqrt(2.0)},
      {"RotatedBox", 0, 0, 1, 0, turned, 10 - 0.9 * std::sqrt(2.0)},
      {"UprightBox", 0, 0, 0, 1, upright, 20 - 2.25},
      {"UprightBoxSide", -10, 20, 1, 0, upright, 10 - 0.9},
      {"GrazingTopEdge", 0, 4.5, 1, 0, aligned, 7.75},
      {"GrazingBottomEdge", 20, 3.5, -1, 0, aligned, 7.75},
      {"GrazingSideEdge", 7.75, -3, 0, 1, aligned, 6.5},
      {"InsideCentre", 10, 4, 0, 1, aligned, 0},
      {"InsidePointingOut", 12, 4.4, 1, 0, aligned, 0},
      {"OnBoundaryPointingAway", 7.75, 4, -1, 0, aligned, 0},
      {"PointingAway", 0, 4, -1, 0, aligned, kInf},
      {"BehindPointingAway", 13, 4, 1, 0, aligned, kInf},
      {"ParallelAbove", 0, 4.5 + 0x1p-30, 1, 0, aligned, kInf},
      {"ParallelBelow", 0, 3, 1, 0, aligned, kInf},
      {"ParallelBeside", 7.5, 0, 0, 1, aligned, kInf},
      {"MissesDiagonally", 0, 0, r, -r, aligned, kInf},
      {"MissesRotated", 0, 2.5, 1, 0, turned, kInf},
  };
  for (const RayCase& c : cases) {
    SCOPED_TRACE(c.name);
    const double d = RayToBox(c.origin_x, c.origin_y, c.dir_x, c.dir_y, c.box);
    if (std::isinf(c.distance)) {
      EXPECT_EQ(d, kInf);
    } else {
      EXPECT_NEAR(d, c.distance, 1e-12);
    }
  }
}

// The first hit by brute force: the ray against each edge segment, by 2D line-segment
// intersection; 0 if the origin is inside.
double OracleRay(Vec origin, Vec dir, const Quad& q) {
  if (InsideConvex(origin, q)) return 0.0;
  double best = kInf;
  for (int k = 0; k < 4; ++k) {
    const Vec p = q[k];
    const Vec e = q[(k + 1) % 4] - p;
    const double denom = Cross(dir, e);
    if (denom == 0.0) continue;  // Parallel: the other edges decide.
    const Vec w = p - origin;
    const double t = Cross(w, e) / denom;
    const double s = Cross(w, dir) / denom;
    if (t >= 0.0 && s >= 0.0 && s <= 1.0) best = std::min(best, t);
  }
  return best;
}

// 100k random rays (a third aimed at a point inside the box, a fifth along exact axes) against
// the segment oracle. Box and origin are within ~60 m, so both methods round by ~1e-13 m and
// 1e-9 m is a generous bound on the difference. Rays passing within 1e-9 m of a corner, or
// starting within 1e-9 m of the boundary, are ambiguous at that precision and skipped.
TEST(RayToBox, MatchesSegmentOracleOnRandomRays) {
  std::mt19937_64 rng(77);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int hits = 0;
  int inside = 0;
  int skipped = 0;
  constexpr int kRays = 100'000;
  for (int i = 0; i < kRays; ++i) {
    CollisionBox box;
    box.center_x_m = 40 * unit(rng) - 20;
    box.center_y_m = 40 * unit(rng) - 20;
    RandomShape(rng, box);
    RandomAxis(rng, 0.0, box);
    const Vec origin{60 * unit(rng) - 30, 60 * unit(rng) - 30};
    Vec dir;
    const int mode = static_cast<int>(rng() % 5);
    if (mode == 0) {
      static constexpr double kExact[4][2] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
      const int k = static_cast<int>(rng() % 4);
      dir = {kExact[k][0], kExact[k][1]};
    } else if (mode <= 2) {
      const Vec target = Vec{box.center_x_m, box.center_y_m} +
                         ((2 * unit(rng) - 1) * box.half_length_m) * Vec{box.axis_x, box.axis_y} +
                         ((2 * unit(rng) - 1) * box.half_width_m) * Vec{-box.axis_y, box.axis_x};
      dir = (1.0 / Norm(target - origin)) * (target - origin);
    } else {
      const double angle = kTwoPi * unit(rng);
      dir = {std::cos(angle), std::sin(angle)};
    }
    const Quad q = Corners(box);
    bool ambiguous = false;
    for (int k = 0; k < 4; ++k) {
      ambiguous |= std::abs(Cross(dir, q[k] - origin)) < 1e-9;
      ambiguous |= PointSegmentDistance(origin, q[k], q[(k + 1) % 4]) < 1e-9;
    }
    if (ambiguous) {
      ++skipped;
      continue;
    }
    const double expected = OracleRay(origin, dir, q);
    const double got = RayToBox(origin.x, origin.y, dir.x, dir.y, box);
    if (std::isinf(expected)) {
      ASSERT_EQ(got, kInf) << "ray " << i;
    } else {
      ASSERT_NEAR(got, expected, 1e-9) << "ray " << i;
      ++hits;
      inside += expected == 0.0;
    }
  }
  EXPECT_LT(skipped, kRays / 1000);
  EXPECT_GT(hits, kRays / 3);
  EXPECT_LT(hits, kRays * 3 / 4);
  EXPECT_GT(inside, 100);
}

// ---------------------------------------------------------------------------------------------
// BoundingBox.

// The box is the corners' hull grown by the tolerance: every corner at least the tolerance
// inside every side, and every side exactly the tolerance from some corner. Near the origin
// (coordinates up to ~1e3 m) both computations round by < 1e-12, so sides must match to 1e-9;
// at 1e7 m a coordinate alone rounds by 1e-9 m, so the bound there is 1e-8.
TEST(BoundingBox, ContainsCornersAndIsTight) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  constexpr int kBoxes = 20'000;
  for (int i = 0; i < kBoxes; ++i) {
    const double offset = i % 10 == 0 ? 1e7 : 0.0;
    const double slack = offset == 0.0 ? 1e-9 : 1e-8;
    CollisionBox box;
    box.center_x_m = offset + 2000 * unit(rng) - 1000;
    box.center_y_m = -offset + 2000 * unit(rng) - 1000;
    RandomShape(rng, box);
    RandomAxis(rng, 0.0, box);
    const Aabb bounds = BoundingBox(box);
    const Quad q = Corners(box, offset, -offset);
    const double min_x = bounds.min_x_m - offset;
    const double max_x = bounds.max_x_m - offset;
    const double min_y = bounds.min_y_m + offset;
    const double max_y = bounds.max_y_m + offset;
    double gap_min_x = kInf, gap_max_x = kInf, gap_min_y = kInf, gap_max_y = kInf;
    for (const Vec& c : q) {
      gap_min_x = std::min(gap_min_x, c.x - min_x);
      gap_max_x = std::min(gap_max_x, max_x - c.x);
      gap_min_y = std::min(gap_min_y, c.y - min_y);
      gap_max_y = std::min(gap_max_y, max_y - c.y);
    }
    SCOPED_TRACE(i);
    for (const double gap : {gap_min_x, gap_max_x, gap_min_y, gap_max_y}) {
      ASSERT_NEAR(gap, kTol, slack);
    }
  }
}

// Exact quarter-turn axes give exact bounds.
TEST(BoundingBox, ExactForQuarterTurns) {
  const CollisionBox upright{.center_x_m = 3,
                             .center_y_m = -2,
                             .axis_x = 0,
                             .axis_y = -1,
                             .half_length_m = 2.25,
                             .half_width_m = 0.5};
  const Aabb b = BoundingBox(upright);
  EXPECT_EQ(b.min_x_m, 3 - (0.5 + kTol));
  EXPECT_EQ(b.max_x_m, 3 + (0.5 + kTol));
  EXPECT_EQ(b.min_y_m, -2 - (2.25 + kTol));
  EXPECT_EQ(b.max_y_m, -2 + (2.25 + kTol));
}

}  // namespace
}  // namespace pitlane::sim
