// Determinism: every scene of determinism_scenes.h, run for its length, ends on a golden
// StateHash (and sensor hash) recorded once, which must hold on every machine and build, and
// through the server's workers with one or two threads; and a copy of the world taken mid-run
// steps bit for bit like the original (save/restore).
//
// A golden changes only when the simulation's arithmetic changes on purpose: then run this
// test, which prints every scene's hashes in the table's format, check that the change is
// meant, and update the table in the same commit.
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/session/clock.h"
#include "server/session/scheduler.h"
#include "server/session/session.h"
#include "tests/determinism_scenes.h"

namespace pitlane::sim::determinism {
namespace {

struct Golden {
  const char* scene;
  std::uint64_t state_hash;   // World::StateHash after the scene's ticks.
  std::uint64_t sensor_hash;  // SensorHash then (the model scenes carry no sensor).
};

// Recorded on x86-64 (Debian 12, GCC 12, -O3 -ffp-contract=off), after the simulation's
// transcendental functions became its own (server/sim/math) and the four-wheel tyre curve
// took AtanFast; the state hashes again when StateHash became a word-wise hash (the sensor
// hashes, computed here, stayed: the simulation did not change).
constexpr Golden kGoldens[] = {
    {"kinematic_bicycle", 0x7ac8abf6e9934329, 0xc4485a69ea81a02d},
    {"physics_body", 0x71450fa6c314cdff, 0xc4485a69ea81a02d},
    {"single_track", 0xedbefbdeded18b5b, 0xc4485a69ea81a02d},
    {"front_wheel_drive", 0x24cd07c28cd05b30, 0xc4485a69ea81a02d},
    {"all_wheel_drive", 0x092cb7da66ae9483, 0xc4485a69ea81a02d},
    {"force_based", 0x28daf2aac551d3f2, 0xc4485a69ea81a02d},
    {"four_wheel", 0xc0a1ad20a0fa178b, 0xc4485a69ea81a02d},
    {"collisions_sensors_drivers", 0x27ca159018e1694b, 0x9bfead19c7aaf365},
};

const Golden& GoldenOf(const std::string& scene) {
  for (const Golden& golden : kGoldens) {
    if (scene == golden.scene) return golden;
  }
  ADD_FAILURE() << "no golden for scene " << scene;
  return kGoldens[0];
}

std::vector<Scene> AllScenes() {
  std::vector<Scene> scenes = ModelScenes();
  scenes.push_back(CollisionScene());
  return scenes;
}

TEST(Determinism, EverySceneEndsOnItsGoldenHash) {
  for (Scene& scene : AllScenes()) {
    SCOPED_TRACE(scene.name);
    World& world = scene.world;
    for (std::uint64_t t = 0; t < scene.ticks; ++t) ASSERT_TRUE(StepScene(scene, world).ok());
    const std::uint64_t state_hash = world.StateHash();
    const std::uint64_t sensor_hash = SensorHash(world);
    std::printf("    {\"%s\", 0x%016" PRIx64 ", 0x%016" PRIx64 "},\n", scene.name.c_str(),
                state_hash, sensor_hash);
    const Golden& golden = GoldenOf(scene.name);
    EXPECT_EQ(state_hash, golden.state_hash);
    EXPECT_EQ(sensor_hash, golden.sensor_hash);
  }
}

// The scenes do what they are for: the collision scene has crashes and contacts, sensors that
// see something, and drivers that move.
TEST(Determinism, TheCollisionSceneCollidesAndSenses) {
  Scene scene = CollisionScene();
  int crashed = 0;
  bool contact = false;
  for (std::uint64_t t = 0; t < scene.ticks; ++t) {
    ASSERT_TRUE(StepScene(scene, scene.world).ok());
    contact = contact || !scene.world.contacts().empty();
  }
  bool scan_hit = false;
  for (const VehicleSnapshot& vehicle : scene.world.Snapshot()) {
    crashed += vehicle.crashed;
    if (vehicle.range_scan.has_value()) {
      for (const double range_m : vehicle.range_scan->ranges_m) scan_hit |= std::isfinite(range_m);
    }
  }
  EXPECT_TRUE(contact);
  EXPECT_GE(crashed, 2);
  EXPECT_LT(crashed, static_cast<int>(scene.world.vehicle_count()));
  EXPECT_TRUE(scan_hit);
}

// Save/restore: a copy of the world taken halfway steps exactly like the original, every tick.
TEST(Determinism, ACopyTakenMidRunStepsLikeTheOriginal) {
  for (Scene& scene : AllScenes()) {
    SCOPED_TRACE(scene.name);
    World& world = scene.world;
    for (std::uint64_t t = 0; t < scene.ticks / 2; ++t) ASSERT_TRUE(StepScene(scene, world).ok());
    World copy = world;
    ASSERT_EQ(copy.StateHash(), world.StateHash());
    for (std::uint64_t t = scene.ticks / 2; t < scene.ticks; ++t) {
      ASSERT_TRUE(StepScene(scene, world).ok());
      ASSERT_TRUE(StepScene(scene, copy).ok());
      ASSERT_EQ(copy.StateHash(), world.StateHash()) << "tick " << world.tick();
      ASSERT_EQ(SensorHash(copy), SensorHash(world)) << "tick " << world.tick();
    }
  }
}

// The same scenes stepped by the server: each one a session, all of them at once, their Steps
// run by the scheduler's workers (1 and 2 threads), their controls set through the session's
// command door between Steps. They end on the same goldens.
TEST(Determinism, ScenesSteppedByTheServerWorkersEndOnTheirGoldens) {
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    session::SteadyClock clock;
    session::Scheduler scheduler(&clock, threads);
    std::vector<std::thread> drivers;
    std::vector<std::uint64_t> state_hashes;
    std::vector<std::uint64_t> sensor_hashes;
    std::vector<Scene> scenes = AllScenes();
    state_hashes.resize(scenes.size());
    sensor_hashes.resize(scenes.size());
    for (std::size_t i = 0; i < scenes.size(); ++i) {
      drivers.emplace_back([&, i] {
        Scene& scene = scenes[i];
        auto session = std::make_shared<session::Session>(
            scene.name, session::SessionConfig{}, scene.world, 1000, &scheduler);
        session->Start();
        for (std::uint64_t tick = 0; tick < scene.ticks; ++tick) {
          const std::vector<VehicleInput> inputs = scene.inputs_at(tick);
          if (!inputs.empty()) {
            ASSERT_TRUE(session->SetControls(inputs).ok());
          }
          std::promise<absl::Status> done;
          ASSERT_TRUE(session
                          ->StartStep(1, tick,
                                      [&done](absl::StatusOr<session::StepResult> result) {
                                        done.set_value(result.status());
                                      })
                          .ok());
          ASSERT_TRUE(done.get_future().get().ok());
        }
        state_hashes[i] = session->StateHash();
        sensor_hashes[i] = SensorHash(session->CurrentFrame()->vehicles);
        session->Close();
      });
    }
    for (std::thread& driver : drivers) driver.join();
    for (std::size_t i = 0; i < scenes.size(); ++i) {
      SCOPED_TRACE(scenes[i].name);
      EXPECT_EQ(state_hashes[i], GoldenOf(scenes[i].name).state_hash);
      EXPECT_EQ(sensor_hashes[i], GoldenOf(scenes[i].name).sensor_hash);
    }
  }
}

}  // namespace
}  // namespace pitlane::sim::determinism
