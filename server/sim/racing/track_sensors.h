// Track sensors (docs/racing.md), as TORCS's Simulated Car Racing controllers get them: the
// distance to the track's edges along beams fanned around the vehicle's heading, its angle to
// the track's axis and its position across the track. Computed from the track's geometry
// (track.h), not from the world's ray grid: only the edges stop a beam.
#ifndef PITLANE_SERVER_SIM_RACING_TRACK_SENSORS_H_
#define PITLANE_SERVER_SIM_RACING_TRACK_SENSORS_H_

#include <vector>

#include "absl/status/status.h"
#include "server/sim/racing/track.h"

namespace pitlane::sim {

inline constexpr std::size_t kMaxTrackBeams = 64;
inline constexpr double kMaxTrackBeamRange_m = 1000.0;

struct TrackSensorSpec {
  // Beam directions relative to the heading, radians, counter-clockwise (left) positive, each
  // in [-pi, pi]. Empty: TORCS's 19, -90 to +90 degrees: -90, -75, -60, -45, -30, -20, -15,
  // -10, -5, 0, 5, 10, 15, 20, 30, 45, 60, 75, 90.
  std::vector<double> beam_angles_rad;
  double range_m = 200.0;  // In (0, kMaxTrackBeamRange_m].
};

// TORCS's 19 beam angles, radians.
std::vector<double> DefaultTrackBeamAngles();

// InvalidArgument naming the field ("track_sensor.beam_angles_rad[3]: ...").
absl::Status ValidateTrackSensorSpec(const TrackSensorSpec& spec);

struct TrackSensorReading {
  // Per beam, in the spec's order: the distance from the vehicle's reference point to the
  // first edge along it, m; range_m when none is that near.
  std::vector<double> edge_distances_m;
  double angle_rad = 0.0;       // Heading minus the track axis' direction, (-pi, pi].
  double track_position = 0.0;  // Offset from the axis over half the width: -1 right edge, +1 left.
};

// `beam_angles_rad` must be the spec's (or the defaults, for an empty one).
TrackSensorReading ReadTrackSensors(const TrackGeometry& track, const TrackPosition& position,
                                    const Pose2& pose, const std::vector<double>& beam_angles_rad,
                                    double range_m);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_RACING_TRACK_SENSORS_H_
