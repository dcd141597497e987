// Vehicle specs, ids and per-tick inputs shared by every vehicle model.
#ifndef PITLANE_SERVER_SIM_VEHICLES_VEHICLE_H_
#define PITLANE_SERVER_SIM_VEHICLES_VEHICLE_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "server/sim/math/geometry.h"
#include "server/sim/world/ids.h"
#include "server/sim/vehicles/axle_drive.h"
#include "server/sim/drivers/driver_spec.h"
#include "server/sim/racing/track_sensors.h"
#include "server/sim/vehicles/force_based.h"
#include "server/sim/vehicles/four_wheel.h"
#include "server/sim/vehicles/model_common.h"
#include "server/sim/vehicles/physics_body.h"
#include "server/sim/vehicles/single_track.h"

namespace pitlane::sim {

// How a kinematic bicycle's ODE is advanced over one tick.
enum class BicycleIntegrator {
  kSemiImplicitEuler,  // v, then yaw, then position, each from the values just updated.
  kExactArc,           // The exact solution for inputs held over the tick.
};

// The kinematic bicycle of seed 003; the reference point is the rear-axle centre.
struct KinematicBicycleSpec {
  double wheelbase_m = 2.7;  // Axle to axle, metres, in [0.001, length_m].
  // Rear axle to the rear of the body, metres, in [0, length_m - wheelbase_m]. Unset: the
  // wheelbase is centred in the body, (length_m - wheelbase_m) / 2.
  std::optional<double> rear_overhang_m = {};
  BicycleIntegrator integrator = BicycleIntegrator::kSemiImplicitEuler;
};

// The closed set of vehicle models, in the order of ModelKind.
using VehicleModelSpec = std::variant<KinematicBicycleSpec, PhysicsBodySpec, SingleTrackSpec,
                                      FrontWheelDriveSpec, AllWheelDriveSpec, ForceBasedSpec,
                                      FourWheelSpec>;

// Which model a vehicle runs: the index of its alternative in VehicleModelSpec.
enum class ModelKind : std::uint8_t {
  kKinematicBicycle = 0,
  kPhysicsBody = 1,
  kSingleTrack = 2,
  kFrontWheelDrive = 3,
  kAllWheelDrive = 4,
  kForceBased = 5,
  kFourWheel = 6,
};
inline constexpr std::size_t kModelKindCount = std::variant_size_v<VehicleModelSpec>;

inline ModelKind ModelKindOf(const VehicleModelSpec& model) {
  return static_cast<ModelKind>(model.index());
}
// The model's name on the wire ("kinematic_bicycle"), for messages.
const char* ModelName(ModelKind kind);

// The common limits as a client gives them: unset fields take the model's defaults (see
// each model's Default*Limits). A model ignores some limits (physics_body has no steering);
// setting one of those is an error, so that nothing a client asks for is silently dropped.
struct VehicleLimitsSpec {
  std::optional<double> max_steering_angle_rad = {};
  std::optional<double> max_acceleration_mps2 = {};
  std::optional<double> max_braking_mps2 = {};
  std::optional<double> max_speed_mps = {};
  std::optional<double> max_reverse_speed_mps = {};
  // +infinity means no limit.
  std::optional<double> max_steering_rate_radps = {};
};

// A planar range scanner ("2D lidar") at the centre of the body. Its beams fan out evenly
// over the field of view, centred on the heading: from -fov/2 to +fov/2 inclusive, or, for a
// full circle, from -pi in steps of 2 pi / beam_count.
struct RangeScanSpec {
  std::uint32_t beam_count = 64;       // Beams per scan, in [1, kMaxScanBeams].
  double field_of_view_rad = 2 * kPi;  // Angle the beams span, rad, in (0, 2 pi].
  double max_range_m = 50.0;           // Farthest return, metres, in (0, kMaxSensorRange_m].
};

// Reports the objects (vehicles and obstacles, not walls) whose centres lie nearest the
// centre of the body, within a radius.
struct NearestObjectsSpec {
  std::uint32_t count = 8;  // Most objects reported, in [1, kMaxNearestObjects].
  double radius_m = 50.0;   // Search radius around the body centre, metres, in (0, kMaxSensorRange_m].
};

inline constexpr std::uint32_t kMaxScanBeams = 4096;
inline constexpr std::uint32_t kMaxNearestObjects = 256;
inline constexpr double kMaxSensorRange_m = 1000.0;

// What a client asks for when it spawns a vehicle. Editable and possibly invalid: pass it
// through ResolveVehicleSpec before use.
struct VehicleSpec {
  std::string name;              // Label, at most kMaxNameBytes bytes.
  double length_m = 4.5;         // Body length along the heading, metres, in [0.001, 100].
  double width_m = 1.8;          // Body width across the heading, metres, in [0.001, 100].
  Pose2 initial_pose;            // Reference point at spawn; |x|, |y| <= kMaxCoordinate_m.
  double initial_speed_mps = 0;  // Signed speed at spawn, m/s, within the speed limits.
  // After ResolveVehicleSpec: every limit the model uses is set, the others unset.
  VehicleLimitsSpec limits;
  VehicleModelSpec model;
  // Sensors, off unless set: large worlds pay only for the vehicles that sense.
  std::optional<RangeScanSpec> range_scan = {};
  std::optional<NearestObjectsSpec> nearest_objects = {};
  // The route whose track this vehicle's progress is timed on (laps, lap times; World::
  // TrackReadings): it must be a race track (World::params().tracks). Unset: its route
  // follower's route when that is a race track, else the world's first race track, else none.
  std::optional<std::uint32_t> timing_track = {};
  // Track sensors on that track (racing/track_sensors.h), off unless set; the vehicle must be
  // timed on a track.
  std::optional<TrackSensorSpec> track_sensor = {};
  // A built-in driver (drivers.h), which then sets the vehicle's controls every tick: clients
  // cannot (World::SetInputs fails). Unset: clients drive it.
  std::optional<DriverSpec> driver = {};
};

inline constexpr std::size_t kMaxNameBytes = 128;
inline constexpr double kMaxCoordinate_m = 1e7;
inline constexpr double kMaxBodyDimension_m = 100.0;
inline constexpr double kMaxSteeringLimit_rad = 1.5;
// Bounds on the limits themselves: far beyond any road vehicle (1000 m/s is Mach 3), and
// they keep a tick's motion, and so the collision stage's work, bounded.
inline constexpr double kMaxSpeedLimit_mps = 1000.0;
inline constexpr double kMaxAccelerationLimit_mps2 = 1000.0;
inline constexpr double kMaxSteeringRateLimit_radps = 100.0;

// Checks every field of `spec` and fills in the defaults that depend on other fields.
// Returns InvalidArgument naming the offending field by its wire name (e.g. "length_m",
// "kinematic_bicycle.wheelbase_m", "limits.max_speed_mps",
// "driver.route_follower.target_speed_mps") on any non-finite or out-of-domain value, or a
// limit the model does not use. A route follower's route is checked by the world it joins.
absl::Status ResolveVehicleSpec(VehicleSpec& spec);

// The limits of a resolved spec, with the ones its model ignores at their defaults.
VehicleLimits LimitsOf(const VehicleSpec& resolved);

// Geometry of a vehicle body relative to its model's reference point.
struct BodyParams {
  double length_m = 0.0;  // Along the heading, metres.
  double width_m = 0.0;   // Across the heading, metres.
  // Signed distance from the reference point forward to the box centre, metres.
  double center_offset_m = 0.0;
};

// The body of a resolved spec, from its model's reference point.
BodyParams BodyOf(const VehicleSpec& resolved);

// The controls that bring a vehicle of model `kind` moving at `speed_mps` to a stop without
// reversing, for one tick of `dt_s`, wheels straight: full brake for the pedal models, target
// speed 0 for physics_body, and for the acceleration models -speed/dt (their braking limit
// caps it, so it lands on zero once within reach; 0 once stopped).
VehicleInput BrakeToStopInput(ModelKind kind, VehicleId id, double speed_mps, double dt_s);

// Checks `input` for a vehicle of model `kind`: finite, pedals in [0, 1], and no field the
// model does not use. InvalidArgument naming the field.
absl::Status CheckControls(ModelKind kind, const VehicleInput& input);

// One range scan. Beam i points angle_min_rad + i * angle_increment_rad from the heading.
struct RangeScanReading {
  double angle_min_rad = 0.0;        // First beam relative to the heading, rad.
  double angle_increment_rad = 0.0;  // Angle between neighbouring beams, rad.
  // Distance from the body centre along each beam to the first thing it meets, metres;
  // +infinity when nothing lies within max_range_m.
  std::vector<double> ranges_m;
};

// An object near a sensing vehicle, in that vehicle's frame (origin at its body centre, x
// along its heading, y to its left).
struct NearbyObject {
  ObjectKind kind = ObjectKind::kVehicle;  // kVehicle or kObstacle.
  std::uint64_t id = 0;                    // VehicleId or ObstacleId.
  double x_m = 0.0;                        // Centre of the object ahead, metres.
  double y_m = 0.0;                        // Centre of the object to the left, metres.
  double distance_m = 0.0;                 // Centre to centre, metres.
  double relative_yaw_rad = 0.0;           // Its heading minus ours, in (-pi, pi].
  double speed_mps = 0.0;                  // Its signed speed, m/s (0 for obstacles).
};

// One vehicle at one tick, as reported to clients.
struct VehicleSnapshot {
  VehicleId id = 0;
  ModelKind kind = ModelKind::kKinematicBicycle;
  Pose2 pose;                       // Reference point; yaw wrapped to (-pi, pi].
  // Signed speed of the reference point, m/s: along the heading for most models (each model's
  // docs define it: single_track's is along the direction of travel).
  double speed_mps = 0.0;
  VehicleReadout readout;           // The rest of what the model reports.
  // Halted by a collision under the STOP policy; ignores controls until removed.
  bool crashed = false;
  std::optional<RangeScanReading> range_scan = {};           // When the vehicle has a scanner.
  std::optional<std::vector<NearbyObject>> nearest_objects = {};  // Nearest first, when enabled.
};

// Where vehicles are and how fast they go (VehicleSnapshot's pose, speed and crashed flag), as
// columns by ascending id, one row a vehicle.
struct MotionColumns {
  std::vector<VehicleId> ids;
  std::vector<double> x_m;
  std::vector<double> y_m;
  std::vector<double> yaw_rad;  // In (-pi, pi].
  std::vector<double> speed_mps;
  std::vector<std::uint8_t> crashed;  // 1: halted by a collision (VehicleSnapshot::crashed).

  std::size_t size() const { return ids.size(); }
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_VEHICLES_VEHICLE_H_
