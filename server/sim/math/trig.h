// Sine and cosine together, for the step loops.
//
// Why not std::sin/std::cos: in the kinematic-bicycle step they took three quarters of the
// time (glibc evaluates sin and cos separately, behind a PLT call), and their last bits may
// change between libm versions, which would break bit-for-bit replays across machines. This
// version is inline, branch-free on the common path, uses only +, -, * and one conversion
// (so it rounds identically on every IEEE-754 machine that does not contract to FMA; the
// build does not), and is accurate to about one unit in the last place.
//
// Method, for |x| <= kSinCosFastRange_rad:
//   1. x = k * pi/2 + r with k = round(x * 2/pi) and |r| <= pi/4 (plus rounding). pi/2 is
//      split Cody-Waite style into a head with 33 significant bits, so k * head is exact for
//      |k| < 2^20, and a tail that carries the next 53 bits.
//   2. sin r and cos r from their Taylor series through r^17 and r^16: on |r| <= pi/4 the
//      first dropped terms are at most (pi/4)^19/19! = 8.4e-20 and (pi/4)^18/18! = 2.0e-18,
//      far below half an ulp of the results where they matter (5.5e-17 near pi/4).
//   3. The quadrant k mod 4 swaps and negates the pair.
// Beyond that range (never reached by a wrapped yaw plus one tick's turn) it falls back to
// libm.
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
// The double nearest pi/2 with its low 20 significand bits cleared: 33 significant bits.
inline constexpr double kHalfPiHead =
    std::bit_cast<double>(std::bit_cast<std::uint64_t>(kHalfPi) & ~std::uint64_t{0xFFFFF});
// pi/2 - kHalfPiHead: the exact difference of two doubles (Sterbenz), plus pi/2 - fl(pi/2),
// which is 6.123233995736766e-17 (it equals cos(fl(pi/2))).
inline constexpr double kHalfPiTail = (kHalfPi - kHalfPiHead) + 6.123233995736766e-17;
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

// Sets *sin_out = sin(x), *cos_out = cos(x) for finite x.
inline void SinCos(double x, double* sin_out, double* cos_out) {
  using namespace trig_internal;
  if (!(std::abs(x) <= kSinCosFastRange_rad)) {
    *sin_out = std::sin(x);
    *cos_out = std::cos(x);
    return;
  }
  const double k = (x * kTwoOverPi + kRoundingShift) - kRoundingShift;
  const double r = (x - k * kHalfPiHead) - k * kHalfPiTail;

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
  const double sin_r = r + r * z * p;
  const double cos_r = 1.0 + z * q;

  // Quadrant q = k mod 4: 0 -> (s, c), 1 -> (c, -s), 2 -> (-s, -c), 3 -> (-c, s). Done on
  // the bits, without branches: in a fleet the quadrant varies from vehicle to vehicle in no
  // pattern a branch predictor could learn (ternaries here compiled to branches and cost a
  // quarter of the kinematic step once headings had spread out). A swap selects through a
  // mask; a negation flips the sign bit, which is exactly what multiplying by -1 does.
  const auto quadrant = static_cast<std::uint64_t>(static_cast<std::int64_t>(k)) & 3u;
  const std::uint64_t swap_mask = std::uint64_t{0} - (quadrant & 1u);  // All ones: swap.
  const auto sin_bits = std::bit_cast<std::uint64_t>(sin_r);
  const auto cos_bits = std::bit_cast<std::uint64_t>(cos_r);
  const std::uint64_t first = (sin_bits & ~swap_mask) | (cos_bits & swap_mask);
  const std::uint64_t second = (cos_bits & ~swap_mask) | (sin_bits & swap_mask);
  *sin_out = std::bit_cast<double>(first ^ ((quadrant & 2u) << 62));
  *cos_out = std::bit_cast<double>(second ^ (((quadrant + 1u) & 2u) << 62));
}

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_MATH_TRIG_H_
