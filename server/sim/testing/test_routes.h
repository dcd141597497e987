// Route shapes for tests: points on a circle, and the oval the shipped scenarios drive on.
#ifndef PITLANE_SERVER_SIM_TESTING_TEST_ROUTES_H_
#define PITLANE_SERVER_SIM_TESTING_TEST_ROUTES_H_

#include <algorithm>
#include <cmath>
#include <vector>

#include "server/sim/drivers/route.h"
#include "server/sim/math/geometry.h"

namespace pitlane::sim {

// n points on a circle of radius r, metres, about (cx, cy), counter-clockwise from angle 0.
inline std::vector<RoutePoint> Circle(double r, int n, double cx = 0.0, double cy = 0.0) {
  std::vector<RoutePoint> points;
  for (int i = 0; i < n; ++i) {
    const double a = kTwoPi * i / n;
    points.push_back({cx + r * std::cos(a), cy + r * std::sin(a)});
  }
  return points;
}

// scenarios/generate.py's oval: two straights of 2 half_straight along x at y = -+r, joined by
// semicircles about (+-half_straight, 0), counter-clockwise, points about `step` apart.
inline std::vector<RoutePoint> Oval(double half_straight, double r, double step) {
  std::vector<RoutePoint> points;
  const int n = std::max(2, static_cast<int>(2 * half_straight / step));
  const int m = std::max(4, static_cast<int>(kPi * r / step));
  for (int i = 0; i < n; ++i) points.push_back({-half_straight + 2 * half_straight * i / n, -r});
  for (int i = 0; i < m; ++i) {
    const double a = -kPi / 2 + kPi * i / m;
    points.push_back({half_straight + r * std::cos(a), r * std::sin(a)});
  }
  for (int i = 0; i < n; ++i) points.push_back({half_straight - 2 * half_straight * i / n, r});
  for (int i = 0; i < m; ++i) {
    const double a = kPi / 2 + kPi * i / m;
    points.push_back({-half_straight + r * std::cos(a), r * std::sin(a)});
  }
  return points;
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_TESTING_TEST_ROUTES_H_
