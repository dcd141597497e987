#include "server/sim/vehicles/single_track.h"

#include <algorithm>
#include <cmath>

#include "absl/base/macros.h"
#include "absl/strings/str_cat.h"
#include "server/sim/math/functions.h"
#include "server/sim/math/trig.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

// One CommonRoad parameter set. The physical values are CommonRoad's imperial source data
// converted with its own factors (1 lbf = 4.4482216152605 N, 1 ft = 0.3048 m): mass =
// MASS x 4.4482216152605 / 0.3048, I_z = IZZ x 4.4482216152605 x 0.3048, lengths x 0.3048;
// mu = p_dy1 = 1.0489 and C_S = -p_ky1 / p_dy1 = 21.92 / 1.0489 for all three.
struct Preset {
  double mass_kg;
  double yaw_inertia_kgm2;
  double cg_to_front_axle_m;
  double cg_to_rear_axle_m;
  double cg_height_m;
  double switching_speed_mps;
  double max_steering_angle_rad;
  double max_speed_mps;
  double max_reverse_speed_mps;
  double length_m;
  double width_m;
};

constexpr double kPresetFriction = 1.0489;
constexpr double kPresetCorneringStiffness_1prad = 21.92 / 1.0489;
constexpr double kPresetSteeringRate_radps = 0.4;
constexpr double kPresetMaxAcceleration_mps2 = 11.5;

// parameters_vehicle1: MASS 84, IZZ 1135, LENA 2.9 ft, LENB 4.95 ft, HS 1.95 ft.
constexpr Preset kFordEscort = {
    .mass_kg = 1225.8878467253344,
    .yaw_inertia_kgm2 = 1538.8533713561394,
    .cg_to_front_axle_m = 0.88392,
    .cg_to_rear_axle_m = 1.50876,
    .cg_height_m = 0.59436,
    .switching_speed_mps = 4.755,
    .max_steering_angle_rad = 0.910,
    .max_speed_mps = 45.8,
    .max_reverse_speed_mps = 13.9,
    .length_m = 4.298,
    .width_m = 1.674,
};
// parameters_vehicle2: MASS 74.91452, IZZ 1321.416, LENA 3.793293 ft, LENB 4.667707 ft,
// HS 2.01355 ft.
constexpr Preset kBmw320i = {
    .mass_kg = 1093.2952334674046,
    .yaw_inertia_kgm2 = 1791.5995300122856,
    .cg_to_front_axle_m = 1.1561957064,
    .cg_to_rear_axle_m = 1.4227170936,
    .cg_height_m = 0.61373004,
    .switching_speed_mps = 7.319,
    .max_steering_angle_rad = 1.066,
    .max_speed_mps = 50.8,
    .max_reverse_speed_mps = 13.6,
    .length_m = 4.508,
    .width_m = 1.610,
};
// parameters_vehicle3: MASS 101.3367, IZZ 1824.078, LENA 3.775563 ft, LENB 4.334437 ft,
// HS 2.639405 ft.
constexpr Preset kVwVanagon = {
    .mass_kg = 1478.8979637767998,
    .yaw_inertia_kgm2 = 2473.1176915564442,
    .cg_to_front_axle_m = 1.1507916024,
    .cg_to_rear_axle_m = 1.3211363976,
    .cg_height_m = 0.804490644,
    .switching_speed_mps = 7.824,
    .max_steering_angle_rad = 1.023,
    .max_speed_mps = 41.7,
    .max_reverse_speed_mps = 11.2,
    .length_m = 4.569,
    .width_m = 1.844,
};

// The preset's data, or nullptr for a value outside the enum.
const Preset* FindPreset(SingleTrackPreset preset) {
  switch (preset) {
    case SingleTrackPreset::kBmw320i:
      return &kBmw320i;
    case SingleTrackPreset::kFordEscort:
      return &kFordEscort;
    case SingleTrackPreset::kVwVanagon:
      return &kVwVanagon;
  }
  return nullptr;
}

// Validation ranges (documented on SingleTrackSpec).
constexpr double kMaxMass_kg = 1e5;
constexpr double kMaxYawInertia_kgm2 = 1e7;
constexpr double kMinAxleDistance_m = 0.01;
constexpr double kMaxAxleDistance_m = 100.0;
constexpr double kMaxCgHeight_m = 10.0;
constexpr double kMinFriction = 0.01;
constexpr double kMaxFriction = 3.0;
constexpr double kMinCorneringStiffness_1prad = 0.1;
constexpr double kMaxCorneringStiffness_1prad = 100.0;
constexpr double kMaxSwitchingSpeed_mps = 1000.0;
// Radius of gyration sqrt(I / m) relative to the wheelbase: about 0.5 for cars (BMW 0.50,
// f1tenth 0.34). The bounds keep (m / I) l², the scale of the yaw equation, within
// [0.25, 400], so that the lateral dynamics stay within floating-point range.
constexpr double kMinGyrationToWheelbase = 0.05;
constexpr double kMaxGyrationToWheelbase = 2.0;

// In the one branch where an eigenvalue may be positive (an oversteering car past its
// critical speed), its growth over one tick is capped at e^50 before the state bounds apply:
// the result is then held at the bounds either way, and e^50 cannot overflow.
constexpr double kMaxGrowthExponent = 50.0;

// 1/n!, folded at compile time.
constexpr double InverseFactorial(int n) {
  double factorial = 1.0;
  for (int i = 2; i <= n; ++i) factorial *= i;
  return 1.0 / factorial;
}

// The acceleration applied at speed v for a commanded a, before the power limit: one that
// raises |v| is limited to max_acceleration_mps2, one that lowers it to max_braking_mps2 (at
// rest either way raises |v|). The same rule as the kinematic bicycle's ClampAcceleration,
// so a held negative command carries through zero into reverse, as in CommonRoad.
inline double ClampAcceleration(const VehicleLimits& limits, double v, double a) {
  const bool lowers_speed = v * a < 0.0;
  const double limit = lowers_speed ? limits.max_braking_mps2 : limits.max_acceleration_mps2;
  return std::min(std::max(a, -limit), limit);
}

// What the kinematic single-track model at the CoG derives from a wheel angle.
struct KinematicSteer {
  double tan;           // tan(delta).
  double slip_rad;      // beta_k = atan(tan(delta) l_r / l).
  double yaw_rate_1pm;  // r_k / v = cos(beta_k) tan(delta) / l.
};

// tan from SinCos like every trig function of the step; cos(atan(u)) = 1 / sqrt(1 + u²).
inline KinematicSteer Kinematic(const SingleTrackParams& params, double steer_rad) {
  double sin_steer;
  double cos_steer;
  SinCos(steer_rad, &sin_steer, &cos_steer);
  const double tan_steer = sin_steer / cos_steer;  // |steer| <= 1.5 < pi/2: cos > 0.07.
  const double tan_slip = tan_steer * params.rear_fraction;
  const double cos_slip = 1.0 / std::sqrt(1.0 + tan_slip * tan_slip);
  return {tan_steer, Atan(tan_slip), cos_slip * tan_steer * params.inv_wheelbase_1pm};
}

// Result of the linear-tyre (dynamic) lateral step.
struct Lateral {
  double yaw_rate_radps;
  double slip_angle_rad;
  // Power the tyres dissipate per unit mass at mid-tick, |v| (k_f alpha_f² + k_r alpha_r²),
  // W/kg.
  double slip_power_wpkg;
};

// Advances x = (r, beta) over t seconds under x' = A x + f, with v, a and delta held (v > 0):
//
//   A = [ -(m/I)(l_f² k_f + l_r² k_r)/v   (m/I)(l_r k_r - l_f k_f) ]   f = [(m/I) l_f k_f] delta
//       [ (l_r k_r - l_f k_f)/v² - 1      -(k_f + k_r)/v           ]       [k_f / v      ]
//
// Exactly, with the 2x2 matrix exponential: A = p I + M with p = tr(A)/2 and M² = disc I
// (disc = ((A11 - A22)/2)² + A12 A21; the eigenvalues are p +- sqrt(disc)), so
//   e^{A t} = e^{p t} [C I + S M],  C = cosh(sqrt(disc) t),  S = sinh(sqrt(disc) t)/sqrt(disc)
// (cos and sin/sqrt(-disc) for disc < 0). Both are entire functions of u = disc t²:
// C = sum u^k/(2k)!, S = t sum u^k/(2k+1)!, used as polynomials for |u| <= 1/4.
//   * If det(A) = p² - disc >= p²/4 (complex or close eigenvalues, the common case; p < 0
//     since k_f + k_r >= mu min(C_S) g > 0), x(t) = x_ss + e^{A t}(x0 - x_ss) with the steady
//     state x_ss = -A^-1 f.
//   * Otherwise the eigenvalues are real and apart (sqrt(disc) > 0.86 |p|), one maybe near
//     zero or positive, where A^-1 is ill-conditioned: then
//       x(t) = e^{A t} x0 + (integral_0^t e^{A s} ds) f,
//     both as c0 I + c1 M from e^{lambda_i t} - 1 (expm1) and (e^{lambda_i t} - 1)/lambda_i.
inline Lateral AdvanceLinearTyres(const SingleTrackParams& params, double yaw_rate0, double slip0,
                                  double v, double a, double steer, double t) {
  const double kf =
      std::max(params.front_stiffness_static_mps2 - params.front_stiffness_per_accel * a, 0.0);
  const double kr =
      std::max(params.rear_stiffness_static_mps2 + params.rear_stiffness_per_accel * a, 0.0);
  const double inv_v = 1.0 / v;
  const double balance = params.cg_to_rear_axle_m * kr - params.cg_to_front_axle_m * kf;
  const double a11 = -(params.front_lever_sq * kf + params.rear_lever_sq * kr) * inv_v;
  const double a12 = params.rear_lever_1pm * kr - params.front_lever_1pm * kf;
  const double a21 = balance * inv_v * inv_v - 1.0;
  const double a22 = -(kf + kr) * inv_v;
  const double f1 = params.front_lever_1pm * kf * steer;
  const double f2 = kf * inv_v * steer;

  const double p = 0.5 * (a11 + a22);
  const double h = 0.5 * (a11 - a22);  // M = [[h, a12], [a21, -h]].
  const double disc = h * h + a12 * a21;
  double r1;
  double s1;
  if (disc <= 0.75 * p * p) {
    const double inv_det = 1.0 / (p * p - disc);
    const double r_ss = (a12 * f2 - a22 * f1) * inv_det;
    const double s_ss = (a21 * f1 - a11 * f2) * inv_det;
    // e^{p t} C and e^{p t} S.
    double ec;
    double es;
    const double u = disc * t * t;
    if (std::abs(u) <= 0.25) {
      // Truncated after u^7: the first dropped terms are below 0.25^8/16! = 7e-19.
      constexpr double c0 = 1.0, c1 = InverseFactorial(2), c2 = InverseFactorial(4);
      constexpr double c3 = InverseFactorial(6), c4 = InverseFactorial(8);
      constexpr double c5 = InverseFactorial(10), c6 = InverseFactorial(12);
      constexpr double c7 = InverseFactorial(14);
      constexpr double s0 = 1.0, s1c = InverseFactorial(3), s2 = InverseFactorial(5);
      constexpr double s3 = InverseFactorial(7), s4 = InverseFactorial(9);
      constexpr double s5 = InverseFactorial(11), s6 = InverseFactorial(13);
      constexpr double s7 = InverseFactorial(15);
      const double u2 = u * u;
      const double u4 = u2 * u2;
      const double cosh_like =
          ((c0 + c1 * u) + (c2 + c3 * u) * u2) + ((c4 + c5 * u) + (c6 + c7 * u) * u2) * u4;
      const double sinhc_like =
          ((s0 + s1c * u) + (s2 + s3 * u) * u2) + ((s4 + s5 * u) + (s6 + s7 * u) * u2) * u4;
      const double decay = Exp(p * t);
      ec = decay * cosh_like;
      es = decay * t * sinhc_like;
    } else if (u > 0.0) {
      // Real eigenvalues p +- s, both negative here (s <= 0.87 |p|).
      const double s = std::sqrt(disc);
      const double e_plus = Exp((p + s) * t);
      const double e_minus = Exp((p - s) * t);
      ec = 0.5 * (e_plus + e_minus);
      es = 0.5 * (e_plus - e_minus) / s;
    } else {
      const double omega = std::sqrt(-disc);
      double sin_wt;
      double cos_wt;
      SinCos(omega * t, &sin_wt, &cos_wt);
      const double decay = Exp(p * t);
      ec = decay * cos_wt;
      es = decay * sin_wt / omega;
    }
    const double y1 = yaw_rate0 - r_ss;
    const double y2 = slip0 - s_ss;
    r1 = r_ss + ec * y1 + es * (h * y1 + a12 * y2);
    s1 = s_ss + ec * y2 + es * (a21 * y1 - h * y2);
  } else {
    const double s = std::sqrt(disc);
    const double z1 = std::min((p + s) * t, kMaxGrowthExponent);
    const double z2 = (p - s) * t;
    const double e1 = Expm1(z1);
    const double e2 = Expm1(z2);
    // (e^{lambda t} - 1) / lambda = t expm1(z) / z, with its series where z / z would fail.
    const auto integral = [t](double z, double e) {
      return std::abs(z) < 1e-12 ? t * (1.0 + 0.5 * z) : t * e / z;
    };
    const double g1 = integral(z1, e1);
    const double g2 = integral(z2, e2);
    const double inv_2s = 0.5 / s;
    const double ec = 1.0 + 0.5 * (e1 + e2);
    const double es = (e1 - e2) * inv_2s;
    const double gc = 0.5 * (g1 + g2);
    const double gs = (g1 - g2) * inv_2s;
    r1 = ec * yaw_rate0 + es * (h * yaw_rate0 + a12 * slip0) + gc * f1 + gs * (h * f1 + a12 * f2);
    s1 = ec * slip0 + es * (a21 * yaw_rate0 - h * slip0) + gc * f2 + gs * (a21 * f1 - h * f2);
  }

  // Slip angles at mid-tick: alpha_f = delta - beta - l_f r / v, alpha_r = -beta + l_r r / v.
  const double r_mid = 0.5 * (yaw_rate0 + r1);
  const double s_mid = 0.5 * (slip0 + s1);
  const double alpha_f = steer - s_mid - params.cg_to_front_axle_m * r_mid * inv_v;
  const double alpha_r = params.cg_to_rear_axle_m * r_mid * inv_v - s_mid;
  return {r1, s1, v * (kf * alpha_f * alpha_f + kr * alpha_r * alpha_r)};
}

}  // namespace

SingleTrackBodySize SingleTrackPresetBodySize(SingleTrackPreset preset) {
  const Preset* data = FindPreset(preset);
  if (data == nullptr) return {};
  return {.length_m = data->length_m, .width_m = data->width_m};
}

absl::Status ResolveSingleTrackSpec(double length_m, double width_m, SingleTrackSpec& spec) {
  ABSL_ASSERT(length_m > 0.0 && width_m > 0.0);
  const Preset* preset = FindPreset(spec.preset);
  if (preset == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("single_track.preset: unknown preset ", static_cast<int>(spec.preset)));
  }
  const bool front_set = spec.cg_to_front_axle_m.has_value();
  const bool rear_set = spec.cg_to_rear_axle_m.has_value();
  spec.mass_kg = spec.mass_kg.value_or(preset->mass_kg);
  spec.yaw_inertia_kgm2 = spec.yaw_inertia_kgm2.value_or(preset->yaw_inertia_kgm2);
  spec.cg_to_front_axle_m = spec.cg_to_front_axle_m.value_or(preset->cg_to_front_axle_m);
  spec.cg_to_rear_axle_m = spec.cg_to_rear_axle_m.value_or(preset->cg_to_rear_axle_m);
  spec.cg_height_m = spec.cg_height_m.value_or(preset->cg_height_m);
  spec.friction_coefficient = spec.friction_coefficient.value_or(kPresetFriction);
  spec.front_cornering_stiffness_1prad =
      spec.front_cornering_stiffness_1prad.value_or(kPresetCorneringStiffness_1prad);
  spec.rear_cornering_stiffness_1prad =
      spec.rear_cornering_stiffness_1prad.value_or(kPresetCorneringStiffness_1prad);
  spec.switching_speed_mps = spec.switching_speed_mps.value_or(preset->switching_speed_mps);

  RETURN_IF_ERROR(CheckPositive("single_track.mass_kg", *spec.mass_kg, kMaxMass_kg));
  RETURN_IF_ERROR(
      CheckPositive("single_track.yaw_inertia_kgm2", *spec.yaw_inertia_kgm2, kMaxYawInertia_kgm2));
  RETURN_IF_ERROR(CheckInRange("single_track.cg_to_front_axle_m", *spec.cg_to_front_axle_m,
                               kMinAxleDistance_m, kMaxAxleDistance_m));
  RETURN_IF_ERROR(CheckInRange("single_track.cg_to_rear_axle_m", *spec.cg_to_rear_axle_m,
                               kMinAxleDistance_m, kMaxAxleDistance_m));
  RETURN_IF_ERROR(CheckInRange("single_track.cg_height_m", *spec.cg_height_m, 0.0, kMaxCgHeight_m));
  RETURN_IF_ERROR(CheckInRange("single_track.friction_coefficient", *spec.friction_coefficient,
                               kMinFriction, kMaxFriction));
  RETURN_IF_ERROR(CheckInRange("single_track.front_cornering_stiffness_1prad",
                               *spec.front_cornering_stiffness_1prad, kMinCorneringStiffness_1prad,
                               kMaxCorneringStiffness_1prad));
  RETURN_IF_ERROR(CheckInRange("single_track.rear_cornering_stiffness_1prad",
                               *spec.rear_cornering_stiffness_1prad, kMinCorneringStiffness_1prad,
                               kMaxCorneringStiffness_1prad));
  RETURN_IF_ERROR(CheckPositive("single_track.switching_speed_mps", *spec.switching_speed_mps,
                                kMaxSwitchingSpeed_mps));

  // The wheelbase must fit in the body. The error names the distance the client set (the
  // front one when both or neither were set).
  const double wheelbase_m = *spec.cg_to_front_axle_m + *spec.cg_to_rear_axle_m;
  if (wheelbase_m > length_m) {
    return absl::InvalidArgumentError(absl::StrCat(
        rear_set && !front_set ? "single_track.cg_to_rear_axle_m"
                               : "single_track.cg_to_front_axle_m",
        ": the wheelbase cg_to_front_axle_m + cg_to_rear_axle_m must not exceed length_m (",
        length_m, "), got ", wheelbase_m));
  }
  const double gyration_m = std::sqrt(*spec.yaw_inertia_kgm2 / *spec.mass_kg);
  if (!(gyration_m >= kMinGyrationToWheelbase * wheelbase_m &&
        gyration_m <= kMaxGyrationToWheelbase * wheelbase_m)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "single_track.yaw_inertia_kgm2: the radius of gyration sqrt(yaw_inertia_kgm2 / mass_kg) "
        "must be within [",
        kMinGyrationToWheelbase, ", ", kMaxGyrationToWheelbase, "] x the wheelbase (", wheelbase_m,
        " m), got ", gyration_m, " m"));
  }
  const double max_overhang_m = length_m - wheelbase_m;
  spec.rear_overhang_m = spec.rear_overhang_m.value_or(0.5 * max_overhang_m);
  return CheckInRange("single_track.rear_overhang_m", *spec.rear_overhang_m, 0.0, max_overhang_m);
}

VehicleLimits DefaultSingleTrackLimits(const SingleTrackSpec& resolved) {
  const Preset* preset = FindPreset(resolved.preset);
  ABSL_ASSERT(preset != nullptr);
  return VehicleLimits{
      .max_steering_angle_rad = preset->max_steering_angle_rad,
      .max_acceleration_mps2 = kPresetMaxAcceleration_mps2,
      .max_braking_mps2 = kPresetMaxAcceleration_mps2,
      .max_speed_mps = preset->max_speed_mps,
      .max_reverse_speed_mps = preset->max_reverse_speed_mps,
      .max_steering_rate_radps = kPresetSteeringRate_radps,
  };
}

SingleTrackParams MakeSingleTrackParams(const SingleTrackSpec& resolved,
                                        const VehicleLimits& limits, double dt_s) {
  const double m = *resolved.mass_kg;
  const double inertia = *resolved.yaw_inertia_kgm2;
  const double lf = *resolved.cg_to_front_axle_m;
  const double lr = *resolved.cg_to_rear_axle_m;
  const double h = *resolved.cg_height_m;
  const double mu = *resolved.friction_coefficient;
  const double csf = *resolved.front_cornering_stiffness_1prad;
  const double csr = *resolved.rear_cornering_stiffness_1prad;
  const double wheelbase = lf + lr;
  const double m_over_i = m / inertia;
  double sin_max_steer;
  double cos_max_steer;
  SinCos(limits.max_steering_angle_rad, &sin_max_steer, &cos_max_steer);
  return SingleTrackParams{
      .limits = limits,
      .dt_s = dt_s,
      .inv_dt_s = 1.0 / dt_s,
      .mass_kg = m,
      .yaw_inertia_kgm2 = inertia,
      .cg_to_front_axle_m = lf,
      .cg_to_rear_axle_m = lr,
      .inv_wheelbase_1pm = 1.0 / wheelbase,
      .rear_fraction = lr / wheelbase,
      .front_stiffness_static_mps2 = mu * csf * kGravity_mps2 * lr / wheelbase,
      .front_stiffness_per_accel = mu * csf * h / wheelbase,
      .rear_stiffness_static_mps2 = mu * csr * kGravity_mps2 * lf / wheelbase,
      .rear_stiffness_per_accel = mu * csr * h / wheelbase,
      .front_lever_sq = m_over_i * lf * lf,
      .rear_lever_sq = m_over_i * lr * lr,
      .front_lever_1pm = m_over_i * lf,
      .rear_lever_1pm = m_over_i * lr,
      .switching_speed_mps = *resolved.switching_speed_mps,
      .power_per_mass_m2ps3 = limits.max_acceleration_mps2 * *resolved.switching_speed_mps,
      .max_yaw_rate_radps = 2.0 * std::max(limits.max_speed_mps, limits.max_reverse_speed_mps) *
                            (sin_max_steer / cos_max_steer) / wheelbase,
  };
}

SingleTrackInput MakeSingleTrackInput(const SingleTrackParams& params, double acceleration_mps2,
                                      double steering_angle_rad) {
  const VehicleLimits& limits = params.limits;
  const double max_accel = std::max(limits.max_acceleration_mps2, limits.max_braking_mps2);
  const double steer =
      std::clamp(steering_angle_rad, -limits.max_steering_angle_rad, limits.max_steering_angle_rad);
  const KinematicSteer kinematic = Kinematic(params, steer);
  return SingleTrackInput{
      .acceleration_mps2 = std::clamp(acceleration_mps2, -max_accel, max_accel),
      .steering_angle_rad = steer,
      .steering_tan = kinematic.tan,
      .kinematic_slip_rad = kinematic.slip_rad,
      .kinematic_yaw_rate_1pm = kinematic.yaw_rate_1pm,
  };
}

SingleTrackState MakeSingleTrackState(const SingleTrackParams& /*params*/, const Pose2& pose,
                                      double speed_mps) {
  return SingleTrackState{
      .pose = {.x_m = pose.x_m, .y_m = pose.y_m, .yaw_rad = WrapToPi(pose.yaw_rad)},
      .speed_mps = speed_mps,
  };
}

void StepSingleTrack(const SingleTrackParams& params, const SingleTrackInput& input, double dt_s,
                     SingleTrackState& state) {
  ABSL_ASSERT(dt_s == params.dt_s);
  const VehicleLimits& limits = params.limits;

  // 1. Wheels: towards the command by at most rate * dt (+inf: no limit), never past it, so
  // never past +-max_steering_angle_rad. They move linearly within the tick: the dynamics
  // see the average angle, the kinematic values the angle at the end.
  const double steer0 = state.steering_rad;
  double steer1 = steer0;
  TurnWheelsTowards(input.steering_angle_rad, limits.max_steering_rate_radps * dt_s, steer1);
  const double steer_mid = 0.5 * (steer0 + steer1);

  // 2. Speed. Above the switching speed the drive is power-limited, a <= c / v with c =
  // max_acceleration * v_switch; while that limit binds, v v' = c and so v² grows linearly:
  // v1 = sqrt(v0² + 2 c dt), exact over the tick.
  const double v0 = state.speed_mps;
  const double accel = ClampAcceleration(limits, v0, input.acceleration_mps2);
  double v1 = v0 + accel * dt_s;
  if (v0 > params.switching_speed_mps && accel * v0 > params.power_per_mass_m2ps3) {
    v1 = std::sqrt(v0 * v0 + 2.0 * params.power_per_mass_m2ps3 * dt_s);
  }
  v1 = std::clamp(v1, -limits.max_reverse_speed_mps, limits.max_speed_mps);
  const double achieved_accel = (v1 - v0) * params.inv_dt_s;
  const double v_mid = 0.5 * (v0 + v1);

  // 3. Yaw rate and slip angle: the linear-tyre dynamics above kSingleTrackBlendHigh_mps, the
  // kinematic values below kSingleTrackBlendLow_mps and in reverse, a smoothstep blend of
  // the two in between (continuous and with a continuous slope in v).
  const double yaw_rate0 = state.yaw_rate_radps;
  const double slip0 = state.slip_angle_rad;
  double yaw_rate1;
  double slip1;
  double slip_power_wpkg = 0.0;
  if (v_mid >= kSingleTrackBlendHigh_mps) {
    const Lateral dynamic =
        AdvanceLinearTyres(params, yaw_rate0, slip0, v_mid, achieved_accel, steer_mid, dt_s);
    yaw_rate1 = dynamic.yaw_rate_radps;
    slip1 = dynamic.slip_angle_rad;
    slip_power_wpkg = dynamic.slip_power_wpkg;
  } else {
    KinematicSteer kinematic{input.steering_tan, input.kinematic_slip_rad,
                             input.kinematic_yaw_rate_1pm};
    if (steer1 != input.steering_angle_rad) kinematic = Kinematic(params, steer1);
    yaw_rate1 = v1 * kinematic.yaw_rate_1pm;
    slip1 = kinematic.slip_rad;
    if (v_mid > kSingleTrackBlendLow_mps) {
      const double x = (v_mid - kSingleTrackBlendLow_mps) *
                       (1.0 / (kSingleTrackBlendHigh_mps - kSingleTrackBlendLow_mps));
      const double weight = x * x * (3.0 - 2.0 * x);
      const Lateral dynamic =
          AdvanceLinearTyres(params, yaw_rate0, slip0, v_mid, achieved_accel, steer_mid, dt_s);
      yaw_rate1 += weight * (dynamic.yaw_rate_radps - yaw_rate1);
      slip1 += weight * (dynamic.slip_angle_rad - slip1);
      slip_power_wpkg = weight * dynamic.slip_power_wpkg;
    }
  }
  yaw_rate1 = std::clamp(yaw_rate1, -params.max_yaw_rate_radps, params.max_yaw_rate_radps);
  slip1 = std::clamp(slip1, -kSingleTrackMaxSlipAngle_rad, kSingleTrackMaxSlipAngle_rad);

  // 4. Pose: heading by the trapezoidal rule on the yaw rate, position along the mid-tick
  // direction of travel psi + beta at the mid-tick speed (second order).
  const double turn_rad = 0.5 * dt_s * (yaw_rate0 + yaw_rate1);
  const double course_rad = state.pose.yaw_rad + 0.5 * turn_rad + 0.5 * (slip0 + slip1);
  double sin_course;
  double cos_course;
  SinCos(course_rad, &sin_course, &cos_course);
  const double distance_m = v_mid * dt_s;
  state.pose.x_m += distance_m * cos_course;
  state.pose.y_m += distance_m * sin_course;
  state.pose.yaw_rad = WrapToPi(state.pose.yaw_rad + turn_rad);

  // 5. Energy: the brakes take the kinetic energy lost while the acceleration lowers |v| (up
  // to a stop: a held command that carries through zero drives the reverse part); the tyres
  // take their slip power.
  double dissipated_per_kg = slip_power_wpkg * dt_s;
  if (accel * v0 < 0.0) {
    dissipated_per_kg += 0.5 * (v0 * v0 - (v0 * v1 > 0.0 ? v1 * v1 : 0.0));
  }
  state.dissipated_energy_j += params.mass_kg * dissipated_per_kg;

  state.speed_mps = v1;
  state.steering_rad = steer1;
  state.yaw_rate_radps = yaw_rate1;
  state.slip_angle_rad = slip1;
  state.acceleration_mps2 = achieved_accel;
}

VehicleReadout ReadSingleTrack(const SingleTrackParams& params, const SingleTrackInput& /*input*/,
                               const SingleTrackState& state) {
  double sin_slip;
  double cos_slip;
  SinCos(state.slip_angle_rad, &sin_slip, &cos_slip);
  const double v = state.speed_mps;
  const double r = state.yaw_rate_radps;
  return VehicleReadout{
      .steering_angle_rad = state.steering_rad,
      .acceleration_mps2 = state.acceleration_mps2,
      .yaw_rate_radps = r,
      .lateral_speed_mps = v * sin_slip,
      .kinetic_energy_j = 0.5 * params.mass_kg * v * v + 0.5 * params.yaw_inertia_kgm2 * r * r,
      .dissipated_energy_j = state.dissipated_energy_j,
  };
}

void HaltSingleTrack(const SingleTrackParams& params, SingleTrackInput& input,
                     SingleTrackState& state) {
  input = MakeSingleTrackInput(params, 0.0, 0.0);
  state.speed_mps = 0.0;
  state.steering_rad = 0.0;
  state.yaw_rate_radps = 0.0;
  state.slip_angle_rad = 0.0;
  state.acceleration_mps2 = 0.0;
}

double SingleTrackBodyCenterOffset(const SingleTrackSpec& resolved, double length_m) {
  return 0.5 * length_m - resolved.rear_overhang_m.value_or(0.0) -
         resolved.cg_to_rear_axle_m.value_or(0.0);
}

}  // namespace pitlane::sim
