#include "server/sim/racing/track_sensors.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "server/sim/math/trig.h"

namespace pitlane::sim {

std::vector<double> DefaultTrackBeamAngles() {
  static constexpr double kDegrees[] = {-90, -75, -60, -45, -30, -20, -15, -10, -5, 0,
                                        5,   10,  15,  20,  30,  45,  60,  75,  90};
  std::vector<double> angles;
  for (const double degrees : kDegrees) angles.push_back(degrees * (kPi / 180.0));
  return angles;
}

absl::Status ValidateTrackSensorSpec(const TrackSensorSpec& spec) {
  if (spec.beam_angles_rad.size() > kMaxTrackBeams) {
    return absl::InvalidArgumentError(absl::StrCat("track_sensor.beam_angles_rad: at most ",
                                                   kMaxTrackBeams, " beams, got ",
                                                   spec.beam_angles_rad.size()));
  }
  for (std::size_t i = 0; i < spec.beam_angles_rad.size(); ++i) {
    const double angle = spec.beam_angles_rad[i];
    if (!(angle >= -kPi && angle <= kPi)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "track_sensor.beam_angles_rad[", i, "]: must be in [-pi, pi] radians, got ", angle));
    }
  }
  if (!(spec.range_m > 0.0 && spec.range_m <= kMaxTrackBeamRange_m)) {
    return absl::InvalidArgumentError(absl::StrCat("track_sensor.range_m: must be in (0, ",
                                                   kMaxTrackBeamRange_m, "] m, got ",
                                                   spec.range_m));
  }
  return absl::OkStatus();
}

TrackSensorReading ReadTrackSensors(const TrackGeometry& track, const TrackPosition& position,
                                    const Pose2& pose, const std::vector<double>& beam_angles_rad,
                                    double range_m) {
  TrackSensorReading reading;
  reading.angle_rad = position.heading_rad;
  reading.track_position = position.lateral_m / track.half_width_m;
  reading.edge_distances_m.reserve(beam_angles_rad.size());
  for (const double angle : beam_angles_rad) {
    double sin_a = 0.0, cos_a = 0.0;
    SinCos(pose.yaw_rad + angle, &sin_a, &cos_a);
    reading.edge_distances_m.push_back(
        CastOnEdges(track, pose.x_m, pose.y_m, cos_a, sin_a, range_m));
  }
  return reading;
}

}  // namespace pitlane::sim
