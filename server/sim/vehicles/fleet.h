// A fleet: every vehicle of one model in a world, one slot per vehicle in ascending id order.
//
// ModelFleet<Model> stores, per slot, the model's Params, Input and State side by side (one
// array of each) and steps them with the model's Step. `Model` is a traits type naming the
// model's types and functions; each model's header ends with its own (PhysicsBodyModel in
// physics_body.h, ...). The kinematic bicycle keeps its own column-per-variable fleet
// (kinematic_bicycle.h), tuned for 100k-vehicle worlds, with the same member functions.
//
// Fleets, the world's set of fleets, is driven by one list of them (FleetList below): adding a
// model adds its fleet there.
#ifndef PITLANE_SERVER_SIM_VEHICLES_FLEET_H_
#define PITLANE_SERVER_SIM_VEHICLES_FLEET_H_

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/base/macros.h"
#include "server/sim/math/trig.h"
#include "server/sim/vehicles/axle_drive.h"
#include "server/sim/vehicles/force_based.h"
#include "server/sim/vehicles/four_wheel.h"
#include "server/sim/vehicles/kinematic_bicycle.h"
#include "server/sim/vehicles/model_common.h"
#include "server/sim/vehicles/physics_body.h"
#include "server/sim/vehicles/single_track.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/vehicle_table.h"

namespace pitlane::sim {

template <typename Model>
class ModelFleet {
 public:
  using Spec = typename Model::Spec;
  using Params = typename Model::Params;
  using Input = typename Model::Input;
  using State = typename Model::State;
  // The world hashes inputs and states as bytes: they hold doubles only, so no padding.
  static_assert(std::is_trivially_copyable_v<Input> && sizeof(Input) % sizeof(double) == 0);
  static_assert(std::is_trivially_copyable_v<State> && sizeof(State) % sizeof(double) == 0);
  // A State may keep SinCos(pose.yaw_rad) as cos_yaw and sin_yaw (the direction of its next
  // move); the fleet then keeps them in step when it moves a vehicle, and publishes them.
  static constexpr bool kCachesAxes = requires(const State& state) {
    state.cos_yaw;
    state.sin_yaw;
  };

  std::vector<std::uint32_t> rows;  // The vehicle's row in the world's VehicleTable.
  std::vector<Params> params;
  std::vector<Input> inputs;
  std::vector<State> states;

  std::size_t size() const { return rows.size(); }

  // Appends the vehicle of table row `row` (rows must ascend), whose model is this fleet's,
  // and publishes its state into the row.
  void Append(std::uint32_t row, const VehicleSpec& resolved_spec, double dt_s,
              VehicleTable& table) {
    ABSL_ASSERT(rows.empty() || row > rows.back());
    const auto& model = std::get<Spec>(resolved_spec.model);
    rows.push_back(row);
    params.push_back(Model::MakeParams(model, LimitsOf(resolved_spec), dt_s));
    inputs.push_back(Input{});
    states.push_back(
        Model::MakeState(params.back(), resolved_spec.initial_pose, resolved_spec.initial_speed_mps));
    PublishOne(size() - 1, table);
  }
  void Erase(std::size_t index) {
    rows.erase(rows.begin() + index);
    params.erase(params.begin() + index);
    inputs.erase(inputs.begin() + index);
    states.erase(states.begin() + index);
  }
  void SetControls(std::size_t index, const VehicleInput& input) {
    inputs[index] = Model::MakeInput(params[index], input);
  }
  void SetPose(std::size_t index, const Pose2& pose, VehicleTable& table) {
    State& state = states[index];
    state.pose = {pose.x_m, pose.y_m, WrapToPi(pose.yaw_rad)};
    if constexpr (kCachesAxes) SinCos(state.pose.yaw_rad, &state.sin_yaw, &state.cos_yaw);
    PublishOne(index, table);
  }
  void Halt(std::size_t index, VehicleTable& table) {
    Model::Halt(params[index], inputs[index], states[index]);
    PublishOne(index, table);
  }
  // Advances every vehicle by `dt_s` seconds and publishes its new pose into `table`.
  void Step(double dt_s, VehicleTable& table) {
    const std::size_t n = size();
    for (std::size_t i = 0; i < n; ++i) {
      Model::Step(params[i], inputs[i], dt_s, states[i]);
      PublishOne(i, table);
    }
  }
  // Copies the pose, speed and heading axes of the vehicle at `index` into its table row.
  void PublishOne(std::size_t index, VehicleTable& table) const {
    const State& state = states[index];
    const std::uint32_t row = rows[index];
    table.x_m[row] = state.pose.x_m;
    table.y_m[row] = state.pose.y_m;
    table.yaw_rad[row] = state.pose.yaw_rad;
    table.speed_mps[row] = state.speed_mps;
    if constexpr (kCachesAxes) {
      table.cos_yaw[row] = state.cos_yaw;
      table.sin_yaw[row] = state.sin_yaw;
    } else {
      SinCos(state.pose.yaw_rad, &table.sin_yaw[row], &table.cos_yaw[row]);
    }
  }
  VehicleReadout ReadoutAt(std::size_t index, const VehicleTable& /*table*/) const {
    return Model::Read(params[index], inputs[index], states[index]);
  }
  // The controls the vehicle at `index` holds (its model's fields of a VehicleInput).
  VehicleInput HeldAt(std::size_t index) const { return Model::Held(params[index], inputs[index]); }
};

// One fleet of each type listed, and the two ways of reaching them: all in turn (ForEach, whose
// calls the compiler inlines, for the step's loops) and the one of a model kind (Visit).
template <typename... ModelFleets>
class FleetList {
 public:
  static constexpr std::size_t kSize = sizeof...(ModelFleets);
  // The fleets come in the order of VehicleModelSpec's alternatives, which is ModelKind's.
  static_assert(kSize == std::variant_size_v<VehicleModelSpec>);
  static_assert([]<std::size_t... I>(std::index_sequence<I...>) {
    return (std::is_same_v<typename ModelFleets::Spec,
                           std::variant_alternative_t<I, VehicleModelSpec>> &&
            ...);
  }(std::index_sequence_for<ModelFleets...>{}));

  // The fleet of type `Fleet`.
  template <typename Fleet>
  Fleet& Get() {
    return std::get<Fleet>(fleets_);
  }
  template <typename Fleet>
  const Fleet& Get() const {
    return std::get<Fleet>(fleets_);
  }

  // Calls f(fleet) for every fleet, in the order listed.
  template <typename F>
  void ForEach(F&& f) {
    std::apply([&f](auto&... fleet) { (f(fleet), ...); }, fleets_);
  }
  template <typename F>
  void ForEach(F&& f) const {
    std::apply([&f](const auto&... fleet) { (f(fleet), ...); }, fleets_);
  }

  // Calls f(fleet) for the fleet of `kind`, returning what it returns.
  template <typename F>
  decltype(auto) Visit(ModelKind kind, F&& f) {
    return VisitFrom<0>(fleets_, static_cast<std::size_t>(kind), f);
  }
  template <typename F>
  decltype(auto) Visit(ModelKind kind, F&& f) const {
    return VisitFrom<0>(fleets_, static_cast<std::size_t>(kind), f);
  }

 private:
  // f(the fleet at `index`), tried from position I on: a chain of comparisons that the
  // compiler turns into a jump table, as it does a switch.
  template <std::size_t I, typename Tuple, typename F>
  static decltype(auto) VisitFrom(Tuple& fleets, std::size_t index, F& f) {
    if constexpr (I + 1 == kSize) {
      ABSL_ASSERT(index == I);
      return f(std::get<I>(fleets));
    } else {
      if (index == I) return f(std::get<I>(fleets));
      return VisitFrom<I + 1>(fleets, index, f);
    }
  }

  std::tuple<ModelFleets...> fleets_;
};

// Every model's fleet: the one list to extend when a model is added.
using Fleets =
    FleetList<KinematicBicycleFleet, ModelFleet<PhysicsBodyModel>, ModelFleet<SingleTrackModel>,
              ModelFleet<FrontWheelDriveModel>, ModelFleet<AllWheelDriveModel>,
              ModelFleet<ForceBasedModel>, ModelFleet<FourWheelModel>>;

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_FLEET_H_
