#include "server/sim/vehicles/four_wheel.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/base/macros.h"
#include "absl/strings/str_cat.h"
#include "server/sim/math/functions.h"
#include "server/sim/math/trig.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

// Past its travel a spring meets a bump stop this many times stiffer. Capping the force at the
// travel instead would let the body sink without bound under a load the capped springs cannot
// carry; a stiff stop keeps every load finite, and the implicit step keeps it stable.
constexpr double kBumpStopStiffnessRatio = 10.0;
// Longest substep, s, and fewest substeps per tick. 4 substeps keep the substep proportional
// to the tick up to 20 ms ticks (so halving the tick halves every step of the integrator);
// longer ticks get more substeps.
constexpr double kMaxSubstep_s = 0.005;
constexpr int kMinSubsteps = 4;
// A brake acts as a damper of coefficient F_brake / max(|v_lon| - h a_brake, this), m/s: it
// never pushes a wheel through zero and holds it once stopped.
constexpr double kBrakeHoldSpeed_mps = 1e-3;
// Below this |argument| the lateral curve's secant slope sin(c2 atan x) / x takes its limit c2
// (the first dropped term, x^2 c2 (c2^2 + 2) / 6, is below 1e-16 relative).
constexpr double kSmallSlipArgument = 1e-8;
// The common limits' upper bound on the steering angle, rad (model_common.h).
constexpr double kSteeringLimitBound_rad = 1.5;

constexpr double kDefaultMass_kg = 1500.0;
constexpr double kDefaultYawInertia_kgm2 = 2500.0;
constexpr double kDefaultRollToYawInertia = 0.2;
constexpr double kDefaultCgHeight_m = 0.55;
constexpr double kDefaultWheelbase_m = 2.7;
constexpr double kDefaultCgToFrontFraction = 4.0 / 9.0;  // 1.2 m of 2.7 m.
constexpr double kDefaultTrack_m = 1.6;
constexpr double kDefaultStiffness_npm = 33000.0;
constexpr double kDefaultDamping_nspm = 2800.0;
constexpr double kDefaultRestLength_m = 0.4;
constexpr double kDefaultTravel_m = 0.25;
constexpr double kDefaultC1 = 1.0;
constexpr double kDefaultC2 = 1.6;
constexpr double kDefaultC3_spm = 2.0;
constexpr double kDefaultSlipReferenceSpeed_mps = 5.0;
constexpr double kDefaultLongitudinalFriction = 1.0;
constexpr double kDefaultMinTurnRadius_m = 4.5;

std::string Field(const char* name) { return absl::StrCat("four_wheel.", name); }

double Fill(std::optional<double>& field, double fallback) {
  if (!field.has_value()) field = fallback;
  return *field;
}

// `value` in the open range (0, hi); the message matches CheckPositive's.
absl::Status CheckOpenPositive(const char* name, double value, double hi) {
  if (std::isfinite(value) && value > 0.0 && value < hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Field(name), ": must be in (0, ", hi, "), got ", value));
}

// The static load of one front wheel and one rear wheel, N: the weight split between the axles
// by the lever rule, half to each wheel.
struct StaticLoads {
  double front_n;
  double rear_n;
};
StaticLoads StaticWheelLoads(double mass_kg, double wheelbase_m, double cg_to_front_m) {
  const double weight_n = mass_kg * kGravity_mps2;
  const double cg_to_rear_m = wheelbase_m - cg_to_front_m;
  return {0.5 * weight_n * cg_to_rear_m / wheelbase_m,
          0.5 * weight_n * cg_to_front_m / wheelbase_m};
}

// cos and sin of the front-left and front-right wheel angles, without inverse trig:
// the left wheel's angle is atan2(L t, L - T t / 2), t = tan(steer), so its cos and sin are
// (L - T t / 2) and L t over the hypotenuse (likewise the right with L + T t / 2).
struct FrontWheelTrig {
  double cos_left;
  double sin_left;
  double cos_right;
  double sin_right;
};
FrontWheelTrig AckermannTrig(double wheelbase_m, double front_track_m, double steer_rad) {
  if (steer_rad == 0.0) return {1.0, 0.0, 1.0, 0.0};  // Exactly straight.
  double sin_steer, cos_steer;
  SinCos(steer_rad, &sin_steer, &cos_steer);
  const double tan_steer = sin_steer / cos_steer;  // |steer| <= 1.5, so cos > 0.07.
  const double rise = wheelbase_m * tan_steer;
  const double run_left = wheelbase_m - 0.5 * front_track_m * tan_steer;
  const double run_right = wheelbase_m + 0.5 * front_track_m * tan_steer;
  const double inv_left = 1.0 / std::sqrt(rise * rise + run_left * run_left);
  const double inv_right = 1.0 / std::sqrt(rise * rise + run_right * run_right);
  return {run_left * inv_left, rise * inv_left, run_right * inv_right, rise * inv_right};
}

// Solves the 3x3 system S x = b by Cramer's rule. Every S solved here is M + h (symmetric
// positive semi-definite) + (skew-symmetric) with M positive diagonal: its symmetric part is
// positive definite, so every eigenvalue has a positive real part and det S > 0.
struct Vec3 {
  double x, y, z;
};
inline Vec3 Solve3(const double s[3][3], const Vec3& b) {
  const double c00 = s[1][1] * s[2][2] - s[1][2] * s[2][1];
  const double c01 = s[1][2] * s[2][0] - s[1][0] * s[2][2];
  const double c02 = s[1][0] * s[2][1] - s[1][1] * s[2][0];
  const double inv_det = 1.0 / (s[0][0] * c00 + s[0][1] * c01 + s[0][2] * c02);
  // Rows of the adjugate.
  const double a01 = s[0][2] * s[2][1] - s[0][1] * s[2][2];
  const double a02 = s[0][1] * s[1][2] - s[0][2] * s[1][1];
  const double a11 = s[0][0] * s[2][2] - s[0][2] * s[2][0];
  const double a12 = s[0][2] * s[1][0] - s[0][0] * s[1][2];
  const double a21 = s[0][1] * s[2][0] - s[0][0] * s[2][1];
  const double a22 = s[0][0] * s[1][1] - s[0][1] * s[1][0];
  return {(c00 * b.x + a01 * b.y + a02 * b.z) * inv_det,
          (c01 * b.x + a11 * b.y + a12 * b.z) * inv_det,
          (c02 * b.x + a21 * b.y + a22 * b.z) * inv_det};
}

// One wheel's spring compression (m) and its rate (m/s) from the suspension coordinates:
// s = s_static + J q with J = (-1, x, -y) for q = (heave, pitch, roll).
struct Spring {
  double compression_m;
  double rate_mps;
};
inline Spring SpringAt(const FourWheelParams& p, int i, double heave, double pitch, double roll,
                       double heave_rate, double pitch_rate, double roll_rate) {
  const double x = p.wheel_x_m[i];
  const double y = p.wheel_y_m[i];
  return {p.static_compression_m[i] - heave + x * pitch - y * roll,
          -heave_rate + x * pitch_rate - y * roll_rate};
}

// The spring's force at compression s, N (without the damper): linear up to the travel, then
// the bump stop.
inline double SpringForce(const FourWheelParams& p, double s) {
  return s <= p.travel_m ? p.stiffness_npm * s
                         : p.stiffness_npm * p.travel_m + p.bump_stiffness_npm * (s - p.travel_m);
}

// Spring plus damper, or 0 when the spring is fully extended (the wheel is off the ground) or
// the damper would pull the wheel down.
inline double WheelLoad(const FourWheelParams& p, const Spring& spring) {
  if (spring.compression_m <= 0.0) return 0.0;
  return std::max(0.0, SpringForce(p, spring.compression_m) + p.damping_nspm * spring.rate_mps);
}

}  // namespace

absl::Status ResolveFourWheelSpec(double length_m, double width_m, FourWheelSpec& spec) {
  const double mass_kg = Fill(spec.mass_kg, kDefaultMass_kg);
  RETURN_IF_ERROR(CheckPositive(Field("mass_kg"), mass_kg, 1e5));
  const double yaw_inertia = Fill(spec.yaw_inertia_kgm2, kDefaultYawInertia_kgm2);
  RETURN_IF_ERROR(CheckPositive(Field("yaw_inertia_kgm2"), yaw_inertia, 1e7));
  RETURN_IF_ERROR(
      CheckPositive(Field("pitch_inertia_kgm2"), Fill(spec.pitch_inertia_kgm2, yaw_inertia), 1e7));
  RETURN_IF_ERROR(
      CheckPositive(Field("roll_inertia_kgm2"),
                    Fill(spec.roll_inertia_kgm2, kDefaultRollToYawInertia * yaw_inertia), 1e7));
  RETURN_IF_ERROR(
      CheckInRange(Field("cg_height_m"), Fill(spec.cg_height_m, kDefaultCgHeight_m), 0.0, 100.0));

  // Defaults that a small body cannot hold shrink to it (as the other models' do).
  const double wheelbase_m = Fill(spec.wheelbase_m, std::min(kDefaultWheelbase_m, length_m));
  RETURN_IF_ERROR(CheckInRange(Field("wheelbase_m"), wheelbase_m, kMinBodyDimension_m, length_m));
  const double cg_to_front_m =
      Fill(spec.cg_to_front_axle_m, kDefaultCgToFrontFraction * wheelbase_m);
  RETURN_IF_ERROR(CheckOpenPositive("cg_to_front_axle_m", cg_to_front_m, wheelbase_m));
  const double front_track_m = Fill(spec.front_track_m, std::min(kDefaultTrack_m, width_m));
  RETURN_IF_ERROR(
      CheckInRange(Field("front_track_m"), front_track_m, kMinBodyDimension_m, width_m));
  RETURN_IF_ERROR(CheckInRange(Field("rear_track_m"),
                               Fill(spec.rear_track_m, std::min(kDefaultTrack_m, width_m)),
                               kMinBodyDimension_m, width_m));
  const double overhang_m = length_m - wheelbase_m;
  RETURN_IF_ERROR(CheckInRange(Field("rear_overhang_m"),
                               Fill(spec.rear_overhang_m, 0.5 * overhang_m), 0.0, overhang_m));

  const double stiffness = Fill(spec.suspension_stiffness_npm, kDefaultStiffness_npm);
  RETURN_IF_ERROR(CheckPositive(Field("suspension_stiffness_npm"), stiffness, 1e8));
  RETURN_IF_ERROR(CheckInRange(Field("suspension_damping_nspm"),
                               Fill(spec.suspension_damping_nspm, kDefaultDamping_nspm), 0.0, 1e7));
  const double rest_length_m = Fill(spec.suspension_rest_length_m, kDefaultRestLength_m);
  RETURN_IF_ERROR(CheckPositive(Field("suspension_rest_length_m"), rest_length_m, 10.0));
  const double travel_m = Fill(spec.suspension_travel_m, kDefaultTravel_m);
  RETURN_IF_ERROR(CheckPositive(Field("suspension_travel_m"), travel_m, rest_length_m));
  // At rest the body must float on its springs, not sit on the bump stops.
  const StaticLoads loads = StaticWheelLoads(mass_kg, wheelbase_m, cg_to_front_m);
  const double static_compression_m = std::max(loads.front_n, loads.rear_n) / stiffness;
  if (!(travel_m > static_compression_m)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Field("suspension_travel_m"), ": must exceed the largest static compression ",
        static_compression_m, " m (static wheel load / suspension_stiffness_npm), got ", travel_m));
  }

  RETURN_IF_ERROR(CheckPositive(Field("lateral_friction_c1"),
                                Fill(spec.lateral_friction_c1, kDefaultC1), 10.0));
  RETURN_IF_ERROR(
      CheckPositive(Field("lateral_friction_c2"), Fill(spec.lateral_friction_c2, kDefaultC2), 2.0));
  RETURN_IF_ERROR(CheckPositive(Field("lateral_friction_c3_spm"),
                                Fill(spec.lateral_friction_c3_spm, kDefaultC3_spm), 1000.0));
  RETURN_IF_ERROR(CheckPositive(
      Field("lateral_slip_reference_speed_mps"),
      Fill(spec.lateral_slip_reference_speed_mps, kDefaultSlipReferenceSpeed_mps), 1000.0));
  RETURN_IF_ERROR(CheckPositive(Field("longitudinal_friction"),
                                Fill(spec.longitudinal_friction, kDefaultLongitudinalFriction),
                                10.0));

  const double min_turn_radius_m = Fill(spec.min_turn_radius_m, kDefaultMinTurnRadius_m);
  RETURN_IF_ERROR(CheckPositive(Field("min_turn_radius_m"), min_turn_radius_m, 1e4));
  // Beyond this the inner wheel would steer past 90 degrees at full lock.
  if (!(min_turn_radius_m > 0.5 * front_track_m)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Field("min_turn_radius_m"), ": must exceed front_track_m / 2 = ", 0.5 * front_track_m,
        ", got ", min_turn_radius_m));
  }
  // The body pitches and rolls by small angles on its springs; tipping over is not modelled.
  // So the tyres must slide before a wheel pair would lift for good: the lateral grip c1 m g at
  // height h tips the car when c1 h > T / 2 (narrower track), the longitudinal grip mu_x m g
  // when mu_x h exceeds the centre of gravity's distance to an axle.
  const double cg_height_m = *spec.cg_height_m;
  const double tip_lateral_m =
      0.5 * std::min(front_track_m, *spec.rear_track_m) / *spec.lateral_friction_c1;
  const double tip_longitudinal_m =
      std::min(cg_to_front_m, wheelbase_m - cg_to_front_m) / *spec.longitudinal_friction;
  const double tip_height_m = std::min(tip_lateral_m, tip_longitudinal_m);
  if (!(cg_height_m < tip_height_m)) {
    return absl::InvalidArgumentError(absl::StrCat(
        Field("cg_height_m"), ": must be below ", tip_height_m,
        " m (min(min(front_track_m, rear_track_m) / (2 lateral_friction_c1), "
        "min(cg_to_front_axle_m, wheelbase_m - cg_to_front_axle_m) / longitudinal_friction): "
        "the tyres must slide before the car would tip, which is not modelled), got ",
        cg_height_m));
  }
  if (!spec.front_wheel_drive.has_value()) spec.front_wheel_drive = true;
  if (!spec.rear_wheel_drive.has_value()) spec.rear_wheel_drive = false;
  if (!*spec.front_wheel_drive && !*spec.rear_wheel_drive) {
    return absl::InvalidArgumentError(
        absl::StrCat(Field("front_wheel_drive"),
                     ": at least one of front_wheel_drive and rear_wheel_drive must be true"));
  }
  return absl::OkStatus();
}

VehicleLimits DefaultFourWheelLimits(const FourWheelSpec& resolved) {
  VehicleLimits limits;
  limits.max_steering_angle_rad =
      std::min(Atan(*resolved.wheelbase_m / *resolved.min_turn_radius_m), kSteeringLimitBound_rad);
  return limits;
}

FourWheelParams MakeFourWheelParams(const FourWheelSpec& resolved, const VehicleLimits& limits,
                                    double dt_s) {
  FourWheelParams p;
  p.limits = limits;
  p.mass_kg = *resolved.mass_kg;
  p.yaw_inertia_kgm2 = *resolved.yaw_inertia_kgm2;
  p.pitch_inertia_kgm2 = *resolved.pitch_inertia_kgm2;
  p.roll_inertia_kgm2 = *resolved.roll_inertia_kgm2;
  p.cg_height_m = *resolved.cg_height_m;
  p.wheelbase_m = *resolved.wheelbase_m;
  p.front_track_m = *resolved.front_track_m;
  const double a = *resolved.cg_to_front_axle_m;
  const double b = p.wheelbase_m - a;
  const double half_front = 0.5 * p.front_track_m;
  const double half_rear = 0.5 * *resolved.rear_track_m;
  p.wheel_x_m = {a, a, -b, -b};
  p.wheel_y_m = {half_front, -half_front, half_rear, -half_rear};
  p.stiffness_npm = *resolved.suspension_stiffness_npm;
  p.damping_nspm = *resolved.suspension_damping_nspm;
  p.bump_stiffness_npm = kBumpStopStiffnessRatio * p.stiffness_npm;
  p.travel_m = *resolved.suspension_travel_m;
  const StaticLoads loads = StaticWheelLoads(p.mass_kg, p.wheelbase_m, a);
  const double front_s = loads.front_n / p.stiffness_npm;
  const double rear_s = loads.rear_n / p.stiffness_npm;
  p.static_compression_m = {front_s, front_s, rear_s, rear_s};
  p.c1 = *resolved.lateral_friction_c1;
  p.c2 = *resolved.lateral_friction_c2;
  p.c3_spm = *resolved.lateral_friction_c3_spm;
  p.slip_reference_speed_mps = *resolved.lateral_slip_reference_speed_mps;
  p.longitudinal_friction = *resolved.longitudinal_friction;
  p.front_drive = *resolved.front_wheel_drive;
  p.rear_drive = *resolved.rear_wheel_drive;

  p.dt_s = dt_s;
  p.substeps = std::max(kMinSubsteps, static_cast<int>(std::ceil(dt_s / kMaxSubstep_s - 1e-9)));
  p.substep_s = dt_s / p.substeps;

  // K = k sum_i J_i^T J_i with J_i = (-1, x_i, -y_i); the heave-roll (sum y) and pitch-roll
  // (sum x y) entries vanish because the wheels come in left-right pairs.
  double sum_x = 0.0, sum_xx = 0.0, sum_yy = 0.0;
  for (int i = 0; i < 4; ++i) {
    sum_x += p.wheel_x_m[i];
    sum_xx += p.wheel_x_m[i] * p.wheel_x_m[i];
    sum_yy += p.wheel_y_m[i] * p.wheel_y_m[i];
  }
  const double k = p.stiffness_npm;
  p.k_zz = 4.0 * k;
  p.k_zp = -k * sum_x;
  p.k_pp = k * sum_xx;
  p.k_rr = k * sum_yy;
  // S = M + h C + h^2 K = M + (h c + h^2 k) sum_i J_i^T J_i.
  const double h = p.substep_s;
  const double w = h * p.damping_nspm + h * h * k;
  const double s_zz = p.mass_kg + 4.0 * w;
  const double s_zp = -w * sum_x;
  const double s_pp = p.pitch_inertia_kgm2 + w * sum_xx;
  const double s_rr = p.roll_inertia_kgm2 + w * sum_yy;
  const double det = s_zz * s_pp - s_zp * s_zp;
  p.s_inv_zz = s_pp / det;
  p.s_inv_zp = -s_zp / det;
  p.s_inv_pp = s_zz / det;
  p.s_inv_rr = 1.0 / s_rr;
  return p;
}

FourWheelInput MakeFourWheelInput(const FourWheelParams& params, double acceleration_mps2,
                                  double steering_angle_rad) {
  const VehicleLimits& limits = params.limits;
  const double max_accel = std::max(limits.max_acceleration_mps2, limits.max_braking_mps2);
  const double steer =
      std::clamp(steering_angle_rad, -limits.max_steering_angle_rad, limits.max_steering_angle_rad);
  const FrontWheelTrig trig = AckermannTrig(params.wheelbase_m, params.front_track_m, steer);
  return FourWheelInput{
      .acceleration_mps2 = std::clamp(acceleration_mps2, -max_accel, max_accel),
      .steering_angle_rad = steer,
      .cos_front_left = trig.cos_left,
      .sin_front_left = trig.sin_left,
      .cos_front_right = trig.cos_right,
      .sin_front_right = trig.sin_right,
  };
}

FourWheelState MakeFourWheelState(const FourWheelParams& /*params*/, const Pose2& pose,
                                  double speed_mps) {
  FourWheelState state;
  state.pose = {.x_m = pose.x_m, .y_m = pose.y_m, .yaw_rad = WrapToPi(pose.yaw_rad)};
  state.speed_mps = speed_mps;
  return state;
}

namespace {

// Each wheel's direction in the body frame (front left, front right, rear left, rear right),
// and the rows that map the body's planar velocity (vx, vy, r) onto the wheel's own:
//   v_lon = c vx + s vy + lon_r r,   v_lat = -s vx + c vy + lat_r r.
struct WheelFrames {
  double cos[4];
  double sin[4];
  double lon_r[4];  // x s - y c, m.
  double lat_r[4];  // x c + y s, m.
};

// Steering: the wheels turn towards the command by at most rate * dt, then hold.
WheelFrames SteerWheels(const FourWheelParams& p, const FourWheelInput& input, double dt_s,
                        double& steering_rad) {
  FrontWheelTrig trig;
  if (TurnWheelsTowards(input.steering_angle_rad, p.limits.max_steering_rate_radps * dt_s,
                        steering_rad)) {
    trig = {input.cos_front_left, input.sin_front_left, input.cos_front_right,
            input.sin_front_right};
  } else {
    trig = AckermannTrig(p.wheelbase_m, p.front_track_m, steering_rad);
  }
  WheelFrames frames = {.cos = {trig.cos_left, trig.cos_right, 1.0, 1.0},
                        .sin = {trig.sin_left, trig.sin_right, 0.0, 0.0}};
  for (int i = 0; i < 4; ++i) {
    frames.lon_r[i] = p.wheel_x_m[i] * frames.sin[i] - p.wheel_y_m[i] * frames.cos[i];
    frames.lat_r[i] = p.wheel_x_m[i] * frames.cos[i] + p.wheel_y_m[i] * frames.sin[i];
  }
  return frames;
}

// What the longitudinal command asks of the wheels for the whole tick.
struct DriveOrBrake {
  bool braking;
  double direction;         // Of the motion when braking: +1 or -1.
  double brake_decel_mps2;  // The brakes' deceleration when braking, else 0.
  double force_n;           // The brake force's magnitude, or the signed drive force, N.
  bool carries[4];          // The wheels that carry it.
};

// Drive or brake for the whole tick, from the sign of the speed at its start (the kinematic
// bicycle's rule): a command opposing the motion brakes all four wheels, up to max_braking;
// otherwise it drives the driven wheels, up to max_acceleration, and not past a speed limit.
// At rest every command drives.
DriveOrBrake CommandDriveOrBrake(const FourWheelParams& p, double command_mps2, double speed0) {
  const VehicleLimits& limits = p.limits;
  const double m = p.mass_kg;
  DriveOrBrake out;
  out.braking = speed0 * command_mps2 < 0.0;
  out.direction = speed0 > 0.0 ? 1.0 : -1.0;
  out.brake_decel_mps2 = 0.0;
  if (out.braking) {
    out.brake_decel_mps2 = std::min(std::abs(command_mps2), limits.max_braking_mps2);
    out.force_n = m * out.brake_decel_mps2;
  } else {
    const double a =
        std::clamp(command_mps2, -limits.max_acceleration_mps2, limits.max_acceleration_mps2);
    const bool at_limit = (a > 0.0 && speed0 >= limits.max_speed_mps) ||
                          (a < 0.0 && speed0 <= -limits.max_reverse_speed_mps);
    out.force_n = at_limit ? 0.0 : m * a;
  }
  for (int i = 0; i < 4; ++i)
    out.carries[i] = out.braking || (i < 2 ? p.front_drive : p.rear_drive);
  return out;
}

// The lateral friction curve per wheel and per newton of load, once per tick at its start.
struct LateralCurve {
  // The secant coefficient of F_lat = -load c1 sin(c2 atan(c3 sigma v_lat)) = -load
  // unit_damping v_lat, sigma = v_ref / max(|v_lon|, v_ref), s/m.
  double unit_damping[4];
  // The share of the lateral grip it uses, (F_lat / (c1 load))^2, for the friction ellipse.
  double use_sq[4];
};

// Its transcendental functions are most of the cost, so the substeps only scale it by the
// current load. In the curve's linear part (|arg| << 1) the coefficient does not depend on the
// slip, so holding it for a tick is exact there.
LateralCurve LateralCurveAt(const FourWheelParams& p, const WheelFrames& w, double vx, double vy,
                            double r) {
  LateralCurve curve;
  for (int i = 0; i < 4; ++i) {
    const double c = w.cos[i], s = w.sin[i];
    const double v_lon = c * vx + s * vy + w.lon_r[i] * r;
    const double v_lat = -s * vx + c * vy + w.lat_r[i] * r;
    const double sigma =
        p.slip_reference_speed_mps / std::max(std::abs(v_lon), p.slip_reference_speed_mps);
    const double arg = p.c3_spm * sigma * v_lat;
    double sin_curve, cos_curve;
    SinCos(p.c2 * AtanFast(arg), &sin_curve, &cos_curve);
    const double slope = std::abs(arg) > kSmallSlipArgument ? sin_curve / arg : p.c2;
    curve.unit_damping[i] = p.c1 * p.c3_spm * sigma * slope;
    curve.use_sq[i] = sin_curve * sin_curve;
  }
  return curve;
}

// What the substeps advance: the body's pose, planar velocity and suspension.
struct Motion {
  double x, y, yaw, cos_yaw, sin_yaw;                            // m, m, rad.
  double vx, vy, r;                                              // m/s, m/s, rad/s.
  double heave, pitch, roll, heave_rate, pitch_rate, roll_rate;  // m, rad, rad and rates.
  double dissipated;                                             // J.
};

// Wheel loads from the suspension at the start of a substep.
struct WheelLoads {
  double load_n[4];
  Spring spring[4];
  bool linear;         // Every spring loaded and within its travel.
  double long_load_n;  // Carried by the wheels that take the longitudinal force.
};

WheelLoads LoadWheels(const FourWheelParams& p, const DriveOrBrake& command, const Motion& s) {
  WheelLoads loads;
  loads.linear = true;
  loads.long_load_n = 0.0;
  for (int i = 0; i < 4; ++i) {
    loads.spring[i] =
        SpringAt(p, i, s.heave, s.pitch, s.roll, s.heave_rate, s.pitch_rate, s.roll_rate);
    loads.load_n[i] = WheelLoad(p, loads.spring[i]);
    loads.linear =
        loads.linear && loads.load_n[i] > 0.0 && loads.spring[i].compression_m <= p.travel_m;
    loads.long_load_n += command.carries[i] ? loads.load_n[i] : 0.0;
  }
  return loads;
}

// The tyres' and brakes' action on (vx, vy, r) over a substep: a generalised damping A
// (symmetric, positive semi-definite) and the drive's generalised force f.
struct TyreForces {
  double a00, a01, a02, a11, a12, a22;
  double f0, f1, f2;
};

// The longitudinal force is shared by load, so every wheel that carries it uses the same
// fraction of its longitudinal grip.
TyreForces TyreForcesOf(const FourWheelParams& p, const WheelFrames& w, const LateralCurve& curve,
                        const DriveOrBrake& command, const WheelLoads& loads, const Motion& s) {
  const double h = p.substep_s;
  const double per_load =
      loads.long_load_n > 0.0 ? command.force_n / loads.long_load_n : 0.0;  // N per N.
  const double long_use = std::abs(per_load) / p.longitudinal_friction;
  TyreForces t = {};
  for (int i = 0; i < 4; ++i) {
    const double c = w.cos[i], sn = w.sin[i];
    // Friction ellipse: (F_lon / (mu_x load))^2 + (F_lat / (c1 load))^2 <= 1, both scaled
    // down together when exceeded.
    const double use_lon = command.carries[i] ? long_use : 0.0;
    const double use_sq = use_lon * use_lon + curve.use_sq[i];
    const double scale = use_sq > 1.0 ? 1.0 / std::sqrt(use_sq) : 1.0;
    const double lateral_damping = scale * curve.unit_damping[i] * loads.load_n[i];
    const double lat[3] = {-sn, c, w.lat_r[i]};
    t.a00 += lateral_damping * lat[0] * lat[0];
    t.a01 += lateral_damping * lat[0] * lat[1];
    t.a02 += lateral_damping * lat[0] * lat[2];
    t.a11 += lateral_damping * lat[1] * lat[1];
    t.a12 += lateral_damping * lat[1] * lat[2];
    t.a22 += lateral_damping * lat[2] * lat[2];
    if (!command.carries[i]) continue;
    const double share = scale * per_load * loads.load_n[i];  // Of the drive or brake force, N.
    const double lon[3] = {c, sn, w.lon_r[i]};
    if (command.braking) {
      // The brake opposes the wheel's own longitudinal velocity, as a damper whose
      // coefficient is the brake force over the speed expected at the end of the substep,
      // |v_lon| - h a_brake (the secant through the end point: exact for straight-line
      // braking; held finite near a stop by kBrakeHoldSpeed_mps). A damper never does
      // positive work and never pushes the wheel through zero.
      const double v_lon = c * s.vx + sn * s.vy + w.lon_r[i] * s.r;
      const double brake_damping =
          share /
          std::max(std::abs(v_lon) - h * scale * command.brake_decel_mps2, kBrakeHoldSpeed_mps);
      t.a00 += brake_damping * lon[0] * lon[0];
      t.a01 += brake_damping * lon[0] * lon[1];
      t.a02 += brake_damping * lon[0] * lon[2];
      t.a11 += brake_damping * lon[1] * lon[1];
      t.a12 += brake_damping * lon[1] * lon[2];
      t.a22 += brake_damping * lon[2] * lon[2];
    } else {
      t.f0 += share * lon[0];
      t.f1 += share * lon[1];
      t.f2 += share * lon[2];
    }
  }
  return t;
}

// Total ground force on the body (tyres and brakes) over a substep, N: it drives pitch and roll.
struct GroundForce {
  double x_n, y_n;
};

// Planar velocities, linearly implicit Euler: (M + h A + h G) q' = M q + h f, with
// G = m r [[0, -1, 0], [1, 0, 0], [0, 0, 0]] the body frame's rotation (r frozen). A is positive
// semi-definite and G skew, so without drive the kinetic energy cannot rise. Brakes that stop
// the car within this substep (its whole planar motion below what they remove in one:
// sqrt(vx^2 + vy^2 + (I / m) r^2) <= h a_brake) leave it at exactly rest, where they hold it for
// the rest of the tick; braking never carries vx through zero; the speed limits hold. Each only
// lowers the kinetic energy: what it removes counts as dissipated, as does h q^T A q >= 0.
GroundForce AdvancePlanarVelocities(const FourWheelParams& p, const DriveOrBrake& command,
                                    const TyreForces& t, Motion& s) {
  const VehicleLimits& limits = p.limits;
  const double m = p.mass_kg;
  const double inertia = p.yaw_inertia_kgm2;
  const double h = p.substep_s;
  const double stop_speed = h * command.brake_decel_mps2;
  const bool stops = command.braking &&
                     s.vx * s.vx + s.vy * s.vy + inertia / m * s.r * s.r <= stop_speed * stop_speed;

  const double mr = m * s.r;
  const double matrix[3][3] = {{m + h * t.a00, h * (t.a01 - mr), h * t.a02},
                               {h * (t.a01 + mr), m + h * t.a11, h * t.a12},
                               {h * t.a02, h * t.a12, inertia + h * t.a22}};
  const Vec3 q =
      Solve3(matrix, {m * s.vx + h * t.f0, m * s.vy + h * t.f1, inertia * s.r + h * t.f2});
  const double a_q0 = t.a00 * q.x + t.a01 * q.y + t.a02 * q.z;
  const double a_q1 = t.a01 * q.x + t.a11 * q.y + t.a12 * q.z;
  const double a_q2 = t.a02 * q.x + t.a12 * q.y + t.a22 * q.z;
  s.dissipated += h * (q.x * a_q0 + q.y * a_q1 + q.z * a_q2);

  if (stops) {
    s.vx = s.vy = s.r = 0.0;
  } else {
    s.vx = q.x;
    if (command.braking && command.direction * s.vx < 0.0) s.vx = 0.0;
    s.vx = std::clamp(s.vx, -limits.max_reverse_speed_mps, limits.max_speed_mps);
    s.vy = q.y;
    s.r = q.z;
  }
  s.dissipated += 0.5 * m * (q.x * q.x - s.vx * s.vx + q.y * q.y - s.vy * s.vy) +
                  0.5 * inertia * (q.z * q.z - s.r * s.r);
  return {t.f0 - a_q0, t.f1 - a_q1};
}

// Suspension, implicit Euler on (heave, pitch, roll): springs and dampers at the loads'
// start-of-substep activity, gravity, and the ground forces' moment about the centre of
// gravity: -h F_x about the pitch axis (nose down), +h F_y about the roll axis (left side up).
void AdvanceSuspension(const FourWheelParams& p, const WheelLoads& loads, const GroundForce& ground,
                       Motion& s) {
  const double m = p.mass_kg;
  const double h = p.substep_s;
  const double pitch_moment = -p.cg_height_m * ground.x_n;
  const double roll_moment = p.cg_height_m * ground.y_n;
  if (loads.linear) {
    // (M + h C + h^2 K) qdot' = M qdot + h (-K q + Q): the static loads balance gravity.
    const double rz = m * s.heave_rate - h * (p.k_zz * s.heave + p.k_zp * s.pitch);
    const double rp = p.pitch_inertia_kgm2 * s.pitch_rate +
                      h * (pitch_moment - p.k_zp * s.heave - p.k_pp * s.pitch);
    const double rr = p.roll_inertia_kgm2 * s.roll_rate + h * (roll_moment - p.k_rr * s.roll);
    s.heave_rate = p.s_inv_zz * rz + p.s_inv_zp * rp;
    s.pitch_rate = p.s_inv_zp * rz + p.s_inv_pp * rp;
    s.roll_rate = p.s_inv_rr * rr;
  } else {
    // A wheel off the ground (or pulled by its damper) carries nothing; one past its travel
    // is on the bump stop. Each loaded wheel: F = F0 + (h k_i + c) J qdot', F0 its spring
    // force now.
    double m3[3][3] = {
        {m, 0.0, 0.0}, {0.0, p.pitch_inertia_kgm2, 0.0}, {0.0, 0.0, p.roll_inertia_kgm2}};
    double rhs[3] = {m * s.heave_rate - h * m * kGravity_mps2,
                     p.pitch_inertia_kgm2 * s.pitch_rate + h * pitch_moment,
                     p.roll_inertia_kgm2 * s.roll_rate + h * roll_moment};
    for (int i = 0; i < 4; ++i) {
      if (loads.load_n[i] <= 0.0) continue;
      const Spring& spring = loads.spring[i];
      const double k_i =
          spring.compression_m <= p.travel_m ? p.stiffness_npm : p.bump_stiffness_npm;
      const double w = h * (h * k_i + p.damping_nspm);
      const double j[3] = {-1.0, p.wheel_x_m[i], -p.wheel_y_m[i]};
      const double f_spring = SpringForce(p, spring.compression_m);
      for (int row = 0; row < 3; ++row) {
        rhs[row] -= h * f_spring * j[row];
        for (int col = 0; col < 3; ++col) m3[row][col] += w * j[row] * j[col];
      }
    }
    const Vec3 rates = Solve3(m3, {rhs[0], rhs[1], rhs[2]});
    s.heave_rate = rates.x;
    s.pitch_rate = rates.y;
    s.roll_rate = rates.z;
  }
  s.heave += h * s.heave_rate;
  s.pitch += h * s.pitch_rate;
  s.roll += h * s.roll_rate;
}

// Pose, with the new velocities and heading (semi-implicit Euler). The heading's cos and sin
// are turned by the substep's angle rather than recomputed.
void AdvancePose(double h, Motion& s) {
  const double turn = h * s.r;
  s.yaw += turn;
  const TurnTrig rotation = TurnTrigOf(turn);
  const double cos_next = s.cos_yaw * rotation.cos - s.sin_yaw * rotation.sin;
  s.sin_yaw = s.sin_yaw * rotation.cos + s.cos_yaw * rotation.sin;
  s.cos_yaw = cos_next;
  s.x += h * (s.cos_yaw * s.vx - s.sin_yaw * s.vy);
  s.y += h * (s.sin_yaw * s.vx + s.cos_yaw * s.vy);
}

}  // namespace

void StepFourWheel(const FourWheelParams& p, const FourWheelInput& input, double dt_s,
                   FourWheelState& state) {
  ABSL_ASSERT(dt_s == p.dt_s);
  const double speed0 = state.speed_mps;

  // --- Once per tick: steering, the drive or brake command, the lateral friction curve. ---
  const WheelFrames wheels = SteerWheels(p, input, dt_s, state.steering_rad);
  const DriveOrBrake command = CommandDriveOrBrake(p, input.acceleration_mps2, speed0);
  const LateralCurve curve =
      LateralCurveAt(p, wheels, state.speed_mps, state.lateral_speed_mps, state.yaw_rate_radps);

  Motion s = {.x = state.pose.x_m,
              .y = state.pose.y_m,
              .yaw = state.pose.yaw_rad,
              .vx = state.speed_mps,
              .vy = state.lateral_speed_mps,
              .r = state.yaw_rate_radps,
              .heave = state.heave_m,
              .pitch = state.pitch_rad,
              .roll = state.roll_rad,
              .heave_rate = state.heave_rate_mps,
              .pitch_rate = state.pitch_rate_radps,
              .roll_rate = state.roll_rate_radps,
              .dissipated = state.dissipated_energy_j};
  SinCos(s.yaw, &s.sin_yaw, &s.cos_yaw);

  // --- Substeps: loads, tyre forces, planar velocities, suspension, pose. ---
  for (int substep = 0; substep < p.substeps; ++substep) {
    const WheelLoads loads = LoadWheels(p, command, s);
    const TyreForces tyres = TyreForcesOf(p, wheels, curve, command, loads, s);
    const GroundForce ground = AdvancePlanarVelocities(p, command, tyres, s);
    AdvanceSuspension(p, loads, ground, s);
    AdvancePose(p.substep_s, s);
  }

  state.pose = {.x_m = s.x, .y_m = s.y, .yaw_rad = WrapToPi(s.yaw)};
  state.speed_mps = s.vx;
  state.lateral_speed_mps = s.vy;
  state.yaw_rate_radps = s.r;
  state.heave_m = s.heave;
  state.pitch_rad = s.pitch;
  state.roll_rad = s.roll;
  state.heave_rate_mps = s.heave_rate;
  state.pitch_rate_radps = s.pitch_rate;
  state.roll_rate_radps = s.roll_rate;
  state.acceleration_mps2 = (s.vx - speed0) / dt_s;
  state.dissipated_energy_j = s.dissipated;
}

std::array<double, 4> FourWheelLoads(const FourWheelParams& params, const FourWheelState& state) {
  std::array<double, 4> loads;
  for (int i = 0; i < 4; ++i) {
    loads[i] = WheelLoad(
        params, SpringAt(params, i, state.heave_m, state.pitch_rad, state.roll_rad,
                         state.heave_rate_mps, state.pitch_rate_radps, state.roll_rate_radps));
  }
  return loads;
}

FourWheelSteerAngles FourWheelAckermann(const FourWheelParams& params, double steering_rad) {
  const double t = Tan(steering_rad);
  const double l = params.wheelbase_m;
  const double half_track = 0.5 * params.front_track_m;
  return {Atan2(l * t, l - half_track * t), Atan2(l * t, l + half_track * t)};
}

VehicleReadout ReadFourWheel(const FourWheelParams& params, const FourWheelInput& /*input*/,
                             const FourWheelState& state) {
  const double vx = state.speed_mps, vy = state.lateral_speed_mps, r = state.yaw_rate_radps;
  return VehicleReadout{
      .steering_angle_rad = state.steering_rad,
      .acceleration_mps2 = state.acceleration_mps2,
      .yaw_rate_radps = r,
      .lateral_speed_mps = vy,
      .kinetic_energy_j =
          0.5 * params.mass_kg * (vx * vx + vy * vy) + 0.5 * params.yaw_inertia_kgm2 * r * r,
      .dissipated_energy_j = state.dissipated_energy_j,
      .wheel_loads_n = FourWheelLoads(params, state),
  };
}

void HaltFourWheel(const FourWheelParams& params, FourWheelInput& input, FourWheelState& state) {
  input = MakeFourWheelInput(params, 0.0, 0.0);
  state.speed_mps = 0.0;
  state.lateral_speed_mps = 0.0;
  state.yaw_rate_radps = 0.0;
  state.heave_m = 0.0;
  state.pitch_rad = 0.0;
  state.roll_rad = 0.0;
  state.heave_rate_mps = 0.0;
  state.pitch_rate_radps = 0.0;
  state.roll_rate_radps = 0.0;
  state.acceleration_mps2 = 0.0;
}

double FourWheelBodyCenterOffset(const FourWheelSpec& resolved, double length_m) {
  const double cg_to_rear_axle_m = *resolved.wheelbase_m - *resolved.cg_to_front_axle_m;
  return 0.5 * length_m - *resolved.rear_overhang_m - cg_to_rear_axle_m;
}

}  // namespace pitlane::sim
