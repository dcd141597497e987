// Sine and cosine together, for the step loops, and the trig of one tick's turn.
//
// Why not std::sin/std::cos: in the kinematic-bicycle step they took three quarters of the
// time (glibc evaluates sin and cos separately, behind a PLT call), and their last bits may
// change between libm versions, which would break bit-for-bit replays across machines. This
// version is inline, branch-free on the common path, uses only +, -, * and one conversion
// (so it rounds identically on every IEEE-754 machine that does not contract to FMA; the
// build does not), and is accurate to under two units in the last place.
//
// Method, for |x| <= kSinCosFastRange_rad:
//   1. x = k * pi/2 + r with k = round(x * 2/pi) and |r| <= pi/4 (plus rounding). Inline, for
//      |x| <= kSinCosInlineRange_rad (wrapped headings, wheel angles, turns), pi/2 in two
//      parts (kHalfPiHi, kHalfPiLo); beyond, out of line, split Cody-Waite style into three
//      parts (see kHalfPiHead).
//   2. sin r and cos r from their Taylor series through r^17 and r^16: on |r| <= pi/4 the
//      first dropped terms are at most (pi/4)^19/19! = 8.4e-20 and (pi/4)^18/18! = 2.0e-18,
//      far below half an ulp of the results where they matter (5.5e-17 near pi/4).
//   3. The quadrant k mod 4 swaps and negates the pair.
// Beyond that range (never reached by a wrapped yaw plus one tick's turn) the reduction is
// Payne-Hanek's, with integer arithmetic on the bits of 2/pi (trig.cc); infinities and NaN
// give NaN.
#ifndef PITLANE_SERVER_SIM_MATH_TRIG_H_
#define PITLANE_SERVER_SIM_MATH_TRIG_H_

#include <bit>
#include <cmath>
#include <cstdint>
#include <numbers>

namespace pitlane::sim {

inline constexpr double kSinCosFastRange_rad = 1024.0;

namespace trig_internal {

inline constexpr double kHalfPi = std::numbers::pi / 2;
// fl(pi/2) and fl(pi/2 - fl(pi/2)): pi/2 to within 2^-107. For |k| <= 2, k * hi and k * lo
// are exact (a doubling at most).
inline constexpr double kHalfPiHi = kHalfPi;
inline constexpr double kHalfPiLo = 6.123233995736766e-17;
// |x| up to which SinCos reduces inline with them: below 5 pi / 4, so |k| <= 2.
inline constexpr double kSinCosInlineRange_rad = 3.9;
// pi/2 in three parts, Cody-Waite style: a head and a middle of 33 significant bits each (the
// head is the double nearest pi/2 with its low 20 bits cleared; the middle likewise of
// pi/2 - head), so that k * head and k * middle are exact for |k| < 2^20, and a tail, the next
// 53 bits (computed with mpmath: scripts/gen_math_constants.py). x - k head is exact, and so
// is its difference with k middle wherever they cancel (Sterbenz), so r keeps its relative
// accuracy even next to a multiple of pi/2.
inline constexpr double kHalfPiHead =
    std::bit_cast<double>(std::bit_cast<std::uint64_t>(kHalfPi) & ~std::uint64_t{0xFFFFF});
inline constexpr double kHalfPiMiddle = 6.077100506303966e-11;
inline constexpr double kHalfPiTail = 2.0222662487959506e-21;
// pi/2 - head to 53 bits (middle + tail, rounded), for the common two-part reduction.
inline constexpr double kHalfPiRest = 6.077100506506192e-11;
inline constexpr double kTwoOverPi = 2.0 / std::numbers::pi;
// Adding then subtracting 1.5 * 2^52 rounds a double of magnitude < 2^51 to the nearest
// integer (ties to even) in the default rounding mode.
inline constexpr double kRoundingShift = 6755399441055744.0;

// 1/n! for the series, computed exactly as the compiler folds these constant products.
inline constexpr double InverseFactorial(int n) {
  double factorial = 1.0;
  for (int i = 2; i <= n; ++i) factorial *= i;
  return 1.0 / factorial;
}

}  // namespace trig_internal

namespace trig_internal {

// sin r and cos r for |r| <= pi/4 (plus rounding).
inline void SinCosPolynomial(double r, double* sin_r, double* cos_r) {
  // sin r = r (1 + z P(z)) and cos r = 1 + z Q(z) with z = r^2, P and Q the Taylor
  // coefficients 1/n! with alternating signs, evaluated by Estrin's scheme (pairs, then pairs
  // of pairs) for a short dependency chain.
  constexpr double s3 = -InverseFactorial(3), s5 = InverseFactorial(5);
  constexpr double s7 = -InverseFactorial(7), s9 = InverseFactorial(9);
  constexpr double s11 = -InverseFactorial(11), s13 = InverseFactorial(13);
  constexpr double s15 = -InverseFactorial(15), s17 = InverseFactorial(17);
  constexpr double c2 = -InverseFactorial(2), c4 = InverseFactorial(4);
  constexpr double c6 = -InverseFactorial(6), c8 = InverseFactorial(8);
  constexpr double c10 = -InverseFactorial(10), c12 = InverseFactorial(12);
  constexpr double c14 = -InverseFactorial(14), c16 = InverseFactorial(16);
  const double z = r * r;
  const double z2 = z * z;
  const double z4 = z2 * z2;
  const double p =
      ((s3 + s5 * z) + (s7 + s9 * z) * z2) + ((s11 + s13 * z) + (s15 + s17 * z) * z2) * z4;
  const double q =
      ((c2 + c4 * z) + (c6 + c8 * z) * z2) + ((c10 + c12 * z) + (c14 + c16 * z) * z2) * z4;
  *sin_r = r + r * z * p;
  *cos_r = 1.0 + z * q;
}

// sin and cos of k pi/2 + r from sin r and cos r, for quadrant = k mod 4.
inline void ApplyQuadrant(std::uint64_t quadrant, double sin_r, double cos_r, double* sin_out,
                          double* cos_out) {
  // 0 -> (s, c), 1 -> (c, -s), 2 -> (-s, -c), 3 -> (-c, s). Done on the bits, without
  // branches: in a fleet the quadrant varies from vehicle to vehicle in no pattern a branch
  // predictor could learn (ternaries here compiled to branches and cost a quarter of the
  // kinematic step once headings had spread out). A swap selects through a mask; a negation
  // flips the sign bit, which is exactly what multiplying by -1 does.
  const std::uint64_t swap_mask = std::uint64_t{0} - (quadrant & 1u);  // All ones: swap.
  const auto sin_bits = std::bit_cast<std::uint64_t>(sin_r);
  const auto cos_bits = std::bit_cast<std::uint64_t>(cos_r);
  const std::uint64_t first = (sin_bits & ~swap_mask) | (cos_bits & swap_mask);
  const std::uint64_t second = (cos_bits & ~swap_mask) | (sin_bits & swap_mask);
  *sin_out = std::bit_cast<double>(first ^ ((quadrant & 2u) << 62));
  *cos_out = std::bit_cast<double>(second ^ (((quadrant + 1u) & 2u) << 62));
}

// k = round(x * 2/pi) (ties to even), as a double, for |x| <= kSinCosFastRange_rad.
inline double NearestHalfPiMultiple(double x) {
  return (x * kTwoOverPi + kRoundingShift) - kRoundingShift;
}

// sin and cos of k pi/2 + r, for an integer k and |r| <= pi/4 (plus rounding).
inline void SinCosOfReduced(double k, double r, double* sin_out, double* cos_out) {
  double sin_r, cos_r;
  SinCosPolynomial(r, &sin_r, &cos_r);
  const auto quadrant = static_cast<std::uint64_t>(static_cast<std::int64_t>(k)) & 3u;
  ApplyQuadrant(quadrant, sin_r, cos_r, sin_out, cos_out);
}

// SinCos beyond the fast range: Payne-Hanek reduction; NaN for infinities and NaN. In trig.cc.
void SinCosLarge(double x, double* sin_out, double* cos_out);

// SinCos beyond the inline range: the three-part reduction up to kSinCosFastRange_rad, then
// SinCosLarge. In trig.cc. Returned by value (in registers), so that the variables an inline
// SinCos writes to need not live in memory on the common path.
struct SinCosPair {
  double sin;
  double cos;
};
SinCosPair SinCosFar(double x);

}  // namespace trig_internal

// Sets *sin_out = sin(x), *cos_out = cos(x). Domain: every double (NaN for infinities).
// Error: < 2 ulp (measured 1.6 by math/functions_test.cc), relative also next to the zeros.
inline void SinCos(double x, double* sin_out, double* cos_out) {
  using namespace trig_internal;
  if (!(std::abs(x) <= kSinCosInlineRange_rad)) {
    const SinCosPair far = SinCosFar(x);
    *sin_out = far.sin;
    *cos_out = far.cos;
    return;
  }
  const double k = NearestHalfPiMultiple(x);  // |k| <= 2.
  // Rounded once: k hi and k lo are exact, and so is x - k hi (for k != 0, x and k hi are
  // multiples of the smaller one's ulp, at least 2^-53, and differ by less than 1). What r
  // lacks is k (pi/2 - hi - lo), below 2^-108 |k|; next to a multiple of pi/2, where r is
  // smallest, |r| >= |k| lo, so its relative error stays below about 2^-53. (This gives the
  // three-part reduction's bits everywhere but at the doubles just above +-pi/2 and +-pi,
  // where r's exact value lies halfway between two doubles: 0.56 ulp there, not 0.44.)
  SinCosOfReduced(k, (x - k * kHalfPiHi) - k * kHalfPiLo, sin_out, cos_out);
}

// sin, cos and sin(u)/u of an angle u, typically one tick's (half) turn: the pose updates turn
// a heading by it (a rotation) and move along the chord of an arc, whose length is the arc's
// times sinc(u/2). Accurate to rounding for every u, and defined at u = 0 (sinc = 1).
struct TurnTrig {
  double sin;   // sin(u).
  double cos;   // cos(u).
  double sinc;  // sin(u) / u, 1 at u = 0.
};

// Error: < 2.5 ulp (measured 2.2). Up to |u| = 1/8 (the common case: 0.25 rad of heading per
// tick) from Taylor series, which
// need neither a division nor SinCos:
//   sin u / u = 1 - u^2/3! + u^4/5! - u^6/7! + u^8/9!, dropped term u^10/11! <= 2.3e-17,
//   cos u = 1 - u^2/2! + u^4/4! - u^6/6! + u^8/8! - u^10/10!, dropped term u^12/12! <= 7.4e-20,
// both below rounding of 1 (1.1e-16); sin u = u (sin u / u). Beyond, SinCos and a division.
inline TurnTrig TurnTrigOf(double u) {
  const double z = u * u;
  if (z <= 1.0 / 64.0) {
    const double sinc =
        1.0 + z * (-1.0 / 6 + z * (1.0 / 120 + z * (-1.0 / 5040 + z * (1.0 / 362880))));
    const double cos =
        1.0 +
        z * (-0.5 + z * (1.0 / 24 + z * (-1.0 / 720 + z * (1.0 / 40320 + z * (-1.0 / 3628800)))));
    return {u * sinc, cos, sinc};
  }
  TurnTrig turn;
  SinCos(u, &turn.sin, &turn.cos);
  turn.sinc = turn.sin / u;
  return turn;
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_MATH_TRIG_H_
