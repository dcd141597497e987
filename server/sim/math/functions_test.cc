#include "server/sim/math/functions.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/sim/math/geometry.h"
#include "server/sim/math/trig.h"

namespace pitlane::sim {
namespace {

// The oracle is glibc's long-double (x87, 64-bit significand) libm: 11 bits more than a
// double, so its own error is below 1/1000 of a double's ulp. Errors are in units of the last
// place of the exact result rounded to double (the subnormal spacing below 2^-1022).
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr int kPointsPerRange = 1'000'000;

double UlpError(double computed, long double exact) {
  const double rounded = static_cast<double>(exact);
  if (std::isinf(rounded)) return computed == rounded ? 0.0 : kInf;
  const double magnitude = std::abs(rounded);
  const int exponent =
      magnitude < std::numeric_limits<double>::min() ? -1022 : std::ilogb(magnitude);
  const long double ulp = std::ldexp(1.0L, exponent - 52);
  return static_cast<double>(std::abs(static_cast<long double>(computed) - exact) / ulp);
}

// Sampling rules for one range of arguments.
using Sampler = std::function<double(std::mt19937_64&)>;

Sampler Uniform(double lo, double hi) {
  return [lo, hi](std::mt19937_64& rng) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
}

// |x| log-uniform in [2^lo_exp, 2^hi_exp), either sign if `signed_values`.
Sampler LogUniform(int lo_exp, int hi_exp, bool signed_values) {
  return [=](std::mt19937_64& rng) {
    const double e = std::uniform_real_distribution<double>(lo_exp, hi_exp)(rng);
    const double x = std::exp2(e);
    return signed_values && (rng() & 1) ? -x : x;
  };
}

struct Range {
  std::string name;
  Sampler sample;
};

// The largest error of `computed` against `exact` over kPointsPerRange seeded points of each
// range; prints each range's.
double MaxUlpError(const char* function, const std::vector<Range>& ranges,
                   const std::function<double(double)>& computed,
                   const std::function<long double(long double)>& exact) {
  double worst = 0.0;
  std::mt19937_64 rng(20261125);
  for (const Range& range : ranges) {
    double range_worst = 0.0;
    double worst_x = 0.0;
    for (int i = 0; i < kPointsPerRange; ++i) {
      const double x = range.sample(rng);
      const double error = UlpError(computed(x), exact(x));
      if (error > range_worst) {
        range_worst = error;
        worst_x = x;
      }
    }
    std::printf("%-8s %-28s max error %.3f ulp (at %.17g)\n", function, range.name.c_str(),
                range_worst, worst_x);
    worst = std::max(worst, range_worst);
  }
  return worst;
}

TEST(Exp, WithinOneUlpOfLibm) {
  const double worst = MaxUlpError(
      "Exp",
      {{"[-745.2, 709.8]", Uniform(-745.2, 709.8)},
       {"[-1, 1]", Uniform(-1.0, 1.0)},
       {"|x| in [2^-60, 2^-1)", LogUniform(-60, -1, true)},
       {"[-745.2, -708] (subnormal)", Uniform(-745.2, -708.0)},
       {"[700, 709.8]", Uniform(700.0, 709.8)}},
      [](double x) { return Exp(x); }, [](long double x) { return std::exp(x); });
  EXPECT_LE(worst, 1.0);
}

TEST(Exp, SpecialValues) {
  EXPECT_EQ(Exp(0.0), 1.0);
  EXPECT_EQ(Exp(-0.0), 1.0);
  EXPECT_EQ(Exp(kInf), kInf);
  EXPECT_EQ(Exp(-kInf), 0.0);
  EXPECT_TRUE(std::isnan(Exp(kNan)));
  EXPECT_EQ(Exp(709.782712893384), std::exp(709.782712893384));  // The largest finite.
  EXPECT_EQ(Exp(709.7827128933841), kInf);
  EXPECT_EQ(Exp(-745.1332191019411), std::numeric_limits<double>::denorm_min());
  EXPECT_EQ(Exp(-745.1332191019412), 0.0);
  EXPECT_EQ(Exp(1.0), 2.718281828459045);
}

TEST(Expm1, WithinOneAndAHalfUlpOfLibm) {
  const double worst = MaxUlpError(
      "Expm1",
      {{"[-40, 709.7]", Uniform(-40.0, 709.7)},
       {"[-1, 1]", Uniform(-1.0, 1.0)},
       {"|x| in [2^-60, 2^-1)", LogUniform(-60, -1, true)},
       {"|x| in [2^-1074, 2^-60)", LogUniform(-1074, -60, true)}},
      [](double x) { return Expm1(x); }, [](long double x) { return std::expm1(x); });
  EXPECT_LE(worst, 1.5);
}

TEST(Expm1, SpecialValues) {
  EXPECT_EQ(std::bit_cast<std::uint64_t>(Expm1(0.0)), std::bit_cast<std::uint64_t>(0.0));
  EXPECT_EQ(std::bit_cast<std::uint64_t>(Expm1(-0.0)), std::bit_cast<std::uint64_t>(-0.0));
  EXPECT_EQ(Expm1(kInf), kInf);
  EXPECT_EQ(Expm1(-kInf), -1.0);
  EXPECT_EQ(Expm1(-50.0), -1.0);
  EXPECT_EQ(Expm1(710.0), kInf);
  EXPECT_TRUE(std::isnan(Expm1(kNan)));
  EXPECT_EQ(Expm1(1e-300), 1e-300);
}

TEST(Log, WithinOneUlpOfLibm) {
  const double worst = MaxUlpError(
      "Log",
      {{"[2^-1022, 2^1024)", LogUniform(-1022, 1024, false)},
       {"[0.5, 2]", Uniform(0.5, 2.0)},
       {"[1 - 2^-20, 1 + 2^-20]", Uniform(1.0 - 0x1p-20, 1.0 + 0x1p-20)},
       {"subnormal", Uniform(0.0, std::numeric_limits<double>::min())}},
      [](double x) { return Log(x); }, [](long double x) { return std::log(x); });
  EXPECT_LE(worst, 1.0);
}

TEST(Log, SpecialValues) {
  EXPECT_EQ(Log(1.0), 0.0);
  EXPECT_EQ(Log(0.0), -kInf);
  EXPECT_EQ(Log(-0.0), -kInf);
  EXPECT_EQ(Log(kInf), kInf);
  EXPECT_TRUE(std::isnan(Log(-1.0)));
  EXPECT_TRUE(std::isnan(Log(-kInf)));
  EXPECT_TRUE(std::isnan(Log(kNan)));
  EXPECT_EQ(Log(2.0), 0.6931471805599453);
  EXPECT_EQ(Log(std::numeric_limits<double>::denorm_min()), std::log(4.9406564584124654e-324));
}

TEST(Atan, WithinOneUlpOfLibm) {
  const double worst = MaxUlpError(
      "Atan",
      {{"[-2, 2]", Uniform(-2.0, 2.0)},
       {"|x| in [2^-30, 2^30)", LogUniform(-30, 30, true)},
       {"|x| in [2^-1074, 2^1024)", LogUniform(-1074, 1024, true)}},
      [](double x) { return Atan(x); }, [](long double x) { return std::atan(x); });
  EXPECT_LE(worst, 1.0);
}

TEST(AtanFast, WithinOneAndAHalfUlpOfLibm) {
  const double worst = MaxUlpError(
      "AtanFast",
      {{"[-2, 2]", Uniform(-2.0, 2.0)},
       {"|x| in [2^-30, 2^30)", LogUniform(-30, 30, true)},
       {"|x| in [2^-1074, 2^1024)", LogUniform(-1074, 1024, true)}},
      [](double x) { return AtanFast(x); }, [](long double x) { return std::atan(x); });
  EXPECT_LE(worst, 1.5);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(AtanFast(-0.0)), std::bit_cast<std::uint64_t>(-0.0));
  EXPECT_EQ(AtanFast(kInf), kPi / 2);
  EXPECT_EQ(AtanFast(-kInf), -kPi / 2);
  EXPECT_TRUE(std::isnan(AtanFast(kNan)));
}

TEST(Atan, SpecialValues) {
  EXPECT_EQ(std::bit_cast<std::uint64_t>(Atan(-0.0)), std::bit_cast<std::uint64_t>(-0.0));
  EXPECT_EQ(Atan(kInf), kPi / 2);
  EXPECT_EQ(Atan(-kInf), -kPi / 2);
  EXPECT_EQ(Atan(1.0), kPi / 4);
  EXPECT_TRUE(std::isnan(Atan(kNan)));
}

TEST(Atan2, WithinOneAndAHalfUlpOfLibm) {
  // Points (x, y) of random direction and log-uniform radius: the angle covers the circle
  // uniformly; and points spread over the whole exponent range.
  std::mt19937_64 rng(7);
  struct Sample {
    const char* name;
    std::function<std::pair<double, double>()> point;
  };
  const std::vector<Sample> samples = {
      {"circle, r in [2^-10, 2^10)",
       [&rng] {
         const double angle = std::uniform_real_distribution<double>(-kPi, kPi)(rng);
         const double r = std::exp2(std::uniform_real_distribution<double>(-10, 10)(rng));
         return std::pair{r * std::cos(angle), r * std::sin(angle)};
       }},
      {"x, y in [-10, 10]",
       [&rng] {
         std::uniform_real_distribution<double> u(-10.0, 10.0);
         return std::pair{u(rng), u(rng)};
       }},
      {"|x|, |y| in [2^-500, 2^500)", [&rng] {
         std::uniform_real_distribution<double> e(-500, 500);
         const double x = std::exp2(e(rng)) * ((rng() & 1) ? -1 : 1);
         const double y = std::exp2(e(rng)) * ((rng() & 1) ? -1 : 1);
         return std::pair{x, y};
       }},
      // Subnormal x (and y): 0.135 x rounds far from its value there, so the fast path must
      // not be chosen by comparing with it.
      {"x, y in 2^-1074 [-64, 64]", [&rng] {
         std::uniform_int_distribution<int> n(-64, 64);
         return std::pair{0x1p-1074 * n(rng), 0x1p-1074 * n(rng)};
       }}};
  double worst = 0.0;
  for (const Sample& sample : samples) {
    double range_worst = 0.0;
    for (int i = 0; i < kPointsPerRange; ++i) {
      const auto [x, y] = sample.point();
      range_worst =
          std::max(range_worst, UlpError(Atan2(y, x), std::atan2(static_cast<long double>(y),
                                                                 static_cast<long double>(x))));
    }
    std::printf("%-8s %-28s max error %.3f ulp\n", "Atan2", sample.name, range_worst);
    worst = std::max(worst, range_worst);
  }
  EXPECT_LE(worst, 1.5);
  // The worst point known (functions.h): y/x just above 2^-3, its atan just below.
  const double y = 0x1.51ed8f6a72172p-3, x = 0x1.51cadfb723b6ap+0;
  EXPECT_LE(UlpError(Atan2(y, x), std::atan2(static_cast<long double>(y),
                                             static_cast<long double>(x))),
            1.53);
}

TEST(Atan2, SpecialValuesFollowC) {
  // Every combination of zeros, infinities and finite values of both signs, against libm,
  // bit for bit (these results are exact or correctly rounded constants).
  const double values[] = {0.0, -0.0, 1.0, -1.0, 3.5, -3.5, kInf, -kInf, 1e-300, -1e300};
  for (const double y : values) {
    for (const double x : values) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(Atan2(y, x)),
                std::bit_cast<std::uint64_t>(std::atan2(y, x)))
          << "atan2(" << y << ", " << x << ")";
    }
  }
  // On the fast path: y / x underflows to a signed zero (the zero keeps y's sign), is
  // subnormal, or x is the smallest that takes the path.
  for (const auto& [y, x] : {std::pair{-5e-324, 3.0}, {-1e-320, 1e5}, {5e-324, 3.0},
                             {-1e-310, 2.0}, {-0.0, 0x1p-1000}, {0.0, 0x1p-1000}}) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(Atan2(y, x)),
              std::bit_cast<std::uint64_t>(std::atan2(y, x)))
        << "atan2(" << y << ", " << x << ")";
  }
  EXPECT_TRUE(std::isnan(Atan2(kNan, 1.0)));
  EXPECT_TRUE(std::isnan(Atan2(1.0, kNan)));
  EXPECT_TRUE(std::isnan(Atan2(0.0, kNan)));
}

// The inline fast path (a small angle right of the y axis) gives the general path's bits,
// and is odd in y: the signed quotient's series rounds as the kernel's does on |y|.
TEST(Atan2, FastPathGivesTheGeneralPathsBits) {
  std::mt19937_64 rng(20261127);
  std::uniform_real_distribution<double> exponent(-900, 900);
  std::uniform_real_distribution<double> ratio_exponent(-80, std::log2(0.135));
  int mismatches = 0;
  for (int i = 0; i < kPointsPerRange; ++i) {
    const double x = std::exp2(exponent(rng));
    const double y = x * std::exp2(ratio_exponent(rng)) * ((rng() & 1) ? -1 : 1);
    const double angle = Atan2(y, x);
    if (std::bit_cast<std::uint64_t>(angle) !=
            std::bit_cast<std::uint64_t>(math_internal::Atan2General(y, x)) ||
        std::bit_cast<std::uint64_t>(Atan2(-y, x)) != std::bit_cast<std::uint64_t>(-angle)) {
      if (++mismatches <= 5) ADD_FAILURE() << "atan2(" << y << ", " << x << ")";
    }
  }
  EXPECT_EQ(mismatches, 0);
  // The smallest x on the path, against libm.
  const double y = -1e-310, x = 0x1p-1000;
  EXPECT_LE(UlpError(Atan2(y, x), std::atan2(static_cast<long double>(y),
                                             static_cast<long double>(x))),
            1.53);
}

TEST(Asin, WithinOneUlpOfLibm) {
  const double worst = MaxUlpError(
      "Asin",
      {{"[-1, 1]", Uniform(-1.0, 1.0)},
       {"1 - |x| in [2^-53, 2^-1)",
        [](std::mt19937_64& rng) {
          const double gap = std::exp2(std::uniform_real_distribution<double>(-53, -1)(rng));
          return (rng() & 1) ? gap - 1.0 : 1.0 - gap;
        }},
       {"|x| in [2^-1074, 2^-1)", LogUniform(-1074, -1, true)}},
      [](double x) { return Asin(x); }, [](long double x) { return std::asin(x); });
  EXPECT_LE(worst, 1.0);
}

TEST(Asin, SpecialValues) {
  EXPECT_EQ(Asin(1.0), kPi / 2);
  EXPECT_EQ(Asin(-1.0), -kPi / 2);
  EXPECT_EQ(std::bit_cast<std::uint64_t>(Asin(-0.0)), std::bit_cast<std::uint64_t>(-0.0));
  EXPECT_EQ(Asin(0.5), std::asin(0.5));
  EXPECT_TRUE(std::isnan(Asin(1.0000000000000002)));
  EXPECT_TRUE(std::isnan(Asin(kNan)));
}

TEST(Tan, WithinThreeAndAHalfUlpsOfLibm) {
  const double worst = MaxUlpError(
      "Tan",
      {{"[-1.5, 1.5]", Uniform(-1.5, 1.5)},
       {"[-1024, 1024]", Uniform(-1024.0, 1024.0)},
       {"|x| in [2^-1074, 2^1024)", LogUniform(-1074, 1024, true)}},
      [](double x) { return Tan(x); }, [](long double x) { return std::tan(x); });
  EXPECT_LE(worst, 3.5);
}

TEST(SinCos, WithinTwoUlpsOfLibmEverywhere) {
  const std::vector<Range> ranges = {{"[-pi, pi]", Uniform(-kPi, kPi)},
                                     {"[-1024, 1024]", Uniform(-1024.0, 1024.0)},
                                     {"|x| in [2^10, 2^30) (large)", LogUniform(10, 30, true)},
                                     {"|x| in [2^30, 2^1024) (large)", LogUniform(30, 1024, true)}};
  const double worst_sin = MaxUlpError(
      "Sin", ranges,
      [](double x) {
        double s, c;
        SinCos(x, &s, &c);
        return s;
      },
      [](long double x) { return std::sin(x); });
  const double worst_cos = MaxUlpError(
      "Cos", ranges,
      [](double x) {
        double s, c;
        SinCos(x, &s, &c);
        return c;
      },
      [](long double x) { return std::cos(x); });
  EXPECT_LE(worst_sin, 2.0);
  EXPECT_LE(worst_cos, 2.0);
}

// The doubles nearest k pi/2 within the fast range, where r is tiny (for |k| <= 2 the inline
// two-part reduction, beyond it the three-part branch): the result keeps its relative
// accuracy.
TEST(SinCos, NearMultiplesOfHalfPiInTheFastRange) {
  double worst = 0.0;
  for (int k = -652; k <= 652; ++k) {
    const double nearest = static_cast<double>(k * (std::numbers::pi_v<long double> / 2));
    for (const double x :
         {std::nextafter(nearest, -kInf), nearest, std::nextafter(nearest, kInf)}) {
      double s, c;
      SinCos(x, &s, &c);
      const long double lx = x;
      worst = std::max({worst, UlpError(s, std::sin(lx)), UlpError(c, std::cos(lx))});
    }
  }
  std::printf("SinCos next to k pi/2, |k| <= 652: max error %.3f ulp\n", worst);
  EXPECT_LE(worst, 2.0);
}

TEST(SinCos, LargeArgumentsNearMultiplesOfHalfPi) {
  // 6381956970095103 2^797 is the double closest to a multiple of pi/2 (Kahan and McDonald):
  // its cosine is -4.6871659242546276e-19 (mpmath, to 17 digits).
  double s, c;
  SinCos(0x1.6ac5b262ca1ffp+849, &s, &c);
  EXPECT_LE(UlpError(s, std::sin(static_cast<long double>(0x1.6ac5b262ca1ffp+849))), 2.0);
  EXPECT_LE(UlpError(c, std::cos(static_cast<long double>(0x1.6ac5b262ca1ffp+849))), 2.0);
  EXPECT_EQ(s, 1.0);
  EXPECT_NEAR(c, -4.6871659242546276e-19, 1e-34);
  SinCos(kInf, &s, &c);
  EXPECT_TRUE(std::isnan(s) && std::isnan(c));
  SinCos(kNan, &s, &c);
  EXPECT_TRUE(std::isnan(s) && std::isnan(c));
}

TEST(TurnTrigOf, MatchesSinCosAndSinc) {
  double worst = 0.0;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (int i = 0; i < kPointsPerRange; ++i) {
    const double x = u(rng) * u(rng) * u(rng);  // Dense near 0.
    const TurnTrig turn = TurnTrigOf(x);
    const long double lx = x;
    worst = std::max({worst, UlpError(turn.sin, std::sin(lx)), UlpError(turn.cos, std::cos(lx)),
                      UlpError(turn.sinc, std::sin(lx) / lx)});
  }
  std::printf("TurnTrig sin, cos, sinc on [-1, 1]: max error %.3f ulp\n", worst);
  EXPECT_LE(worst, 2.5);
  const TurnTrig zero = TurnTrigOf(0.0);
  EXPECT_EQ(zero.sin, 0.0);
  EXPECT_EQ(zero.cos, 1.0);
  EXPECT_EQ(zero.sinc, 1.0);
}

}  // namespace
}  // namespace pitlane::sim
