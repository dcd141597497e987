#include "server/sim/vehicles/single_track.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/status_matchers.h"

namespace pitlane::sim {
namespace {

using ::testing::DoubleNear;
using ::testing::StartsWith;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kBmwLength_m = 4.508;
constexpr double kBmwWidth_m = 1.610;

SingleTrackSpec Resolved(SingleTrackSpec spec = {}, double length_m = kBmwLength_m) {
  const absl::Status status = ResolveSingleTrackSpec(length_m, 1.8, spec);
  EXPECT_TRUE(status.ok()) << status;
  return spec;
}

SingleTrackParams Params(double dt_s, const SingleTrackSpec& resolved = Resolved()) {
  return MakeSingleTrackParams(resolved, DefaultSingleTrackLimits(resolved), dt_s);
}

double Wheelbase(const SingleTrackSpec& s) { return *s.cg_to_front_axle_m + *s.cg_to_rear_axle_m; }

bool Finite(const SingleTrackState& s) {
  return std::isfinite(s.pose.x_m) && std::isfinite(s.pose.y_m) && std::isfinite(s.pose.yaw_rad) &&
         std::isfinite(s.speed_mps) && std::isfinite(s.steering_rad) &&
         std::isfinite(s.yaw_rate_radps) && std::isfinite(s.slip_angle_rad) &&
         std::isfinite(s.acceleration_mps2) && std::isfinite(s.dissipated_energy_j);
}

// Circumcentre and radius of three points.
struct Circle {
  double x, y, radius;
};
Circle Circumcircle(double ax, double ay, double bx, double by, double cx, double cy) {
  const double d = 2 * (ax * (by - cy) + bx * (cy - ay) + cx * (ay - by));
  const double ux = ((ax * ax + ay * ay) * (by - cy) + (bx * bx + by * by) * (cy - ay) +
                     (cx * cx + cy * cy) * (ay - by)) /
                    d;
  const double uy = ((ax * ax + ay * ay) * (cx - bx) + (bx * bx + by * by) * (ax - cx) +
                     (cx * cx + cy * cy) * (bx - ax)) /
                    d;
  return {ux, uy, std::hypot(ax - ux, ay - uy)};
}

// ---------------------------------------------------------------------------------------
// The oracle: CommonRoad's ST right-hand side, written here straight from the equations of
// the reference notes (vehicle_dynamics_st, |v| >= 0.1 branch), independent of the model's
// code. State (x, y, psi, v, r, beta); delta and a are given functions of time. g is the
// model's kGravity_mps2 (CommonRoad uses 9.81; the model documents the difference).
struct OracleCar {
  double m, inertia, lf, lr, h, mu, csf, csr;
  explicit OracleCar(const SingleTrackSpec& s)
      : m(*s.mass_kg),
        inertia(*s.yaw_inertia_kgm2),
        lf(*s.cg_to_front_axle_m),
        lr(*s.cg_to_rear_axle_m),
        h(*s.cg_height_m),
        mu(*s.friction_coefficient),
        csf(*s.front_cornering_stiffness_1prad),
        csr(*s.rear_cornering_stiffness_1prad) {}
};

struct OracleState {
  double x, y, psi, v, r, beta;
};

OracleState StRhs(const OracleCar& p, const OracleState& s, double delta, double a) {
  const double g = kGravity_mps2;
  const double l = p.lf + p.lr;
  const double front = g * p.lr - a * p.h;
  const double rear = g * p.lf + a * p.h;
  OracleState f;
  f.x = s.v * std::cos(s.psi + s.beta);
  f.y = s.v * std::sin(s.psi + s.beta);
  f.psi = s.r;
  f.v = a;
  f.r = -p.mu * p.m / (s.v * p.inertia * l) *
            (p.lf * p.lf * p.csf * front + p.lr * p.lr * p.csr * rear) * s.r +
        p.mu * p.m / (p.inertia * l) * (p.lr * p.csr * rear - p.lf * p.csf * front) * s.beta +
        p.mu * p.m / (p.inertia * l) * p.lf * p.csf * front * delta;
  f.beta = (p.mu / (s.v * s.v * l) * (p.csr * rear * p.lr - p.csf * front * p.lf) - 1) * s.r -
           p.mu / (s.v * l) * (p.csr * rear + p.csf * front) * s.beta +
           p.mu / (s.v * l) * p.csf * front * delta;
  return f;
}

OracleState Axpy(const OracleState& s, const OracleState& k, double h) {
  return {s.x + h * k.x, s.y + h * k.y, s.psi + h * k.psi,
          s.v + h * k.v, s.r + h * k.r, s.beta + h * k.beta};
}

// RK4 at step h from `start` for n steps; returns the state after every step (index 0 =
// start).
std::vector<OracleState> IntegrateOracle(const OracleCar& car, OracleState start,
                                         const std::function<double(double)>& delta, double a,
                                         double h, int n) {
  std::vector<OracleState> out = {start};
  OracleState s = start;
  for (int k = 0; k < n; ++k) {
    const double t = k * h;
    const OracleState k1 = StRhs(car, s, delta(t), a);
    const OracleState k2 = StRhs(car, Axpy(s, k1, h / 2), delta(t + h / 2), a);
    const OracleState k3 = StRhs(car, Axpy(s, k2, h / 2), delta(t + h / 2), a);
    const OracleState k4 = StRhs(car, Axpy(s, k3, h), delta(t + h), a);
    OracleState sum = Axpy(Axpy(Axpy(k1, k2, 2.0), k3, 2.0), k4, 1.0);
    s = Axpy(s, sum, h / 6);
    out.push_back(s);
  }
  return out;
}

// The linear steady state (r, beta) of the ST equations at (v > 0, a, delta), solved from
// the oracle's right-hand side (linear in (r, beta)).
struct Lateral {
  double r, beta;
};
Lateral OracleSteadyState(const OracleCar& car, double v, double a, double delta) {
  const auto rhs = [&](double r, double beta, double d) {
    const OracleState f = StRhs(car, {0, 0, 0, v, r, beta}, d, a);
    return Lateral{f.r, f.beta};
  };
  const Lateral f0 = rhs(0, 0, delta);
  const Lateral col_r = rhs(1, 0, 0);
  const Lateral col_b = rhs(0, 1, 0);
  const double det = col_r.r * col_b.beta - col_b.r * col_r.beta;
  return {(-f0.r * col_b.beta + col_b.r * f0.beta) / det,
          (-col_r.r * f0.beta + col_r.beta * f0.r) / det};
}

// ---------------------------------------------------------------------------------------
// Presets and validation.

struct PresetCase {
  SingleTrackPreset preset;
  // The table of the reference notes (section 6), rounded as printed there.
  double m, iz, lf, lr, hs, steer_max, v_min, v_max, v_switch, length, width;
};

void PrintTo(const PresetCase& c, std::ostream* os) {
  *os << "preset " << static_cast<int>(c.preset);
}

class Presets : public ::testing::TestWithParam<PresetCase> {};
INSTANTIATE_TEST_SUITE_P(
    SingleTrack, Presets,
    ::testing::Values(PresetCase{SingleTrackPreset::kFordEscort, 1225.89, 1538.85, 0.88392, 1.50876,
                                 0.59436, 0.910, -13.9, 45.8, 4.755, 4.298, 1.674},
                      PresetCase{SingleTrackPreset::kBmw320i, 1093.30, 1791.60, 1.15620, 1.42272,
                                 0.61373, 1.066, -13.6, 50.8, 7.319, 4.508, 1.610},
                      PresetCase{SingleTrackPreset::kVwVanagon, 1478.90, 2473.12, 1.15079, 1.32114,
                                 0.80449, 1.023, -11.2, 41.7, 7.824, 4.569, 1.844}));

TEST_P(Presets, MatchCommonRoadsParameterSets) {
  const PresetCase c = GetParam();
  SingleTrackSpec spec;
  spec.preset = c.preset;
  spec = Resolved(spec, 5.0);
  // Half a unit of the table's last printed digit.
  EXPECT_THAT(*spec.mass_kg, DoubleNear(c.m, 0.005));
  EXPECT_THAT(*spec.yaw_inertia_kgm2, DoubleNear(c.iz, 0.005));
  EXPECT_THAT(*spec.cg_to_front_axle_m, DoubleNear(c.lf, 5e-6));
  EXPECT_THAT(*spec.cg_to_rear_axle_m, DoubleNear(c.lr, 5e-6));
  EXPECT_THAT(*spec.cg_height_m, DoubleNear(c.hs, 5e-6));
  EXPECT_EQ(*spec.friction_coefficient, 1.0489);
  EXPECT_THAT(*spec.front_cornering_stiffness_1prad, DoubleNear(20.898, 5e-4));
  EXPECT_EQ(*spec.rear_cornering_stiffness_1prad, *spec.front_cornering_stiffness_1prad);
  EXPECT_EQ(*spec.switching_speed_mps, c.v_switch);
  const VehicleLimits limits = DefaultSingleTrackLimits(spec);
  EXPECT_EQ(limits.max_steering_angle_rad, c.steer_max);
  EXPECT_EQ(limits.max_steering_rate_radps, 0.4);
  EXPECT_EQ(limits.max_acceleration_mps2, 11.5);
  EXPECT_EQ(limits.max_braking_mps2, 11.5);
  EXPECT_EQ(limits.max_speed_mps, c.v_max);
  EXPECT_EQ(limits.max_reverse_speed_mps, -c.v_min);
  const SingleTrackBodySize body = SingleTrackPresetBodySize(c.preset);
  EXPECT_EQ(body.length_m, c.length);
  EXPECT_EQ(body.width_m, c.width);
}

TEST(SingleTrack, DefaultPresetIsTheBmwAndOverridesAreKept) {
  SingleTrackSpec spec;
  EXPECT_EQ(spec.preset, SingleTrackPreset::kBmw320i);
  spec.mass_kg = 1500.0;
  spec.rear_cornering_stiffness_1prad = 25.0;
  spec = Resolved(spec);
  EXPECT_EQ(*spec.mass_kg, 1500.0);
  EXPECT_EQ(*spec.rear_cornering_stiffness_1prad, 25.0);
  EXPECT_THAT(*spec.yaw_inertia_kgm2, DoubleNear(1791.60, 0.005));  // From the preset.
  // The wheelbase is centred in the body by default.
  EXPECT_THAT(*spec.rear_overhang_m, DoubleNear((kBmwLength_m - Wheelbase(spec)) / 2, 1e-15));
}

struct BadSpec {
  std::string field;
  std::function<void(SingleTrackSpec&)> corrupt;
};

void PrintTo(const BadSpec& b, std::ostream* os) { *os << b.field; }

class ResolveSingleTrackSpecRejects : public ::testing::TestWithParam<BadSpec> {};

TEST_P(ResolveSingleTrackSpecRejects, NamesTheField) {
  SingleTrackSpec spec;
  GetParam().corrupt(spec);
  const absl::Status status = ResolveSingleTrackSpec(kBmwLength_m, kBmwWidth_m, spec);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               StartsWith("single_track." + GetParam().field + ": ")));
}

INSTANTIATE_TEST_SUITE_P(
    SingleTrack, ResolveSingleTrackSpecRejects,
    ::testing::Values(
        BadSpec{"preset", [](SingleTrackSpec& s) { s.preset = static_cast<SingleTrackPreset>(7); }},
        BadSpec{"mass_kg", [](SingleTrackSpec& s) { s.mass_kg = -1; }},
        BadSpec{"mass_kg", [](SingleTrackSpec& s) { s.mass_kg = 0; }},
        BadSpec{"mass_kg", [](SingleTrackSpec& s) { s.mass_kg = kNaN; }},
        BadSpec{"mass_kg", [](SingleTrackSpec& s) { s.mass_kg = 1e5 + 1; }},
        BadSpec{"yaw_inertia_kgm2", [](SingleTrackSpec& s) { s.yaw_inertia_kgm2 = kInf; }},
        BadSpec{"yaw_inertia_kgm2", [](SingleTrackSpec& s) { s.yaw_inertia_kgm2 = 0; }},
        // Radius of gyration sqrt(1/1093) = 0.03 m < 0.05 x 2.58 m.
        BadSpec{"yaw_inertia_kgm2", [](SingleTrackSpec& s) { s.yaw_inertia_kgm2 = 1.0; }},
        // sqrt(1e7/1093) = 95.6 m > 2 x 2.58 m.
        BadSpec{"yaw_inertia_kgm2", [](SingleTrackSpec& s) { s.yaw_inertia_kgm2 = 1e7; }},
        BadSpec{"cg_to_front_axle_m", [](SingleTrackSpec& s) { s.cg_to_front_axle_m = 0.0; }},
        BadSpec{"cg_to_front_axle_m", [](SingleTrackSpec& s) { s.cg_to_front_axle_m = kNaN; }},
        BadSpec{"cg_to_rear_axle_m", [](SingleTrackSpec& s) { s.cg_to_rear_axle_m = -0.5; }},
        BadSpec{"cg_to_rear_axle_m", [](SingleTrackSpec& s) { s.cg_to_rear_axle_m = 101; }},
        // Wheelbase longer than the body: named after the distance the client set.
        BadSpec{"cg_to_front_axle_m", [](SingleTrackSpec& s) { s.cg_to_front_axle_m = 3.5; }},
        BadSpec{"cg_to_rear_axle_m", [](SingleTrackSpec& s) { s.cg_to_rear_axle_m = 3.5; }},
        BadSpec{"cg_height_m", [](SingleTrackSpec& s) { s.cg_height_m = -0.1; }},
        BadSpec{"cg_height_m", [](SingleTrackSpec& s) { s.cg_height_m = 11; }},
        BadSpec{"friction_coefficient", [](SingleTrackSpec& s) { s.friction_coefficient = 0; }},
        BadSpec{"friction_coefficient", [](SingleTrackSpec& s) { s.friction_coefficient = 3.5; }},
        BadSpec{"front_cornering_stiffness_1prad",
                [](SingleTrackSpec& s) { s.front_cornering_stiffness_1prad = 0.0; }},
        BadSpec{"front_cornering_stiffness_1prad",
                [](SingleTrackSpec& s) { s.front_cornering_stiffness_1prad = -kInf; }},
        BadSpec{"rear_cornering_stiffness_1prad",
                [](SingleTrackSpec& s) { s.rear_cornering_stiffness_1prad = 101; }},
        BadSpec{"switching_speed_mps", [](SingleTrackSpec& s) { s.switching_speed_mps = 0; }},
        BadSpec{"switching_speed_mps", [](SingleTrackSpec& s) { s.switching_speed_mps = 1001; }},
        BadSpec{"rear_overhang_m", [](SingleTrackSpec& s) { s.rear_overhang_m = -0.01; }},
        // The body is 4.508 m, the wheelbase 2.579 m: at most 1.929 m of overhang.
        BadSpec{"rear_overhang_m", [](SingleTrackSpec& s) { s.rear_overhang_m = 1.93; }}));

TEST(SingleTrack, BodyCentreOffsetFromTheCog) {
  SingleTrackSpec spec = Resolved();
  // Wheelbase centred in the body: the box centre is midway between the axles, (l_f - l_r)/2
  // ahead of the CoG (behind it for the BMW, whose CoG is forward of centre).
  EXPECT_THAT(SingleTrackBodyCenterOffset(spec, kBmwLength_m),
              DoubleNear((*spec.cg_to_front_axle_m - *spec.cg_to_rear_axle_m) / 2, 1e-12));
  SingleTrackSpec rear_heavy;
  rear_heavy.rear_overhang_m = 0.5;
  rear_heavy = Resolved(rear_heavy);
  EXPECT_THAT(SingleTrackBodyCenterOffset(rear_heavy, kBmwLength_m),
              DoubleNear(kBmwLength_m / 2 - 0.5 - *spec.cg_to_rear_axle_m, 1e-12));
}

// ---------------------------------------------------------------------------------------
// Standstill, kinematic agreement, oracle.

class BothTicks : public ::testing::TestWithParam<double> {};
INSTANTIATE_TEST_SUITE_P(SingleTrack, BothTicks, ::testing::Values(0.02, 0.01));

TEST_P(BothTicks, NothingMovesWithZeroControlsAtRest) {
  const SingleTrackParams params = Params(GetParam());
  const SingleTrackInput input = MakeSingleTrackInput(params, 0.0, 0.0);
  const Pose2 pose = {.x_m = 3.0, .y_m = -4.0, .yaw_rad = 2.0};
  SingleTrackState state = MakeSingleTrackState(params, pose, 0.0);
  for (int k = 0; k < 1000; ++k) StepSingleTrack(params, input, GetParam(), state);
  EXPECT_EQ(state.pose.x_m, 3.0);
  EXPECT_EQ(state.pose.y_m, -4.0);
  EXPECT_EQ(state.pose.yaw_rad, 2.0);
  EXPECT_EQ(state.speed_mps, 0.0);
  EXPECT_EQ(state.yaw_rate_radps, 0.0);
  EXPECT_EQ(state.slip_angle_rad, 0.0);
  EXPECT_EQ(state.dissipated_energy_j, 0.0);
}

// At rest the wheels turn (at the rate limit) but the car stays put; the slip angle follows
// the kinematic beta_k = atan(tan(delta) l_r / l) of the wheel angle (the direction the CoG
// would move in), the yaw rate stays 0. (CommonRoad's own ground truth expects beta = 0
// here while its ks_cog branch integrates beta_k; see the docs.)
TEST_P(BothTicks, SteeringAtRestTurnsTheWheelsOnly) {
  const double dt = GetParam();
  const SingleTrackSpec spec = Resolved();
  const SingleTrackParams params = Params(dt, spec);
  SingleTrackState state = MakeSingleTrackState(params, {.x_m = 1.0, .yaw_rad = -1.0}, 0.0);
  for (const double command : {0.7, -1.066}) {
    const SingleTrackInput input = MakeSingleTrackInput(params, 0.0, command);
    for (int k = 0; k < static_cast<int>(6.0 / dt); ++k) {
      StepSingleTrack(params, input, dt, state);
      ASSERT_EQ(state.pose.x_m, 1.0);
      ASSERT_EQ(state.pose.y_m, 0.0);
      ASSERT_EQ(state.pose.yaw_rad, -1.0);
      ASSERT_EQ(state.yaw_rate_radps, 0.0);
      ASSERT_THAT(state.slip_angle_rad,
                  DoubleNear(std::atan(std::tan(state.steering_rad) * *spec.cg_to_rear_axle_m /
                                       Wheelbase(spec)),
                             1e-15));
    }
    EXPECT_EQ(state.steering_rad, command);
  }
}

// At 5 m/s and delta = 0.05 rad (lateral acceleration v² delta / l = 0.48 m/s²) the model must
// follow the kinematic bicycle: rear axle on a circle of radius R = l / tan(delta), CoG on a
// circle of radius sqrt(R² + l_r²), yaw rate v_rear tan(delta) / l.
//
// Tolerance, from the neutral-steer analysis: with CommonRoad's load-dependent stiffness
// (k_f = mu C_S g l_r / l, k_r = mu C_S g l_f / l at a = 0) the understeer gradient
// K = (l_r / k_f - l_f / k_r) / l = (1/C_Sf - 1/C_Sr) / (mu g) is exactly 0, so the linear
// model's steady state is r = v delta / l: the path differs from the kinematic one only by
// tan(delta) versus delta (relative delta²/3) and the slip angles' cosines (beta²/2 with
// beta < delta; the rear slip angle alpha_r = a_y l_f / (l k_r) = 0.002 rad adds
// alpha_r²/2). All below delta²/2 = 1.25e-3. The integration error is far smaller (the
// exponential step is exact in steady state; chords of (r dt)² / 24 = 4e-7).
TEST_P(BothTicks, AgreesWithTheKinematicBicycleAtLowLateralAcceleration) {
  const double dt = GetParam();
  const SingleTrackSpec spec = Resolved();
  const SingleTrackParams params = Params(dt, spec);
  const double l = Wheelbase(spec);
  const double lr = *spec.cg_to_rear_axle_m;
  const double v = 5.0;
  const double delta = 0.05;
  const SingleTrackInput input = MakeSingleTrackInput(params, 0.0, delta);
  SingleTrackState state = MakeSingleTrackState(params, {}, v);
  for (int k = 0; k < static_cast<int>(2.0 / dt); ++k) StepSingleTrack(params, input, dt, state);
  // Transient gone (eigenvalues near -43/s at 5 m/s): sample three rear-axle points over the
  // next 8 s (a third of a turn).
  std::vector<std::array<double, 2>> rear;
  std::vector<std::array<double, 2>> cog;
  const int ticks = static_cast<int>(8.0 / dt);
  for (int k = 0; k <= ticks; ++k) {
    if (k % (ticks / 2) == 0) {
      rear.push_back({state.pose.x_m - lr * std::cos(state.pose.yaw_rad),
                      state.pose.y_m - lr * std::sin(state.pose.yaw_rad)});
      cog.push_back({state.pose.x_m, state.pose.y_m});
    }
    StepSingleTrack(params, input, dt, state);
  }
  const double tolerance = delta * delta / 2;
  const double radius_kinematic = l / std::tan(delta);
  const Circle rear_circle =
      Circumcircle(rear[0][0], rear[0][1], rear[1][0], rear[1][1], rear[2][0], rear[2][1]);
  EXPECT_LT(std::abs(rear_circle.radius / radius_kinematic - 1.0), tolerance);
  const Circle cog_circle =
      Circumcircle(cog[0][0], cog[0][1], cog[1][0], cog[1][1], cog[2][0], cog[2][1]);
  EXPECT_LT(std::abs(cog_circle.radius / std::hypot(radius_kinematic, lr) - 1.0), tolerance);
  const double rear_speed = v * std::cos(state.slip_angle_rad);
  EXPECT_LT(std::abs(state.yaw_rate_radps / (rear_speed * std::tan(delta) / l) - 1.0), tolerance);
}

// Step steer at 15-25 m/s against the oracle (RK4 at 1e-4 s, whose own error is ~1e-14 here).
// The model is second order: every approximation it makes (speed, acceleration and wheel
// angle held at their tick averages, trapezoidal yaw, mid-tick direction of travel) is a
// midpoint rule, and the exponential step is exact for what it holds. So the errors scale
// as dt²: bounded by K dt² with K measured at 20 ms plus ~40% margin, and the ratios over
// dt, dt/2, dt/4 must be 4 (+-0.1).
struct OracleCase {
  double v0_mps;
  double accel_mps2;  // Within the limits, below the power limit.
  double delta_rad;   // Reached at 0.4 rad/s after delta / 0.4 s, a whole number of ticks.
};

struct TrajectoryError {
  double position_m = 0, yaw_rad = 0, yaw_rate_radps = 0, slip_rad = 0;
};

TrajectoryError ErrorAgainstOracle(const OracleCase& c, double dt,
                                   const std::vector<OracleState>& oracle, double oracle_h) {
  const SingleTrackParams params = Params(dt);
  const SingleTrackInput input = MakeSingleTrackInput(params, c.accel_mps2, c.delta_rad);
  SingleTrackState state = MakeSingleTrackState(params, {}, c.v0_mps);
  const int stride = static_cast<int>(std::lround(dt / oracle_h));
  const int ticks = static_cast<int>((oracle.size() - 1) / stride);
  TrajectoryError e;
  for (int k = 1; k <= ticks; ++k) {
    StepSingleTrack(params, input, dt, state);
    const OracleState& o = oracle[k * stride];
    e.position_m = std::max(e.position_m, std::hypot(state.pose.x_m - o.x, state.pose.y_m - o.y));
    e.yaw_rad = std::max(e.yaw_rad, std::abs(WrapToPi(state.pose.yaw_rad - o.psi)));
    e.yaw_rate_radps = std::max(e.yaw_rate_radps, std::abs(state.yaw_rate_radps - o.r));
    e.slip_rad = std::max(e.slip_rad, std::abs(state.slip_angle_rad - o.beta));
    EXPECT_NEAR(state.speed_mps, o.v, 1e-9);
  }
  return e;
}

void PrintTo(const OracleCase& c, std::ostream* os) {
  *os << "v0 " << c.v0_mps << " m/s, a " << c.accel_mps2 << " m/s², delta " << c.delta_rad;
}

class AgainstOracle : public ::testing::TestWithParam<OracleCase> {};
INSTANTIATE_TEST_SUITE_P(SingleTrack, AgainstOracle,
                         ::testing::Values(OracleCase{20.0, 0.0, 0.08},
                                           OracleCase{15.0, 2.0, -0.064},
                                           OracleCase{25.0, -3.0, 0.08}));

TEST_P(AgainstOracle, SecondOrderAgreementWithRk4OfTheCommonRoadEquations) {
  const OracleCase c = GetParam();
  const SingleTrackSpec spec = Resolved();
  const double h = 1e-4;
  const double duration = 2.0;
  const auto delta = [&](double t) {
    const double reached = std::min(0.4 * t, std::abs(c.delta_rad));
    return c.delta_rad > 0 ? reached : -reached;
  };
  const std::vector<OracleState> oracle =
      IntegrateOracle(OracleCar(spec), {0, 0, 0, c.v0_mps, 0, 0}, delta, c.accel_mps2, h,
                      static_cast<int>(std::lround(duration / h)));

  // K per quantity, in units of the quantity per s² (measured over the three cases: 18, 0.56,
  // 2.5, 0.28, the same at every dt to 0.1%).
  const TrajectoryError k_bound = {25.0, 0.8, 3.5, 0.4};
  const double dts[] = {0.02, 0.01, 0.005};
  TrajectoryError e[3];
  for (int i = 0; i < 3; ++i) {
    const double dt = dts[i];
    e[i] = ErrorAgainstOracle(c, dt, oracle, h);
    EXPECT_LT(e[i].position_m, k_bound.position_m * dt * dt) << "dt " << dt;
    EXPECT_LT(e[i].yaw_rad, k_bound.yaw_rad * dt * dt) << "dt " << dt;
    EXPECT_LT(e[i].yaw_rate_radps, k_bound.yaw_rate_radps * dt * dt) << "dt " << dt;
    EXPECT_LT(e[i].slip_rad, k_bound.slip_rad * dt * dt) << "dt " << dt;
  }
  // A real discretisation error, not noise, and halving dt quarters it.
  EXPECT_GT(e[0].position_m, 1e-4);
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(e[i].position_m / e[i + 1].position_m, DoubleNear(4.0, 0.1)) << "dt " << dts[i];
    EXPECT_THAT(e[i].yaw_rad / e[i + 1].yaw_rad, DoubleNear(4.0, 0.1)) << "dt " << dts[i];
    EXPECT_THAT(e[i].yaw_rate_radps / e[i + 1].yaw_rate_radps, DoubleNear(4.0, 0.1));
    EXPECT_THAT(e[i].slip_rad / e[i + 1].slip_rad, DoubleNear(4.0, 0.1));
  }
}

// Steady-state cornering against the closed form of the linear single track,
// r = v delta / (l + K v²) with K = (l_r / k_f - l_f / k_r) / l and CommonRoad's
// load-dependent stiffness k_f = mu C_Sf g l_r / l, k_r = mu C_Sr g l_f / l at a = 0, i.e.
// K = (1 / C_Sf - 1 / C_Sr) / (mu g): exactly 0 (neutral steer) for the presets, whatever
// their geometry. The exponential step reproduces the steady state exactly for inputs held
// over the tick, so once the transient has decayed (e^{lambda t} < 1e-13) the yaw rate agrees
// to rounding at any tick.
struct SteadyCase {
  SingleTrackPreset preset;
  std::optional<double> rear_stiffness;  // Unset: the preset's (neutral).
  double v_mps;
  double delta_rad;
};

void PrintTo(const SteadyCase& c, std::ostream* os) {
  *os << "preset " << static_cast<int>(c.preset) << ", C_Sr "
      << (c.rear_stiffness ? *c.rear_stiffness : 0.0) << ", v " << c.v_mps << ", delta "
      << c.delta_rad;
}

class SteadyState : public ::testing::TestWithParam<SteadyCase> {};
INSTANTIATE_TEST_SUITE_P(
    SingleTrack, SteadyState,
    ::testing::Values(SteadyCase{SingleTrackPreset::kBmw320i, {}, 10.0, 0.03},
                      SteadyCase{SingleTrackPreset::kBmw320i, {}, 40.0, -0.01},
                      SteadyCase{SingleTrackPreset::kFordEscort, {}, 25.0, 0.02},
                      SteadyCase{SingleTrackPreset::kVwVanagon, {}, 5.0, 0.1},
                      // Understeer: K = 1.4e-3 s²/m.
                      SteadyCase{SingleTrackPreset::kBmw320i, 30.0, 30.0, 0.02},
                      // Oversteer: K = -7.5e-4 s²/m, below its critical speed of 59 m/s.
                      SteadyCase{SingleTrackPreset::kBmw320i, 18.0, 30.0, 0.02}));

TEST_P(SteadyState, YawRateMatchesTheLinearClosedForm) {
  const SteadyCase c = GetParam();
  SingleTrackSpec spec;
  spec.preset = c.preset;
  spec.rear_cornering_stiffness_1prad = c.rear_stiffness;
  spec = Resolved(spec, 5.0);
  const double mu_g = *spec.friction_coefficient * kGravity_mps2;
  const double k_us =
      (1.0 / *spec.front_cornering_stiffness_1prad - 1.0 / *spec.rear_cornering_stiffness_1prad) /
      mu_g;
  const double expected = c.v_mps * c.delta_rad / (Wheelbase(spec) + k_us * c.v_mps * c.v_mps);
  for (const double dt : {0.02, 0.01}) {
    const SingleTrackParams params = Params(dt, spec);
    const SingleTrackInput input = MakeSingleTrackInput(params, 0.0, c.delta_rad);
    SingleTrackState state = MakeSingleTrackState(params, {}, c.v_mps);
    for (int k = 0; k < static_cast<int>(20.0 / dt); ++k) StepSingleTrack(params, input, dt, state);
    EXPECT_THAT(state.yaw_rate_radps, DoubleNear(expected, 1e-10 * std::abs(expected)))
        << "dt " << dt;
    const Lateral oracle = OracleSteadyState(OracleCar(spec), c.v_mps, 0.0, c.delta_rad);
    EXPECT_THAT(state.slip_angle_rad, DoubleNear(oracle.beta, 1e-10)) << "dt " << dt;
  }
}

// ---------------------------------------------------------------------------------------
// Stability: no NaN or infinity, and yaw rate and slip angle within physically sensible
// bounds, at both ticks, in the scenarios where the reference formulation fails (it is stiff
// below ~1 m/s and unstable in reverse).
//
// Bounds, per tick: |r| and |beta| at most 1.5 x (plus 0.01) the largest quasi-steady value
// met so far, where the quasi-steady value at (v, a, delta) is the kinematic one (r_k =
// v cos(beta_k) tan(delta) / l, beta_k) below 3 m/s and in reverse and the larger of it and
// the oracle's linear steady state above 1 m/s. A well-damped second-order response
// overshoots its steady state by far less than 50%; a numerical instability grows without
// bound.
struct Controls {
  double accel_mps2, steer_rad;
};
struct StabilityScenario {
  std::string name;
  double v0_mps;
  double duration_s;
  // The controls at time t, from the state and the previous tick's controls.
  std::function<Controls(double t, const SingleTrackState&, const Controls& previous)> controls;
};

void PrintTo(const StabilityScenario& s, std::ostream* os) { *os << s.name; }

class Stability : public ::testing::TestWithParam<std::tuple<double, StabilityScenario>> {};

TEST_P(Stability, StaysFiniteAndBounded) {
  const auto& [dt, scenario] = GetParam();
  const SingleTrackSpec spec = Resolved();
  const SingleTrackParams params = Params(dt, spec);
  const OracleCar car(spec);
  const double l = Wheelbase(spec);
  SingleTrackState state = MakeSingleTrackState(params, {.x_m = 5.0, .y_m = 5.0}, scenario.v0_mps);
  double r_bound = 0.0;
  double beta_bound = 0.0;
  const int ticks = static_cast<int>(std::lround(scenario.duration_s / dt));
  Controls c = {0.0, 0.0};
  for (int k = 0; k < ticks; ++k) {
    c = scenario.controls(k * dt, state, c);
    const SingleTrackInput input = MakeSingleTrackInput(params, c.accel_mps2, c.steer_rad);
    StepSingleTrack(params, input, dt, state);
    ASSERT_TRUE(Finite(state)) << scenario.name << " tick " << k;
    const double v = state.speed_mps;
    const double delta = state.steering_rad;
    const double beta_k = std::atan(std::tan(delta) * *spec.cg_to_rear_axle_m / l);
    r_bound = std::max(r_bound, std::abs(v * std::cos(beta_k) * std::tan(delta) / l));
    beta_bound = std::max(beta_bound, std::abs(beta_k));
    if (v > 1.0) {
      const Lateral steady = OracleSteadyState(car, v, state.acceleration_mps2, delta);
      r_bound = std::max(r_bound, std::abs(steady.r));
      beta_bound = std::max(beta_bound, std::abs(steady.beta));
    }
    ASSERT_LE(std::abs(state.yaw_rate_radps), 1.5 * r_bound + 0.01) << scenario.name << " " << k;
    ASSERT_LE(std::abs(state.slip_angle_rad), 1.5 * beta_bound + 0.01) << scenario.name << " " << k;
  }
}

const StabilityScenario kScenarios[] = {
    {"standstill_with_steering", 0.0, 10.0,
     [](double t, const SingleTrackState&, const Controls&) {
       return Controls{0.0, t < 5 ? 1.066 : -0.5};
     }},
    {"accelerate_from_rest_steering", 0.0, 10.0,
     [](double, const SingleTrackState&, const Controls&) {
       return Controls{3.0, 0.3};
     }},
    {"brake_to_a_stop_steering", 20.0, 6.0,
     [](double, const SingleTrackState& s, const Controls&) {
       return Controls{s.speed_mps > 0 ? -8.0 : 0.0, 0.1};
     }},
    {"reverse_full_lock", -5.0, 10.0,
     [](double, const SingleTrackState&, const Controls&) {
       return Controls{0.0, 1.066};
     }},
    {"crawl_0.5_to_2_mps", 0.5, 30.0,
     [](double t, const SingleTrackState& s, const Controls& previous) {
       // Speed up to 2 m/s and down to 0.5 m/s, over and over; steer left and right.
       double accel = previous.accel_mps2 == 0.0 ? 1.0 : previous.accel_mps2;
       if (s.speed_mps >= 2.0) accel = -1.0;
       if (s.speed_mps <= 0.5) accel = 1.0;
       return Controls{accel, std::fmod(t, 4.0) < 2.0 ? 0.6 : -0.6};
     }},
    {"slalom_40_mps", 40.0, 20.0,
     [](double t, const SingleTrackState&, const Controls&) {
       return Controls{0.0, 0.05 * std::sin(2 * kPi * 0.5 * t)};
     }},
};

INSTANTIATE_TEST_SUITE_P(SingleTrack, Stability,
                         ::testing::Combine(::testing::Values(0.02, 0.01),
                                            ::testing::ValuesIn(kScenarios)),
                         [](const auto& info) {
                           std::string name = std::get<1>(info.param).name;
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name + (std::get<0>(info.param) == 0.02 ? "_20ms" : "_10ms");
                         });

// Sweeping the speed slowly through the blend band [1, 3] m/s (0.5 m/s² up, then down),
// yaw rate and slip angle change smoothly: per tick by at most their natural change (the
// kinematic yaw rate's a dt tan(delta) / l, plus a small allowance) plus a tenth of the gap
// between the dynamic and kinematic values that a hard switch would jump across.
TEST_P(BothTicks, HandOverThroughTheBlendBandIsContinuous) {
  const double dt = GetParam();
  const SingleTrackSpec spec = Resolved();
  const SingleTrackParams params = Params(dt, spec);
  const OracleCar car(spec);
  const double l = Wheelbase(spec);
  for (const double delta : {0.3, 0.8}) {
    const double beta_k = std::atan(std::tan(delta) * *spec.cg_to_rear_axle_m / l);
    // The gap a hard switch would jump across, the largest over the band.
    double gap_r = 0.0;
    double gap_beta = 0.0;
    for (double v = 1.0; v <= 3.0; v += 0.1) {
      const Lateral dynamic = OracleSteadyState(car, v, 0.5, delta);
      gap_r = std::max(gap_r, std::abs(dynamic.r - v * std::cos(beta_k) * std::tan(delta) / l));
      gap_beta = std::max(gap_beta, std::abs(dynamic.beta - beta_k));
    }
    ASSERT_GT(gap_beta, 0.005);  // The test can fail: a switch would jump this far.
    const double natural_r = 0.5 * dt * std::tan(delta) / l * 1.1;
    SingleTrackState state = MakeSingleTrackState(params, {}, 0.5);
    state.steering_rad = delta;
    state.slip_angle_rad = beta_k;
    state.yaw_rate_radps = 0.5 * std::cos(beta_k) * std::tan(delta) / l;
    for (const double accel : {0.5, -0.5}) {
      const SingleTrackInput input = MakeSingleTrackInput(params, accel, delta);
      for (int k = 0; k < static_cast<int>(6.0 / dt); ++k) {
        const SingleTrackState before = state;
        StepSingleTrack(params, input, dt, state);
        ASSERT_LE(std::abs(state.yaw_rate_radps - before.yaw_rate_radps), natural_r + 0.1 * gap_r)
            << "delta " << delta << " v " << state.speed_mps;
        ASSERT_LE(std::abs(state.slip_angle_rad - before.slip_angle_rad), 0.1 * gap_beta)
            << "delta " << delta << " v " << state.speed_mps;
      }
    }
    EXPECT_NEAR(state.speed_mps, 0.5, 1e-9);
  }
}

// ---------------------------------------------------------------------------------------
// Limits.

TEST_P(BothTicks, SteeringIsClampedAndRateLimitedWithoutOvershoot) {
  const double dt = GetParam();
  const SingleTrackParams params = Params(dt);
  const double max_steer = params.limits.max_steering_angle_rad;
  SingleTrackState state = MakeSingleTrackState(params, {}, 10.0);
  for (const double command : {5.0, -5.0, 0.3}) {
    const SingleTrackInput input = MakeSingleTrackInput(params, 0.0, command);
    EXPECT_EQ(input.steering_angle_rad, std::clamp(command, -max_steer, max_steer));
    for (int k = 0; k < static_cast<int>(8.0 / dt); ++k) {
      const double before = state.steering_rad;
      StepSingleTrack(params, input, dt, state);
      ASSERT_LE(std::abs(state.steering_rad), max_steer);
      ASSERT_LE(std::abs(state.steering_rad - before), 0.4 * dt * (1 + 1e-12));
    }
    EXPECT_EQ(state.steering_rad, input.steering_angle_rad);  // Reached exactly, held.
  }
}

TEST_P(BothTicks, SpeedStaysWithinItsRange) {
  const double dt = GetParam();
  const SingleTrackParams params = Params(dt);
  SingleTrackState state = MakeSingleTrackState(params, {}, 0.0);
  const SingleTrackInput forward = MakeSingleTrackInput(params, 100.0, 0.02);
  for (int k = 0; k < static_cast<int>(60.0 / dt); ++k) {
    StepSingleTrack(params, forward, dt, state);
    ASSERT_LE(state.speed_mps, 50.8);
  }
  EXPECT_EQ(state.speed_mps, 50.8);
  EXPECT_EQ(state.acceleration_mps2, 0.0);
  const SingleTrackInput backward = MakeSingleTrackInput(params, -100.0, -0.02);
  for (int k = 0; k < static_cast<int>(60.0 / dt); ++k) {
    StepSingleTrack(params, backward, dt, state);
    ASSERT_GE(state.speed_mps, -13.6);
  }
  EXPECT_EQ(state.speed_mps, -13.6);
}

// Above v_switch the drive delivers constant power per unit mass c = a_max v_switch
// (CommonRoad's a <= a_max v_switch / v), so v v' = c and v² = v0² + 2 c t exactly.
// Below v_switch and in reverse the plain limit applies.
TEST_P(BothTicks, PowerLimitAboveTheSwitchingSpeed) {
  const double dt = GetParam();
  const SingleTrackParams params = Params(dt);
  const double c = 11.5 * 7.319;
  const SingleTrackInput full = MakeSingleTrackInput(params, 11.5, 0.0);
  SingleTrackState state = MakeSingleTrackState(params, {}, 10.0);
  const int ticks = static_cast<int>(2.0 / dt);
  for (int k = 1; k <= ticks; ++k) {
    const double v_before = state.speed_mps;
    StepSingleTrack(params, full, dt, state);
    ASSERT_LE(state.acceleration_mps2, c / v_before);  // Never above the limit at the start.
  }
  EXPECT_THAT(state.speed_mps, DoubleNear(std::sqrt(100.0 + 2 * c * 2.0), 1e-12));
  // A command under the limit is not touched.
  state = MakeSingleTrackState(params, {}, 10.0);
  StepSingleTrack(params, MakeSingleTrackInput(params, 5.0, 0.0), dt, state);
  EXPECT_THAT(state.acceleration_mps2, DoubleNear(5.0, 1e-9));
  // Below v_switch, full acceleration.
  state = MakeSingleTrackState(params, {}, 2.0);
  StepSingleTrack(params, full, dt, state);
  EXPECT_THAT(state.acceleration_mps2, DoubleNear(11.5, 1e-9));
  // In reverse, the limit does not apply.
  state = MakeSingleTrackState(params, {}, -10.0);
  StepSingleTrack(params, MakeSingleTrackInput(params, -11.5, 0.0), dt, state);
  EXPECT_THAT(state.acceleration_mps2, DoubleNear(-11.5, 1e-9));
}

// The kinematic bicycle's ClampAcceleration rule: braking (a against v) up to max_braking,
// anything raising |v| up to max_acceleration, judged by the sign of v at the start of the
// tick, so a held braking command carries through zero into reverse as in CommonRoad.
TEST(SingleTrack, HeldBrakingCarriesThroughZeroIntoReverse) {
  const SingleTrackSpec spec = Resolved();
  VehicleLimits limits = DefaultSingleTrackLimits(spec);
  limits.max_acceleration_mps2 = 3.0;
  limits.max_braking_mps2 = 8.0;
  const SingleTrackParams params = MakeSingleTrackParams(spec, limits, 0.02);
  SingleTrackState state = MakeSingleTrackState(params, {}, 0.5);
  const SingleTrackInput brake = MakeSingleTrackInput(params, -20.0, 0.0);
  EXPECT_EQ(brake.acceleration_mps2, -8.0);  // Clamped to the larger limit at the input.
  std::vector<double> speeds;
  for (int k = 0; k < 5; ++k) {
    StepSingleTrack(params, brake, 0.02, state);
    speeds.push_back(state.speed_mps);
  }
  // 0.16 m/s per tick while braking: 0.34, 0.18, 0.02, -0.14 (started forward), then 3 m/s².
  EXPECT_THAT(speeds[2], DoubleNear(0.02, 1e-12));
  EXPECT_THAT(speeds[3], DoubleNear(-0.14, 1e-12));
  EXPECT_THAT(speeds[4], DoubleNear(-0.20, 1e-12));
  EXPECT_THAT(state.acceleration_mps2, DoubleNear(-3.0, 1e-9));
}

// In reverse the state is the kinematic one: beta = beta_k, r = v cos(beta_k) tan(delta) / l,
// and the CoG runs backwards around a circle of radius sqrt((l / tan delta)² + l_r²). With v,
// r, beta constant each tick moves a chord v dt along the mid-tick direction, turning r dt:
// the points are the vertices of a regular polygon whose circumradius exceeds the circle's
// by the factor (r dt / 2) / sin(r dt / 2) ~ 1 + (r dt)² / 24.
TEST_P(BothTicks, ReverseFollowsTheKinematicCircle) {
  const double dt = GetParam();
  const SingleTrackSpec spec = Resolved();
  const SingleTrackParams params = Params(dt, spec);
  const double l = Wheelbase(spec);
  const double lr = *spec.cg_to_rear_axle_m;
  const double v = -5.0;
  const double delta = 0.5;
  SingleTrackState state = MakeSingleTrackState(params, {.x_m = 2.0, .yaw_rad = 0.4}, v);
  const SingleTrackInput input = MakeSingleTrackInput(params, 0.0, delta);
  for (int k = 0; k < static_cast<int>(2.0 / dt); ++k) StepSingleTrack(params, input, dt, state);
  const double beta_k = std::atan(std::tan(delta) * lr / l);
  const double r = v * std::cos(beta_k) * std::tan(delta) / l;
  EXPECT_THAT(state.slip_angle_rad, DoubleNear(beta_k, 1e-15));
  EXPECT_THAT(state.yaw_rate_radps, DoubleNear(r, 1e-14));
  std::vector<SingleTrackState> run;
  for (int k = 0; k < 500; ++k) {
    StepSingleTrack(params, input, dt, state);
    run.push_back(state);
  }
  const Circle circle = Circumcircle(run[0].pose.x_m, run[0].pose.y_m, run[1].pose.x_m,
                                     run[1].pose.y_m, run[2].pose.x_m, run[2].pose.y_m);
  for (const SingleTrackState& s : run) {
    ASSERT_THAT(std::hypot(s.pose.x_m - circle.x, s.pose.y_m - circle.y),
                DoubleNear(circle.radius, 1e-8));
  }
  const double half_turn = 0.5 * std::abs(r) * dt;
  EXPECT_THAT(
      circle.radius,
      DoubleNear(std::hypot(l / std::tan(delta), lr) * half_turn / std::sin(half_turn), 1e-9));
}

// ---------------------------------------------------------------------------------------
// Invariants, guards, determinism.

// Long seeded random control sequences (a new command every 0.1-2 s, any acceleration and
// any wheel angle, random spawn speeds) for every preset at both ticks: never NaN or
// infinity, every limit kept, yaw wrapped, dissipated energy never decreasing.
TEST(SingleTrack, RandomControlsKeepEveryInvariant) {
  std::mt19937_64 rng(20240611);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (const SingleTrackPreset preset :
       {SingleTrackPreset::kBmw320i, SingleTrackPreset::kFordEscort,
        SingleTrackPreset::kVwVanagon}) {
    SingleTrackSpec spec;
    spec.preset = preset;
    spec = Resolved(spec, 5.0);
    for (const double dt : {0.02, 0.01}) {
      const SingleTrackParams params = Params(dt, spec);
      const VehicleLimits& limits = params.limits;
      SingleTrackState state = MakeSingleTrackState(
          params, {},
          -limits.max_reverse_speed_mps +
              unit(rng) * (limits.max_speed_mps + limits.max_reverse_speed_mps));
      SingleTrackInput input;
      int hold = 0;
      for (int k = 0; k < 100000; ++k) {
        if (hold-- <= 0) {
          input = MakeSingleTrackInput(params, -15.0 + 30.0 * unit(rng), -1.5 + 3.0 * unit(rng));
          hold = static_cast<int>((0.1 + 1.9 * unit(rng)) / dt);
        }
        const SingleTrackState before = state;
        StepSingleTrack(params, input, dt, state);
        ASSERT_TRUE(Finite(state)) << "tick " << k;
        ASSERT_LE(std::abs(state.steering_rad), limits.max_steering_angle_rad);
        ASSERT_LE(std::abs(state.steering_rad - before.steering_rad),
                  limits.max_steering_rate_radps * dt * (1 + 1e-12));
        ASSERT_LE(state.speed_mps, limits.max_speed_mps);
        ASSERT_GE(state.speed_mps, -limits.max_reverse_speed_mps);
        ASSERT_GT(state.pose.yaw_rad, -kPi);
        ASSERT_LE(state.pose.yaw_rad, kPi);
        ASSERT_LE(std::abs(state.slip_angle_rad), kSingleTrackMaxSlipAngle_rad);
        ASSERT_LE(std::abs(state.yaw_rate_radps), params.max_yaw_rate_radps);
        ASSERT_GE(state.dissipated_energy_j, before.dissipated_energy_j);
      }
    }
  }
}

// An oversteering override (C_Sr = 5 against C_Sf = 20.9: K = -0.015 s²/m, critical speed
// sqrt(l / -K) = 13 m/s) held at 30 m/s diverges exponentially, as the linear tyre model
// does (a spin without a friction limit). The state must stay finite, held at its bounds.
TEST_P(BothTicks, UnstableOversteerStaysFiniteAtTheBounds) {
  const double dt = GetParam();
  SingleTrackSpec spec;
  spec.rear_cornering_stiffness_1prad = 5.0;
  spec = Resolved(spec);
  const SingleTrackParams params = Params(dt, spec);
  const SingleTrackInput input = MakeSingleTrackInput(params, 0.0, 0.05);
  SingleTrackState state = MakeSingleTrackState(params, {}, 30.0);
  bool reached_bound = false;
  for (int k = 0; k < static_cast<int>(600.0 / dt); ++k) {
    StepSingleTrack(params, input, dt, state);
    ASSERT_TRUE(Finite(state)) << "tick " << k;
    ASSERT_LE(std::abs(state.slip_angle_rad), kSingleTrackMaxSlipAngle_rad);
    ASSERT_LE(std::abs(state.yaw_rate_radps), params.max_yaw_rate_radps);
    reached_bound |= std::abs(state.slip_angle_rad) == kSingleTrackMaxSlipAngle_rad ||
                     std::abs(state.yaw_rate_radps) == params.max_yaw_rate_radps;
  }
  EXPECT_TRUE(reached_bound);
}

TEST(SingleTrack, TwoRunsAreBitIdentical) {
  const auto run = [] {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    const SingleTrackParams params = Params(0.01);
    SingleTrackState state = MakeSingleTrackState(params, {.x_m = 1, .y_m = 2, .yaw_rad = 3}, 4.0);
    std::vector<SingleTrackState> states;
    SingleTrackInput input;
    for (int k = 0; k < 20000; ++k) {
      if (k % 37 == 0)
        input = MakeSingleTrackInput(params, -12 + 24 * unit(rng), -1 + 2 * unit(rng));
      StepSingleTrack(params, input, 0.01, state);
      states.push_back(state);
    }
    return states;
  };
  const std::vector<SingleTrackState> a = run();
  const std::vector<SingleTrackState> b = run();
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(SingleTrackState)), 0);
}

// ---------------------------------------------------------------------------------------
// Energy, readout, halt.

TEST_P(BothTicks, StraightBrakingDissipatesTheKineticEnergyLost) {
  const double dt = GetParam();
  const SingleTrackParams params = Params(dt);
  SingleTrackState state = MakeSingleTrackState(params, {}, 20.0);
  const SingleTrackInput brake = MakeSingleTrackInput(params, -5.0, 0.0);
  for (int k = 0; k < static_cast<int>(std::lround(2.0 / dt)); ++k)
    StepSingleTrack(params, brake, dt, state);
  EXPECT_THAT(state.speed_mps, DoubleNear(10.0, 1e-12));
  EXPECT_THAT(state.dissipated_energy_j,
              DoubleNear(0.5 * params.mass_kg * (400.0 - 100.0), 1e-9 * 164000));
  const VehicleReadout readout = ReadSingleTrack(params, brake, state);
  EXPECT_THAT(readout.kinetic_energy_j,
              DoubleNear(0.5 * params.mass_kg * 100.0, 1e-9 * 0.5 * params.mass_kg * 100.0));
  EXPECT_EQ(readout.dissipated_energy_j, state.dissipated_energy_j);
  EXPECT_THAT(readout.acceleration_mps2, DoubleNear(-5.0, 1e-9));
}

// In steady cornering the tyres dissipate m v (k_f alpha_f² + k_r alpha_r²) per second,
// with the slip angles of the closed-form steady state.
TEST(SingleTrack, SteadyCorneringDissipatesTheTyreSlipPower) {
  const double dt = 0.02;
  const SingleTrackSpec spec = Resolved();
  const SingleTrackParams params = Params(dt, spec);
  const double v = 20.0;
  const double delta = 0.02;
  const SingleTrackInput input = MakeSingleTrackInput(params, 0.0, delta);
  SingleTrackState state = MakeSingleTrackState(params, {}, v);
  for (int k = 0; k < 500; ++k) StepSingleTrack(params, input, dt, state);
  const double before = state.dissipated_energy_j;
  StepSingleTrack(params, input, dt, state);
  const Lateral steady = OracleSteadyState(OracleCar(spec), v, 0.0, delta);
  const double l = Wheelbase(spec);
  const double mu_cs_g =
      *spec.friction_coefficient * *spec.front_cornering_stiffness_1prad * kGravity_mps2;
  const double kf = mu_cs_g * *spec.cg_to_rear_axle_m / l;
  const double kr = mu_cs_g * *spec.cg_to_front_axle_m / l;
  const double alpha_f = delta - steady.beta - *spec.cg_to_front_axle_m * steady.r / v;
  const double alpha_r = -steady.beta + *spec.cg_to_rear_axle_m * steady.r / v;
  const double power = *spec.mass_kg * v * (kf * alpha_f * alpha_f + kr * alpha_r * alpha_r);
  EXPECT_GT(power, 1.0);
  EXPECT_THAT(state.dissipated_energy_j - before, DoubleNear(power * dt, 1e-6 * power * dt));
  const VehicleReadout readout = ReadSingleTrack(params, input, state);
  EXPECT_EQ(readout.steering_angle_rad, delta);
  EXPECT_EQ(readout.yaw_rate_radps, state.yaw_rate_radps);
  EXPECT_THAT(readout.lateral_speed_mps, DoubleNear(v * std::sin(state.slip_angle_rad), 1e-14));
  EXPECT_THAT(
      readout.kinetic_energy_j,
      DoubleNear(0.5 * *spec.mass_kg * v * v + 0.5 * *spec.yaw_inertia_kgm2 * steady.r * steady.r,
                 1e-6));
  EXPECT_EQ(readout.wheel_loads_n, (std::array<double, 4>{}));
}

TEST(SingleTrack, HaltedVehicleStaysPut) {
  const double dt = 0.02;
  const SingleTrackParams params = Params(dt);
  SingleTrackInput input = MakeSingleTrackInput(params, 2.0, 0.3);
  SingleTrackState state = MakeSingleTrackState(params, {}, 15.0);
  for (int k = 0; k < 100; ++k) StepSingleTrack(params, input, dt, state);
  HaltSingleTrack(params, input, state);
  const Pose2 pose = state.pose;
  for (int k = 0; k < 1000; ++k) StepSingleTrack(params, input, dt, state);
  EXPECT_EQ(state.pose.x_m, pose.x_m);
  EXPECT_EQ(state.pose.y_m, pose.y_m);
  EXPECT_EQ(state.pose.yaw_rad, pose.yaw_rad);
  EXPECT_EQ(state.speed_mps, 0.0);
  EXPECT_EQ(state.yaw_rate_radps, 0.0);
  EXPECT_EQ(state.slip_angle_rad, 0.0);
  EXPECT_EQ(state.steering_rad, 0.0);
  EXPECT_EQ(input.acceleration_mps2, 0.0);
}

}  // namespace
}  // namespace pitlane::sim
