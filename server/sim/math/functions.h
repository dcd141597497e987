// Elementary functions for the simulation core: exp, expm1, log, atan, atan2, asin and tan.
//
// Why not libm: World::StateHash is promised equal on every machine, and libm's last bits
// differ between versions and between CPUs (glibc picks FMA code where the CPU has it). These
// use only +, -, *, /, sqrt, exact conversions and exact bit operations, each of which IEEE 754
// rounds the same everywhere; the build compiles the core with -ffp-contract=off, so nothing is
// fused into an FMA. SinCos lives in trig.h. Tests may use libm as an oracle; the core may not
// (tests/check_layering.sh).
//
// Each function is accurate to about one unit in the last place (ulp) over its whole domain;
// math/functions_test.cc measures the errors against glibc's long-double functions (10^6
// seeded random points per range) and holds them to the bounds stated below. Special values (NaN,
// infinities, zeros, overflow, underflow) follow C's Annex F.
//
// The constants (tables and hi + lo splits) were computed with mpmath by
// scripts/gen_math_constants.py.
#ifndef PITLANE_SERVER_SIM_MATH_FUNCTIONS_H_
#define PITLANE_SERVER_SIM_MATH_FUNCTIONS_H_

#include <bit>
#include <cmath>
#include <cstdint>

#include "server/sim/math/exact_arithmetic.h"
#include "server/sim/math/geometry.h"
#include "server/sim/math/trig.h"

namespace pitlane::sim {

// e^x. Domain: every double. Beyond 709.782712893384 it overflows to +inf, below
// -745.1332191019412 it underflows to +0; subnormal results are rounded twice (error up to
// one ulp of the smallest subnormal). Error: < 1 ulp (measured 0.75).
inline double Exp(double x);

// e^x - 1, accurate near 0 where Exp(x) - 1 would cancel. Domain: every double; +inf past
// 709.78, -1 below -40. Error: < 1.5 ulp (measured 1.02).
inline double Expm1(double x);

// The natural logarithm. Domain: x >= 0 (-inf at 0, NaN below). Error: < 1 ulp (measured 0.87).
// Not inline: no step calls it.
double Log(double x);

// atan(x) in [-pi/2, pi/2]. Domain: every double. Error: < 1 ulp (measured 0.54).
inline double Atan(double x);

// atan2(y, x): the angle of (x, y) in [-pi, pi], with C's signed-zero and infinity cases.
// Error: < 1 ulp (measured 0.54).
inline double Atan2(double y, double x);

// asin(x) in [-pi/2, pi/2]. Domain: [-1, 1] (NaN outside). Error: < 1 ulp (measured 0.54).
inline double Asin(double x);

// tan(x) = sin(x) / cos(x) from SinCos. Domain: every finite double (NaN for infinities).
// Error: < 3.5 ulp (measured 3.2: the errors of sin, cos and the division add up; only
// readouts call it, never the step).
inline double Tan(double x);

namespace math_internal {

// 2^(j/32) for j = 0..31 as {hi, lo}: hi = fl(2^(j/32)), lo = fl(2^(j/32) - hi).
inline constexpr double kExp2Table[32][2] = {
    {1.0, 0.0},
    {1.0218971486541166, 5.109225028973444e-17},
    {1.0442737824274138, 8.551889705537965e-17},
    {1.0671404006768237, -7.899853966841582e-17},
    {1.0905077326652577, -3.046782079812471e-17},
    {1.1143867425958924, 1.0410278456845571e-16},
    {1.1387886347566916, 8.912812676025408e-17},
    {1.1637248587775775, 3.8292048369240935e-17},
    {1.189207115002721, 3.982015231465646e-17},
    {1.215247359980469, -7.712630692681488e-17},
    {1.241857812073484, 4.658027591836937e-17},
    {1.2690509571917332, 2.667932131342186e-18},
    {1.2968395546510096, 2.5382502794888315e-17},
    {1.3252366431597413, -2.8587312100388614e-17},
    {1.3542555469368927, 7.70094837980299e-17},
    {1.383909881963832, -6.770511658794786e-17},
    {1.4142135623730951, -9.667293313452913e-17},
    {1.4451808069770467, -3.0237581349939873e-17},
    {1.4768261459394993, -3.483994556892796e-17},
    {1.5091644275934228, -1.016455327754295e-16},
    {1.5422108254079407, 7.949834809697621e-17},
    {1.5759808451078865, -1.0136916471278304e-17},
    {1.6104903319492543, 2.4707192569797888e-17},
    {1.645755478153965, -1.0125679913674773e-16},
    {1.681792830507429, 8.199010020581497e-17},
    {1.718619298122478, -1.851380418263111e-17},
    {1.7562521603732995, 2.960140695448873e-17},
    {1.7947090750031072, 1.8227458427912087e-17},
    {1.8340080864093424, 3.283107224245627e-17},
    {1.8741676341103, -6.122763413004143e-17},
    {1.9152065613971474, -1.0619946056195963e-16},
    {1.9571441241754002, 8.960767791036668e-17},
};

inline constexpr double kThirtyTwoOverLn2 = 46.16624130844683;
// ln(2)/32 split Cody-Waite style: the head keeps 37 significant bits (the double nearest
// ln(2)/32 with its low 16 bits cleared), so k * head is exact for |k| < 2^16, which covers
// every k of the domain (|k| <= 34420); the tail is the rest, ln(2)/32 - head, to 53 bits.
inline constexpr double kLn2By32 = 0.02166084939249829;
inline constexpr double kLn2By32Head =
    std::bit_cast<double>(std::bit_cast<std::uint64_t>(kLn2By32) & ~std::uint64_t{0xFFFF});
inline constexpr double kLn2By32Tail = (kLn2By32 - kLn2By32Head) + 7.247021293269686e-19;

// |x| up to which Expm1 uses its Taylor series: ln(2)/2.
inline constexpr double kExpm1SeriesRange = 0.34657359027997264;

// |x| up to which Exp takes its fast path: the result and 2^m are normal numbers.
inline constexpr double kExpFastRange = 708.0;

using trig_internal::InverseFactorial;

// x = (32 m + j) ln(2)/32 + r with |r| <= ln(2)/64 (plus rounding), and e^r - 1 = p:
// e^x = 2^m 2^(j/32) (1 + p). For |x| < 2^16 ln(2)/32 (= 1419).
struct ExpReduction {
  int m;     // The power of two.
  int j;     // The table index, 0..31.
  double p;  // e^r - 1.
};
inline ExpReduction ReduceExp(double x) {
  // Round to the nearest integer by adding and subtracting 1.5 * 2^52 (trig.h).
  const double kd =
      (x * kThirtyTwoOverLn2 + trig_internal::kRoundingShift) - trig_internal::kRoundingShift;
  const int k = static_cast<int>(kd);
  // x - kd * head is exact (kd * head is exact and, by Sterbenz's lemma, so is the difference
  // of two numbers this close); only the tail's product rounds.
  const double r = (x - kd * kLn2By32Head) - kd * kLn2By32Tail;
  // e^r - 1 by its Taylor series through r^6: on |r| <= 0.01083 the first dropped term,
  // r^7 / 7! < 3.5e-18, is below rounding of the result (1.1e-16 relative).
  constexpr double c2 = 1.0 / 2, c3 = 1.0 / 6, c4 = 1.0 / 24, c5 = 1.0 / 120, c6 = 1.0 / 720;
  const double r2 = r * r;
  const double p = r + r2 * ((c2 + c3 * r) + r2 * ((c4 + c5 * r) + r2 * c6));
  // k >> 5 rounds towards -inf (C++20 defines >> of a negative int as arithmetic).
  return {k >> 5, k & 31, p};
}

// 2^m for a normal power, -1022 <= m <= 1023.
inline double PowerOfTwo(int m) {
  return std::bit_cast<double>(static_cast<std::uint64_t>(m + 1023) << 52);
}

// Exp beyond the fast range: infinities, NaN, overflow, subnormal results. In functions.cc.
double ExpSlow(double x);

// Atan's reduction, for t in [0, 1]: k is the nearest of the reference angles k pi / 12 by
// tan: t is compared with the midpoints tan((2k + 1) pi / 24). c_k = fl(tan(k pi / 12)).
inline constexpr double kAtanMid[3] = {0.13165249758739586, 0.41421356237309503,
                                       0.7673269879789604};
inline constexpr double kAtanC[4] = {0.0, 0.2679491924311227, 0.5773502691896257, 1.0};
// The angle the reduced atan(u) is added to, {hi, lo}, by kind (see AtanKernel) and k, for
// a = atan(c_k) (exactly, of the rounded c_k): a; pi/2 - a; pi - a; pi/2 + a.
inline constexpr double kAtanBase[4][4][2] = {
    {{0.0, 0.0},
     {0.2617993877991494, 1.8752499114174e-17},
     {0.5235987755982988, 3.2330503585443845e-17},
     {0.7853981633974483, 3.061616997868383e-17}},
    {{1.5707963267948966, 6.123233995736766e-17},
     {1.3089969389957472, -1.3031310388064169e-17},
     {1.0471975511965979, -8.212046609059184e-17},
     {0.7853981633974483, 3.061616997868383e-17}},
    {{3.141592653589793, 1.2246467991473532e-16},
     {2.879793265790644, -1.7384357535572783e-16},
     {2.6179938779914944, -2.0888126133224184e-17},
     {2.356194490192345, 9.184850993605148e-17}},
    {{1.5707963267948966, 6.123233995736766e-17},
     {1.8325957145940461, -8.654861462223182e-17},
     {2.0943951023931953, 2.0458514600532717e-16},
     {2.356194490192345, 9.184850993605148e-17}},
};
// The sign atan(u) enters with, by kind.
inline constexpr double kAtanSign[4] = {1.0, -1.0, -1.0, 1.0};

// The angle of a ray from its tangent t + t_lo in [0, 1] (t_lo a correction below an ulp of
// t), by kind:
//   0: atan(t);  1: pi/2 - atan(t) (t was inverted);  2: pi - atan(t);  3: pi/2 + atan(t).
// atan(t) = atan(c) + atan(u) with u = (t - c) / (1 + c t), |u| <= tan(pi / 24) = 0.132, and
// atan(u) from its Taylor series through u^17 (the first dropped term, u^19 / 19, is below
// 1e-18 of u). u is carried as u + u_lo (double-double), and the base angle is added to it
// exactly (FastTwoSum) before the small terms, so the result is rounded about once.
inline double AtanKernel(double t, double t_lo, int kind) {
  const int k = (t > kAtanMid[0]) + (t > kAtanMid[1]) + (t > kAtanMid[2]);
  // Most calls (a tick's turn, a small slip) have k = 0, where u = t.
  double u = t;
  double u_lo = t_lo;
  if (k != 0) {
    const double c = kAtanC[k];
    double numerator, numerator_lo;
    TwoSum(t, -c, &numerator, &numerator_lo);
    numerator_lo += t_lo;
    double ct, ct_lo;
    TwoProduct(c, t, &ct, &ct_lo);
    double denominator, denominator_lo;
    FastTwoSum(1.0, ct, &denominator, &denominator_lo);
    denominator_lo += ct_lo + c * t_lo;
    u = numerator / denominator;
    // The quotient's remainder, exactly: numerator - u denominator.
    double product, product_lo;
    TwoProduct(u, denominator, &product, &product_lo);
    u_lo = (((numerator - product) - product_lo) + numerator_lo - u * denominator_lo) / denominator;
  }
  // Estrin's scheme (pairs, then pairs of pairs), for a short dependency chain.
  constexpr double c3 = -1.0 / 3, c5 = 1.0 / 5, c7 = -1.0 / 7, c9 = 1.0 / 9;
  constexpr double c11 = -1.0 / 11, c13 = 1.0 / 13, c15 = -1.0 / 15, c17 = 1.0 / 17;
  const double z = u * u;
  const double z2 = z * z;
  const double z4 = z2 * z2;
  const double p =
      ((c3 + c5 * z) + (c7 + c9 * z) * z2) + ((c11 + c13 * z) + (c15 + c17 * z) * z2) * z4;
  // atan(u + u_lo) = atan(u) + u_lo / (1 + u^2) + ..., and 1 / (1 + z) = 1 - z to 3e-4.
  const double small = u * z * p + (u_lo - u_lo * z);
  const double sign = kAtanSign[kind];
  // |base| >= pi/12 > |u| unless k = 0 and kind = 0, where base = 0: FastTwoSum holds.
  double head, head_error;
  FastTwoSum(kAtanBase[kind][k][0], sign * u, &head, &head_error);
  return head + ((head_error + kAtanBase[kind][k][1]) + sign * small);
}

// n / d as q + q_lo, the remainder's share q_lo exact to rounding (for the atan kernels),
// with d + d_lo the divisor. For 2^-900 < |n|, |d| < 2^900; outside, q_lo = 0 (q is then
// either far below 2^-53 or the operands' rounding dominates anyway).
inline void Divide(double n, double d, double d_lo, double* q, double* q_lo) {
  *q = n / d;
  *q_lo = 0.0;
  if (n > 0x1p-900 && n < 0x1p900 && d > 0x1p-900 && d < 0x1p900) {
    double product, product_lo;
    TwoProduct(*q, d, &product, &product_lo);
    *q_lo = (((n - product) - product_lo) - *q * d_lo) / d;
  }
}

// The angle of (x, y) = (d + d_lo, n) for finite n, d >= 0, not both 0, in [0, pi/2] (left = 0)
// or reflected to pi - angle (left = 2).
inline double AtanOfRatio(double n, double d, double d_lo, int left) {
  double t, t_lo;
  if (n <= d) {
    Divide(n, d, d_lo, &t, &t_lo);
    return AtanKernel(t, t_lo, left);
  }
  // Steeper than the diagonal: pi/2 -+ atan(d / n).
  Divide(d, n, 0.0, &t, &t_lo);
  t_lo += d_lo / n;
  return AtanKernel(t, t_lo, left + 1);
}

}  // namespace math_internal

inline double Exp(double x) {
  using namespace math_internal;
  if (!(std::abs(x) <= kExpFastRange)) return ExpSlow(x);
  const ExpReduction e = ReduceExp(x);
  const double* t = kExp2Table[e.j];
  // 2^(j/32) (1 + p) = hi + (lo + hi p): rounded once, at the end.
  return PowerOfTwo(e.m) * (t[0] + (t[1] + t[0] * e.p));
}

inline double Expm1(double x) {
  using namespace math_internal;
  if (!(x <= 709.0)) return x != x ? x : Exp(x);  // NaN, or the -1 is below rounding.
  if (x < -40.0) return -1.0;                     // e^-40 = 4e-18 is below rounding of 1.
  // x + x^2/2 rounds to x; this also keeps the sign of -0.
  if (std::abs(x) < 0x1p-54) return x;
  if (std::abs(x) <= kExpm1SeriesRange) {
    // The Taylor series through x^13: the first dropped term, x^14 / 14!, is below 1.3e-17 of
    // x. x + x^2 P(x), with x^2 P(x) at most a fifth of the result, rounds about once.
    constexpr double c2 = InverseFactorial(2), c3 = InverseFactorial(3);
    constexpr double c4 = InverseFactorial(4), c5 = InverseFactorial(5);
    constexpr double c6 = InverseFactorial(6), c7 = InverseFactorial(7);
    constexpr double c8 = InverseFactorial(8), c9 = InverseFactorial(9);
    constexpr double c10 = InverseFactorial(10), c11 = InverseFactorial(11);
    constexpr double c12 = InverseFactorial(12), c13 = InverseFactorial(13);
    const double x2 = x * x;
    const double x4 = x2 * x2;
    const double x8 = x4 * x4;
    const double p = ((c2 + c3 * x) + (c4 + c5 * x) * x2) +
                     ((c6 + c7 * x) + (c8 + c9 * x) * x2) * x4 +
                     ((c10 + c11 * x) + (c12 + c13 * x) * x2) * x8;
    return x + x2 * p;
  }
  const ExpReduction e = ReduceExp(x);
  const double* t = kExp2Table[e.j];
  // e^x - 1 = (2^m hi - 1) + 2^m (lo + hi p). Here |x| > ln(2)/2, so |2^m hi - 1| >= 0.29 and
  // the correction is below 0.022 of it: the result rounds about once.
  const double scale = PowerOfTwo(e.m);
  return (scale * t[0] - 1.0) + scale * (t[1] + t[0] * e.p);
}

inline double Atan(double x) {
  const double a = std::abs(x);
  // Above 1, atan(a) = pi/2 - atan(1/a). NaN stays NaN (a <= 1 is false, 1/NaN is NaN).
  const double angle =
      a <= 1.0 ? math_internal::AtanKernel(a, 0.0, 0) : math_internal::AtanOfRatio(a, 1.0, 0.0, 0);
  return std::copysign(angle, x);
}

inline double Atan2(double y, double x) {
  if (std::isnan(x) || std::isnan(y)) return x + y;
  const double ax = std::abs(x);
  const double ay = std::abs(y);
  // Kinds 2 and 3 (see AtanKernel) reflect the angle into the left half-plane.
  const int left = std::signbit(x) ? 2 : 0;
  double angle;
  if (ay == 0.0) {
    angle = left ? kPi : 0.0;  // Also for x = +-0: C's atan2(+-0, -+0).
  } else if (std::isinf(ax) || std::isinf(ay)) {
    // Both infinite: the diagonals, pi/4 or 3 pi/4. One infinite: its axis.
    angle = std::isinf(ax) ? (std::isinf(ay) ? math_internal::kAtanBase[left][3][0]
                                             : math_internal::kAtanBase[left][0][0])
                           : kPi / 2;
  } else {
    angle = math_internal::AtanOfRatio(ay, ax, 0.0, left);
  }
  return std::copysign(angle, y);
}

inline double Asin(double x) {
  using namespace math_internal;
  const double a = std::abs(x);
  if (!(a <= 1.0)) return (x - x) / (x - x);  // NaN, for NaN and |x| > 1.
  // cos(asin x) = sqrt(1 - x^2), from 1 - x^2 in double-double (exact square, exact
  // difference: 1 - a^2 = (1 - s) - e with a^2 = s + e) and one Newton correction of the root.
  double s, e;
  TwoProduct(a, a, &s, &e);
  double d, d_lo;
  FastTwoSum(1.0, -s, &d, &d_lo);
  d_lo -= e;
  const double c = std::sqrt(d);
  double c_lo = 0.0;
  if (c > 0.0) {
    double c_sq, c_sq_lo;
    TwoProduct(c, c, &c_sq, &c_sq_lo);
    c_lo = (((d - c_sq) - c_sq_lo) + d_lo) / (2.0 * c);
  }
  return std::copysign(a == 0.0 ? 0.0 : AtanOfRatio(a, c, c_lo, 0), x);
}

inline double Tan(double x) {
  double sin_x, cos_x;
  SinCos(x, &sin_x, &cos_x);
  return sin_x / cos_x;
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_MATH_FUNCTIONS_H_
