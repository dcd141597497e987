#include "server/sim/vehicles/kinematic_bicycle.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pitlane::sim {
namespace {

using ::testing::DoubleNear;

constexpr double kDt = 0.02;  // 50 Hz, the seeds' rate.

KinematicBicycleParams Params(BicycleIntegrator integrator) {
  return KinematicBicycleParams{.wheelbase_m = 2.7, .limits = {}, .integrator = integrator};
}

// Runs one vehicle for `ticks` ticks with a held input, recording the pose after each tick.
struct Trajectory {
  std::vector<KinematicBicycleState> states;  // states[k] is after tick k+1.
};

Trajectory RunFor(const KinematicBicycleParams& params, double acceleration_mps2,
                  double steering_rad, KinematicBicycleState state, int ticks, double dt_s = kDt) {
  const KinematicBicycleInput input =
      MakeKinematicBicycleInput(params, acceleration_mps2, steering_rad);
  Trajectory run;
  for (int k = 0; k < ticks; ++k) {
    StepKinematicBicycle(params, input, dt_s, state);
    run.states.push_back(state);
  }
  return run;
}

double Distance(double ax, double ay, double bx, double by) { return std::hypot(ax - bx, ay - by); }

class BothIntegrators : public ::testing::TestWithParam<BicycleIntegrator> {};
INSTANTIATE_TEST_SUITE_P(KinematicBicycle, BothIntegrators,
                         ::testing::Values(BicycleIntegrator::kSemiImplicitEuler,
                                           BicycleIntegrator::kExactArc));

TEST_P(BothIntegrators, StraightLineAtConstantSpeed) {
  KinematicBicycleState start{.pose = {.x_m = 1.0, .y_m = -2.0, .yaw_rad = kPi / 6},
                              .speed_mps = 10.0};
  const Trajectory run = RunFor(Params(GetParam()), 0.0, 0.0, start, 500);
  const double distance_m = 10.0 * 500 * kDt;
  const KinematicBicycleState& end = run.states.back();
  EXPECT_THAT(end.pose.x_m, DoubleNear(1.0 + distance_m * std::cos(kPi / 6), 1e-9));
  EXPECT_THAT(end.pose.y_m, DoubleNear(-2.0 + distance_m * std::sin(kPi / 6), 1e-9));
  EXPECT_EQ(end.pose.yaw_rad, kPi / 6);
  EXPECT_EQ(end.speed_mps, 10.0);
  EXPECT_EQ(end.acceleration_mps2, 0.0);
}

TEST(KinematicBicycle, ConstantAccelerationFromRestMatchesEachIntegratorsClosedForm) {
  const double a = 2.0;
  const int n = 100;
  const KinematicBicycleState rest;
  // Exact: x = a t^2 / 2.
  const Trajectory exact = RunFor(Params(BicycleIntegrator::kExactArc), a, 0.0, rest, n);
  EXPECT_THAT(exact.states.back().pose.x_m, DoubleNear(0.5 * a * std::pow(n * kDt, 2), 1e-9));
  // Semi-implicit Euler moves with the speed after each update, v_k = a k dt, so
  // x_n = sum_k a k dt^2 = a dt^2 n (n + 1) / 2: half a tick ahead of the exact solution.
  const Trajectory euler = RunFor(Params(BicycleIntegrator::kSemiImplicitEuler), a, 0.0, rest, n);
  EXPECT_THAT(euler.states.back().pose.x_m, DoubleNear(a * kDt * kDt * n * (n + 1) / 2, 1e-9));
  for (const Trajectory* run : {&exact, &euler}) {
    EXPECT_THAT(run->states.back().speed_mps, DoubleNear(a * n * kDt, 1e-12));
    EXPECT_THAT(run->states.back().acceleration_mps2, DoubleNear(a, 1e-9));
  }
}

// Semi-implicit Euler at constant speed and steering moves a fixed chord v dt per tick and
// turns a fixed angle v dt kappa per tick, so its points are the vertices of a regular
// polygon: they lie exactly on a circle of radius (v dt / 2) / sin(v dt kappa / 2).
TEST(KinematicBicycle, SemiImplicitEulerTracesTheCircumcircleOfARegularPolygon) {
  const double v = 5.0;
  const double steer = 0.2;
  const KinematicBicycleParams params = Params(BicycleIntegrator::kSemiImplicitEuler);
  const Trajectory run = RunFor(params, 0.0, steer, {.speed_mps = v}, 1000);
  const double kappa = std::tan(steer) / params.wheelbase_m;
  const double polygon_radius_m = (v * kDt / 2) / std::sin(v * kDt * kappa / 2);

  // Circumcentre of the first three points.
  const auto& p = run.states;
  const double ax = p[0].pose.x_m, ay = p[0].pose.y_m;
  const double bx = p[1].pose.x_m, by = p[1].pose.y_m;
  const double cx = p[2].pose.x_m, cy = p[2].pose.y_m;
  const double d = 2 * (ax * (by - cy) + bx * (cy - ay) + cx * (ay - by));
  const double ux = ((ax * ax + ay * ay) * (by - cy) + (bx * bx + by * by) * (cy - ay) +
                     (cx * cx + cy * cy) * (ay - by)) /
                    d;
  const double uy = ((ax * ax + ay * ay) * (cx - bx) + (bx * bx + by * by) * (ax - cx) +
                     (cx * cx + cy * cy) * (bx - ax)) /
                    d;
  for (const KinematicBicycleState& state : run.states) {
    ASSERT_THAT(Distance(state.pose.x_m, state.pose.y_m, ux, uy),
                DoubleNear(polygon_radius_m, 1e-8));
  }
  // The discrete circle's radius differs from L / tan(steer) by about (v dt kappa)^2 / 24.
  const double analytic_radius_m = 1.0 / kappa;
  EXPECT_THAT(polygon_radius_m / analytic_radius_m - 1.0,
              DoubleNear(std::pow(v * kDt * kappa, 2) / 24, 1e-9));
  EXPECT_LT(std::abs(polygon_radius_m / analytic_radius_m - 1.0), 0.01);
}

struct ArcCase {
  double speed_mps;
  double steering_rad;
  double yaw0_rad;
};

class ExactArc : public ::testing::TestWithParam<ArcCase> {};
INSTANTIATE_TEST_SUITE_P(KinematicBicycle, ExactArc,
                         ::testing::Values(ArcCase{5.0, 0.2, 0.0}, ArcCase{5.0, -0.2, 1.0},
                                           ArcCase{20.0, 0.6, -2.5}, ArcCase{-2.0, 0.3, 0.5},
                                           ArcCase{0.5, 1e-7, 3.0}));

// The exact integrator must stay on the analytic circle, centre (x0 - R sin yaw0,
// y0 + R cos yaw0), and reach the closed-form pose after 1000 ticks.
TEST_P(ExactArc, FollowsTheAnalyticCircle) {
  const ArcCase c = GetParam();
  const KinematicBicycleParams params = Params(BicycleIntegrator::kExactArc);
  const KinematicBicycleState start{.pose = {.x_m = 3.0, .y_m = 4.0, .yaw_rad = c.yaw0_rad},
                                    .speed_mps = c.speed_mps};
  const int n = 1000;
  const Trajectory run = RunFor(params, 0.0, c.steering_rad, start, n);
  const double kappa = std::tan(c.steering_rad) / params.wheelbase_m;
  const double t = n * kDt;
  const double yaw = c.yaw0_rad + c.speed_mps * t * kappa;
  const KinematicBicycleState& end = run.states.back();
  if (std::abs(kappa) > 1e-3) {
    const double radius_m = 1.0 / kappa;  // Signed: negative turns right.
    const double centre_x = 3.0 - radius_m * std::sin(c.yaw0_rad);
    const double centre_y = 4.0 + radius_m * std::cos(c.yaw0_rad);
    for (const KinematicBicycleState& state : run.states) {
      ASSERT_THAT(Distance(state.pose.x_m, state.pose.y_m, centre_x, centre_y),
                  DoubleNear(std::abs(radius_m), 1e-9));
    }
    EXPECT_THAT(end.pose.x_m, DoubleNear(centre_x + radius_m * std::sin(yaw), 1e-9));
    EXPECT_THAT(end.pose.y_m, DoubleNear(centre_y - radius_m * std::cos(yaw), 1e-9));
  } else {
    // Nearly straight: the chord formula must not lose accuracy as kappa -> 0.
    const double s = c.speed_mps * t;
    const double chord = std::abs(kappa * s) > 0 ? 2 * std::sin(kappa * s / 2) / kappa : s;
    EXPECT_THAT(end.pose.x_m, DoubleNear(3.0 + chord * std::cos(c.yaw0_rad + kappa * s / 2), 1e-9));
    EXPECT_THAT(end.pose.y_m, DoubleNear(4.0 + chord * std::sin(c.yaw0_rad + kappa * s / 2), 1e-9));
  }
  EXPECT_THAT(end.pose.yaw_rad, DoubleNear(WrapToPi(yaw), 1e-9));
}

// Semi-implicit Euler is first order: halving dt halves the end-point error against the
// exact arc.
TEST(KinematicBicycle, SemiImplicitEulerConvergesAtFirstOrder) {
  const auto error_at = [](double dt_s) {
    const int n = static_cast<int>(std::lround(2.0 / dt_s));
    const KinematicBicycleState start{.speed_mps = 8.0};
    const Trajectory euler =
        RunFor(Params(BicycleIntegrator::kSemiImplicitEuler), 0.0, 0.3, start, n, dt_s);
    const Trajectory exact = RunFor(Params(BicycleIntegrator::kExactArc), 0.0, 0.3, start, n, dt_s);
    return Distance(euler.states.back().pose.x_m, euler.states.back().pose.y_m,
                    exact.states.back().pose.x_m, exact.states.back().pose.y_m);
  };
  const double coarse = error_at(0.02);
  const double fine = error_at(0.01);
  EXPECT_GT(coarse, 1e-3);  // A real discretisation error, not noise.
  EXPECT_THAT(coarse / fine, DoubleNear(2.0, 0.1));
}

struct ClampCase {
  double speed_mps;
  double commanded_mps2;
  double applied_mps2;
};

class ClampAccelerationTest : public ::testing::TestWithParam<ClampCase> {};
INSTANTIATE_TEST_SUITE_P(
    KinematicBicycle, ClampAccelerationTest,
    ::testing::Values(ClampCase{5.0, 10.0, 3.0},     // Forward, speeding up: max accel.
                      ClampCase{5.0, -20.0, -8.0},   // Forward, braking: max braking.
                      ClampCase{5.0, -5.0, -5.0},    // Within limits: unchanged.
                      ClampCase{-2.0, -10.0, -3.0},  // Reverse, speeding up backwards.
                      ClampCase{-2.0, 20.0, 8.0},    // Reverse, braking.
                      ClampCase{0.0, 10.0, 3.0},     // At rest either way raises |v|.
                      ClampCase{0.0, -10.0, -3.0}));

TEST_P(ClampAccelerationTest, LimitsByWhetherSpeedRisesOrFalls) {
  const ClampCase c = GetParam();
  EXPECT_EQ(ClampAcceleration(VehicleLimits{}, c.speed_mps, c.commanded_mps2), c.applied_mps2);
}

TEST_P(BothIntegrators, SpeedStaysWithinLimits) {
  const KinematicBicycleParams params = Params(GetParam());
  const Trajectory forward = RunFor(params, 100.0, 0.0, {}, 1000);
  EXPECT_EQ(forward.states.back().speed_mps, params.limits.max_speed_mps);
  EXPECT_EQ(forward.states.back().acceleration_mps2, 0.0);
  const Trajectory reverse = RunFor(params, -100.0, 0.0, {}, 1000);
  EXPECT_EQ(reverse.states.back().speed_mps, -params.limits.max_reverse_speed_mps);
  for (const Trajectory* run : {&forward, &reverse}) {
    for (const KinematicBicycleState& state : run->states) {
      ASSERT_LE(state.speed_mps, params.limits.max_speed_mps);
      ASSERT_GE(state.speed_mps, -params.limits.max_reverse_speed_mps);
    }
  }
}

// When the speed limit is reached mid-tick, the exact integrator covers the accelerating part
// and the capped part exactly.
TEST(KinematicBicycle, ExactArcReachesTheSpeedLimitMidTick) {
  const KinematicBicycleParams params = Params(BicycleIntegrator::kExactArc);
  const double dt = 0.1;
  KinematicBicycleState state{.speed_mps = 29.9};
  StepKinematicBicycle(params, MakeKinematicBicycleInput(params, 3.0, 0.0), dt, state);
  const double t_hit = 0.1 / 3.0;
  EXPECT_THAT(state.pose.x_m, DoubleNear((29.9 + 30.0) / 2 * t_hit + 30.0 * (dt - t_hit), 1e-12));
  EXPECT_EQ(state.speed_mps, 30.0);
  EXPECT_THAT(state.acceleration_mps2, DoubleNear(1.0, 1e-9));  // 0.1 m/s gained in 0.1 s.
}

TEST(KinematicBicycle, HeldBrakingCarriesThroughZeroIntoReverseAtTheAccelerationLimit) {
  const KinematicBicycleParams params = Params(BicycleIntegrator::kSemiImplicitEuler);
  const Trajectory run = RunFor(params, -8.0, 0.0, {.speed_mps = 0.5}, 10);
  // Braking at 8 m/s^2 for 0.02 s removes 0.16 m/s per tick: 0.34, 0.18, 0.02, then -0.14
  // (the tick started forward, so it still brakes), then reverse acceleration at 3 m/s^2.
  EXPECT_THAT(run.states[2].speed_mps, DoubleNear(0.02, 1e-12));
  EXPECT_THAT(run.states[3].speed_mps, DoubleNear(-0.14, 1e-12));
  EXPECT_THAT(run.states[4].speed_mps, DoubleNear(-0.20, 1e-12));
  EXPECT_THAT(run.states[4].acceleration_mps2, DoubleNear(-3.0, 1e-9));
}

TEST(KinematicBicycle, SteeringIsClampedAndSetsTheCurvature) {
  const KinematicBicycleParams params = Params(BicycleIntegrator::kExactArc);
  for (const double commanded : {10.0, -10.0, 0.3}) {
    const KinematicBicycleInput input = MakeKinematicBicycleInput(params, 0.0, commanded);
    const double expected = std::clamp(commanded, -0.6, 0.6);
    EXPECT_EQ(input.steering_angle_rad, expected);
    EXPECT_DOUBLE_EQ(input.curvature_1pm, std::tan(expected) / 2.7);
  }
}

// With a steering-rate limit the wheels ramp at rate * dt per tick: 0.5 rad/s at 50 Hz is
// 0.01 rad per tick, so a 0.3 rad command is reached after exactly 30 ticks and held; a
// reversal to -0.2 rad then takes 50 ticks. Under semi-implicit Euler at constant speed v the
// heading is the sum over ticks of v dt tan(steer_k) / L: checked against that sum (tan from
// libm; the model's own tan agrees to rounding).
TEST(KinematicBicycle, SteeringRateLimitRampsTheWheelsAtTheRate) {
  KinematicBicycleParams params = Params(BicycleIntegrator::kSemiImplicitEuler);
  params.limits.max_steering_rate_radps = 0.5;
  KinematicBicycleState state;
  state.speed_mps = 5.0;
  const double v_dt = 5.0 * kDt;
  double expected_yaw = 0.0;
  const auto run = [&](double command, int ticks, double start, double step) {
    const KinematicBicycleInput input = MakeKinematicBicycleInput(params, 0.0, command);
    for (int k = 1; k <= ticks; ++k) {
      StepKinematicBicycle(params, input, kDt, state);
      const double expected_steer =
          std::abs(command - start) <= k * std::abs(step) + 1e-12 ? command : start + k * step;
      ASSERT_NEAR(state.steering_rad, expected_steer, 1e-12) << "tick " << k;
      expected_yaw += v_dt * std::tan(expected_steer) / params.wheelbase_m;
      ASSERT_NEAR(state.pose.yaw_rad, expected_yaw, 1e-12) << "tick " << k;
    }
  };
  run(0.3, 40, 0.0, 0.01);
  EXPECT_EQ(state.steering_rad, 0.3);  // Reached exactly, then held.
  run(-0.2, 60, 0.3, -0.01);
  EXPECT_EQ(state.steering_rad, -0.2);
}

// Without a limit (the default) the wheels take any command at the next tick, as before.
TEST(KinematicBicycle, NoSteeringRateLimitTakesTheCommandAtOnce) {
  const KinematicBicycleParams params = Params(BicycleIntegrator::kExactArc);
  KinematicBicycleState state;
  const KinematicBicycleInput input = MakeKinematicBicycleInput(params, 0.0, -0.55);
  StepKinematicBicycle(params, input, kDt, state);
  EXPECT_EQ(state.steering_rad, -0.55);
  // The yaw turned by exactly one tick at the command's curvature (speed after one tick at
  // 0 acceleration: 0; give it speed to see the turn).
  KinematicBicycleState moving;
  moving.speed_mps = 10.0;
  StepKinematicBicycle(Params(BicycleIntegrator::kSemiImplicitEuler), input, kDt, moving);
  EXPECT_EQ(moving.steering_rad, -0.55);
  EXPECT_NEAR(moving.pose.yaw_rad, 10.0 * kDt * std::tan(-0.55) / 2.7, 1e-15);
}

TEST_P(BothIntegrators, YawStaysWrappedOverManyTurns) {
  // A tight circle at speed turns about 0.28 rad per tick: ~45 full turns in 1000 ticks.
  const Trajectory run = RunFor(Params(GetParam()), 0.0, 0.6, {.speed_mps = 20.0}, 1000);
  for (const KinematicBicycleState& state : run.states) {
    ASSERT_GT(state.pose.yaw_rad, -kPi);
    ASSERT_LE(state.pose.yaw_rad, kPi);
  }
}

TEST(WrapToPi, MapsIntoHalfOpenInterval) {
  struct Case {
    double in, out;
  };
  for (const Case& c :
       {Case{0.0, 0.0}, Case{kPi, kPi}, Case{-kPi, kPi}, Case{3 * kPi, kPi}, Case{-3 * kPi, kPi},
        Case{kPi + 0.5, -kPi + 0.5}, Case{-kPi - 0.5, kPi - 0.5}, Case{1e-300, 1e-300},
        Case{100.0, 100.0 - 32 * kPi}}) {
    EXPECT_THAT(WrapToPi(c.in), DoubleNear(c.out, 1e-12)) << "input " << c.in;
  }
}

TEST(KinematicBicycleFleet, SteppingTheFleetEqualsSteppingEachVehicleAlone) {
  // The fleet's vehicles sit in every other row of the table (as if other models' vehicles
  // were interleaved), so the step must go through its rows.
  KinematicBicycleFleet fleet;
  VehicleTable table;
  std::vector<KinematicBicycleState> alone;
  std::vector<KinematicBicycleInput> inputs;
  for (int i = 0; i < 64; ++i) {
    VehicleSpec spec;
    spec.initial_pose = {.x_m = i * 1.5, .y_m = -i * 0.5, .yaw_rad = i * 0.3};
    spec.initial_speed_mps = (i % 7) - 2.0;
    KinematicBicycleSpec model;
    model.integrator = i % 2 ? BicycleIntegrator::kExactArc : BicycleIntegrator::kSemiImplicitEuler;
    model.rear_overhang_m = 0.9;
    spec.model = model;
    table.Append(static_cast<VehicleId>(2 * i + 1), VehicleSpec{});  // Not in the fleet.
    table.Append(static_cast<VehicleId>(2 * i + 2), spec);
    fleet.Append(static_cast<std::uint32_t>(2 * i + 1), spec, model);
    if (i % 3 == 0) fleet.params[i].limits.max_steering_rate_radps = 0.05 * (i % 4 + 1);
    inputs.push_back(
        MakeKinematicBicycleInput(fleet.params[i], (i % 5) - 2.0, (i % 9) * 0.1 - 0.4));
    fleet.SetInput(i, inputs.back());
    alone.push_back(fleet.StateAt(i, table));
  }
  for (int tick = 0; tick < 200; ++tick) {
    StepFleet(kDt, fleet, table);
    for (int i = 0; i < 64; ++i)
      StepKinematicBicycle(fleet.params[i], inputs[i], kDt, alone[i]);
  }
  for (int i = 0; i < 64; ++i) {
    const KinematicBicycleState state = fleet.StateAt(i, table);
    // Bit-for-bit: the same arithmetic in the same order.
    EXPECT_EQ(state.pose.x_m, alone[i].pose.x_m);
    EXPECT_EQ(state.pose.y_m, alone[i].pose.y_m);
    EXPECT_EQ(state.pose.yaw_rad, alone[i].pose.yaw_rad);
    EXPECT_EQ(state.speed_mps, alone[i].speed_mps);
    EXPECT_EQ(state.steering_rad, alone[i].steering_rad);
    EXPECT_EQ(table.x_m[2 * i], 0.0);  // The other rows are untouched.
  }
}

}  // namespace
}  // namespace pitlane::sim
