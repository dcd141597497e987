// Vehicle specs, ids and per-tick inputs shared by every vehicle model.
#ifndef PITLANE_SERVER_SIM_VEHICLE_H_
#define PITLANE_SERVER_SIM_VEHICLE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "server/sim/geometry.h"

namespace pitlane::sim {

// Identifies a vehicle within one world. Ids start at 1 and are never reused, so a removed
// vehicle's id stays invalid ("stale") for the life of the world. 0 is never a valid id.
using VehicleId = std::uint64_t;

// Physical limits of a vehicle. Controls beyond them are clamped, never rejected.
struct VehicleLimits {
  double max_steering_angle_rad = 0.6;  // Largest steering angle either way, rad, in (0, 1.5].
  double max_acceleration_mps2 = 3.0;   // Largest acceleration that raises |speed|, m/s², > 0.
  double max_braking_mps2 = 8.0;        // Largest deceleration that lowers |speed|, m/s², > 0.
  double max_speed_mps = 30.0;          // Highest forward speed, m/s, > 0.
  double max_reverse_speed_mps = 5.0;   // Highest reverse speed, m/s, >= 0.
};

// How a kinematic bicycle's ODE is advanced over one tick.
enum class BicycleIntegrator {
  kSemiImplicitEuler,  // v, then yaw, then position, each from the values just updated.
  kExactArc,           // The exact solution for inputs held over the tick.
};

// The kinematic bicycle of seed 003; the reference point is the rear-axle centre.
struct KinematicBicycleSpec {
  double wheelbase_m = 2.7;  // Axle to axle, metres, in (0, length_m].
  // Rear axle to the rear of the body, metres, in [0, length_m - wheelbase_m]. Unset: the
  // wheelbase is centred in the body, (length_m - wheelbase_m) / 2.
  std::optional<double> rear_overhang_m;
  BicycleIntegrator integrator = BicycleIntegrator::kSemiImplicitEuler;
};

// The closed set of vehicle models. More alternatives join as the seed models land.
using VehicleModelSpec = std::variant<KinematicBicycleSpec>;

// What a client asks for when it spawns a vehicle. Editable and possibly invalid: pass it
// through ResolveVehicleSpec before use.
struct VehicleSpec {
  std::string name;              // Label, at most kMaxNameBytes bytes.
  double length_m = 4.5;         // Body length along the heading, metres, in (0, 100].
  double width_m = 1.8;          // Body width across the heading, metres, in (0, 100].
  Pose2 initial_pose;            // Reference point at spawn; |x|, |y| <= kMaxCoordinate_m.
  double initial_speed_mps = 0;  // Signed speed at spawn, m/s, within the speed limits.
  VehicleLimits limits;
  VehicleModelSpec model;
};

inline constexpr std::size_t kMaxNameBytes = 128;
inline constexpr double kMaxCoordinate_m = 1e7;
inline constexpr double kMaxBodyDimension_m = 100.0;
inline constexpr double kMaxSteeringLimit_rad = 1.5;

// Checks every field of `spec` and fills in the defaults that depend on other fields.
// Returns InvalidArgument naming the offending field by its wire name (e.g. "length_m",
// "kinematic_bicycle.wheelbase_m", "limits.max_speed_mps") on any non-finite or
// out-of-domain value.
absl::Status ResolveVehicleSpec(VehicleSpec& spec);

// Geometry of a vehicle body relative to its model's reference point.
struct BodyParams {
  double length_m = 0.0;  // Along the heading, metres.
  double width_m = 0.0;   // Across the heading, metres.
  // Signed distance from the reference point forward to the box centre, metres.
  double center_offset_m = 0.0;
};

// The body box of a vehicle whose reference point is at `pose`.
OrientedBox BodyBox(const BodyParams& body, const Pose2& pose);

// A control for one vehicle, as a client sends it. Must be finite; it is clamped to the
// vehicle's limits when applied.
struct VehicleInput {
  VehicleId id = 0;
  double acceleration_mps2 = 0.0;   // Signed longitudinal acceleration, m/s².
  double steering_angle_rad = 0.0;  // Front-wheel angle, rad, positive turns left.
};

// One vehicle at one tick, as reported to clients.
struct VehicleSnapshot {
  VehicleId id = 0;
  Pose2 pose;                       // Reference point; yaw wrapped to (-pi, pi].
  double speed_mps = 0.0;           // Signed speed along the heading, m/s.
  double steering_angle_rad = 0.0;  // Steering in effect after clamping, rad.
  double acceleration_mps2 = 0.0;   // Acceleration achieved over the last tick, m/s².
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLE_H_
