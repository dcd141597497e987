// The kinematic bicycle model (seed 003; CommonRoad "KS" with the steering angle as input):
//
//   x' = v cos(yaw),  y' = v sin(yaw),  yaw' = v tan(steer) / L,  v' = a
//
// with the rear-axle centre as reference point and L the wheelbase. Both wheels roll without
// slip, so the path's curvature is tan(steer) / L whatever the speed; at constant steering the
// rear axle follows a circle of radius R = L / tan(steer).
//
// Vehicles of this model are stored as a fleet: one column per variable, in ascending id
// order, so that the step streams through memory (100k vehicles step in about a millisecond).
// A world's vehicle table (vehicle_table.h) holds what every model shares; the fleet holds
// the rest and publishes the poses into the table.
#ifndef PITLANE_SERVER_SIM_VEHICLES_KINEMATIC_BICYCLE_H_
#define PITLANE_SERVER_SIM_VEHICLES_KINEMATIC_BICYCLE_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "server/sim/math/geometry.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/vehicle_table.h"

namespace pitlane::sim {

// Validated, immutable parameters of one kinematic bicycle.
struct KinematicBicycleParams {
  double wheelbase_m = 2.7;  // Axle to axle, metres, > 0.
  VehicleLimits limits;      // All checked by ResolveVehicleSpec.
  BicycleIntegrator integrator = BicycleIntegrator::kSemiImplicitEuler;
};

// The control a bicycle holds until replaced, already clamped to its limits where the limit
// does not depend on the state.
struct KinematicBicycleInput {
  double acceleration_mps2 = 0.0;   // Commanded; clamped each tick (depends on speed's sign).
  double steering_angle_rad = 0.0;  // Clamped to +-max_steering_angle_rad.
  double curvature_1pm = 0.0;       // tan(steering_angle_rad) / wheelbase_m, 1/m.
};

// The state of one kinematic bicycle.
struct KinematicBicycleState {
  Pose2 pose = {};                 // Rear-axle centre; yaw wrapped to (-pi, pi].
  double speed_mps = 0.0;          // Signed speed along the heading, m/s.
  double acceleration_mps2 = 0.0;  // Achieved over the last tick: (v_new - v_old) / dt, m/s².
  double steering_rad = 0.0;       // Wheel angle in effect over the last tick, rad.
};

// Clamps a client's control to `params`' limits and derives the curvature it steers.
KinematicBicycleInput MakeKinematicBicycleInput(const KinematicBicycleParams& params,
                                                double acceleration_mps2,
                                                double steering_angle_rad);

// The acceleration actually applied at speed `speed_mps` for a commanded `acceleration_mps2`:
// one that raises |speed| is limited to max_acceleration_mps2, one that lowers it to
// max_braking_mps2 (at rest, any acceleration raises |speed|). The sign of the speed at the
// start of the tick decides, so a held braking command carries the vehicle through zero into
// reverse (as in CommonRoad): to stop, command 0 once stopped.
double ClampAcceleration(const VehicleLimits& limits, double speed_mps, double acceleration_mps2);

// Advances one bicycle by `dt_s` seconds: first the wheels turn towards the commanded angle
// (reaching it, or by limits.max_steering_rate_radps * dt_s), then the integrator moves the
// vehicle with that angle held over the tick. Never fails; speed stays within
// [-max_reverse_speed_mps, max_speed_mps] and yaw within (-pi, pi].
void StepKinematicBicycle(const KinematicBicycleParams& params, const KinematicBicycleInput& input,
                          double dt_s, KinematicBicycleState& state);

// Every kinematic bicycle of a world, one entry ("slot") per vehicle in ascending id order.
// The pose, speed and heading axes of each live in its row of the world's VehicleTable (the
// fleet steps them there: one copy, streamed in row order); the fleet holds the rest.
struct KinematicBicycleFleet {
  using Spec = KinematicBicycleSpec;  // The model this fleet keeps (fleet.h's FleetList).

  // Fixed at spawn (rows shift down when a vehicle before them is removed).
  std::vector<std::uint32_t> rows;  // The vehicle's row in the world's VehicleTable.
  std::vector<KinematicBicycleParams> params;
  // Held controls, as clamped by MakeKinematicBicycleInput (set them with SetInput).
  std::vector<double> steering_command_rad;
  std::vector<double> steering_command_curvature_1pm;
  // What the step loop reads of the controls, side by side (one stream through memory):
  // the commanded acceleration and the curvature of the wheel angle in effect.
  struct Drive {
    double acceleration_command_mps2 = 0.0;  // m/s².
    double curvature_1pm = 0.0;              // tan(steering_rad) / wheelbase, 1/m.
  };
  std::vector<Drive> drive;
  std::vector<double> acceleration_mps2;  // Achieved over the last tick, m/s².
  std::vector<double> steering_rad;       // Wheel angle in effect, rad.
  // The vehicles whose wheel angle has yet to reach the command, in no particular order, and a
  // flag per vehicle for membership: the step turns only these, so that the loop over the
  // whole fleet never looks at steering.
  std::vector<std::uint32_t> turning;
  std::vector<std::uint8_t> is_turning;

  std::size_t size() const { return rows.size(); }

  // Appends the vehicle of table row `row` (already appended there, at its initial pose and
  // speed); rows must ascend.
  void Append(std::uint32_t row, const VehicleSpec& resolved_spec,
              const KinematicBicycleSpec& model);
  // The same, for a spec whose model is a kinematic bicycle. `dt_s` is unused (the fleet
  // works at any tick).
  void Append(std::uint32_t row, const VehicleSpec& resolved_spec, double dt_s,
              VehicleTable& table);
  // Removes the vehicle at `index`, keeping the order of the rest.
  void Erase(std::size_t index);
  // Replaces the held controls of the vehicle at `index`; they apply from the next step.
  void SetInput(std::size_t index, const KinematicBicycleInput& input);
  // The controls of a client's input (already checked by CheckControls).
  void SetControls(std::size_t index, const VehicleInput& input);
  // Moves the vehicle at `index` to `pose` (yaw wrapped, with its axes).
  void SetPose(std::size_t index, const Pose2& pose, VehicleTable& table);
  // Halts the vehicle for good (a crash): speed, acceleration and controls 0.
  void Halt(std::size_t index, VehicleTable& table);
  // Advances every vehicle by `dt_s` seconds, in `table`.
  void Step(double dt_s, VehicleTable& table);

  KinematicBicycleState StateAt(std::size_t index, const VehicleTable& table) const;
  VehicleReadout ReadoutAt(std::size_t index, const VehicleTable& table) const;
  // The controls the vehicle at `index` holds: acceleration and steering angle commanded.
  VehicleInput HeldAt(std::size_t index) const {
    return {.acceleration_mps2 = drive[index].acceleration_command_mps2,
            .steering_angle_rad = steering_command_rad[index]};
  }
};

// Advances every bicycle of `fleet` by `dt_s` seconds; their poses and speeds are in `table`.
void StepFleet(double dt_s, KinematicBicycleFleet& fleet, VehicleTable& table);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_KINEMATIC_BICYCLE_H_
