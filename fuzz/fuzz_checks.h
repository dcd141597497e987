// Checks the fuzzers share: what must hold of a session whatever a client sent it. A broken
// check aborts, so that libFuzzer keeps the input as a crash.
#ifndef PITLANE_FUZZ_FUZZ_CHECKS_H_
#define PITLANE_FUZZ_FUZZ_CHECKS_H_

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "server/session/frame.h"
#include "server/session/session.h"

namespace pitlane::fuzz {

// Prints `what` and aborts (libFuzzer then saves the input).
[[noreturn]] inline void Fail(const char* what, double value = 0.0) {
  std::fprintf(stderr, "fuzz check failed: %s (%g)\n", what, value);
  std::abort();
}

inline void CheckFinite(double value, const char* what) {
  if (!std::isfinite(value)) Fail(what, value);
}

// No NaN or infinity in any vehicle's state, no more vehicles than the session allows, and
// no more contacts than its budget, sorted by pair, each once.
inline void CheckFrame(const session::Frame& frame, std::uint32_t max_vehicles,
                       std::uint32_t max_contacts) {
  if (frame.vehicles.size() > max_vehicles) {
    Fail("more vehicles than max_vehicles", static_cast<double>(frame.vehicles.size()));
  }
  if (frame.contacts.size() > max_contacts) {
    Fail("more contacts than max_contacts", static_cast<double>(frame.contacts.size()));
  }
  if (frame.contacts_dropped > 0 && frame.contacts.size() != max_contacts) {
    Fail("contacts dropped below the budget", static_cast<double>(frame.contacts.size()));
  }
  for (std::size_t i = 1; i < frame.contacts.size(); ++i) {
    if (!(frame.contacts[i - 1].pair < frame.contacts[i].pair)) {
      Fail("contacts not sorted by pair", static_cast<double>(i));
    }
  }
  for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
    CheckFinite(vehicle.pose.x_m, "pose.x_m");
    CheckFinite(vehicle.pose.y_m, "pose.y_m");
    CheckFinite(vehicle.pose.yaw_rad, "pose.yaw_rad");
    CheckFinite(vehicle.speed_mps, "speed_mps");
    const sim::VehicleReadout& readout = vehicle.readout;
    CheckFinite(readout.steering_angle_rad, "readout.steering_angle_rad");
    CheckFinite(readout.acceleration_mps2, "readout.acceleration_mps2");
    CheckFinite(readout.yaw_rate_radps, "readout.yaw_rate_radps");
    CheckFinite(readout.lateral_speed_mps, "readout.lateral_speed_mps");
    CheckFinite(readout.kinetic_energy_j, "readout.kinetic_energy_j");
    CheckFinite(readout.dissipated_energy_j, "readout.dissipated_energy_j");
    for (const double load_n : readout.wheel_loads_n) CheckFinite(load_n, "readout.wheel_loads_n");
    if (vehicle.nearest_objects.has_value()) {
      for (const sim::NearbyObject& object : *vehicle.nearest_objects) {
        CheckFinite(object.x_m, "nearest_objects.x_m");
        CheckFinite(object.y_m, "nearest_objects.y_m");
        CheckFinite(object.distance_m, "nearest_objects.distance_m");
        CheckFinite(object.relative_yaw_rad, "nearest_objects.relative_yaw_rad");
        CheckFinite(object.speed_mps, "nearest_objects.speed_mps");
      }
    }
    if (vehicle.range_scan.has_value()) {
      // A beam that meets nothing reads +infinity; never NaN.
      for (const double range_m : vehicle.range_scan->ranges_m) {
        if (std::isnan(range_m) || range_m < 0.0) Fail("range_scan.ranges_m", range_m);
      }
    }
  }
}

// CheckFrame of the session's current frame, which it returns.
inline std::shared_ptr<const session::Frame> CheckSession(const session::Session& session) {
  std::shared_ptr<const session::Frame> frame = session.CurrentFrame();
  CheckFrame(*frame, session.config().world.max_vehicles, session.config().world.max_contacts);
  return frame;
}

}  // namespace pitlane::fuzz

#endif  // PITLANE_FUZZ_FUZZ_CHECKS_H_
