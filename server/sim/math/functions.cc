#include "server/sim/math/functions.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "server/sim/math/exact_arithmetic.h"

namespace pitlane::sim {
namespace math_internal {

double ExpSlow(double x) {
  // The largest x whose e^x rounds to a finite double, and the smallest whose e^x rounds to
  // more than zero (half the smallest subnormal, 2^-1075).
  constexpr double kOverflow = 709.782712893384;
  constexpr double kUnderflow = -745.1332191019412;
  if (x != x) return x;
  if (x > kOverflow) return std::numeric_limits<double>::infinity();
  if (x < kUnderflow) return 0.0;
  const ExpReduction e = ReduceExp(x);
  const double* t = kExp2Table[e.j];
  const double y = t[0] + (t[1] + t[0] * e.p);  // In [0.98, 2.03).
  // 2^m y in two exact-or-final steps, as 2^m itself may not be a normal double: for m >= 1023
  // (up to 1024) the second factor 2 rounds to inf only if the result overflows; for
  // m < -1022 the first factor keeps y normal and the second rounds it (once more) into the
  // subnormals.
  if (e.m > 0) return (y * PowerOfTwo(e.m - 1)) * 2.0;
  return (y * PowerOfTwo(e.m + 537)) * PowerOfTwo(-537);
}

double Atan2Slow(double ay, double ax, int left) {
  if (ax != ax || ay != ay) return ax + ay;  // NaN.
  if (std::isinf(ax) || std::isinf(ay)) {
    // Both infinite: the diagonals, pi/4 or 3 pi/4. One infinite: its axis.
    if (!std::isinf(ay)) return kAtanBase[left][0][0];  // 0 or pi.
    return std::isinf(ax) ? kAtanBase[left][3][0] : kPi / 2;
  }
  if (ay == 0.0) return left ? kPi : 0.0;  // Also for x = +-0: C's atan2(+-0, -+0).
  if (ax == 0.0) return kPi / 2;
  // Finite, beyond AtanKernel's range: scale both by the same power of two (exact, unless the
  // smaller underflows, whose angle then rounds to the axis anyway).
  const double scale = (ax > 0x1p900 || ay > 0x1p900) ? 0x1p-200 : 0x1p600;
  ax *= scale;
  ay *= scale;
  return ay <= ax ? AtanKernel<false>(ay, 0.0, ax, 0.0, left)
                  : AtanKernel<false>(ax, 0.0, ay, 0.0, left + 1);
}

double Atan2General(double y, double x) {
  const double ax = std::abs(x);
  const double ay = std::abs(y);
  // Kinds 2 and 3 (see AtanKernel) reflect the angle into the left half-plane.
  const int left = std::signbit(x) ? 2 : 0;
  double angle;
  // Both finite, at most 2^900, the larger at least 2^-900 (false for NaN).
  if (ax <= 0x1p900 && ay <= 0x1p900 && (ax >= 0x1p-900 || ay >= 0x1p-900)) {
    // Below the diagonal atan(|y| / |x|), above it pi/2 -+ atan(|x| / |y|).
    angle = ay <= ax ? AtanKernel<false>(ay, 0.0, ax, 0.0, left)
                     : AtanKernel<false>(ax, 0.0, ay, 0.0, left + 1);
  } else {
    angle = Atan2Slow(ay, ax, left);
  }
  return std::copysign(angle, y);
}

}  // namespace math_internal

// x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact, by Sterbenz), and
// log(1 + f) = 2 atanh(s) = 2s + s R(s^2), s = f / (2 + f), |s| <= 0.1716, with
// R(z) = 2z/3 + 2z^2/5 + ... + 2z^10/21 (the first dropped term, 2 s z^11 / 23, is below
// 2.2e-19). Written as f - (f^2/2 - s (f^2/2 + R)) (it equals 2s + s R because f - s f = 2s),
// so that f, which is exact, carries the result and the rounding of s only touches the
// smaller terms. Then log x = e ln 2 + log(1 + f), with ln 2 split so that e ln2_head is
// exact.
double Log(double x) {
  if (x != x) return x;
  if (x <= 0.0) {
    return x == 0.0 ? -std::numeric_limits<double>::infinity()
                    : std::numeric_limits<double>::quiet_NaN();
  }
  if (x == std::numeric_limits<double>::infinity()) return x;
  int e = 0;
  if (x < std::numeric_limits<double>::min()) {  // Subnormal: scale into the normals.
    x *= 0x1p54;
    e = -54;
  }
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  e += static_cast<int>(bits >> 52) - 1023;
  // The significand, with exponent 0: in [1, 2).
  double m =
      std::bit_cast<double>((bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1023} << 52));
  if (m > 1.4142135623730951) {
    m *= 0.5;
    ++e;
  }
  const double f = m - 1.0;
  const double s = f / (2.0 + f);
  const double z = s * s;
  const double r =
      z * (2.0 / 3 +
           z * (2.0 / 5 +
                z * (2.0 / 7 +
                     z * (2.0 / 9 +
                          z * (2.0 / 11 +
                               z * (2.0 / 13 +
                                    z * (2.0 / 15 +
                                         z * (2.0 / 17 + z * (2.0 / 19 + z * (2.0 / 21))))))))));
  const double half_f_sq = 0.5 * f * f;
  // ln 2 with its head's low 32 bits cleared (21 bits: e ln2_head is exact for |e| < 2^32),
  // and the rest to 53 bits.
  constexpr double kLn2 = 0.6931471805599453;
  constexpr double kLn2Head =
      std::bit_cast<double>(std::bit_cast<std::uint64_t>(kLn2) & ~std::uint64_t{0xFFFFFFFF});
  constexpr double kLn2Tail = (kLn2 - kLn2Head) + 2.3190468138462996e-17;
  // e ln2_head + f, which may cancel, is summed exactly; the rest is small beside it.
  const double ed = e;
  double head, head_error;
  math_internal::TwoSum(ed * kLn2Head, f, &head, &head_error);
  return head + ((head_error + ed * kLn2Tail) - (half_f_sq - s * (half_f_sq + r)));
}

}  // namespace pitlane::sim
