// Error-free transformations: the rounding error of a sum or a product, itself a double, from
// +, - and * alone (no FMA), for the double-double steps of math/functions.h and trig.cc.
#ifndef PITLANE_SERVER_SIM_MATH_EXACT_ARITHMETIC_H_
#define PITLANE_SERVER_SIM_MATH_EXACT_ARITHMETIC_H_

namespace pitlane::sim::math_internal {

// a + b = *sum + *error exactly, for |a| >= |b| or a = 0 (Dekker's Fast2Sum).
inline void FastTwoSum(double a, double b, double* sum, double* error) {
  *sum = a + b;
  *error = b - (*sum - a);
}

// a + b = *sum + *error exactly, whatever their magnitudes (Knuth's TwoSum).
inline void TwoSum(double a, double b, double* sum, double* error) {
  *sum = a + b;
  const double b_virtual = *sum - a;
  *error = (a - (*sum - b_virtual)) + (b - b_virtual);
}

// a * b = *product + *error exactly (Dekker's product: each factor is split into two halves
// of at most 26 bits, whose products are exact). For |a|, |b| < 2^995 and products whose
// error stays above the subnormals.
inline void TwoProduct(double a, double b, double* product, double* error) {
  constexpr double kSplitter = 134217729.0;  // 2^27 + 1.
  const double ca = kSplitter * a;
  const double a_hi = ca - (ca - a);
  const double a_lo = a - a_hi;
  const double cb = kSplitter * b;
  const double b_hi = cb - (cb - b);
  const double b_lo = b - b_hi;
  *product = a * b;
  *error = ((a_hi * b_hi - *product) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo;
}

}  // namespace pitlane::sim::math_internal

#endif  // PITLANE_SERVER_SIM_MATH_EXACT_ARITHMETIC_H_
