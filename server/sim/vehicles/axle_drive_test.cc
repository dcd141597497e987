#include "server/sim/vehicles/axle_drive.h"

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

using ::testing::DoubleNear;
using ::testing::StartsWith;

constexpr double kDt = 0.02;       // 50 Hz.
constexpr double kLength_m = 4.5;  // Body length of every test vehicle.
constexpr double kG = 9.80665;     // Standard gravity, written out independently of the model.

AxleDriveSpec Resolved(AxleDriveSpec spec = {}) {
  const absl::Status status = ResolveAxleDriveSpec("front_wheel_drive", kLength_m, 1.8, spec);
  EXPECT_TRUE(status.ok()) << status;
  return spec;
}

AxleDriveParams Params(DriveAxles axles, AxleDriveSpec spec = {},
                       VehicleLimits limits = VehicleLimits{}, double dt_s = kDt) {
  return MakeAxleDriveParams(Resolved(spec), axles, limits, dt_s);
}

// A car whose speed never changes while coasting: no drag.
AxleDriveParams NoDrag(DriveAxles axles = DriveAxles::kFront) {
  return Params(axles, {.drag_coefficient_1ps = 0.0});
}

// Runs one vehicle for `ticks` ticks with held controls, recording the state after each tick.
std::vector<AxleDriveState> RunFor(const AxleDriveParams& params, const AxleDriveInput& input,
                                   AxleDriveState state, int ticks, double dt_s = kDt) {
  std::vector<AxleDriveState> states;
  states.reserve(ticks);
  for (int k = 0; k < ticks; ++k) {
    StepAxleDrive(params, input, dt_s, state);
    states.push_back(state);
  }
  return states;
}

double Distance(const Pose2& a, const Pose2& b) { return std::hypot(a.x_m - b.x_m, a.y_m - b.y_m); }

// The centre of the circle through three points.
Pose2 Circumcentre(const Pose2& a, const Pose2& b, const Pose2& c) {
  const double d =
      2 * (a.x_m * (b.y_m - c.y_m) + b.x_m * (c.y_m - a.y_m) + c.x_m * (a.y_m - b.y_m));
  const double a2 = a.x_m * a.x_m + a.y_m * a.y_m;
  const double b2 = b.x_m * b.x_m + b.y_m * b.y_m;
  const double c2 = c.x_m * c.x_m + c.y_m * c.y_m;
  return {.x_m = (a2 * (b.y_m - c.y_m) + b2 * (c.y_m - a.y_m) + c2 * (a.y_m - b.y_m)) / d,
          .y_m = (a2 * (c.x_m - b.x_m) + b2 * (a.x_m - c.x_m) + c2 * (b.x_m - a.x_m)) / d};
}

// ---------------------------------------------------------------------------------------------
// Spec validation.

TEST(AxleDrive, ResolveFillsEveryDefault) {
  AxleDriveSpec spec;
  ASSERT_TRUE(ResolveAxleDriveSpec("all_wheel_drive", kLength_m, 1.8, spec).ok());
  EXPECT_EQ(spec.wheelbase_m, 2.7);
  EXPECT_DOUBLE_EQ(*spec.rear_overhang_m, 0.9);  // (4.5 − 2.7) / 2.
  EXPECT_EQ(spec.gas_to_acc_mps2, 3.5);
  EXPECT_EQ(spec.brake_to_acc_mps2, 8.0);
  EXPECT_EQ(spec.drag_coefficient_1ps, 0.05);
  EXPECT_EQ(spec.friction_coefficient, 1.0);
  EXPECT_EQ(spec.cg_height_m, 0.55);
  EXPECT_DOUBLE_EQ(*spec.cg_to_front_axle_m, 0.4 * 2.7);
  // A body shorter than the default wheelbase gets a wheelbase as long as the body.
  AxleDriveSpec short_car;
  ASSERT_TRUE(ResolveAxleDriveSpec("front_wheel_drive", 2.0, 1.2, short_car).ok());
  EXPECT_EQ(short_car.wheelbase_m, 2.0);
  EXPECT_EQ(short_car.rear_overhang_m, 0.0);
  // Set fields are kept.
  AxleDriveSpec custom{.wheelbase_m = 3.0, .cg_height_m = 0.0};
  ASSERT_TRUE(ResolveAxleDriveSpec("front_wheel_drive", kLength_m, 1.8, custom).ok());
  EXPECT_EQ(custom.wheelbase_m, 3.0);
  EXPECT_DOUBLE_EQ(*custom.rear_overhang_m, 0.75);
  EXPECT_DOUBLE_EQ(*custom.cg_to_front_axle_m, 1.2);
  EXPECT_EQ(custom.cg_height_m, 0.0);
}

TEST(AxleDrive, BoundaryValuesAreAccepted) {
  for (AxleDriveSpec spec : {
           AxleDriveSpec{.wheelbase_m = kLength_m},  // Axles at the ends of the body.
           AxleDriveSpec{.rear_overhang_m = 0.0},
           AxleDriveSpec{.rear_overhang_m = kLength_m - 2.7},
           AxleDriveSpec{.drag_coefficient_1ps = 0.0},
           AxleDriveSpec{.drag_coefficient_1ps = 1.0},
           AxleDriveSpec{.friction_coefficient = 3.0},
           AxleDriveSpec{.cg_to_front_axle_m = 0.0},
           AxleDriveSpec{.cg_to_front_axle_m = 2.7},
       }) {
    EXPECT_TRUE(ResolveAxleDriveSpec("front_wheel_drive", kLength_m, 1.8, spec).ok());
  }
}

struct InvalidCase {
  std::string field;
  AxleDriveSpec spec;
};

class AxleDriveValidation : public ::testing::TestWithParam<InvalidCase> {};

const double kNaN = std::nan("");
const double kInf = std::numeric_limits<double>::infinity();

INSTANTIATE_TEST_SUITE_P(
    AxleDrive, AxleDriveValidation,
    ::testing::Values(InvalidCase{"wheelbase_m", {.wheelbase_m = 0.0}},
                      InvalidCase{"wheelbase_m", {.wheelbase_m = -1.0}},
                      InvalidCase{"wheelbase_m", {.wheelbase_m = 4.6}},  // Longer than the body.
                      InvalidCase{"wheelbase_m", {.wheelbase_m = kNaN}},
                      InvalidCase{"rear_overhang_m", {.rear_overhang_m = -0.1}},
                      InvalidCase{"rear_overhang_m", {.rear_overhang_m = 1.81}},  // Rear axle
                      // so far back that the front axle leaves the body.
                      InvalidCase{"gas_to_acc_mps2", {.gas_to_acc_mps2 = 0.0}},
                      InvalidCase{"gas_to_acc_mps2", {.gas_to_acc_mps2 = 101.0}},
                      InvalidCase{"gas_to_acc_mps2", {.gas_to_acc_mps2 = kInf}},
                      InvalidCase{"brake_to_acc_mps2", {.brake_to_acc_mps2 = -1.0}},
                      InvalidCase{"brake_to_acc_mps2", {.brake_to_acc_mps2 = 0.0}},
                      InvalidCase{"drag_coefficient_1ps", {.drag_coefficient_1ps = -0.01}},
                      InvalidCase{"drag_coefficient_1ps", {.drag_coefficient_1ps = 1.5}},
                      InvalidCase{"friction_coefficient", {.friction_coefficient = 0.0}},
                      InvalidCase{"friction_coefficient", {.friction_coefficient = 3.5}},
                      InvalidCase{"cg_height_m", {.cg_height_m = -0.1}},
                      InvalidCase{"cg_height_m", {.cg_height_m = 6.0}},
                      InvalidCase{"cg_to_front_axle_m", {.cg_to_front_axle_m = -0.1}},
                      InvalidCase{"cg_to_front_axle_m", {.cg_to_front_axle_m = 2.71}},
                      InvalidCase{"cg_to_front_axle_m", {.cg_to_front_axle_m = kNaN}}));

TEST_P(AxleDriveValidation, NamesTheFieldUnderTheWireName) {
  for (const char* wire_name : {"front_wheel_drive", "all_wheel_drive"}) {
    AxleDriveSpec spec = GetParam().spec;
    const absl::Status status = ResolveAxleDriveSpec(wire_name, kLength_m, 1.8, spec);
    EXPECT_THAT(status,
                StatusIs(absl::StatusCode::kInvalidArgument,
                         StartsWith(std::string(wire_name) + "." + GetParam().field + ": ")));
  }
}

TEST(AxleDrive, DefaultLimitsForbidReverse) {
  const VehicleLimits limits = DefaultAxleDriveLimits(Resolved());
  EXPECT_EQ(limits.max_reverse_speed_mps, 0.0);
  EXPECT_EQ(limits.max_speed_mps, 30.0);
  EXPECT_EQ(limits.max_steering_angle_rad, 0.6);
  EXPECT_TRUE(std::isinf(limits.max_steering_rate_radps));
}

TEST(AxleDrive, BodyCentreOffsetFollowsTheRearOverhang) {
  struct Case {
    AxleDriveSpec spec;
    double offset_m;
  };
  for (const Case& c :
       {Case{{}, 0.0},  // Wheelbase centred in the body.
                        // Rear axle 0.5 m from the rear: the body's rear is 1.85 m behind the
                        // midpoint, its centre 2.25 − 1.85 = 0.4 m ahead of it.
        Case{{.rear_overhang_m = 0.5}, 0.4}, Case{{.wheelbase_m = 4.5}, 0.0},
        Case{{.wheelbase_m = 2.5, .rear_overhang_m = 0.0}, 1.0}}) {
    EXPECT_NEAR(AxleDriveBodyCenterOffset(Resolved(c.spec), kLength_m), c.offset_m, 1e-15);
  }
}

// ---------------------------------------------------------------------------------------------
// Kinematics.

// The seed's two_wheel_drive (reference notes §2) transcribed literally, with its axle points
// in world coordinates, as an oracle for the model's body-axes arithmetic.
struct SeedCar {
  double x, y, heading, speed;
};
void SeedTwoWheelDrive(SeedCar& car, double length, double steering_angle, double gas, double brake,
                       double gas_to_acc, double brake_to_acc, double drag_coef, double dt) {
  double fx = car.x + length / 2 * std::cos(car.heading);
  double fy = car.y + length / 2 * std::sin(car.heading);
  double bx = car.x - length / 2 * std::cos(car.heading);
  double by = car.y - length / 2 * std::sin(car.heading);
  car.speed =
      car.speed + gas * gas_to_acc * dt - brake * brake_to_acc * dt - drag_coef * car.speed * dt;
  car.speed = car.speed >= 0 ? car.speed : 0;
  fx += car.speed * dt * std::cos(car.heading + steering_angle);
  fy += car.speed * dt * std::sin(car.heading + steering_angle);
  bx += car.speed * dt * std::cos(car.heading);
  by += car.speed * dt * std::sin(car.heading);
  car.x = (fx + bx) / 2;
  car.y = (fy + by) / 2;
  car.heading = std::atan2(fy - by, fx - bx);
}

// Within the grip limits, the speed limit and the steering limit the model is the seed, tick
// by tick, under random pedals and steering. The arithmetic differs (body axes versus world
// coordinates), so agreement is to rounding accumulated over 5,000 ticks, not bit-for-bit.
TEST(AxleDrive, MatchesTheSeedAlgorithmTickByTick) {
  const AxleDriveParams params = Params(DriveAxles::kAll, {}, {.max_speed_mps = 100.0});
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> pedal(0.0, 1.0);
  std::uniform_real_distribution<double> steer(-0.55, 0.55);
  AxleDriveState state = MakeAxleDriveState(params, {.x_m = 5.0, .y_m = -3.0, .yaw_rad = 2.0}, 4.0);
  SeedCar seed{.x = 5.0, .y = -3.0, .heading = 2.0, .speed = 4.0};
  AxleDriveInput input;
  for (int k = 0; k < 5000; ++k) {
    if (k % 25 == 0) {
      // Throttle-biased so the car keeps moving; brake now and then.
      input =
          MakeAxleDriveInput(params, pedal(rng), pedal(rng) < 0.3 ? pedal(rng) : 0.0, steer(rng));
    }
    StepAxleDrive(params, input, kDt, state);
    SeedTwoWheelDrive(seed, 2.7, input.steering_angle_rad, input.throttle, input.brake, 3.5, 8.0,
                      0.05, kDt);
    ASSERT_NEAR(state.speed_mps, seed.speed, 1e-12) << "tick " << k;
    ASSERT_NEAR(state.pose.x_m, seed.x, 1e-9) << "tick " << k;
    ASSERT_NEAR(state.pose.y_m, seed.y, 1e-9) << "tick " << k;
    ASSERT_NEAR(WrapToPi(state.pose.yaw_rad - seed.heading), 0.0, 1e-11) << "tick " << k;
  }
  EXPECT_GT(Distance(state.pose, {.x_m = 5.0, .y_m = -3.0}), 10.0);  // It went somewhere.
}

// One tick, against the closed form of the seed's geometry: Δθ = atan2(s sin δ, L + s(cos δ
// − 1)) and the midpoint moving (s/2)(1 + cos δ, sin δ) in body axes, s = v dt with the new v.
TEST(AxleDrive, OneTickHasTheSeedsExactGeometry) {
  struct Case {
    double speed_mps, steer_rad, yaw_rad, dt_s;
  };
  const AxleDriveParams params = Params(DriveAxles::kFront, {}, {.max_steering_angle_rad = 1.5});
  for (const Case& c : {Case{10.0, 0.3, 0.4, kDt}, Case{25.0, -0.6, -3.0, 0.1},
                        // Turn just below 1/8 rad per tick: the edge of the series for atan.
                        Case{27.5, 0.6, 1.0, kDt}, Case{29.5, 0.6, 1.0, kDt},  // Just above.
                        Case{30.0, 1.5, 3.1, 1.0},  // s = 30 m: far beyond the small-step regime.
                        Case{1.0, 1e-9, 0.0, kDt}}) {
    AxleDriveState state =
        MakeAxleDriveState(params, {.x_m = 1.0, .y_m = 2.0, .yaw_rad = c.yaw_rad}, c.speed_mps);
    const AxleDriveInput input = MakeAxleDriveInput(params, 0.0, 0.0, c.steer_rad);
    StepAxleDrive(params, input, c.dt_s, state);
    const double v = c.speed_mps * (1.0 - 0.05 * c.dt_s);  // Coasting against the drag.
    const double s = v * c.dt_s;
    const double turn =
        std::atan2(s * std::sin(c.steer_rad), 2.7 + s * (std::cos(c.steer_rad) - 1));
    const double fwd = s / 2 * (1 + std::cos(c.steer_rad));
    const double left = s / 2 * std::sin(c.steer_rad);
    EXPECT_NEAR(state.speed_mps, v, 1e-14);
    EXPECT_NEAR(WrapToPi(state.pose.yaw_rad - c.yaw_rad - turn), 0.0, 1e-15);
    EXPECT_NEAR(state.pose.x_m, 1.0 + fwd * std::cos(c.yaw_rad) - left * std::sin(c.yaw_rad),
                1e-13);
    EXPECT_NEAR(state.pose.y_m, 2.0 + fwd * std::sin(c.yaw_rad) + left * std::cos(c.yaw_rad),
                1e-13);
    EXPECT_NEAR(state.yaw_rate_radps * c.dt_s, turn, 1e-15);
  }
}

// The yaw rate of the scheme tends to v sin δ / L (not v tan δ / L): per tick Δθ =
// atan2(s sin δ, L − s(1 − cos δ)) = (s sin δ / L)(1 + s(1 − cos δ)/L + O(s²)), so the relative
// error is first order in dt: halving dt halves it.
TEST(AxleDrive, YawRateTendsToSpeedTimesSineOfSteeringOverWheelbase) {
  const AxleDriveParams params = NoDrag();
  const double v = 12.0, steer = 0.45;
  const double limit_radps = v * std::sin(steer) / 2.7;
  const auto relative_error = [&](double dt_s) {
    std::vector<AxleDriveState> run = RunFor(params, MakeAxleDriveInput(params, 0.0, 0.0, steer),
                                             MakeAxleDriveState(params, {}, v), 1, dt_s);
    return run.back().yaw_rate_radps / limit_radps - 1.0;
  };
  // The next term, −(s sin δ / L)² / 3 from the atan, is 3% of the leading one at s = 4.8 cm:
  // hence the small steps and the 5% tolerances.
  const double coarse = relative_error(0.004);
  const double fine = relative_error(0.002);
  // Leading term: s (1 − cos δ) / L with s = v dt.
  EXPECT_NEAR(coarse, v * 0.004 * (1 - std::cos(steer)) / 2.7, 0.05 * coarse);
  EXPECT_NEAR(coarse / fine, 2.0, 0.05);
  EXPECT_LT(std::abs(relative_error(1e-5)), 1e-5);
  // Not v tan δ / L: that differs by 1/cos δ − 1 = 11%.
  EXPECT_GT(std::abs(v * std::tan(steer) / 2.7 / limit_radps - 1.0), 0.1);
}

// At constant speed and steering every tick is the same rigid motion in body axes, so the
// midpoints are the vertices of a regular polygon: chord s cos(δ/2) (the length of
// (s/2)(1 + cos δ, sin δ)), turn Δθ per tick, circumradius chord / (2 sin(Δθ / 2)).
TEST(AxleDrive, ConstantSpeedAndSteeringTraceARegularPolygon) {
  const AxleDriveParams params = NoDrag();
  const double v = 8.0, steer = -0.35;
  const std::vector<AxleDriveState> run =
      RunFor(params, MakeAxleDriveInput(params, 0.0, 0.0, steer),
             MakeAxleDriveState(params, {.x_m = -4.0, .yaw_rad = 1.0}, v), 2000);
  const double s = v * kDt;
  const double turn = std::atan2(s * std::sin(steer), 2.7 + s * (std::cos(steer) - 1));
  const double radius_m = s * std::cos(steer / 2) / (2 * std::sin(std::abs(turn) / 2));
  const Pose2 centre = Circumcentre(run[0].pose, run[1].pose, run[2].pose);
  for (const AxleDriveState& state : run) {
    ASSERT_NEAR(Distance(state.pose, centre), radius_m, 1e-9);
    ASSERT_EQ(state.speed_mps, v);  // No drag, no pedals: the speed never changes.
  }
}

// The continuous limit: yaw rate ω = v sin δ / L, midpoint velocity (v/2)(1 + cos δ, sin δ) in
// body axes, of length v cos(δ/2), so the midpoint circles with radius v cos(δ/2) / ω =
// L / (2 sin(δ/2)) about a centre perpendicular to that velocity. The scheme converges to that
// circle at first order: halving dt halves both the radius error and the end-point error after
// 4 s.
TEST(AxleDrive, ConvergesToTheContinuousCircleAtFirstOrder) {
  const AxleDriveParams params = NoDrag();
  const double v = 10.0, steer = 0.3, yaw0 = 0.7, t_s = 4.0;
  const double radius_m = 2.7 / (2 * std::sin(steer / 2));
  const double omega = v * std::sin(steer) / 2.7;
  const double centre_x = -radius_m * std::sin(yaw0 + steer / 2);
  const double centre_y = radius_m * std::cos(yaw0 + steer / 2);
  const double yaw_t = yaw0 + omega * t_s;
  const Pose2 exact_end = {.x_m = centre_x + radius_m * std::sin(yaw_t + steer / 2),
                           .y_m = centre_y - radius_m * std::cos(yaw_t + steer / 2)};
  struct Errors {
    double radius_m, end_m;
  };
  const auto errors_at = [&](double dt_s) {
    const int n = static_cast<int>(std::lround(t_s / dt_s));
    const std::vector<AxleDriveState> run =
        RunFor(params, MakeAxleDriveInput(params, 0.0, 0.0, steer),
               MakeAxleDriveState(params, {.yaw_rad = yaw0}, v), n, dt_s);
    const Pose2 centre = Circumcentre(run[0].pose, run[n / 3].pose, run[2 * n / 3].pose);
    return Errors{std::abs(Distance(run.back().pose, centre) - radius_m),
                  Distance(run.back().pose, exact_end)};
  };
  const Errors coarse = errors_at(0.02);
  const Errors fine = errors_at(0.01);
  const Errors finer = errors_at(0.005);
  EXPECT_GT(coarse.end_m, 1e-3);  // A real discretisation error, not rounding.
  EXPECT_NEAR(coarse.radius_m / fine.radius_m, 2.0, 0.1);
  EXPECT_NEAR(fine.radius_m / finer.radius_m, 2.0, 0.1);
  EXPECT_NEAR(coarse.end_m / fine.end_m, 2.0, 0.1);
  EXPECT_NEAR(fine.end_m / finer.end_m, 2.0, 0.1);
}

// ---------------------------------------------------------------------------------------------
// Speed.

// Constant throttle with linear drag: Euler gives v_{n+1} = v_n (1 − c dt) + a dt, so
// v_n = (a/c)(1 − (1 − c dt)^n) exactly; the ODE's solution is (a/c)(1 − e^{−c t}). With
// x = c dt, e^{−nx} ≥ (1 − x)^n ≥ e^{−nx}(1 − n x² / (2(1 − x))), which bounds the gap.
TEST(AxleDrive, SpeedUnderConstantThrottleFollowsTheEulerRecurrenceOfLinearDrag) {
  const double a = 3.5, c = 0.05;
  const AxleDriveParams params = Params(DriveAxles::kAll, {}, {.max_speed_mps = 100.0});
  const std::vector<AxleDriveState> run =
      RunFor(params, MakeAxleDriveInput(params, 1.0, 0.0, 0.0), {}, 20000);
  const double x = c * kDt;
  for (int n = 1; n <= 2000; ++n) {
    const double euler = a / c * (1.0 - std::pow(1.0 - x, n));
    const double exact = a / c * (1.0 - std::exp(-c * n * kDt));
    const double v = run[n - 1].speed_mps;
    ASSERT_NEAR(v, euler, 1e-12 * euler + 1e-15) << "tick " << n;
    ASSERT_LE(std::abs(v - exact), a / c * n * x * x / (2 * (1 - x)) + 1e-12) << "tick " << n;
  }
  // The gap is real (about (a/c) e^{-2} n x² / 2 = 0.0095 m/s after 40 s at this dt)...
  EXPECT_GT(std::abs(run[1999].speed_mps - a / c * (1.0 - std::exp(-c * 2000 * kDt))), 0.009);
  // ... and the terminal speed gas / c is approached exponentially: 70 e^{−20} = 1.4e-7 m/s
  // short of it after 400 s.
  EXPECT_NEAR(run.back().speed_mps, a / c, 2e-7);
  EXPECT_LT(run.back().speed_mps, a / c);
}

// Front-wheel drive: the driven axle carries m (g l_r − a h) / L, so its grip caps the
// acceleration at μ g l_r / (L + μ h); all-wheel drive at μ g. A weak engine is below both.
TEST(AxleDrive, TractionLimitsDependOnTheDrivenAxles) {
  struct Case {
    DriveAxles axles;
    double mu, gas_mps2;
    double expected_mps2;
  };
  const double l_r = 0.6 * 2.7, h = 0.55, L = 2.7;
  const auto front_limit = [&](double mu) { return mu * kG * l_r / (L + mu * h); };
  const std::vector<Case> cases = {
      {DriveAxles::kFront, 1.0, 20.0, front_limit(1.0)},  // 4.888 m/s²: grip-limited.
      {DriveAxles::kAll, 1.0, 20.0, kG},                  // 9.807 m/s²: grip-limited.
      {DriveAxles::kFront, 1.0, 3.5, 3.5},                // Engine-limited.
      {DriveAxles::kAll, 1.0, 3.5, 3.5},
      {DriveAxles::kFront, 0.5, 3.5, front_limit(0.5)},  // Wet road: 2.670 m/s².
      {DriveAxles::kAll, 0.5, 3.5, 3.5},                 // 0.5 g = 4.9 m/s² still suffices.
  };
  for (const Case& c : cases) {
    const AxleDriveParams params = Params(
        c.axles,
        {.gas_to_acc_mps2 = c.gas_mps2, .drag_coefficient_1ps = 0.0, .friction_coefficient = c.mu},
        {.max_speed_mps = 100.0});
    const std::vector<AxleDriveState> run =
        RunFor(params, MakeAxleDriveInput(params, 1.0, 0.0, 0.0), {}, 50);
    EXPECT_NEAR(run.back().speed_mps, c.expected_mps2 * 50 * kDt, 1e-12);
    EXPECT_NEAR(run.back().acceleration_mps2, c.expected_mps2, 1e-9);
    if (c.axles == DriveAxles::kFront && c.gas_mps2 > c.expected_mps2) {
      // At the limit the front axle's load times μ is exactly the drive force (per unit mass).
      const double front_load_per_kg = kG * l_r / L - c.expected_mps2 * h / L;
      EXPECT_NEAR(c.mu * front_load_per_kg, c.expected_mps2, 1e-12);
    }
  }
  EXPECT_GT(kG / front_limit(1.0), 2.0);  // All-wheel drive doubles the launch on dry road.
}

TEST(AxleDrive, BrakingIsLimitedByTheGripOfAllFourWheels) {
  struct Case {
    double mu, brake_mps2, expected_mps2;
  };
  for (const Case& c : {Case{1.0, 20.0, kG}, Case{1.0, 8.0, 8.0}, Case{0.5, 8.0, 0.5 * kG}}) {
    for (const DriveAxles axles : {DriveAxles::kFront, DriveAxles::kAll}) {
      const AxleDriveParams params = Params(axles, {.brake_to_acc_mps2 = c.brake_mps2,
                                                    .drag_coefficient_1ps = 0.0,
                                                    .friction_coefficient = c.mu});
      const std::vector<AxleDriveState> run =
          RunFor(params, MakeAxleDriveInput(params, 0.0, 1.0, 0.0),
                 MakeAxleDriveState(params, {}, 29.0), 10);
      EXPECT_NEAR(run.back().speed_mps, 29.0 - c.expected_mps2 * 10 * kDt, 1e-12);
    }
  }
}

// Braking ends at exactly 0 within the tick that would cross it, and the car then stays put:
// no reverse, whatever the pedals that hold it (brake alone, or brake with as much throttle).
TEST(AxleDrive, BrakingStopsAtExactlyZeroAndStays) {
  const AxleDriveParams params = Params(DriveAxles::kFront);
  AxleDriveState state = MakeAxleDriveState(params, {.x_m = 2.0, .yaw_rad = 0.5}, 10.0);
  const AxleDriveInput brake = MakeAxleDriveInput(params, 0.0, 1.0, 0.2);
  int stopped_at = -1;
  double previous = state.speed_mps;
  for (int k = 0; k < 200; ++k) {
    StepAxleDrive(params, brake, kDt, state);
    ASSERT_LE(state.speed_mps, previous);
    ASSERT_GE(state.speed_mps, 0.0);
    previous = state.speed_mps;
    if (state.speed_mps == 0.0 && stopped_at < 0) stopped_at = k;
  }
  // 10 m/s at 8 m/s² plus drag: stops within 1.25 s (62.5 ticks).
  ASSERT_GE(stopped_at, 0);
  EXPECT_LE(stopped_at, 63);
  const AxleDriveState stopped = state;
  for (const AxleDriveInput& hold : {brake, MakeAxleDriveInput(params, 1.0, 1.0, -0.4),
                                     MakeAxleDriveInput(params, 0.2, 0.5, 0.0)}) {
    for (int k = 0; k < 100; ++k) StepAxleDrive(params, hold, kDt, state);
    EXPECT_EQ(state.speed_mps, 0.0);
    EXPECT_EQ(state.pose.x_m, stopped.pose.x_m);
    EXPECT_EQ(state.pose.y_m, stopped.pose.y_m);
    EXPECT_EQ(state.pose.yaw_rad, stopped.pose.yaw_rad);
  }
}

TEST(AxleDrive, StandstillWithNoPedalsStaysPut) {
  const AxleDriveParams params = Params(DriveAxles::kAll);
  const Pose2 start{.x_m = 3.0, .y_m = -7.0, .yaw_rad = -2.0};
  for (const double steer : {0.0, 0.5, -0.6}) {
    const std::vector<AxleDriveState> run =
        RunFor(params, MakeAxleDriveInput(params, 0.0, 0.0, steer),
               MakeAxleDriveState(params, start, 0.0), 100);
    for (const AxleDriveState& state : run) {
      ASSERT_EQ(state.pose.x_m, start.x_m);
      ASSERT_EQ(state.pose.y_m, start.y_m);
      ASSERT_EQ(state.pose.yaw_rad, start.yaw_rad);
      ASSERT_EQ(state.speed_mps, 0.0);
      ASSERT_EQ(state.yaw_rate_radps, 0.0);
    }
  }
}

TEST(AxleDrive, SpeedStaysWithinTheLimitAndIsNeverNegative) {
  const AxleDriveParams params = Params(DriveAxles::kAll, {.gas_to_acc_mps2 = 9.0});
  AxleDriveState state = MakeAxleDriveState(params, {}, -5.0);  // Clamped at spawn.
  EXPECT_EQ(state.speed_mps, 0.0);
  state = MakeAxleDriveState(params, {}, 50.0);
  EXPECT_EQ(state.speed_mps, 30.0);
  const std::vector<AxleDriveState> run =
      RunFor(params, MakeAxleDriveInput(params, 1.0, 0.0, 0.1), {}, 1000);
  for (const AxleDriveState& s : run) ASSERT_LE(s.speed_mps, 30.0);
  EXPECT_EQ(run.back().speed_mps, 30.0);
  EXPECT_EQ(run.back().acceleration_mps2, 0.0);
}

TEST(AxleDrive, InputsAreClamped) {
  const AxleDriveParams params = Params(DriveAxles::kFront);
  const AxleDriveInput input = MakeAxleDriveInput(params, 2.0, -1.0, 1.0);
  EXPECT_EQ(input.throttle, 1.0);
  EXPECT_EQ(input.brake, 0.0);
  EXPECT_EQ(input.steering_angle_rad, 0.6);
  EXPECT_NEAR(input.sin_steering, std::sin(0.6), 1e-16);
  EXPECT_NEAR(input.cos_steering, std::cos(0.6), 1e-16);
  EXPECT_EQ(input.tyre_acceleration_mps2, 3.5);
  EXPECT_EQ(MakeAxleDriveInput(params, -1.0, 5.0, -9.0).steering_angle_rad, -0.6);
  EXPECT_EQ(MakeAxleDriveInput(params, -1.0, 5.0, -9.0).tyre_acceleration_mps2, -8.0);
}

// With a steering-rate limit the wheels ramp at rate·dt per tick (0.5 rad/s at 50 Hz: 0.01 rad)
// and each tick turns the heading by the seed's Δθ for the angle in effect.
TEST(AxleDrive, SteeringRateLimitRampsTheWheels) {
  const AxleDriveParams params =
      Params(DriveAxles::kFront, {.drag_coefficient_1ps = 0.0}, {.max_steering_rate_radps = 0.5});
  AxleDriveState state = MakeAxleDriveState(params, {}, 5.0);
  const AxleDriveInput input = MakeAxleDriveInput(params, 0.0, 0.0, 0.25);
  double yaw = 0.0;
  for (int k = 1; k <= 40; ++k) {
    StepAxleDrive(params, input, kDt, state);
    const double steer = std::min(0.01 * k, 0.25);
    ASSERT_NEAR(state.steering_rad, steer, 1e-12) << "tick " << k;
    const double s = 5.0 * kDt;
    yaw += std::atan2(s * std::sin(steer), 2.7 + s * (std::cos(steer) - 1));
    ASSERT_NEAR(state.pose.yaw_rad, yaw, 1e-12) << "tick " << k;
  }
  EXPECT_EQ(state.steering_rad, 0.25);  // Reached exactly, then held.
}

TEST(AxleDrive, ReadoutReportsTheLastTick) {
  const AxleDriveParams params = Params(DriveAxles::kFront);
  const AxleDriveInput input = MakeAxleDriveInput(params, 1.0, 0.0, 0.3);
  AxleDriveState state = MakeAxleDriveState(params, {}, 10.0);
  StepAxleDrive(params, input, kDt, state);
  const VehicleReadout readout = ReadAxleDrive(params, input, state);
  EXPECT_EQ(readout.steering_angle_rad, 0.3);
  EXPECT_NEAR(readout.acceleration_mps2, 3.5 - 0.05 * 10.0, 1e-12);
  EXPECT_EQ(readout.yaw_rate_radps, state.yaw_rate_radps);
  EXPECT_NEAR(readout.lateral_speed_mps, state.speed_mps * std::sin(0.3) / 2, 1e-14);
  EXPECT_EQ(readout.kinetic_energy_j, 0.0);
  EXPECT_EQ(readout.dissipated_energy_j, 0.0);
}

TEST(AxleDrive, HaltStopsTheVehicleForGood) {
  const AxleDriveParams params = Params(DriveAxles::kAll);
  AxleDriveInput input = MakeAxleDriveInput(params, 1.0, 0.0, 0.4);
  AxleDriveState state = MakeAxleDriveState(params, {.x_m = 1.0}, 20.0);
  StepAxleDrive(params, input, kDt, state);
  HaltAxleDrive(params, input, state);
  const AxleDriveState halted = state;
  EXPECT_EQ(halted.speed_mps, 0.0);
  EXPECT_EQ(halted.acceleration_mps2, 0.0);
  EXPECT_EQ(halted.yaw_rate_radps, 0.0);
  for (int k = 0; k < 50; ++k) StepAxleDrive(params, input, kDt, state);
  EXPECT_EQ(std::memcmp(&state, &halted, sizeof state), 0);
}

// ---------------------------------------------------------------------------------------------
// Invariants and determinism.

// Runs a vehicle under seeded random controls, changed every few ticks, calling `check` after
// every tick with the state before and after.
void RunRandom(const AxleDriveParams& params, std::uint64_t seed, int ticks, double dt_s,
               const std::function<void(const AxleDriveInput&, const AxleDriveState&,
                                        const AxleDriveState&)>& check) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> pedal(-0.2, 1.2);  // Beyond [0, 1] now and then.
  std::uniform_real_distribution<double> steer(-2.0, 2.0);  // Beyond the limit now and then.
  std::uniform_int_distribution<int> hold(1, 60);
  AxleDriveState state =
      MakeAxleDriveState(params, {.x_m = 1e3, .y_m = -2e3, .yaw_rad = 3.0}, 10.0);
  AxleDriveInput input;
  int next_change = 0;
  for (int k = 0; k < ticks; ++k) {
    if (k == next_change) {
      input =
          MakeAxleDriveInput(params, pedal(rng), pedal(rng) < 0.5 ? 0.0 : pedal(rng), steer(rng));
      next_change += hold(rng);
    }
    const AxleDriveState before = state;
    StepAxleDrive(params, input, dt_s, state);
    check(input, before, state);
  }
}

TEST(AxleDrive, RandomControlsKeepEveryInvariant) {
  for (const DriveAxles axles : {DriveAxles::kFront, DriveAxles::kAll}) {
    for (const double dt_s : {0.001, kDt, 0.25, 1.0}) {
      const AxleDriveParams params = Params(
          axles, {.gas_to_acc_mps2 = 12.0, .drag_coefficient_1ps = 1.0},
          {.max_steering_angle_rad = 1.5, .max_speed_mps = 60.0, .max_steering_rate_radps = 2.0});
      int moving_ticks = 0;
      RunRandom(params, 7, 20000, dt_s,
                [&](const AxleDriveInput& input, const AxleDriveState& before,
                    const AxleDriveState& after) {
                  const VehicleReadout readout = ReadAxleDrive(params, input, after);
                  for (const double value :
                       {after.pose.x_m, after.pose.y_m, after.pose.yaw_rad, after.speed_mps,
                        after.acceleration_mps2, after.yaw_rate_radps, readout.lateral_speed_mps}) {
                    ASSERT_TRUE(std::isfinite(value));
                  }
                  ASSERT_GE(after.speed_mps, 0.0);
                  ASSERT_LE(after.speed_mps, 60.0);
                  ASSERT_GT(after.pose.yaw_rad, -kPi);
                  ASSERT_LE(after.pose.yaw_rad, kPi);
                  // The cached axes are the heading's (SinCos is within 4e-16 of libm).
                  ASSERT_NEAR(after.cos_yaw, std::cos(after.pose.yaw_rad), 1e-15);
                  ASSERT_NEAR(after.sin_yaw, std::sin(after.pose.yaw_rad), 1e-15);
                  ASSERT_LE(std::abs(after.steering_rad), 1.5);
                  ASSERT_LE(std::abs(after.steering_rad - before.steering_rad), 2.0 * dt_s + 1e-12);
                  // The tyres never push harder than the driven axle's grip (drag only slows).
                  ASSERT_LE(after.acceleration_mps2, params.drive_grip_limit_mps2 + 1e-9);
                  // The midpoint moves s cos(δ/2) <= s = v dt per tick.
                  ASSERT_LE(Distance(after.pose, before.pose),
                            after.speed_mps * dt_s * (1 + 1e-12) + 1e-12);
                  ASSERT_NEAR(WrapToPi(after.pose.yaw_rad - before.pose.yaw_rad),
                              WrapToPi(after.yaw_rate_radps * dt_s), 1e-9);
                  if (after.speed_mps > 0.0) ++moving_ticks;
                });
      EXPECT_GT(moving_ticks, 1000);  // The random drive did move the car.
    }
  }
}

TEST(AxleDrive, TwoRunsAreBitIdentical) {
  const AxleDriveParams params = Params(DriveAxles::kFront, {}, {.max_steering_rate_radps = 1.0});
  std::vector<AxleDriveState> first, second;
  const auto record = [](std::vector<AxleDriveState>& out) {
    return [&out](const AxleDriveInput&, const AxleDriveState&, const AxleDriveState& after) {
      out.push_back(after);
    };
  };
  RunRandom(params, 42, 5000, kDt, record(first));
  RunRandom(params, 42, 5000, kDt, record(second));
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * sizeof(AxleDriveState)), 0);
}

}  // namespace
}  // namespace pitlane::sim
