// Built-in drivers: what a vehicle no client drives does each tick. Specs only; drivers.h has
// the code. A driver states an intent (a speed to hold, a route to follow) and maps it onto
// the inputs of whatever model the vehicle runs. Routes themselves are in route.h.
#ifndef PITLANE_SERVER_SIM_DRIVERS_DRIVER_SPEC_H_
#define PITLANE_SERVER_SIM_DRIVERS_DRIVER_SPEC_H_

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

namespace pitlane::sim {

// Holds a speed, wheels straight: seed 000's accelerator device as a driver.
struct CruiseDriverSpec {
  double target_speed_mps = 10.0;  // Signed, within the vehicle's speed limits.
};

// Seed 004's driver styles, as variations of the route follower.
enum class DriverStyle {
  kNormal,    // Speed from the route's curvature and the lateral-acceleration limit.
  kSpeeder,   // Full throttle (top speed) on the lane; brakes hard when it leaves the lane.
  kCautious,  // As kNormal, but lifts off while steering is losing effect (the force-based
              // car's fade above its slip speed; for the others, beyond the lateral limit).
  kTurtle,    // The slowest: 40 % of the normal speed, gentle acceleration.
};

// Follows a route with pure pursuit: steers towards the point `lookahead` ahead along the route
// (lookahead = max(min_lookahead_m, lookahead_time_s * speed)); holds the speed the route's
// curvature allows within max_lateral_acceleration_mps2 (capped by target_speed_mps) and slows
// for the nearest vehicle ahead on the same route (time gap and standstill distance).
struct RouteFollowerSpec {
  std::uint32_t route = 0;  // Index into the world's routes.
  double target_speed_mps = 10.0;                // Top speed, m/s, > 0.
  double max_lateral_acceleration_mps2 = 2.0;    // m/s², > 0.
  double min_lookahead_m = 4.0;                  // m, > 0.
  double lookahead_time_s = 0.6;                 // s, >= 0.
  double time_gap_s = 1.5;                       // To the vehicle ahead, s, >= 0.
  double standstill_gap_m = 4.0;                 // Bumper to bumper at rest, m, >= 0.
  DriverStyle style = DriverStyle::kNormal;
};

using DriverSpec = std::variant<CruiseDriverSpec, RouteFollowerSpec>;

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_DRIVERS_DRIVER_SPEC_H_
