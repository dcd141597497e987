#include "server/sim/math/trig.h"

#include <cmath>
#include <cstdint>
#include <limits>

#include "gtest/gtest.h"
#include "server/sim/math/geometry.h"

namespace pitlane::sim {
namespace {

// Against libm (an independent implementation), over a dense deterministic sweep: the
// absolute error of values in [-1, 1] stays within a few units in the last place.
TEST(SinCos, MatchesLibmAcrossTheFastRange) {
  double worst_sin = 0.0;
  double worst_cos = 0.0;
  const int n = 2'000'000;
  for (int i = 0; i <= n; ++i) {
    // Quadratic spacing: dense near 0, reaching +-1024.
    const double t = -1.0 + 2.0 * i / n;
    const double x = std::copysign(t * t * kSinCosFastRange_rad, t);
    double s, c;
    SinCos(x, &s, &c);
    worst_sin = std::max(worst_sin, std::abs(s - std::sin(x)));
    worst_cos = std::max(worst_cos, std::abs(c - std::cos(x)));
  }
  EXPECT_LT(worst_sin, 4e-16);
  EXPECT_LT(worst_cos, 4e-16);
}

TEST(SinCos, SpecialPoints) {
  struct Case {
    double x, sin_x, cos_x;
  };
  for (const Case& c :
       {Case{0.0, 0.0, 1.0}, Case{kPi / 2, 1.0, 6.123233995736766e-17},
        Case{-kPi / 2, -1.0, 6.123233995736766e-17}, Case{kPi, 1.2246467991473532e-16, -1.0},
        Case{kPi / 6, 0.5, std::sqrt(3.0) / 2}, Case{1e-300, 1e-300, 1.0}}) {
    double s, co;
    SinCos(c.x, &s, &co);
    EXPECT_NEAR(s, c.sin_x, 2e-16) << c.x;
    EXPECT_NEAR(co, c.cos_x, 2e-16) << c.x;
  }
  double s, co;
  SinCos(1e-300, &s, &co);
  EXPECT_EQ(s, 1e-300);  // Tiny arguments keep full relative precision.
}

// Beyond the fast range the reduction is Payne-Hanek's (functions_test.cc measures it in ulps).
TEST(SinCos, ReducesLargeArgumentsExactly) {
  for (const double x : {1025.0, -5e6, 1e300}) {
    double s, c;
    SinCos(x, &s, &c);
    EXPECT_NEAR(s, std::sin(x), 3e-16) << x;
    EXPECT_NEAR(c, std::cos(x), 3e-16) << x;
  }
}

}  // namespace
}  // namespace pitlane::sim
