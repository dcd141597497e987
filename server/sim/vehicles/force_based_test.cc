#include "server/sim/vehicles/force_based.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/status_matchers.h"

namespace pitlane::sim {
namespace {

using ::testing::StartsWith;

constexpr double kDt = 0.02;       // 50 Hz.
constexpr double kLength_m = 4.5;  // Body length of every test vehicle.
constexpr double kMass_kg = 1200.0;
// ½ C_d A ρ with the defaults 0.35, 2.2 m², 1.29 kg/m³, counted once.
constexpr double kDrag_nspm2 = 0.5 * 0.35 * 2.2 * 1.29;
constexpr double kRolling_nspm = 10.5;

ForceBasedSpec Resolved(ForceBasedSpec spec = {}) {
  const absl::Status status = ResolveForceBasedSpec(kLength_m, 1.8, spec);
  EXPECT_TRUE(status.ok()) << status;
  return spec;
}

// Parameters from `spec` with the model's default limits, changed by `edit_limits`.
ForceBasedParams Params(ForceBasedSpec spec = {},
                        const std::function<void(VehicleLimits&)>& edit_limits = nullptr) {
  const ForceBasedSpec resolved = Resolved(spec);
  VehicleLimits limits = DefaultForceBasedLimits(resolved);
  if (edit_limits) edit_limits(limits);
  return MakeForceBasedParams(resolved, limits, kDt);
}

// No drag and no rolling resistance: coasting keeps the speed.
ForceBasedParams Frictionless() {
  return Params({.drag_coefficient = 0.0, .rolling_resistance_nspm = 0.0});
}

std::function<void(VehicleLimits&)> MaxSpeed(double max_speed_mps) {
  return [max_speed_mps](VehicleLimits& limits) { limits.max_speed_mps = max_speed_mps; };
}

std::vector<ForceBasedState> RunFor(const ForceBasedParams& params, const ForceBasedInput& input,
                                    ForceBasedState state, int ticks, double dt_s = kDt) {
  std::vector<ForceBasedState> states;
  states.reserve(ticks);
  for (int k = 0; k < ticks; ++k) {
    StepForceBased(params, input, dt_s, state);
    states.push_back(state);
  }
  return states;
}

double Distance(const Pose2& a, const Pose2& b) { return std::hypot(a.x_m - b.x_m, a.y_m - b.y_m); }

double KineticEnergy(const ForceBasedParams& params, const ForceBasedState& state) {
  return ReadForceBased(params, {}, state).kinetic_energy_j;
}

// ---------------------------------------------------------------------------------------------
// Spec validation.

TEST(ForceBased, ResolveFillsEveryDefault) {
  const ForceBasedSpec spec = Resolved();
  EXPECT_EQ(spec.mass_kg, 1200.0);
  EXPECT_EQ(spec.engine_force_n, 8000.0);
  EXPECT_EQ(spec.brake_force_n, 8000.0);
  EXPECT_EQ(spec.drag_coefficient, 0.35);
  EXPECT_EQ(spec.frontal_area_m2, 2.2);
  EXPECT_EQ(spec.air_density_kgpm3, 1.29);
  EXPECT_EQ(spec.rolling_resistance_nspm, 10.5);
  EXPECT_EQ(spec.rolling_resistance_coefficient, 0.0);
  EXPECT_EQ(spec.axle_distance_m, 2.7);
  EXPECT_EQ(spec.slip_threshold_mps, 30.0);
  ForceBasedSpec short_car;
  ASSERT_TRUE(ResolveForceBasedSpec(2.0, 1.0, short_car).ok());
  EXPECT_EQ(short_car.axle_distance_m, 2.0);
  ForceBasedSpec custom{.mass_kg = 660.0, .axle_distance_m = 4.5};
  ASSERT_TRUE(ResolveForceBasedSpec(kLength_m, 1.8, custom).ok());
  EXPECT_EQ(custom.mass_kg, 660.0);
  EXPECT_EQ(custom.axle_distance_m, 4.5);
}

TEST(ForceBased, DefaultLimitsAreTheOriginals) {
  const VehicleLimits limits = DefaultForceBasedLimits(Resolved());
  EXPECT_DOUBLE_EQ(limits.max_steering_angle_rad, 60.0 * kPi / 180.0);
  EXPECT_EQ(limits.max_speed_mps, 60.0);
  EXPECT_EQ(limits.max_reverse_speed_mps, 0.0);
  EXPECT_TRUE(std::isinf(limits.max_steering_rate_radps));
  EXPECT_EQ(ForceBasedBodyCenterOffset(Resolved(), kLength_m), 0.0);
}

struct InvalidCase {
  std::string field;
  ForceBasedSpec spec;
};

class ForceBasedValidation : public ::testing::TestWithParam<InvalidCase> {};

const double kNaN = std::nan("");
const double kInf = std::numeric_limits<double>::infinity();

INSTANTIATE_TEST_SUITE_P(
    ForceBased, ForceBasedValidation,
    ::testing::Values(
        InvalidCase{"mass_kg", {.mass_kg = 0.0}}, InvalidCase{"mass_kg", {.mass_kg = -1.0}},
        InvalidCase{"mass_kg", {.mass_kg = 1e6}}, InvalidCase{"mass_kg", {.mass_kg = kNaN}},
        InvalidCase{"engine_force_n", {.engine_force_n = 0.0}},
        InvalidCase{"engine_force_n", {.engine_force_n = kInf}},
        InvalidCase{"brake_force_n", {.brake_force_n = -8000.0}},
        InvalidCase{"brake_force_n", {.brake_force_n = 2e6}},
        InvalidCase{"drag_coefficient", {.drag_coefficient = -0.1}},
        InvalidCase{"drag_coefficient", {.drag_coefficient = 11.0}},
        InvalidCase{"frontal_area_m2", {.frontal_area_m2 = -2.2}},
        InvalidCase{"frontal_area_m2", {.frontal_area_m2 = kNaN}},
        InvalidCase{"air_density_kgpm3", {.air_density_kgpm3 = -1.0}},
        InvalidCase{"air_density_kgpm3", {.air_density_kgpm3 = 1000.0}},
        InvalidCase{"rolling_resistance_nspm", {.rolling_resistance_nspm = -10.5}},
        InvalidCase{"rolling_resistance_coefficient", {.rolling_resistance_coefficient = -0.01}},
        InvalidCase{"rolling_resistance_coefficient", {.rolling_resistance_coefficient = 1.5}},
        InvalidCase{"axle_distance_m", {.axle_distance_m = 0.0}},
        InvalidCase{"axle_distance_m", {.axle_distance_m = 5.0}},  // main.m's 5 m: longer
                                                                   // than a 4.5 m body.
        InvalidCase{"slip_threshold_mps", {.slip_threshold_mps = 0.0}},
        InvalidCase{"slip_threshold_mps", {.slip_threshold_mps = -30.0}}));

TEST_P(ForceBasedValidation, NamesTheField) {
  ForceBasedSpec spec = GetParam().spec;
  const absl::Status status = ResolveForceBasedSpec(kLength_m, 1.8, spec);
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               StartsWith("force_based." + GetParam().field + ": ")));
}

// ---------------------------------------------------------------------------------------------
// Speed.

// Full throttle on a straight: the speed tends to the root of engine = drag + rolling
// resistance, k v² + c v + C = F, v = 2 (F − C) / (c + sqrt(c² + 4 k (F − C))) (the form
// without cancellation). With the defaults that is 116.79 m/s; the original's double-counted
// drag (0.25 cof A² ρ² v²) gave 99.354 m/s. Euler has the same fixed point as the ODE, and it
// converges at the rate (2 k v + c) / m = 0.105 /s: after 400 s it is within 117 e^{-42} m/s.
TEST(ForceBased, TerminalSpeedIsTheRootOfTheForceBalance) {
  struct Case {
    double rolling_coefficient, throttle;
  };
  for (const Case& c : {Case{0.0, 1.0}, Case{0.0, 0.4}, Case{0.012, 1.0}}) {
    const ForceBasedParams params =
        Params({.rolling_resistance_coefficient = c.rolling_coefficient}, MaxSpeed(200.0));
    const double force_n = 8000.0 * c.throttle - c.rolling_coefficient * kMass_kg * 9.80665;
    const double terminal_mps =
        2 * force_n /
        (kRolling_nspm + std::sqrt(kRolling_nspm * kRolling_nspm + 4 * kDrag_nspm2 * force_n));
    const std::vector<ForceBasedState> run =
        RunFor(params, MakeForceBasedInput(params, c.throttle, 0.0, 0.0), {}, 20000);
    EXPECT_NEAR(run.back().speed_mps, terminal_mps, 1e-9);
    EXPECT_NEAR(run.back().acceleration_mps2, 0.0, 1e-9);
    if (c.throttle == 1.0 && c.rolling_coefficient == 0.0) {
      EXPECT_NEAR(terminal_mps, 116.79, 0.01);
      EXPECT_GT(run.back().speed_mps - 99.354, 17.0);  // Not the original's bug.
    }
  }
}

// Coasting: m v' = −k v² − c v is a Bernoulli equation; u = 1/v gives u' = (c/m) u + k/m, so
// v(t) = 1 / ((1/v0 + k/c) e^{c t / m} − k/c). Euler is first order: the error is about
// (dt/2)·|v''|·t and halves with dt.
TEST(ForceBased, CoastDownFollowsTheClosedFormAtFirstOrder) {
  const ForceBasedParams params = Params({}, MaxSpeed(100.0));
  const double v0 = 50.0, t_s = 30.0;
  const double k = kDrag_nspm2, c = kRolling_nspm, m = kMass_kg;
  const auto exact = [&](double t) {
    return 1.0 / ((1.0 / v0 + k / c) * std::exp(c * t / m) - k / c);
  };
  const auto error_at = [&](double dt_s) {
    const int n = static_cast<int>(std::lround(t_s / dt_s));
    const std::vector<ForceBasedState> run =
        RunFor(params, MakeForceBasedInput(params, 0.0, 0.0, 0.0),
               MakeForceBasedState(params, {}, v0), n, dt_s);
    return run.back().speed_mps - exact(t_s);
  };
  const double coarse = error_at(0.04), fine = error_at(0.02);
  EXPECT_NEAR(exact(t_s), 24.87, 0.01);  // It really slowed down (from 50 m/s).
  // Error bound: the local error is v'' dt² / 2 with v'' = (2 k v + c) |v'| / m at most
  // (2·0.5·50 + 10.5)/1200 · 1.47 = 0.075 m/s³ at the start, i.e. 6e-5 m/s per 0.04 s tick;
  // 750 ticks (the error is damped, not amplified) bound the global error by 0.045 m/s.
  EXPECT_LT(std::abs(coarse), 0.045);
  EXPECT_GT(std::abs(coarse), 1e-3);  // A real discretisation error, not rounding.
  // The speed is convex in time, so Euler's tangent steps fall below it.
  EXPECT_LT(coarse, 0.0);
  EXPECT_NEAR(coarse / fine, 2.0, 0.05);
}

// Braking with no resistance is a constant deceleration F_b / m: the car stops within the tick
// that crosses zero, after exactly v0² m / (2 F_b), and stays at exactly 0.
TEST(ForceBased, BrakingStopsAtTheExactDistanceAndNeverReverses) {
  const ForceBasedParams params = Frictionless();
  const double v0 = 20.0;
  const double decel = 8000.0 / kMass_kg;  // 6.67 m/s²: stops after 3.0 s = 150 ticks.
  ForceBasedState state = MakeForceBasedState(params, {.x_m = 1.0, .yaw_rad = 0.0}, v0);
  const ForceBasedInput brake = MakeForceBasedInput(params, 0.0, 1.0, 0.0);
  double previous = v0;
  for (int k = 0; k < 400; ++k) {
    StepForceBased(params, brake, 0.0137, state);  // A tick that does not divide 3 s.
    ASSERT_LE(state.speed_mps, previous);
    ASSERT_GE(state.speed_mps, 0.0);
    previous = state.speed_mps;
  }
  EXPECT_EQ(state.speed_mps, 0.0);
  EXPECT_NEAR(state.pose.x_m - 1.0, v0 * v0 / (2 * decel), 1e-9);
  EXPECT_EQ(state.pose.y_m, 0.0);
  // All the kinetic energy went into the brakes.
  EXPECT_NEAR(state.dissipated_energy_j, 0.5 * kMass_kg * v0 * v0, 1e-9 * kMass_kg * v0 * v0);
}

// At standstill the brake (plus constant rolling resistance) holds the car while it covers the
// engine force; otherwise the car pulls away at (engine − brake − C_rr m g) / m.
TEST(ForceBased, BrakeHoldsAtStandstillWhileItCoversTheEngine) {
  struct Case {
    double throttle, brake, rolling_coefficient;
    double expected_mps2;
  };
  const double g = 9.80665;
  for (const Case& c : {
           Case{1.0, 1.0, 0.0, 0.0},               // 8000 N against 8000 N: held.
           Case{0.5, 0.6, 0.0, 0.0},               // Held.
           Case{0.0, 0.0, 0.0, 0.0},               // No pedals: stays.
           Case{0.0, 1.0, 0.0, 0.0},               // Brake alone: no reverse.
           Case{1.0, 0.99, 0.0, 80.0 / kMass_kg},  // 80 N net: creeps away.
           Case{0.02, 0.0, 0.02, 0.0},             // 160 N < 235 N rolling: held.
           Case{0.3, 0.0, 0.02, (2400.0 - 0.02 * kMass_kg * g) / kMass_kg},
       }) {
    const ForceBasedParams params =
        Params({.rolling_resistance_coefficient = c.rolling_coefficient});
    const Pose2 start{.x_m = -3.0, .y_m = 2.0, .yaw_rad = 1.0};
    const std::vector<ForceBasedState> run =
        RunFor(params, MakeForceBasedInput(params, c.throttle, c.brake, 0.4),
               MakeForceBasedState(params, start, 0.0), 50);
    if (c.expected_mps2 == 0.0) {
      for (const ForceBasedState& s : run) {
        ASSERT_EQ(s.speed_mps, 0.0);
        ASSERT_EQ(s.pose.x_m, start.x_m);
        ASSERT_EQ(s.pose.y_m, start.y_m);
        ASSERT_EQ(s.pose.yaw_rad, start.yaw_rad);
        ASSERT_EQ(s.dissipated_energy_j, 0.0);
      }
    } else {
      EXPECT_NEAR(run[0].acceleration_mps2, c.expected_mps2, 1e-12);
      EXPECT_GT(run.back().speed_mps, 0.0);
    }
  }
}

// The speed limit is applied before the move: no tick goes farther than limit·dt, and the tick
// that reaches the limit covers the accelerating part and the capped part exactly.
TEST(ForceBased, SpeedLimitAppliesBeforeTheMove) {
  const ForceBasedParams params = Frictionless();  // 60 m/s limit; 6.67 m/s² at full throttle.
  const double a = 8000.0 / kMass_kg;
  ForceBasedState state = MakeForceBasedState(params, {}, 59.9);
  StepForceBased(params, MakeForceBasedInput(params, 1.0, 0.0, 0.0), 0.1, state);
  const double t_hit = 0.1 / a;
  EXPECT_NEAR(state.pose.x_m, (59.9 + 60.0) / 2 * t_hit + 60.0 * (0.1 - t_hit), 1e-12);
  EXPECT_EQ(state.speed_mps, 60.0);

  const std::vector<ForceBasedState> run =
      RunFor(params, MakeForceBasedInput(params, 1.0, 0.0, 0.5),
             MakeForceBasedState(params, {}, 0.0), 3000);
  Pose2 previous{};
  for (const ForceBasedState& s : run) {
    ASSERT_LE(s.speed_mps, 60.0);
    ASSERT_LE(Distance(s.pose, previous), 60.0 * kDt * (1 + 1e-12));
    previous = s.pose;
  }
  EXPECT_EQ(run.back().speed_mps, 60.0);
  // Spawning above the limit is clamped.
  EXPECT_EQ(MakeForceBasedState(params, {}, 70.0).speed_mps, 60.0);
  EXPECT_EQ(MakeForceBasedState(params, {}, -5.0).speed_mps, 0.0);
}

// ---------------------------------------------------------------------------------------------
// Steering.

// At constant speed (no resistance, no pedals) the yaw rate is v sin(δ_eff) / L with δ_eff = δ
// up to the slip threshold and δ exp(3 (1 − v / 30)) above it. The reference notes list the
// speeds at which the original's steering coefficient falls to 0.5, 0.3, 0.2 and 0.1.
TEST(ForceBased, SteeringFadesAboveTheSlipThreshold) {
  struct Case {
    double speed_mps, coefficient;
  };
  const ForceBasedParams params = Frictionless();
  const double steer = 0.3;
  for (const Case& c : {Case{5.0, 1.0}, Case{30.0, 1.0}, Case{36.93, 0.5}, Case{42.04, 0.3},
                        Case{46.09, 0.2}, Case{53.03, 0.1}}) {
    const double coefficient =
        c.speed_mps > 30.0 ? std::exp(3.0 * (1.0 - c.speed_mps / 30.0)) : 1.0;
    EXPECT_NEAR(coefficient, c.coefficient, 1e-3) << c.speed_mps;  // The notes' table.
    const std::vector<ForceBasedState> run =
        RunFor(params, MakeForceBasedInput(params, 0.0, 0.0, steer),
               MakeForceBasedState(params, {}, c.speed_mps), 3);
    EXPECT_EQ(run.back().speed_mps, c.speed_mps);
    EXPECT_NEAR(run.back().yaw_rate_radps, c.speed_mps * std::sin(steer * coefficient) / 2.7, 1e-12)
        << c.speed_mps;
    EXPECT_EQ(ReadForceBased(params, {}, run.back()).steering_angle_rad, steer);
  }
}

// At constant speed the reference point runs on a circle of radius L / sin(δ_eff) (the
// original's R = axleDist / sind(effSteer)), exactly: the step follows the exact arc.
TEST(ForceBased, ConstantSpeedCircleHasRadiusAxleDistanceOverSineOfEffectiveSteering) {
  const ForceBasedParams params = Frictionless();
  for (const double v : {10.0, 40.0}) {
    for (const double steer : {0.5, -1.0}) {
      const double effective = v > 30.0 ? steer * std::exp(3.0 * (1.0 - v / 30.0)) : steer;
      const double radius_m = 2.7 / std::sin(effective);  // Signed: negative turns right.
      const double yaw0 = 2.0;
      const Pose2 start{.x_m = 5.0, .y_m = 6.0, .yaw_rad = yaw0};
      const Pose2 centre{.x_m = 5.0 - radius_m * std::sin(yaw0),
                         .y_m = 6.0 + radius_m * std::cos(yaw0)};
      const std::vector<ForceBasedState> run =
          RunFor(params, MakeForceBasedInput(params, 0.0, 0.0, steer),
                 MakeForceBasedState(params, start, v), 2000);
      for (const ForceBasedState& s : run) {
        ASSERT_NEAR(Distance(s.pose, centre), std::abs(radius_m), 1e-9);
      }
      const double yaw = yaw0 + v * 2000 * kDt / radius_m;
      EXPECT_NEAR(WrapToPi(run.back().pose.yaw_rad - yaw), 0.0, 1e-9);
    }
  }
}

// The wheels ramp at rate·dt per tick (0.5 rad/s at 50 Hz: 0.01 rad) to the clamped command,
// and each tick at constant speed turns the heading by v dt sin(δ_k) / L for the angle in
// effect; then a reversal ramps back through zero.
TEST(ForceBased, SteeringIsClampedAndRateLimited) {
  const ForceBasedParams params =
      Params({.drag_coefficient = 0.0, .rolling_resistance_nspm = 0.0},
             [](VehicleLimits& limits) { limits.max_steering_rate_radps = 0.5; });
  const ForceBasedInput input = MakeForceBasedInput(params, 0.0, -1.0, 3.0);
  EXPECT_EQ(input.throttle, 0.0);
  EXPECT_EQ(input.brake, 0.0);
  EXPECT_EQ(MakeForceBasedInput(params, 2.0, 0.0, 0.0).throttle, 1.0);
  EXPECT_DOUBLE_EQ(input.steering_angle_rad, kPi / 3);
  EXPECT_EQ(MakeForceBasedInput(params, 0.0, 0.0, -3.0).steering_angle_rad, -kPi / 3);
  const double v = 10.0;
  ForceBasedState state = MakeForceBasedState(params, {}, v);
  double yaw = 0.0;
  for (int k = 1; k <= 150; ++k) {
    StepForceBased(params, input, kDt, state);
    const double steer = std::min(0.01 * k, kPi / 3);
    ASSERT_NEAR(state.steering_rad, steer, 1e-12) << "tick " << k;
    yaw += v * kDt * std::sin(steer) / 2.7;
    ASSERT_NEAR(state.pose.yaw_rad, WrapToPi(yaw), 1e-12) << "tick " << k;
  }
  EXPECT_EQ(state.steering_rad, input.steering_angle_rad);
  const ForceBasedInput reverse = MakeForceBasedInput(params, 0.0, 0.0, -0.2);
  for (int k = 1; k <= 150; ++k) {
    StepForceBased(params, reverse, kDt, state);
    const double steer = std::max(kPi / 3 - 0.01 * k, -0.2);
    ASSERT_NEAR(state.steering_rad, steer, 1e-12) << "tick " << k;
    yaw += v * kDt * std::sin(steer) / 2.7;
    ASSERT_NEAR(WrapToPi(state.pose.yaw_rad - yaw), 0.0, 1e-11) << "tick " << k;
  }
  EXPECT_EQ(state.steering_rad, -0.2);
}

// ---------------------------------------------------------------------------------------------
// Energy.

// Full throttle on a straight, below the speed limit: kinetic + dissipated energy equals the
// engine's work F × distance, the distance measured from the poses.
TEST(ForceBased, KineticPlusDissipatedEnergyIsTheEngineWork) {
  const ForceBasedParams params = Params({.rolling_resistance_coefficient = 0.01}, MaxSpeed(200.0));
  const Pose2 start{.x_m = 10.0, .y_m = 20.0, .yaw_rad = -0.7};
  ForceBasedState state = MakeForceBasedState(params, start, 0.0);
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> pedal(0.0, 1.0);
  double engine_work_j = 0.0;
  for (int k = 0; k < 5000; ++k) {
    const ForceBasedInput input = MakeForceBasedInput(params, pedal(rng), 0.3 * pedal(rng), 0.0);
    const Pose2 before = state.pose;
    StepForceBased(params, input, kDt, state);
    engine_work_j += input.engine_force_n * Distance(before, state.pose);
    const VehicleReadout readout = ReadForceBased(params, input, state);
    ASSERT_NEAR(readout.kinetic_energy_j + readout.dissipated_energy_j, engine_work_j,
                1e-9 * engine_work_j + 1e-9)
        << "tick " << k;
  }
  EXPECT_GT(state.speed_mps, 20.0);
  EXPECT_GT(state.dissipated_energy_j, 1e6);
}

// Coasting, the dissipated energy is the work of drag and rolling resistance, ∫(k v² + c v) v dt
// along the exact coast-down v(t) (Simpson's rule, 30,000 panels: error ~1e-12 relative), to
// the model's first-order accuracy.
TEST(ForceBased, CoastingDissipationIsTheIntegralOfTheResistancePower) {
  const ForceBasedParams params = Params({}, MaxSpeed(100.0));
  const double v0 = 45.0, t_s = 20.0;
  const double k = kDrag_nspm2, c = kRolling_nspm, m = kMass_kg;
  const auto v = [&](double t) { return 1.0 / ((1.0 / v0 + k / c) * std::exp(c * t / m) - k / c); };
  const auto power = [&](double t) { return (k * v(t) + c) * v(t) * v(t); };
  const int panels = 30000;
  const double h = t_s / panels;
  double integral = power(0.0) + power(t_s);
  for (int i = 1; i < panels; ++i) integral += (i % 2 ? 4.0 : 2.0) * power(i * h);
  integral *= h / 3.0;

  const auto dissipated_at = [&](double dt_s) {
    const int n = static_cast<int>(std::lround(t_s / dt_s));
    const std::vector<ForceBasedState> run =
        RunFor(params, MakeForceBasedInput(params, 0.0, 0.0, 0.2),
               MakeForceBasedState(params, {}, v0), n, dt_s);
    double previous = 0.0;
    for (const ForceBasedState& s : run) {
      EXPECT_GE(s.dissipated_energy_j, previous);
      previous = s.dissipated_energy_j;
    }
    return run.back().dissipated_energy_j;
  };
  const double coarse = dissipated_at(0.04) - integral;
  const double fine = dissipated_at(0.02) - integral;
  EXPECT_LT(std::abs(coarse), 1e-3 * integral);
  EXPECT_NEAR(coarse / fine, 2.0, 0.05);
}

// Held at the speed limit, the engine is throttled back to what holds the speed: the tick
// dissipates only the resistance's work, (k v² + c v) v dt, not the full engine force's.
TEST(ForceBased, AtTheSpeedLimitOnlyTheResistanceIsDissipated) {
  const ForceBasedParams params = Params();  // 60 m/s limit, below the 116.8 m/s terminal speed.
  ForceBasedState state = MakeForceBasedState(params, {}, 60.0);
  const ForceBasedInput input = MakeForceBasedInput(params, 1.0, 0.0, 0.0);
  for (int k = 0; k < 10; ++k) {
    const double before = state.dissipated_energy_j;
    StepForceBased(params, input, kDt, state);
    EXPECT_EQ(state.speed_mps, 60.0);
    EXPECT_NEAR(state.dissipated_energy_j - before,
                (kDrag_nspm2 * 60.0 + kRolling_nspm) * 60.0 * 60.0 * kDt, 1e-9);
  }
}

TEST(ForceBased, HaltStopsForGoodAndTheCrashTakesTheKineticEnergy) {
  const ForceBasedParams params = Params();
  ForceBasedInput input = MakeForceBasedInput(params, 1.0, 0.0, 0.4);
  ForceBasedState state = MakeForceBasedState(params, {.x_m = 1.0}, 20.0);
  StepForceBased(params, input, kDt, state);
  const double total_j = KineticEnergy(params, state) + state.dissipated_energy_j;
  HaltForceBased(params, input, state);
  EXPECT_EQ(state.speed_mps, 0.0);
  EXPECT_EQ(state.acceleration_mps2, 0.0);
  EXPECT_EQ(state.yaw_rate_radps, 0.0);
  EXPECT_EQ(input.engine_force_n, 0.0);
  EXPECT_NEAR(state.dissipated_energy_j, total_j, 1e-9);
  const ForceBasedState halted = state;
  for (int k = 0; k < 50; ++k) StepForceBased(params, input, kDt, state);
  EXPECT_EQ(std::memcmp(&state, &halted, sizeof state), 0);
}

// ---------------------------------------------------------------------------------------------
// Convergence, invariants and determinism.

// Against an independent oracle: RK4 on the continuous equations (top of force_based.h) with
// 0.1 ms steps (error ~1e-13 m), accelerating through the slip threshold while steering, so
// that the fade is in play. The model is first order (Euler speed, δ_eff held per tick):
// halving dt halves the end-point error.
TEST(ForceBased, ConvergesAtFirstOrderToTheContinuousModel) {
  const ForceBasedParams params = Params();
  const double throttle = 0.8, steer = 0.05, v0 = 25.0, t_s = 6.0;
  struct Y {
    double x, y, yaw, v;
  };
  const auto rhs = [&](const Y& s) {
    const double force = 8000.0 * throttle - (kDrag_nspm2 * s.v + kRolling_nspm) * s.v;
    const double effective = s.v > 30.0 ? steer * std::exp(3.0 * (1.0 - s.v / 30.0)) : steer;
    return Y{s.v * std::cos(s.yaw), s.v * std::sin(s.yaw), s.v * std::sin(effective) / 2.7,
             force / kMass_kg};
  };
  const auto axpy = [](const Y& a, double h, const Y& b) {
    return Y{a.x + h * b.x, a.y + h * b.y, a.yaw + h * b.yaw, a.v + h * b.v};
  };
  Y oracle{0.0, 0.0, 0.0, v0};
  const double h = 1e-4;
  for (int i = 0; i < static_cast<int>(std::lround(t_s / h)); ++i) {
    const Y k1 = rhs(oracle), k2 = rhs(axpy(oracle, h / 2, k1)), k3 = rhs(axpy(oracle, h / 2, k2)),
            k4 = rhs(axpy(oracle, h, k3));
    oracle = Y{oracle.x + h / 6 * (k1.x + 2 * k2.x + 2 * k3.x + k4.x),
               oracle.y + h / 6 * (k1.y + 2 * k2.y + 2 * k3.y + k4.y),
               oracle.yaw + h / 6 * (k1.yaw + 2 * k2.yaw + 2 * k3.yaw + k4.yaw),
               oracle.v + h / 6 * (k1.v + 2 * k2.v + 2 * k3.v + k4.v)};
  }
  ASSERT_GT(oracle.v, 40.0);  // Well past the slip threshold.
  const auto error_at = [&](double dt_s) {
    const int n = static_cast<int>(std::lround(t_s / dt_s));
    const std::vector<ForceBasedState> run =
        RunFor(params, MakeForceBasedInput(params, throttle, 0.0, steer),
               MakeForceBasedState(params, {}, v0), n, dt_s);
    return Distance(run.back().pose, {.x_m = oracle.x, .y_m = oracle.y});
  };
  const double coarse = error_at(0.04), fine = error_at(0.02), finer = error_at(0.01);
  EXPECT_GT(coarse, 1e-3);
  EXPECT_NEAR(coarse / fine, 2.0, 0.1);
  EXPECT_NEAR(fine / finer, 2.0, 0.1);
}

void RunRandom(const ForceBasedParams& params, std::uint64_t seed, int ticks, double dt_s,
               const std::function<void(const ForceBasedInput&, const ForceBasedState&,
                                        const ForceBasedState&)>& check) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> pedal(-0.2, 1.2);  // Beyond [0, 1] now and then.
  std::uniform_real_distribution<double> steer(-1.5, 1.5);  // Beyond the limit now and then.
  std::uniform_int_distribution<int> hold(1, 80);
  ForceBasedState state =
      MakeForceBasedState(params, {.x_m = -1e3, .y_m = 5e2, .yaw_rad = -3.0}, 15.0);
  ForceBasedInput input;
  int next_change = 0;
  for (int k = 0; k < ticks; ++k) {
    if (k == next_change) {
      // Throttle off a third of the time, brake half the time.
      input = MakeForceBasedInput(params, rng() % 3 == 0 ? 0.0 : pedal(rng),
                                  rng() % 2 == 0 ? 0.0 : pedal(rng), steer(rng));
      next_change += hold(rng);
    }
    const ForceBasedState before = state;
    StepForceBased(params, input, dt_s, state);
    check(input, before, state);
  }
}

TEST(ForceBased, RandomControlsKeepEveryInvariant) {
  for (const double dt_s : {0.001, kDt, 0.25, 1.0}) {
    for (const double mass_kg : {1.0, 660.0, 1e5}) {
      const ForceBasedParams params =
          // Forces scaled with the mass, so that every car can move.
          Params({.mass_kg = mass_kg,
                  .engine_force_n = 8.0 * mass_kg,
                  .brake_force_n = 8.0 * mass_kg,
                  .rolling_resistance_coefficient = 0.01},
                 [](VehicleLimits& limits) {
                   limits.max_speed_mps = 80.0;
                   limits.max_steering_rate_radps = 1.0;
                 });
      int moving = 0, coasting = 0;
      RunRandom(params, 11, 20000, dt_s,
                [&](const ForceBasedInput& input, const ForceBasedState& before,
                    const ForceBasedState& after) {
                  const VehicleReadout readout = ReadForceBased(params, input, after);
                  for (const double value :
                       {after.pose.x_m, after.pose.y_m, after.pose.yaw_rad, after.speed_mps,
                        after.acceleration_mps2, after.yaw_rate_radps, after.dissipated_energy_j,
                        readout.kinetic_energy_j}) {
                    ASSERT_TRUE(std::isfinite(value));
                  }
                  ASSERT_GE(after.speed_mps, 0.0);
                  ASSERT_LE(after.speed_mps, 80.0);
                  ASSERT_GT(after.pose.yaw_rad, -kPi);
                  ASSERT_LE(after.pose.yaw_rad, kPi);
                  // The cached axes are the heading's, to a few ulps (rotated from mid-arc).
                  ASSERT_NEAR(after.cos_yaw, std::cos(after.pose.yaw_rad), 2e-15);
                  ASSERT_NEAR(after.sin_yaw, std::sin(after.pose.yaw_rad), 2e-15);
                  ASSERT_LE(std::abs(after.steering_rad), kPi / 3);
                  ASSERT_LE(std::abs(after.steering_rad - before.steering_rad), dt_s + 1e-12);
                  // Rounding of coordinates near 1e3 m: 1e-12 m.
                  ASSERT_LE(Distance(after.pose, before.pose), 80.0 * dt_s * (1 + 1e-12) + 1e-12);
                  ASSERT_GE(after.dissipated_energy_j, before.dissipated_energy_j);
                  ASSERT_NEAR(WrapToPi(after.pose.yaw_rad - before.pose.yaw_rad),
                              WrapToPi(after.yaw_rate_radps * dt_s), 1e-9);
                  if (input.throttle == 0.0) {
                    // No engine: kinetic energy never rises, and what it loses is dissipated.
                    const double ke_before = KineticEnergy(params, before);
                    const double ke_after = KineticEnergy(params, after);
                    ASSERT_LE(ke_after, ke_before);
                    ASSERT_NEAR(ke_after + after.dissipated_energy_j,
                                ke_before + before.dissipated_energy_j,
                                1e-12 * (ke_before + after.dissipated_energy_j));
                    ++coasting;
                  }
                  if (after.speed_mps > 0.0) ++moving;
                });
      EXPECT_GT(moving, 1000);
      EXPECT_GT(coasting, 1000);
    }
  }
}

TEST(ForceBased, TwoRunsAreBitIdentical) {
  const ForceBasedParams params =
      Params({}, [](VehicleLimits& limits) { limits.max_steering_rate_radps = 1.0; });
  std::vector<ForceBasedState> first, second;
  const auto record = [](std::vector<ForceBasedState>& out) {
    return [&out](const ForceBasedInput&, const ForceBasedState&, const ForceBasedState& after) {
      out.push_back(after);
    };
  };
  RunRandom(params, 42, 5000, kDt, record(first));
  RunRandom(params, 42, 5000, kDt, record(second));
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(ForceBasedState)), 0);
}

}  // namespace
}  // namespace pitlane::sim
