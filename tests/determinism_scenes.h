// Fixed scenes for the determinism suite (determinism_test.cc), reusable by any runner that
// steps a World: each scene is a world at tick 0 and a pure function from the tick to the
// controls set before it. Every number here is exact or a ratio of small integers (no libm),
// so a scene is the same on every machine and its golden StateHash must be too.
#ifndef PITLANE_TESTS_DETERMINISM_SCENES_H_
#define PITLANE_TESTS_DETERMINISM_SCENES_H_

#include <bit>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/sim/world/world.h"

namespace pitlane::sim::determinism {

// A scene: its world at tick 0, its controls and its length.
struct Scene {
  std::string name;
  World world;
  // The controls to set (World::SetInputs) before stepping from `tick`; empty when none
  // change. A pure function of the tick.
  std::function<std::vector<VehicleInput>(std::uint64_t tick)> inputs_at;
  std::uint64_t ticks = 0;  // How many ticks the golden hash covers.
};

// Ticks between two changes of a scene's controls.
inline constexpr std::uint64_t kControlPeriod = 25;

// Vehicle `i`'s controls for its model in control phase `phase`: varied over the vehicles and
// the phases (speeding up, braking, steering both ways), within every default limit.
inline VehicleInput ScenedControls(ModelKind kind, VehicleId id, std::uint64_t phase) {
  const auto i = static_cast<std::int64_t>(id);
  const auto p = static_cast<std::int64_t>(phase);
  const double steer = 0.05 * static_cast<double>((3 * i + 5 * p) % 13 - 6);  // [-0.3, 0.3].
  const double accel = 0.5 * static_cast<double>((5 * i + 3 * p) % 9 - 3);    // [-1.5, 2.5].
  switch (kind) {
    case ModelKind::kKinematicBicycle:
    case ModelKind::kSingleTrack:
    case ModelKind::kFourWheel:
      return {.id = id, .acceleration_mps2 = accel, .steering_angle_rad = steer};
    case ModelKind::kPhysicsBody:
      if ((i + p) % 2 == 0) {
        return {.id = id,
                .target_speed_mps = 2.0 + static_cast<double>((i + p) % 7),
                .yaw_rate_radps = steer};
      }
      return {.id = id, .acceleration_mps2 = accel, .yaw_rate_radps = steer};
    case ModelKind::kFrontWheelDrive:
    case ModelKind::kAllWheelDrive:
    case ModelKind::kForceBased:
      if ((i + p) % 3 == 0) return {.id = id, .steering_angle_rad = steer, .brake = 0.25};
      return {.id = id,
              .steering_angle_rad = steer,
              .throttle = 0.125 * static_cast<double>(1 + (i + 2 * p) % 8)};
  }
  return {.id = id};
}

// The scene of one model: 8 vehicles of `model`, apart from each other (policy kReport), with
// varied initial headings and speeds, their controls changed every kControlPeriod ticks.
// kinematic_bicycle alternates its two integrators.
inline Scene ModelScene(std::string name, const VehicleModelSpec& model) {
  WorldSpec world_spec{.tick_rate_hz = 50.0, .seed = 11, .max_vehicles = 8};
  World world = World::Create(world_spec).value();
  std::vector<VehicleSpec> specs;
  for (int i = 0; i < 8; ++i) {
    VehicleSpec spec;
    spec.name = "car" + std::to_string(i);
    spec.model = model;
    if (auto* bicycle = std::get_if<KinematicBicycleSpec>(&spec.model)) {
      bicycle->integrator =
          i % 2 ? BicycleIntegrator::kExactArc : BicycleIntegrator::kSemiImplicitEuler;
    }
    spec.initial_pose = {.x_m = 60.0 * (i % 4), .y_m = 60.0 * (i / 4), .yaw_rad = 0.75 * (i - 4)};
    spec.initial_speed_mps = 1.5 * i;
    specs.push_back(spec);
  }
  world.Spawn(specs).value();
  const ModelKind kind = static_cast<ModelKind>(model.index());
  return Scene{
      .name = std::move(name),
      .world = std::move(world),
      .inputs_at =
          [kind](std::uint64_t tick) {
            std::vector<VehicleInput> inputs;
            if (tick % kControlPeriod != 0) return inputs;
            for (VehicleId id = 1; id <= 8; ++id) {
              inputs.push_back(ScenedControls(kind, id, tick / kControlPeriod));
            }
            return inputs;
          },
      .ticks = 500,
  };
}

// Every model's scene, in ModelKind order.
inline std::vector<Scene> ModelScenes() {
  std::vector<Scene> scenes;
  scenes.push_back(ModelScene("kinematic_bicycle", KinematicBicycleSpec{}));
  scenes.push_back(ModelScene("physics_body", PhysicsBodySpec{}));
  scenes.push_back(ModelScene("single_track", SingleTrackSpec{}));
  scenes.push_back(ModelScene("front_wheel_drive", FrontWheelDriveSpec{}));
  scenes.push_back(ModelScene("all_wheel_drive", AllWheelDriveSpec{}));
  scenes.push_back(ModelScene("force_based", ForceBasedSpec{}));
  scenes.push_back(ModelScene("four_wheel", FourWheelSpec{}));
  return scenes;
}

// A walled yard under CollisionPolicy::kStop: a closed route (a 120 m x 60 m loop) driven by
// route followers of every model and style, cruise drivers heading into obstacles and into
// each other, client-driven cars crossing the route, range scanners and nearest-object
// sensors on some. Collisions happen from tick ~60 on.
inline Scene CollisionScene() {
  WorldSpec world_spec{.tick_rate_hz = 50.0,
                       .seed = 5,
                       .max_vehicles = 32,
                       .collision_policy = CollisionPolicy::kStop,
                       .bounds = WorldBounds{
                           .min_x_m = -100.0, .min_y_m = -60.0, .max_x_m = 100.0, .max_y_m = 60.0}};
  world_spec.routes.push_back(Route{.points = {{-60.0, -30.0},
                                               {0.0, -36.0},
                                               {60.0, -30.0},
                                               {66.0, 0.0},
                                               {60.0, 30.0},
                                               {0.0, 36.0},
                                               {-60.0, 30.0},
                                               {-66.0, 0.0}},
                                    .closed = true,
                                    .lane_width_m = 4.0});
  World world = World::Create(world_spec).value();
  world
      .AddObstacles(std::vector<ObstacleSpec>{
          {.name = "block", .center_x_m = 20.0, .center_y_m = 0.0, .length_m = 4.0, .width_m = 4.0},
          {.name = "post",
           .center_x_m = -20.0,
           .center_y_m = 10.0,
           .yaw_rad = 0.5,
           .length_m = 1.0,
           .width_m = 1.0},
          {.name = "barrier",
           .center_x_m = 0.0,
           .center_y_m = -15.0,
           .length_m = 30.0,
           .width_m = 0.5}})
      .value();

  const VehicleModelSpec models[] = {KinematicBicycleSpec{}, PhysicsBodySpec{},   SingleTrackSpec{},
                                     FrontWheelDriveSpec{},  AllWheelDriveSpec{}, ForceBasedSpec{},
                                     FourWheelSpec{}};
  const DriverStyle styles[] = {DriverStyle::kNormal, DriverStyle::kSpeeder, DriverStyle::kCautious,
                                DriverStyle::kTurtle};
  std::vector<VehicleSpec> specs;
  // Route followers, one per model, spaced along the bottom and right of the loop.
  for (int i = 0; i < 7; ++i) {
    VehicleSpec spec;
    spec.name = "follower" + std::to_string(i);
    spec.model = models[i];
    spec.initial_pose = {.x_m = -50.0 + 14.0 * i, .y_m = -31.0 - 0.5 * (i % 3), .yaw_rad = 0.0};
    spec.initial_speed_mps = 2.0 * (i % 3);
    spec.driver =
        RouteFollowerSpec{.route = 0, .target_speed_mps = 8.0 + 2.0 * i, .style = styles[i % 4]};
    if (i % 2 == 0) spec.range_scan = RangeScanSpec{.beam_count = 90, .max_range_m = 40.0};
    if (i % 3 == 0) spec.nearest_objects = NearestObjectsSpec{.count = 5, .radius_m = 30.0};
    specs.push_back(spec);
  }
  // Cruise drivers: two head-on towards each other, one into the block, one into a wall.
  const struct {
    double x_m, y_m, yaw_rad, speed_mps;
  } cruisers[] = {
      {-40.0, 5.0, 0.0, 6.0}, {-5.0, 5.0, kPi, 6.0}, {5.0, 0.5, 0.0, 4.0}, {80.0, 45.0, 0.5, 9.0}};
  for (int i = 0; i < 4; ++i) {
    VehicleSpec spec;
    spec.name = "cruiser" + std::to_string(i);
    spec.model = models[(2 * i + 1) % 7];
    spec.initial_pose = {
        .x_m = cruisers[i].x_m, .y_m = cruisers[i].y_m, .yaw_rad = cruisers[i].yaw_rad};
    spec.driver = CruiseDriverSpec{.target_speed_mps = cruisers[i].speed_mps};
    if (i == 0) spec.range_scan = RangeScanSpec{.beam_count = 33, .field_of_view_rad = kPi / 2};
    if (i == 1) spec.nearest_objects = NearestObjectsSpec{.count = 3};
    specs.push_back(spec);
  }
  // Client-driven cars (ids 12..15), one of each control family, crossing the loop.
  const VehicleModelSpec manual_models[] = {KinematicBicycleSpec{}, PhysicsBodySpec{},
                                            ForceBasedSpec{}, FourWheelSpec{}};
  for (int i = 0; i < 4; ++i) {
    VehicleSpec spec;
    spec.name = "manual" + std::to_string(i);
    spec.model = manual_models[i];
    spec.initial_pose = {.x_m = -30.0 + 20.0 * i, .y_m = 45.0, .yaw_rad = -kPi / 2};
    spec.initial_speed_mps = 3.0;
    if (i == 3) spec.range_scan = RangeScanSpec{.beam_count = 16};
    specs.push_back(spec);
  }
  world.Spawn(specs).value();
  const ModelKind manual_kinds[] = {ModelKind::kKinematicBicycle, ModelKind::kPhysicsBody,
                                    ModelKind::kForceBased, ModelKind::kFourWheel};
  return Scene{
      .name = "collisions_sensors_drivers",
      .world = std::move(world),
      .inputs_at =
          [manual_kinds](std::uint64_t tick) {
            std::vector<VehicleInput> inputs;
            if (tick % kControlPeriod != 0) return inputs;
            for (int i = 0; i < 4; ++i) {
              inputs.push_back(ScenedControls(manual_kinds[i], static_cast<VehicleId>(12 + i),
                                              tick / kControlPeriod));
            }
            return inputs;
          },
      .ticks = 750,
  };
}

// Sets the scene's controls for the world's current tick, then steps it once. Returns what
// SetInputs returned (the world steps either way): OK for every scene here, as crashed
// vehicles accept and ignore controls.
inline absl::Status StepScene(const Scene& scene, World& world) {
  absl::Status status = absl::OkStatus();
  const std::vector<VehicleInput> inputs = scene.inputs_at(world.tick());
  if (!inputs.empty()) status = world.SetInputs(inputs);
  world.Step();
  return status;
}

// FNV-1a over the bits of every sensor reading of the world's snapshot (range-scan ranges,
// nearest objects): what StateHash does not cover, since sensors are read, not stepped.
inline std::uint64_t SensorHash(const std::vector<VehicleSnapshot>& snapshot) {
  std::uint64_t hash = 14695981039346656037u;
  const auto mix = [&hash](std::uint64_t word) {
    for (int byte = 0; byte < 8; ++byte) {
      hash ^= (word >> (8 * byte)) & 0xFF;
      hash *= 1099511628211u;
    }
  };
  const auto mix_double = [&mix](double value) { mix(std::bit_cast<std::uint64_t>(value)); };
  for (const VehicleSnapshot& vehicle : snapshot) {
    mix(vehicle.id);
    if (vehicle.range_scan.has_value()) {
      mix_double(vehicle.range_scan->angle_min_rad);
      mix_double(vehicle.range_scan->angle_increment_rad);
      for (const double range_m : vehicle.range_scan->ranges_m) mix_double(range_m);
    }
    if (vehicle.nearest_objects.has_value()) {
      for (const NearbyObject& object : *vehicle.nearest_objects) {
        mix(static_cast<std::uint64_t>(object.kind));
        mix(object.id);
        mix_double(object.x_m);
        mix_double(object.y_m);
        mix_double(object.distance_m);
        mix_double(object.relative_yaw_rad);
        mix_double(object.speed_mps);
      }
    }
  }
  return hash;
}

inline std::uint64_t SensorHash(const World& world) { return SensorHash(world.Snapshot()); }

}  // namespace pitlane::sim::determinism

#endif  // PITLANE_TESTS_DETERMINISM_SCENES_H_
