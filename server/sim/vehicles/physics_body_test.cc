#include "server/sim/vehicles/physics_body.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/util/status_matchers.h"

namespace pitlane::sim {
namespace {

using ::testing::HasSubstr;

struct Body {
  PhysicsBodyParams params;
  PhysicsBodyInput input;
  PhysicsBodyState state;
};

Body MakeBody(double tick_rate_hz, double drag = 0.98, VehicleLimits limits = {},
              double speed_mps = 0.0, Pose2 pose = {}) {
  PhysicsBodySpec spec{.drag_factor_per_frame = drag};
  EXPECT_TRUE(ResolvePhysicsBodySpec(4.5, 1.8, spec).ok());
  Body body;
  body.params = MakePhysicsBodyParams(spec, limits, 1.0 / tick_rate_hz);
  body.state = MakePhysicsBodyState(body.params, pose, speed_mps);
  return body;
}

void Advance(Body& body, double tick_rate_hz, int ticks) {
  for (int i = 0; i < ticks; ++i) StepPhysicsBody(body.params, body.input, 1.0 / tick_rate_hz, body.state);
}

// With no input the speed decays as v0 k^(50 t) at every tick rate: the per-tick factor is
// k^(50 dt), so after n = t / dt ticks the product is k^(50 t) up to n roundings.
TEST(PhysicsBodyTest, SpeedDecaysExponentiallyAtEveryTickRate) {
  const double k = 0.98;
  const double v0 = 20.0;
  for (const double rate_hz : {50.0, 25.0, 100.0, 60.0, 1000.0}) {
    for (const double t_s : {1.0, 3.0}) {
      Body body = MakeBody(rate_hz, k, {}, v0);
      const int ticks = static_cast<int>(std::lround(t_s * rate_hz));
      Advance(body, rate_hz, ticks);
      const double expected = v0 * std::pow(k, kPhysicsBodyFrameRate_hz * t_s);
      // n multiplications by a factor itself within an ulp or two: relative error <= ~4n ulp.
      EXPECT_NEAR(body.state.speed_mps, expected, expected * 4.0 * ticks * 2.3e-16)
          << rate_hz << " Hz, t = " << t_s;
    }
  }
}

// At 50 Hz the seed's frame: the position after n frames is the geometric sum
// v0 dt (1 - k^n) / (1 - k), moved with the pre-drag speed each frame.
TEST(PhysicsBodyTest, PositionIsTheSeedsFrameSumAt50Hz) {
  const double k = 0.95;
  Body body = MakeBody(50.0, k, {}, 10.0);
  Advance(body, 50.0, 40);
  EXPECT_NEAR(body.state.pose.x_m, 10.0 * 0.02 * (1.0 - std::pow(k, 40)) / (1.0 - k), 1e-12);
  EXPECT_EQ(body.state.pose.y_m, 0.0);
}

// Coasting distance converges to the continuous v0 (1 - e^(-lambda t)) / lambda at first
// order (the move uses the speed at the start of the tick: a left Riemann sum, error
// ~ v0 (1 - e^(-lambda t)) dt / 2), so halving dt halves the error.
TEST(PhysicsBodyTest, CoastingDistanceConvergesAtFirstOrder) {
  const double k = 0.98;
  const double lambda = -kPhysicsBodyFrameRate_hz * std::log(k);
  const double v0 = 10.0;
  const double t_s = 2.0;
  const double exact = v0 * (1.0 - std::exp(-lambda * t_s)) / lambda;
  std::vector<double> errors;
  for (const double rate_hz : {50.0, 100.0, 200.0, 400.0}) {
    Body body = MakeBody(rate_hz, k, {}, v0);
    Advance(body, rate_hz, static_cast<int>(t_s * rate_hz));
    const double error = body.state.pose.x_m - exact;
    const double predicted = v0 * (1.0 - std::exp(-lambda * t_s)) / (2.0 * rate_hz);
    EXPECT_NEAR(error, predicted, 0.05 * predicted) << rate_hz;
    errors.push_back(error);
  }
  for (std::size_t i = 1; i < errors.size(); ++i) {
    EXPECT_NEAR(errors[i - 1] / errors[i], 2.0, 0.05);
  }
}

// The accelerator device: from rest, the net speed change per tick is capped at
// max_acceleration dt (the device makes up the drag on top), so v(n) = a dt n until the
// target; from then on the speed at the start of every tick is exactly the target.
TEST(PhysicsBodyTest, AcceleratorDeviceReachesAndHoldsTheTarget) {
  for (const double rate_hz : {50.0, 100.0}) {
    const double dt = 1.0 / rate_hz;
    Body body = MakeBody(rate_hz, 0.98, VehicleLimits{.max_acceleration_mps2 = 3.0});
    body.input = MakePhysicsBodyInput(body.params, 10.0, 0.0, 0.0);
    Advance(body, rate_hz, 10);
    EXPECT_NEAR(body.state.speed_mps, 3.0 * dt * 10, 1e-12);
    // 10 m/s at 3 m/s² takes 3.33 s.
    Advance(body, rate_hz, static_cast<int>(3.3 * rate_hz) - 10);  // To t = 3.3 s.
    EXPECT_LT(body.state.speed_mps, 10.0);
    Advance(body, rate_hz, static_cast<int>(0.1 * rate_hz));
    EXPECT_EQ(body.state.speed_mps, 10.0);
    const double x0 = body.state.pose.x_m;
    Advance(body, rate_hz, static_cast<int>(5 * rate_hz));
    // Holding: 10 m/s for 5 s at either rate (the per-second behaviour is the same).
    EXPECT_NEAR(body.state.pose.x_m - x0, 50.0, 1e-9) << rate_hz;
  }
}

// The device holds even the top speed against strong drag with the default limits.
TEST(PhysicsBodyTest, DeviceHoldsTheTopSpeedAgainstDrag) {
  Body body = MakeBody(50.0, 0.9, VehicleLimits{});
  body.input = MakePhysicsBodyInput(body.params, 30.0, 0.0, 0.0);
  Advance(body, 50.0, 600);
  EXPECT_EQ(body.state.speed_mps, 30.0);
}

// AddSpeed at a steady rate works against drag: v(n+1) = k v(n) + a dt, which settles at
// a dt / (1 - k).
TEST(PhysicsBodyTest, SteadyAddSpeedSettlesWhereItBalancesDrag) {
  Body body = MakeBody(50.0, 0.98, VehicleLimits{.max_acceleration_mps2 = 1.0});
  body.input = MakePhysicsBodyInput(body.params, std::nullopt, 1.0, 0.0);
  Advance(body, 50.0, 10);
  const double k = 0.98;
  EXPECT_NEAR(body.state.speed_mps, 1.0 * 0.02 * (1.0 - std::pow(k, 10)) / (1.0 - k), 1e-12);
  Advance(body, 50.0, 2000);
  EXPECT_NEAR(body.state.speed_mps, 1.0 * 0.02 / (1.0 - k), 1e-9);
}

TEST(PhysicsBodyTest, BrakingToZeroStopsWithoutReversing) {
  Body body = MakeBody(50.0, 0.99, VehicleLimits{.max_braking_mps2 = 8.0}, 20.0);
  body.input = MakePhysicsBodyInput(body.params, 0.0, 0.0, 0.0);
  for (int i = 0; i < 500; ++i) {
    Advance(body, 50.0, 1);
    ASSERT_GE(body.state.speed_mps, 0.0) << i;
  }
  EXPECT_EQ(body.state.speed_mps, 0.0);
  const Pose2 stopped = body.state.pose;
  Advance(body, 50.0, 100);
  EXPECT_EQ(body.state.pose.x_m, stopped.x_m);
}

TEST(PhysicsBodyTest, StandsStillWithNoInput) {
  Body body = MakeBody(50.0, 0.98, {}, 0.0, Pose2{3.0, -4.0, 1.0});
  Advance(body, 50.0, 1000);
  EXPECT_EQ(body.state.pose.x_m, 3.0);
  EXPECT_EQ(body.state.pose.y_m, -4.0);
  EXPECT_EQ(body.state.pose.yaw_rad, 1.0);
  EXPECT_EQ(body.state.speed_mps, 0.0);
}

// No momentum: a quarter turn in one tick, and the next tick moves along the new heading.
TEST(PhysicsBodyTest, TurnsInstantlyWithoutSliding) {
  Body body = MakeBody(50.0, 1.0, {});
  body.input = MakePhysicsBodyInput(body.params, 5.0, 0.0, 0.0);
  body.state.speed_mps = 5.0;
  Advance(body, 50.0, 50);  // 1 s east at 5 m/s.
  EXPECT_NEAR(body.state.pose.x_m, 5.0, 1e-12);
  body.input.yaw_rate_radps = (kPi / 2) * 50.0;
  Advance(body, 50.0, 1);  // Moves 0.1 m east, then faces north.
  body.input.yaw_rate_radps = 0.0;
  Advance(body, 50.0, 50);  // 1 s north.
  EXPECT_NEAR(body.state.pose.x_m, 5.1, 1e-12);
  EXPECT_NEAR(body.state.pose.y_m, 5.0, 1e-12);
  EXPECT_NEAR(body.state.pose.yaw_rad, kPi / 2, 1e-15);
}

TEST(PhysicsBodyTest, YawIsTheRateTimesTimeWrapped) {
  Body body = MakeBody(100.0);
  body.input = MakePhysicsBodyInput(body.params, std::nullopt, 0.0, 1.3);
  Advance(body, 100.0, 1000);  // 10 s.
  EXPECT_NEAR(body.state.pose.yaw_rad, std::remainder(13.0, 2 * kPi), 1e-12);
}

TEST(PhysicsBodyTest, SpeedStaysWithinItsLimits) {
  const VehicleLimits limits{.max_acceleration_mps2 = 50.0, .max_braking_mps2 = 50.0,
                             .max_speed_mps = 12.0, .max_reverse_speed_mps = 2.0};
  Body body = MakeBody(50.0, 1.0, limits);
  body.input = MakePhysicsBodyInput(body.params, std::nullopt, 50.0, 0.0);
  Advance(body, 50.0, 100);
  EXPECT_EQ(body.state.speed_mps, 12.0);
  body.input = MakePhysicsBodyInput(body.params, -100.0, 0.0, 0.0);
  EXPECT_EQ(body.input.target_speed_mps, -2.0);
  Advance(body, 50.0, 100);
  EXPECT_EQ(body.state.speed_mps, -2.0);
}

// Long random control sequences: nothing non-finite, speed in its limits, and no tick changes
// |v| beyond drag plus the rate limits.
TEST(PhysicsBodyTest, RandomControlsKeepTheInvariants) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  const VehicleLimits limits{.max_acceleration_mps2 = 4.0, .max_braking_mps2 = 9.0,
                             .max_speed_mps = 25.0, .max_reverse_speed_mps = 6.0};
  for (const double rate_hz : {50.0, 100.0, 20.0}) {
    const double dt = 1.0 / rate_hz;
    Body body = MakeBody(rate_hz, 0.97, limits);
    for (int i = 0; i < 20000; ++i) {
      if (i % 37 == 0) {
        const bool target = unit(rng) > 0.0;
        body.input = MakePhysicsBodyInput(body.params,
                                          target ? std::optional<double>(40.0 * unit(rng))
                                                 : std::nullopt,
                                          20.0 * unit(rng), 10.0 * unit(rng));
      }
      const double v0 = body.state.speed_mps;
      const double before = body.input.holds_target != 0.0
                                ? v0
                                : v0 * body.params.drag_factor_per_tick;
      StepPhysicsBody(body.params, body.input, dt, body.state);
      const PhysicsBodyState& s = body.state;
      ASSERT_TRUE(std::isfinite(s.pose.x_m) && std::isfinite(s.pose.y_m) &&
                  std::isfinite(s.pose.yaw_rad) && std::isfinite(s.speed_mps));
      ASSERT_LE(s.speed_mps, 25.0);
      ASSERT_GE(s.speed_mps, -6.0);
      ASSERT_GT(s.pose.yaw_rad, -kPi);
      ASSERT_LE(s.pose.yaw_rad, kPi);
      // The change beyond drag (or, with the device, the net change) within the rate limits.
      ASSERT_LE(std::abs(s.speed_mps - before), 9.0 * dt + 1e-12) << i;
    }
  }
}

TEST(PhysicsBodyTest, DeterministicBitForBit) {
  auto run = [] {
    Body body = MakeBody(60.0, 0.975, {}, 3.0, Pose2{1, 2, 3});
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    for (int i = 0; i < 3000; ++i) {
      if (i % 11 == 0) body.input = MakePhysicsBodyInput(body.params, 20 * unit(rng), 0, unit(rng));
      StepPhysicsBody(body.params, body.input, 1.0 / 60.0, body.state);
    }
    return body.state;
  };
  const PhysicsBodyState a = run();
  const PhysicsBodyState b = run();
  EXPECT_EQ(std::memcmp(&a, &b, sizeof(a)), 0);
}

TEST(PhysicsBodyTest, RejectsBadDragFactors) {
  for (const double bad : {0.0, -0.5, 1.0000001, std::nan(""), HUGE_VAL}) {
    PhysicsBodySpec spec{.drag_factor_per_frame = bad};
    const absl::Status status = ResolvePhysicsBodySpec(4.5, 1.8, spec);
    EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("physics_body.drag_factor_per_frame")))
        << bad;
  }
  PhysicsBodySpec spec;
  ASSERT_TRUE(ResolvePhysicsBodySpec(4.5, 1.8, spec).ok());
  EXPECT_EQ(spec.drag_factor_per_frame, 0.98);
}

}  // namespace
}  // namespace pitlane::sim
