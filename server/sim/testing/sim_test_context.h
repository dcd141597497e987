// A world for a test to build a scene in and run (Jolt's PhysicsTestContext is the model):
//
//   SimTestContext sim({.tick_rate_hz = 50, .collision_policy = CollisionPolicy::kStop});
//   World& world = sim.world();
//   const VehicleId car = sim.Spawn(CarAt(0, 0, 0, 10));
//   sim.RunFor(2.0);  // 100 ticks.
#ifndef PITLANE_SERVER_SIM_TESTING_SIM_TEST_CONTEXT_H_
#define PITLANE_SERVER_SIM_TESTING_SIM_TEST_CONTEXT_H_

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "server/sim/collision/contacts.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/world.h"

namespace pitlane::sim {

// A spec like `base`, placed so that its body's centre is at (center_x_m, center_y_m), metres,
// heading yaw_rad, radians, moving at speed_mps, m/s. The reference point sits
// BodyOf(resolved base).center_offset_m behind the centre along the heading.
inline VehicleSpec CarAt(double center_x_m, double center_y_m, double yaw_rad,
                         double speed_mps = 0.0, VehicleSpec base = {}) {
  VehicleSpec resolved = base;
  const absl::Status status = ResolveVehicleSpec(resolved);
  EXPECT_TRUE(status.ok()) << status;
  const double center_offset_m = BodyOf(resolved).center_offset_m;
  base.initial_pose = {.x_m = center_x_m - center_offset_m * std::cos(yaw_rad),
                       .y_m = center_y_m - center_offset_m * std::sin(yaw_rad),
                       .yaw_rad = yaw_rad};
  base.initial_speed_mps = speed_mps;
  return base;
}

// Owns a World made from a WorldSpec, and steps it by ticks or by simulated seconds.
class SimTestContext {
 public:
  // The world of `spec`. An invalid spec fails the test and leaves a default world.
  explicit SimTestContext(const WorldSpec& spec) : world_(MakeWorld(spec)) {}

  World& world() { return world_; }
  const World& world() const { return world_; }

  // Spawns `spec` and returns its id; a refused spawn fails the test and returns 0.
  VehicleId Spawn(const VehicleSpec& spec) {
    absl::StatusOr<std::vector<VehicleId>> ids = world_.Spawn({spec});
    EXPECT_TRUE(ids.ok()) << ids.status();
    return ids.ok() ? ids->front() : 0;
  }

  // One tick; appends its contact transitions to `transitions` if not null.
  void StepOnce(std::vector<ContactEvent>* transitions = nullptr) { world_.Step(transitions); }

  // round(seconds * tick_rate_hz) ticks, appending their transitions to `transitions` if not
  // null.
  void RunFor(double seconds, std::vector<ContactEvent>* transitions = nullptr) {
    const auto ticks = std::llround(seconds * world_.params().tick_rate_hz);
    for (long long i = 0; i < ticks; ++i) world_.Step(transitions);
  }

 private:
  static World MakeWorld(const WorldSpec& spec) {
    absl::StatusOr<World> world = World::Create(spec);
    EXPECT_TRUE(world.ok()) << world.status();
    return world.ok() ? *std::move(world) : *World::Create({});
  }

  World world_;
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_TESTING_SIM_TEST_CONTEXT_H_
