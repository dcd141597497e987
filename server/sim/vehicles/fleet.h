// A fleet: every vehicle of one model in a world, one slot per vehicle in ascending id order.
//
// ModelFleet<Model> stores, per slot, the model's Params, Input and State side by side (one
// array of each) and steps them with the model's Step. `Model` is a traits type naming the
// model's types and functions (see PhysicsBodyModel below). The kinematic bicycle keeps its
// own column-per-variable fleet (kinematic_bicycle.h), tuned for 100k-vehicle worlds, with
// the same member functions.
#ifndef PITLANE_SERVER_SIM_VEHICLES_FLEET_H_
#define PITLANE_SERVER_SIM_VEHICLES_FLEET_H_

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "absl/base/macros.h"
#include "server/sim/vehicles/axle_drive.h"
#include "server/sim/vehicles/force_based.h"
#include "server/sim/vehicles/four_wheel.h"
#include "server/sim/vehicles/kinematic_bicycle.h"
#include "server/sim/vehicles/model_common.h"
#include "server/sim/vehicles/physics_body.h"
#include "server/sim/vehicles/single_track.h"
#include "server/sim/math/trig.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/vehicle_table.h"

namespace pitlane::sim {

template <typename Model>
class ModelFleet {
 public:
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
    const auto& model = std::get<typename Model::Spec>(resolved_spec.model);
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
};

// Traits of the models kept in a ModelFleet.

struct PhysicsBodyModel {
  using Spec = PhysicsBodySpec;
  using Params = PhysicsBodyParams;
  using Input = PhysicsBodyInput;
  using State = PhysicsBodyState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakePhysicsBodyParams(spec, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakePhysicsBodyState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakePhysicsBodyInput(params, input.target_speed_mps, input.acceleration_mps2,
                                input.yaw_rate_radps);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltPhysicsBody(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepPhysicsBody(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadPhysicsBody(params, input, state);
  }
};

struct SingleTrackModel {
  using Spec = SingleTrackSpec;
  using Params = SingleTrackParams;
  using Input = SingleTrackInput;
  using State = SingleTrackState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakeSingleTrackParams(spec, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakeSingleTrackState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakeSingleTrackInput(params, input.acceleration_mps2, input.steering_angle_rad);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltSingleTrack(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepSingleTrack(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadSingleTrack(params, input, state);
  }
};

// Front- and all-wheel drive: one model, its axles fixed by the wire entry.
template <typename SpecType, DriveAxles kAxles>
struct AxleDriveModel {
  using Spec = SpecType;
  using Params = AxleDriveParams;
  using Input = AxleDriveInput;
  using State = AxleDriveState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakeAxleDriveParams(spec, kAxles, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakeAxleDriveState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakeAxleDriveInput(params, input.throttle, input.brake, input.steering_angle_rad);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltAxleDrive(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepAxleDrive(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadAxleDrive(params, input, state);
  }
};
using FrontWheelDriveModel = AxleDriveModel<FrontWheelDriveSpec, DriveAxles::kFront>;
using AllWheelDriveModel = AxleDriveModel<AllWheelDriveSpec, DriveAxles::kAll>;

struct ForceBasedModel {
  using Spec = ForceBasedSpec;
  using Params = ForceBasedParams;
  using Input = ForceBasedInput;
  using State = ForceBasedState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakeForceBasedParams(spec, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakeForceBasedState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakeForceBasedInput(params, input.throttle, input.brake, input.steering_angle_rad);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltForceBased(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepForceBased(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadForceBased(params, input, state);
  }
};

struct FourWheelModel {
  using Spec = FourWheelSpec;
  using Params = FourWheelParams;
  using Input = FourWheelInput;
  using State = FourWheelState;
  static Params MakeParams(const Spec& spec, const VehicleLimits& limits, double dt_s) {
    return MakeFourWheelParams(spec, limits, dt_s);
  }
  static State MakeState(const Params& params, const Pose2& pose, double speed_mps) {
    return MakeFourWheelState(params, pose, speed_mps);
  }
  static Input MakeInput(const Params& params, const VehicleInput& input) {
    return MakeFourWheelInput(params, input.acceleration_mps2, input.steering_angle_rad);
  }
  static void Halt(const Params& params, Input& input, State& state) {
    HaltFourWheel(params, input, state);
  }
  static void Step(const Params& params, const Input& input, double dt_s, State& state) {
    StepFourWheel(params, input, dt_s, state);
  }
  static VehicleReadout Read(const Params& params, const Input& input, const State& state) {
    return ReadFourWheel(params, input, state);
  }
};

// One fleet per model, in the order of ModelKind.
struct Fleets {
  KinematicBicycleFleet kinematic_bicycle;
  ModelFleet<PhysicsBodyModel> physics_body;
  ModelFleet<SingleTrackModel> single_track;
  ModelFleet<FrontWheelDriveModel> front_wheel_drive;
  ModelFleet<AllWheelDriveModel> all_wheel_drive;
  ModelFleet<ForceBasedModel> force_based;
  ModelFleet<FourWheelModel> four_wheel;

  // Calls f(fleet) for every fleet.
  template <typename F>
  void ForEach(F&& f) {
    f(kinematic_bicycle);
    f(physics_body);
    f(single_track);
    f(front_wheel_drive);
    f(all_wheel_drive);
    f(force_based);
    f(four_wheel);
  }
  template <typename F>
  void ForEach(F&& f) const {
    f(kinematic_bicycle);
    f(physics_body);
    f(single_track);
    f(front_wheel_drive);
    f(all_wheel_drive);
    f(force_based);
    f(four_wheel);
  }
  // Calls f(fleet) for the fleet of `kind`, returning what it returns.
  template <typename F>
  decltype(auto) Visit(ModelKind kind, F&& f) {
    switch (kind) {
      case ModelKind::kKinematicBicycle: return f(kinematic_bicycle);
      case ModelKind::kPhysicsBody: return f(physics_body);
      case ModelKind::kSingleTrack: return f(single_track);
      case ModelKind::kFrontWheelDrive: return f(front_wheel_drive);
      case ModelKind::kAllWheelDrive: return f(all_wheel_drive);
      case ModelKind::kForceBased: return f(force_based);
      case ModelKind::kFourWheel: return f(four_wheel);
    }
    __builtin_unreachable();  // Every ModelKind is handled above.
  }
  template <typename F>
  decltype(auto) Visit(ModelKind kind, F&& f) const {
    switch (kind) {
      case ModelKind::kKinematicBicycle: return f(kinematic_bicycle);
      case ModelKind::kPhysicsBody: return f(physics_body);
      case ModelKind::kSingleTrack: return f(single_track);
      case ModelKind::kFrontWheelDrive: return f(front_wheel_drive);
      case ModelKind::kAllWheelDrive: return f(all_wheel_drive);
      case ModelKind::kForceBased: return f(force_based);
      case ModelKind::kFourWheel: return f(four_wheel);
    }
    __builtin_unreachable();  // Every ModelKind is handled above.
  }
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_FLEET_H_
