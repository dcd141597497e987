// Cost of the simulation core per vehicle and step. Run:
//   build/bin/sim_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// The `per_vehicle_step` counter is seconds per vehicle-step (shown with an n/u suffix).
#include <cmath>
#include <cstdint>
#include <vector>

#include "benchmark/benchmark.h"
#include "server/sim/vehicles/kinematic_bicycle.h"
#include "server/sim/world/world.h"

namespace pitlane::sim {
namespace {

// Controls for vehicle `i` of a model, varied so that no two vehicles take exactly the same
// path through the math: some speed up, some slow down, all steer differently.
VehicleInput ControlsFor(ModelKind kind, std::int64_t i) {
  const auto id = static_cast<VehicleId>(i + 1);
  const double steer = 0.3 * std::cos(0.37 * i);
  switch (kind) {
    case ModelKind::kKinematicBicycle:
    case ModelKind::kSingleTrack:
    case ModelKind::kFourWheel:
      return {.id = id, .acceleration_mps2 = 0.5 * std::sin(0.1 * i), .steering_angle_rad = steer};
    case ModelKind::kPhysicsBody:
      if (i % 2 == 0) return {.id = id, .target_speed_mps = 5.0 + (i % 20), .yaw_rate_radps = steer};
      return {.id = id, .acceleration_mps2 = 0.5 * std::sin(0.1 * i), .yaw_rate_radps = steer};
    case ModelKind::kFrontWheelDrive:
    case ModelKind::kAllWheelDrive:
    case ModelKind::kForceBased:
      // Pedals: a third brake, the rest throttle between 0.2 and 1.
      if (i % 3 == 0) return {.id = id, .steering_angle_rad = steer, .brake = 0.3};
      return {.id = id, .steering_angle_rad = steer, .throttle = 0.6 + 0.4 * std::sin(0.1 * i)};
  }
  return {.id = id};
}

// A world of `n` vehicles of one model spread on a grid, each with its own speed and held
// controls.
World MakeWorld(std::int64_t n, const VehicleModelSpec& model) {
  World world = *World::Create({.tick_rate_hz = 50,
                                .seed = 1,
                                .max_vehicles = static_cast<std::uint32_t>(n)});
  std::vector<VehicleSpec> specs(n);
  std::vector<VehicleInput> inputs(n);
  for (std::int64_t i = 0; i < n; ++i) {
    specs[i].initial_pose = {.x_m = 10.0 * (i % 1000), .y_m = 10.0 * (i / 1000),
                             .yaw_rad = 0.001 * i};
    specs[i].initial_speed_mps = 5.0 + (i % 20);
    specs[i].model = model;
    inputs[i] = ControlsFor(ModelKindOf(model), i);
  }
  (void)world.Spawn(specs).value();
  (void)world.SetInputs(inputs).ok();
  return world;
}

World MakeWorld(std::int64_t n, BicycleIntegrator integrator) {
  return MakeWorld(n, KinematicBicycleSpec{.integrator = integrator});
}

// Vehicle dynamics alone: the fleet's integrator loop, as World::Step runs it first.
void BM_Dynamics(benchmark::State& state, BicycleIntegrator integrator) {
  const std::int64_t n = state.range(0);
  const World world = MakeWorld(n, integrator);
  WorldState world_state = world.state();
  KinematicBicycleFleet& fleet = world_state.fleets.Get<KinematicBicycleFleet>();
  const double dt_s = world.params().dt_s;
  for (auto _ : state) {
    fleet.Step(dt_s, world_state.vehicles);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["per_vehicle_step"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}

// The whole step: dynamics, then the collision stage (the cars are 10 m apart on a lattice,
// so they never touch; collision_bench measures crowded scenes).
void BM_WorldStep(benchmark::State& state, BicycleIntegrator integrator) {
  const std::int64_t n = state.range(0);
  World world = MakeWorld(n, integrator);
  for (auto _ : state) {
    world.Step();
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["per_vehicle_step"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}

// Dynamics of each model alone: its fleet's step plus publishing the poses into the vehicle
// table, as World::Step runs them before the collision stage.
void BM_ModelDynamics(benchmark::State& state, VehicleModelSpec model) {
  const std::int64_t n = state.range(0);
  const World world = MakeWorld(n, model);
  WorldState world_state = world.state();
  const double dt_s = world.params().dt_s;
  for (auto _ : state) {
    world_state.fleets.ForEach([&](auto& fleet) {
      if (fleet.size() == 0) return;
      fleet.Step(dt_s, world_state.vehicles);
    });
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.counters["per_vehicle_step"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}

BENCHMARK_CAPTURE(BM_ModelDynamics, kinematic_bicycle, KinematicBicycleSpec{})
    ->Arg(1000)->Arg(10000)->Arg(100000);
BENCHMARK_CAPTURE(BM_ModelDynamics, physics_body, PhysicsBodySpec{})->Arg(10000)->Arg(100000);
BENCHMARK_CAPTURE(BM_ModelDynamics, single_track, SingleTrackSpec{})->Arg(10000)->Arg(100000);
BENCHMARK_CAPTURE(BM_ModelDynamics, front_wheel_drive, FrontWheelDriveSpec{})
    ->Arg(10000)->Arg(100000);
BENCHMARK_CAPTURE(BM_ModelDynamics, all_wheel_drive, AllWheelDriveSpec{})
    ->Arg(10000)->Arg(100000);
BENCHMARK_CAPTURE(BM_ModelDynamics, force_based, ForceBasedSpec{})->Arg(10000)->Arg(100000);
BENCHMARK_CAPTURE(BM_ModelDynamics, four_wheel, FourWheelSpec{})->Arg(10000)->Arg(100000);

BENCHMARK_CAPTURE(BM_Dynamics, semi_implicit_euler, BicycleIntegrator::kSemiImplicitEuler)
    ->Arg(1)->Arg(1000)->Arg(100000);
BENCHMARK_CAPTURE(BM_Dynamics, exact_arc, BicycleIntegrator::kExactArc)
    ->Arg(1)->Arg(1000)->Arg(100000);
BENCHMARK_CAPTURE(BM_WorldStep, semi_implicit_euler, BicycleIntegrator::kSemiImplicitEuler)
    ->Arg(1)->Arg(1000)->Arg(100000);
BENCHMARK_CAPTURE(BM_WorldStep, exact_arc, BicycleIntegrator::kExactArc)
    ->Arg(1)->Arg(1000)->Arg(100000);

}  // namespace
}  // namespace pitlane::sim

BENCHMARK_MAIN();
