#include "server/sim/world.h"

#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

absl::Status IndexedError(std::size_t index, const absl::Status& status) {
  return PrefixField(absl::StrCat("[", index, "]"), status);
}

// FNV-1a, 64-bit, over raw bytes.
class Fnv1a {
 public:
  void Add(const void* data, std::size_t size) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < size; ++i) {
      hash_ = (hash_ ^ bytes[i]) * 0x100000001b3ULL;
    }
  }
  template <typename T>
  void AddColumn(const std::vector<T>& column) {
    Add(column.data(), column.size() * sizeof(T));
  }
  std::uint64_t value() const { return hash_; }

 private:
  std::uint64_t hash_ = 0xcbf29ce484222325ULL;
};

}  // namespace

absl::StatusOr<World> World::Create(const WorldSpec& spec) {
  RETURN_IF_ERROR(CheckPositive("tick_rate_hz", spec.tick_rate_hz, kMaxTickRate_hz));
  if (!std::isfinite(1.0 / spec.tick_rate_hz)) {  // A subnormal rate: dt would overflow.
    return absl::InvalidArgumentError(
        absl::StrCat("tick_rate_hz: too small, got ", spec.tick_rate_hz));
  }
  if (spec.max_vehicles < 1) {
    return absl::InvalidArgumentError("max_vehicles: must be >= 1, got 0");
  }
  return World(WorldParams{
      .tick_rate_hz = spec.tick_rate_hz,
      .dt_s = 1.0 / spec.tick_rate_hz,
      .seed = spec.seed,
      .max_vehicles = spec.max_vehicles,
  });
}

absl::StatusOr<std::vector<VehicleId>> World::Spawn(absl::Span<const VehicleSpec> specs) {
  // Validate everything before touching the state: all or none.
  std::vector<VehicleSpec> resolved(specs.begin(), specs.end());
  for (std::size_t i = 0; i < resolved.size(); ++i) {
    RETURN_IF_ERROR(IndexedError(i, ResolveVehicleSpec(resolved[i])));
  }
  if (vehicle_count() + resolved.size() > params_.max_vehicles) {
    return absl::ResourceExhaustedError(
        absl::StrCat("vehicles: the session holds ", vehicle_count(), " of at most ",
                     params_.max_vehicles, " vehicles (max_vehicles); cannot add ",
                     resolved.size()));
  }
  std::vector<VehicleId> ids;
  ids.reserve(resolved.size());
  for (const VehicleSpec& spec : resolved) {
    const VehicleId id = state_.next_vehicle_id++;
    std::visit([&](const KinematicBicycleSpec& model) { state_.bicycles.Append(id, spec, model); },
               spec.model);
    ids.push_back(id);
  }
  return ids;
}

absl::Status World::Remove(VehicleId id) {
  const std::ptrdiff_t index = state_.bicycles.Find(id);
  if (index < 0) {
    return absl::NotFoundError(absl::StrCat("vehicle_id: no vehicle ", id, " in this world"));
  }
  state_.bicycles.Erase(static_cast<std::size_t>(index));
  return absl::OkStatus();
}

absl::Status World::SetInputs(absl::Span<const VehicleInput> inputs) {
  KinematicBicycleFleet& fleet = state_.bicycles;
  // Validate and look up everything first: all or none.
  std::vector<std::size_t> indices;
  indices.reserve(inputs.size());
  absl::flat_hash_set<VehicleId> seen;
  seen.reserve(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const VehicleInput& input = inputs[i];
    RETURN_IF_ERROR(IndexedError(i, CheckFinite("acceleration_mps2", input.acceleration_mps2)));
    RETURN_IF_ERROR(IndexedError(i, CheckFinite("steering_angle_rad", input.steering_angle_rad)));
    const std::ptrdiff_t index = fleet.Find(input.id);
    if (index < 0) {
      return IndexedError(i, absl::NotFoundError(absl::StrCat("vehicle_id: no vehicle ", input.id,
                                                              " in this world")));
    }
    if (!seen.insert(input.id).second) {
      return IndexedError(i, absl::InvalidArgumentError(absl::StrCat(
                                 "vehicle_id: vehicle ", input.id, " appears more than once")));
    }
    indices.push_back(static_cast<std::size_t>(index));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::size_t index = indices[i];
    fleet.inputs[index] = MakeKinematicBicycleInput(
        fleet.params[index], inputs[i].acceleration_mps2, inputs[i].steering_angle_rad);
  }
  return absl::OkStatus();
}

void World::Step() {
  // Inputs: the held controls in state_ apply as they are; clients change them only between
  // ticks (SetInputs).

  // Vehicle dynamics.
  StepFleet(params_.dt_s, state_.bicycles);

  // Clock.
  ++state_.tick;
}

std::vector<VehicleSnapshot> World::Snapshot() const {
  const KinematicBicycleFleet& fleet = state_.bicycles;
  std::vector<VehicleSnapshot> vehicles;
  vehicles.reserve(fleet.size());
  for (std::size_t i = 0; i < fleet.size(); ++i) vehicles.push_back(fleet.SnapshotAt(i));
  return vehicles;
}

std::vector<VehicleDescription> World::DescribeVehicles() const {
  const KinematicBicycleFleet& fleet = state_.bicycles;
  std::vector<VehicleDescription> vehicles;
  vehicles.reserve(fleet.size());
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    vehicles.push_back({.id = fleet.ids[i], .spec = fleet.specs[i]});
  }
  return vehicles;
}

std::uint64_t World::StateHash() const {
  const KinematicBicycleFleet& fleet = state_.bicycles;
  Fnv1a hash;
  hash.Add(&state_.tick, sizeof(state_.tick));
  hash.Add(&state_.next_vehicle_id, sizeof(state_.next_vehicle_id));
  hash.AddColumn(fleet.ids);
  for (const KinematicBicycleInput& input : fleet.inputs) {
    hash.Add(&input.acceleration_mps2, sizeof(double));
    hash.Add(&input.steering_angle_rad, sizeof(double));
  }
  hash.AddColumn(fleet.x_m);
  hash.AddColumn(fleet.y_m);
  hash.AddColumn(fleet.yaw_rad);
  hash.AddColumn(fleet.speed_mps);
  hash.AddColumn(fleet.acceleration_mps2);
  return hash.value();
}

}  // namespace pitlane::sim
