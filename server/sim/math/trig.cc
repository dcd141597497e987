#include "server/sim/math/trig.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "server/sim/math/exact_arithmetic.h"

namespace pitlane::sim::trig_internal {
namespace {

using Uint128 = unsigned __int128;

// The first 1280 bits of 2/pi after the binary point (2/pi = 0.A2F9836E...), most significant
// first (scripts/gen_math_constants.py). The largest double needs bits up to 1162.
constexpr std::uint64_t kTwoOverPiBits[20] = {
    0xA2F9836E4E441529, 0xFC2757D1F534DDC0, 0xDB6295993C439041, 0xFE5163ABDEBBC561,
    0xB7246E3A424DD2E0, 0x06492EEA09D1921C, 0xFE1DEB1CB129A73E, 0xE88235F52EBB4484,
    0xE99C7026B45F7E41, 0x3991D639835339F4, 0x9C845F8BBDF9283B, 0x1FF897FFDE05980F,
    0xEF2F118B5A0A6D1F, 0x6D367ECF27CB09B7, 0x4F463F669E5FEA2D, 0x7527BAC7EBE5F17B,
    0x3D0739F78A5292EA, 0x6BFB5FB11F8D5D08, 0x56033046FC7B6BAB, 0xF0CFBC209AF4361D,
};

// Bits j .. j + 63 of 2/pi after the point (bit 1 is the first), as one word.
std::uint64_t TwoOverPiWord(int j) {
  const int index = (j - 1) / 64;
  const int shift = (j - 1) % 64;
  if (shift == 0) return kTwoOverPiBits[index];
  return (kTwoOverPiBits[index] << shift) | (kTwoOverPiBits[index + 1] >> (64 - shift));
}

// The 64 bits of a 256-bit number (four words, least significant first) from bit `pos` up.
std::uint64_t Bits64(const std::uint64_t (&words)[4], int pos) {
  const int index = pos / 64;
  const int shift = pos % 64;
  std::uint64_t low = words[index] >> shift;
  if (shift != 0 && index + 1 < 4) low |= words[index + 1] << (64 - shift);
  return low;
}

}  // namespace

// Payne-Hanek: with |x| = M 2^E (M a 53-bit integer), |x| 2/pi = sum over the bits b_j of 2/pi
// of M b_j 2^(E - j). The bits with E - j >= 2 add multiples of 4, which change neither the
// quadrant nor the remainder, so only bits from j0 = max(1, E - 1) on are needed: 192 of them
// (B), multiplied by M exactly in integers, give |x| 2/pi mod 4 to 2^-137 absolute. Rounded to
// the nearest integer k, it leaves a fraction f in [-1/2, 1/2) known to 128 bits, and r = f pi/2.
// A double's remainder is at least 2^-62 of a quarter turn (the closest approach of a double to
// a multiple of pi/2), so r keeps 60+ bits; it is carried as hi + lo into the polynomials.
void SinCosLarge(double x, double* sin_out, double* cos_out) {
  if (!std::isfinite(x)) {
    *sin_out = *cos_out = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  const std::uint64_t bits = std::bit_cast<std::uint64_t>(x);
  // |x| > 1024: a normal number, E >= -42.
  const std::uint64_t mantissa = (bits & ((std::uint64_t{1} << 52) - 1)) | (std::uint64_t{1} << 52);
  const int exponent = static_cast<int>((bits >> 52) & 0x7FF) - 1075;
  const int j0 = exponent - 1 > 1 ? exponent - 1 : 1;
  const std::uint64_t b0 = TwoOverPiWord(j0);
  const std::uint64_t b1 = TwoOverPiWord(j0 + 64);
  const std::uint64_t b2 = TwoOverPiWord(j0 + 128);
  // P = M B, 245 bits, in four words, least significant first.
  std::uint64_t product[4];
  Uint128 t = Uint128{mantissa} * b2;
  product[0] = static_cast<std::uint64_t>(t);
  t = Uint128{mantissa} * b1 + (t >> 64);
  product[1] = static_cast<std::uint64_t>(t);
  t = Uint128{mantissa} * b0 + (t >> 64);
  product[2] = static_cast<std::uint64_t>(t);
  product[3] = static_cast<std::uint64_t>(t >> 64);
  // |x| 2/pi = P / 2^s: bits s and s + 1 of P are the quadrant, the 128 below the fraction.
  const int s = j0 + 191 - exponent;  // In [190, 234].
  std::uint64_t quadrant = Bits64(product, s) & 3u;
  const std::uint64_t fraction_hi = Bits64(product, s - 64);
  const std::uint64_t fraction_lo = Bits64(product, s - 128);
  // A fraction of 1/2 or more rounds k up and leaves f - 1: the same 128 bits read as a
  // two's-complement number.
  quadrant = (quadrant + (fraction_hi >> 63)) & 3u;
  const auto fraction = static_cast<__int128>((Uint128{fraction_hi} << 64) | fraction_lo);
  const bool negative = fraction < 0;
  Uint128 magnitude =
      negative ? Uint128{0} - static_cast<Uint128>(fraction) : static_cast<Uint128>(fraction);
  // f = (hi + lo) 2^-128: normalise, then take 53 bits for hi and the next 64 for lo.
  double r_hi = 0.0, r_lo = 0.0;
  if (magnitude != 0) {
    const auto top = static_cast<std::uint64_t>(magnitude >> 64);
    const int leading = top != 0 ? std::countl_zero(top)
                                 : 64 + std::countl_zero(static_cast<std::uint64_t>(magnitude));
    magnitude <<= leading;
    const auto head = static_cast<std::uint64_t>(magnitude >> 75);  // 53 bits: exact.
    const auto tail = static_cast<std::uint64_t>(magnitude >> 11);  // The next 64 bits.
    const double f_hi = std::ldexp(static_cast<double>(head), -128 + 75 - leading);
    const double f_lo = std::ldexp(static_cast<double>(tail), -128 + 11 - leading);
    // r = f pi/2 in double-double.
    double p_hi, p_lo;
    math_internal::TwoProduct(f_hi, kHalfPiHi, &p_hi, &p_lo);
    p_lo += f_hi * kHalfPiLo + f_lo * kHalfPiHi;
    r_hi = p_hi + p_lo;
    r_lo = p_lo - (r_hi - p_hi);
    if (negative) {
      r_hi = -r_hi;
      r_lo = -r_lo;
    }
  }
  // sin(r_hi + r_lo) = sin r_hi + r_lo cos r_hi and cos(r_hi + r_lo) = cos r_hi - r_lo sin
  // r_hi, to within r_lo^2 (below 2^-106).
  double sin_r, cos_r;
  SinCosPolynomial(r_hi, &sin_r, &cos_r);
  const double sin_corrected = sin_r + r_lo * cos_r;
  const double cos_corrected = cos_r - r_lo * sin_r;
  ApplyQuadrant(quadrant, sin_corrected, cos_corrected, sin_out, cos_out);
  if (x < 0.0) *sin_out = -*sin_out;
}

SinCosPair SinCosFar(double x) {
  SinCosPair result;
  if (!(std::abs(x) <= kSinCosFastRange_rad)) {
    SinCosLarge(x, &result.sin, &result.cos);
    return result;
  }
  const double k = NearestHalfPiMultiple(x);
  // Two parts suffice unless r is small (x next to a multiple of pi/2): the rest's rounding,
  // 2^-87, times |k| <= 652 is below 2^-77, under 2^-65 of any |r| >= 2^-12.
  double r = (x - k * kHalfPiHead) - k * kHalfPiRest;
  if (std::abs(r) < 0x1p-12) r = ((x - k * kHalfPiHead) - k * kHalfPiMiddle) - k * kHalfPiTail;
  SinCosOfReduced(k, r, &result.sin, &result.cos);
  return result;
}

}  // namespace pitlane::sim::trig_internal
