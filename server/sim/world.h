// A world: fixed parameters, a state value, and the step that advances it by one tick.
//
// World is single-threaded and not synchronised: its owner (a session) serialises access.
// It is a copyable value, so a test or a replay can snapshot it and step the copy.
#ifndef PITLANE_SERVER_SIM_WORLD_H_
#define PITLANE_SERVER_SIM_WORLD_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/sim/kinematic_bicycle.h"
#include "server/sim/vehicle.h"

namespace pitlane::sim {

inline constexpr double kMaxTickRate_hz = 10000.0;

// What a client asks for when it creates a world. Possibly invalid.
struct WorldSpec {
  double tick_rate_hz = 50.0;      // Ticks per simulated second, Hz, in (0, 10000].
  std::uint64_t seed = 0;          // Seed of every random choice the world makes.
  std::uint32_t max_vehicles = 1;  // Most vehicles alive at once, >= 1.
};

// Validated, immutable parameters of a world.
struct WorldParams {
  double tick_rate_hz = 50.0;  // Hz.
  double dt_s = 0.02;          // Seconds per tick: 1 / tick_rate_hz.
  std::uint64_t seed = 0;
  std::uint32_t max_vehicles = 1;
};

// The state of a world: everything that changes as it runs.
struct WorldState {
  std::uint64_t tick = 0;  // Ticks stepped since creation.
  VehicleId next_vehicle_id = 1;
  KinematicBicycleFleet bicycles;
};

// A vehicle and the spec it was spawned with (defaults filled in).
struct VehicleDescription {
  VehicleId id = 0;
  VehicleSpec spec;
};

class World {
 public:
  // Validates `spec`. InvalidArgument names the field ("tick_rate_hz", "max_vehicles").
  static absl::StatusOr<World> Create(const WorldSpec& spec);

  const WorldParams& params() const { return params_; }
  std::uint64_t tick() const { return state_.tick; }
  // Simulated time, seconds. Computed as tick / tick_rate_hz (one rounding), never summed.
  double sim_time_s() const { return static_cast<double>(state_.tick) / params_.tick_rate_hz; }
  std::size_t vehicle_count() const { return state_.bicycles.size(); }
  const WorldState& state() const { return state_; }

  // Adds every vehicle of `specs` at the current tick, or none. Returns their new ids in
  // order. Errors: InvalidArgument naming "[i].<field>" for the first invalid spec;
  // ResourceExhausted if the world would exceed max_vehicles.
  absl::StatusOr<std::vector<VehicleId>> Spawn(absl::Span<const VehicleSpec> specs);

  // Removes a vehicle. NotFound if `id` is not alive (never spawned, or removed).
  absl::Status Remove(VehicleId id);

  // Replaces the held controls of the vehicles named in `inputs`, or of none. Values are
  // clamped to each vehicle's limits. Errors, naming "[i].<field>" of the first bad entry:
  // InvalidArgument for a non-finite value or a vehicle named twice; NotFound for an id that
  // is not alive.
  absl::Status SetInputs(absl::Span<const VehicleInput> inputs);

  // Advances the world by one tick: vehicle dynamics for every vehicle with its held input.
  // Never fails.
  void Step();

  // Every vehicle alive, by ascending id.
  std::vector<VehicleSnapshot> Snapshot() const;
  std::vector<VehicleDescription> DescribeVehicles() const;

  // A 64-bit FNV-1a hash of the tick and of the bits of every state variable and held input,
  // for determinism checks: equal states hash equal on any machine with IEEE doubles.
  std::uint64_t StateHash() const;

 private:
  explicit World(const WorldParams& params) : params_(params) {}

  WorldParams params_;
  WorldState state_;
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_WORLD_H_
