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

// atan(x) for inner loops that need speed more than the last bit (the four-wheel model's tyre
// curve): the same reduction to |u| <= 0.135 and series as Atan, but u = (t - c) / (1 + c t)
// in plain double arithmetic. Domain: every double. Error: < 1.5 ulp (measured 1.38).
// About half of Atan's work where |x| > 0.135.
inline double AtanFast(double x);

// atan2(y, x): the angle of (x, y) in [-pi, pi], with C's signed-zero and infinity cases.
// Error: < 1.53 ulp. For |y| <= 0.135 |x| the quotient y/x rounds once before the series (its
// half ulp is a whole ulp of the result where y/x is just above a power of two and its atan
// just below it: 1.525 ulp at y = 0x1.51ed8f6a72172p-3, x = 0x1.51cadfb723b6ap+0, found by
// search; random points measure up to 1.41); elsewhere < 0.6 ulp.
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

// The x for which Exp takes its fast path: the result, 2^m and the table's lo parts times 2^m
// are normal numbers (for x >= -660, 2^m >= 2^-953, and every lo is 0 or above 2^-59).
inline constexpr double kExpFastMin = -660.0;
inline constexpr double kExpFastMax = 708.0;

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
  // r^7 / 7! < 3.5e-18, is below rounding of the result (1.1e-16 relative). Estrin's scheme
  // (pairs, then r^4): a short dependency chain, since Exp's latency is on the models' paths.
  constexpr double c2 = 1.0 / 2, c3 = 1.0 / 6, c4 = 1.0 / 24, c5 = 1.0 / 120, c6 = 1.0 / 720;
  const double r2 = r * r;
  const double r4 = r2 * r2;
  const double p = (r + r2 * (c2 + c3 * r)) + r4 * ((c4 + c5 * r) + r2 * c6);
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
// tan: t is compared with the midpoints tan((2k + 1) pi / 24), except that the first is raised
// from 0.1317 to 0.135 (above c_1 / 2, so that t - c_1 is exact by Sterbenz's lemma).
// c_k = fl(tan(k pi / 12)).
inline constexpr double kAtanMid[3] = {0.135, 0.41421356237309503, 0.7673269879789604};
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

// (atan(u) - u) / u^3 as a polynomial in z = u^2: the Taylor series of atan through u^17
// (-1/3 + z/5 - z^2/7 + ...), by Estrin's scheme (pairs, then pairs of pairs) for a short
// dependency chain.
inline double AtanSeries(double z) {
  constexpr double c3 = -1.0 / 3, c5 = 1.0 / 5, c7 = -1.0 / 7, c9 = 1.0 / 9;
  constexpr double c11 = -1.0 / 11, c13 = 1.0 / 13, c15 = -1.0 / 15, c17 = 1.0 / 17;
  const double z2 = z * z;
  const double z4 = z2 * z2;
  return ((c3 + c5 * z) + (c7 + c9 * z) * z2) + ((c11 + c13 * z) + (c15 + c17 * z) * z2) * z4;
}

// The angle of a ray from its tangent t = (n + n_lo) / (d + d_lo) in [0, 1] (n, d >= 0, d > 0,
// both below 2^900; the lo parts are corrections below an ulp, often 0), by kind:
//   0: atan(t);  1: pi/2 - atan(t) (t was inverted);  2: pi - atan(t);  3: pi/2 + atan(t).
// atan(t) = atan(c) + atan(u) with u = (n - c d) / (d + c n), |u| <= 0.135, and atan(u) from
// its Taylor series through u^17 (the first dropped term, u^19 / 19, is below 1.2e-17 of u).
// For k >= 1, u is carried as u + u_lo (double-double): n - c d and d + c n are formed exactly
// (Dekker's product, Sterbenz's lemma), and u_lo is the exact remainder's share, with one
// division (by the reciprocal: u itself may be off by an ulp, u + u_lo is not). For k = 0
// (t <= 0.135, the common small angle) u = n / d, rounded once: exact when d = 1 (Atan), half
// an ulp otherwise, unless kExactQuotient asks for the double-double there too (Asin, whose lo
// parts matter). The base angle is added to u exactly (FastTwoSum) before the small terms, so
// the result is rounded about once.
template <bool kExactQuotient>
inline double AtanKernel(double n, double n_lo, double d, double d_lo, int kind) {
  const int k = (n > kAtanMid[0] * d) + (n > kAtanMid[1] * d) + (n > kAtanMid[2] * d);
  double u, u_lo;
  if (k == 0 && !kExactQuotient) {
    u = n / d;
    u_lo = 0.0;
  } else {
    double numerator = n, numerator_lo = n_lo;
    double denominator = d, denominator_lo = d_lo;
    if (k != 0) {
      const double c = kAtanC[k];
      double cd, cd_lo;
      TwoProduct(c, d, &cd, &cd_lo);
      numerator = n - cd;  // Exact: n / (c d) is within [1/2, 2].
      numerator_lo = n_lo - cd_lo - c * d_lo;
      double cn, cn_lo;
      TwoProduct(c, n, &cn, &cn_lo);
      FastTwoSum(d, cn, &denominator, &denominator_lo);  // d >= c n.
      denominator_lo += cn_lo + d_lo + c * n_lo;
    }
    const double inverse = 1.0 / denominator;
    u = numerator * inverse;
    // The quotient's remainder, exactly: numerator - u denominator.
    double product, product_lo;
    TwoProduct(u, denominator, &product, &product_lo);
    u_lo = (((numerator - product) - product_lo) + numerator_lo - u * denominator_lo) * inverse;
  }
  const double z = u * u;
  const double p = AtanSeries(z);
  // atan(u + u_lo) = atan(u) + u_lo / (1 + u^2) + ..., and 1 / (1 + z) = 1 - z to 3e-4.
  const double small = u * z * p + (u_lo - u_lo * z);
  const double sign = kAtanSign[kind];
  // |base| >= pi/12 > |u| unless k = 0 and kind = 0, where base = 0: FastTwoSum holds.
  double head, head_error;
  FastTwoSum(kAtanBase[kind][k][0], sign * u, &head, &head_error);
  return head + ((head_error + kAtanBase[kind][k][1]) + sign * small);
}

// Atan2 of |y|, |x| outside AtanKernel's range: NaN, infinities, zeros, magnitudes beyond
// 2^+-900 (rescaled). `left` is 2 for x with its sign bit set, else 0. In functions.cc.
double Atan2Slow(double ay, double ax, int left);

// Atan2 off its inline fast path (every case but a small angle right of the y axis). Out of
// line, so that the callers' hot loops hold only the fast path. In functions.cc.
double Atan2General(double y, double x);

}  // namespace math_internal

inline double Exp(double x) {
  using namespace math_internal;
  if (!(x >= kExpFastMin && x <= kExpFastMax)) return ExpSlow(x);
  const ExpReduction e = ReduceExp(x);
  const double* t = kExp2Table[e.j];
  // 2^m 2^(j/32) (1 + p) = hi + (lo + hi p) with hi, lo the table's pair times 2^m (exact:
  // all normal), made while p is being computed: rounded once, at the end.
  const double scale = PowerOfTwo(e.m);
  const double hi = t[0] * scale;
  const double lo = t[1] * scale;
  return hi + (lo + hi * e.p);
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
  double angle;
  if (a <= 1.0) {
    angle = math_internal::AtanKernel<false>(a, 0.0, 1.0, 0.0, 0);
  } else if (a <= 0x1p900) {
    angle = math_internal::AtanKernel<false>(1.0, 0.0, a, 0.0, 1);  // pi/2 - atan(1/a).
  } else {
    if (a != a) return x;  // NaN.
    angle = kPi / 2;       // pi/2 - 1/a rounds to pi/2.
  }
  return std::copysign(angle, x);
}

inline double AtanFast(double x) {
  using namespace math_internal;
  const double a = std::abs(x);
  if (!(a <= 0x1p900)) return a != a ? x : std::copysign(kPi / 2, x);  // NaN, or pi/2 - 1/a.
  const bool invert = a > 1.0;
  const double t = invert ? 1.0 / a : a;  // In [0, 1].
  const int k = (t > kAtanMid[0]) + (t > kAtanMid[1]) + (t > kAtanMid[2]);
  const double c = kAtanC[k];
  const double u = (t - c) / (1.0 + c * t);  // |u| <= 0.135.
  const double z = u * u;
  // kind 0: atan(c) + atan(u); kind 1 (inverted): pi/2 - atan(c) - atan(u).
  const int kind = invert ? 1 : 0;
  const double sign = kAtanSign[kind];
  double head, head_error;
  FastTwoSum(kAtanBase[kind][k][0], sign * u, &head, &head_error);
  const double angle =
      head + ((head_error + kAtanBase[kind][k][1]) + sign * (u * z * AtanSeries(z)));
  return std::copysign(angle, x);
}

inline double Atan2(double y, double x) {
  // The common case, a small angle right of the y axis (a tick's turn): AtanKernel's k = 0,
  // kind 0 path inline, on the signed quotient (the division and the odd series round the
  // same for either sign, so these are the kernel's bits with y's sign). Two comparisons
  // select it: x >= 2^-1000 (positive, not NaN, and 0.135 x a normal number, rounded to
  // 2^-53 of itself: for a subnormal x it could round to a third more, too far for the
  // series), and |y| < 0.135 x (false for NaN and for an infinite y; an infinite x with a
  // finite y gives y / x = +-0, atan2's value). A zero quotient (y = +-0, y/x underflowed, or
  // x infinite) is the angle itself: the series would turn -0 into -0 + +0 = +0, where C's
  // atan2 keeps y's sign. That test is a branch, which the processor predicts (for a
  // vehicle's turn it goes with the caller's own test of a zero turn), rather than an
  // operation on the result, which lengthened every turn's chain of dependent operations
  // (3 to 4 % of the axle drive's step, measured).
  if (x >= 0x1p-1000 && std::abs(y) < math_internal::kAtanMid[0] * x) {
    const double u = y / x;
    if (u == 0.0) [[unlikely]] return u;  // +-0, y's sign.
    const double z = u * u;
    return u + u * z * math_internal::AtanSeries(z);
  }
  return math_internal::Atan2General(y, x);
}

inline double Asin(double x) {
  using namespace math_internal;
  const double a = std::abs(x);
  if (!(a <= 1.0)) return (x - x) / (x - x);  // NaN, for NaN and |x| > 1.
  if (a < 0x1p-900) return x;                 // asin x = x (1 + x^2/6) rounds to x.
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
  const double angle =
      a <= c ? AtanKernel<true>(a, 0.0, c, c_lo, 0) : AtanKernel<true>(c, c_lo, a, 0.0, 1);
  return std::copysign(angle, x);
}

inline double Tan(double x) {
  double sin_x, cos_x;
  SinCos(x, &sin_x, &cos_x);
  return sin_x / cos_x;
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_MATH_FUNCTIONS_H_
