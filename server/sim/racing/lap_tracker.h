// One vehicle's progress round a closed track (docs/racing.md): laps, lap and sector times,
// time and excursions off the track.
//
// The rules, in the track's terms (track.h):
//   - The vehicle's distance along the track, d, counts from the line and goes on across it
//     (unwrapped: each tick adds the change of its arc length, taken the short way round). It
//     starts as its arc length, or that minus the track's length if it starts in the lap's
//     second half (a grid behind the line starts at a small negative d).
//   - Lap k is completed when d first reaches k x length: driving the wrong way, or backwards
//     over the line, takes distance back that must be driven again; crossing the line again
//     and again counts once.
//   - Lap 1 is timed from when tracking starts (a race's start); lap k > 1 from when lap k - 1
//     was completed. Lap times (last_lap_s, best_lap_s, last_sector_times_s) are kept of the
//     laps that began at the line: every lap after the first, and lap 1 when tracking started
//     at or behind the line. A lap 1 that started past it (d > 0 at the start: a car spawned
//     part-way round) is partial: it completes lap 1 and its events say how long it took,
//     but it is no lap time.
//     Sector j of lap k ends when d first reaches (k - 1) x length plus sector j + 1's start
//     (the last sector at the line).
//   - A crossing's time is found within its tick by linear interpolation of d, so a lap of a
//     car at constant speed is timed to a fraction of a tick.
//   - Off the track: its reference point more than half the width from the centre line. Each
//     move from on to off counts one excursion; the ticks that end off the track add up to the
//     time off it.
#ifndef PITLANE_SERVER_SIM_RACING_LAP_TRACKER_H_
#define PITLANE_SERVER_SIM_RACING_LAP_TRACKER_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "server/sim/racing/track.h"

namespace pitlane::sim {

// What a lap tracker reports.
struct LapProgress {
  TrackPosition position;
  double distance_m = 0.0;             // d, m.
  std::uint32_t laps_completed = 0;
  std::uint32_t sector = 0;            // The sector of the lap in progress.
  double lap_time_s = 0.0;             // Of the lap in progress, so far.
  // The last and the best lap times, of the laps that began at the line (see above).
  std::optional<double> last_lap_s;
  std::optional<double> best_lap_s;
  // Sector times of the lap in progress (the sectors it has completed) and of the last lap.
  std::vector<double> sector_times_s;
  std::vector<double> last_sector_times_s;
  std::uint32_t off_track_count = 0;
  double off_track_s = 0.0;
  double total_time_s = 0.0;  // Since tracking started.
};

// A lap completed or a sector ended during an Update, with the time it happened.
struct LapEvent {
  enum class Kind { kSector, kLap };
  Kind kind = Kind::kSector;
  std::uint32_t lap = 0;     // 1-based: the lap it belongs to.
  std::uint32_t sector = 0;  // The sector that ended (kLap: the last one).
  double time_s = 0.0;       // Since tracking started, interpolated within the tick.
  double duration_s = 0.0;   // The sector's or the lap's time.
};

class LapTracker {
 public:
  // Starts tracking at `pose` (time 0; finite). `track` must outlive the tracker.
  LapTracker(const TrackGeometry& track, const Pose2& pose);

  // The vehicle is at `pose` after `dt_s` more seconds. Appends what it completed to `events`
  // (when not null), in order. A pose that is not finite leaves the progress where it was
  // (the time passes). Between two updates a vehicle must move less than half a lap.
  void Update(const Pose2& pose, double dt_s, std::vector<LapEvent>* events = nullptr);

  // What the updates keep: all but position.heading_rad (0), which counting laps does not
  // need (its arctangent would be half the cost of an update).
  const LapProgress& progress() const { return progress_; }
  // progress() with position.heading_rad: the heading at the last update relative to the
  // track's axis there.
  LapProgress Reading() const;

 private:
  // The distance at which the sector in progress ends.
  double NextBoundary() const;

  const TrackGeometry* track_;
  LapProgress progress_;
  double lap_started_s_ = 0.0;      // When the lap in progress started.
  double sector_started_s_ = 0.0;   // When the sector in progress started.
  double yaw_rad_ = 0.0;            // The last update's (finite) heading.
  bool first_lap_partial_ = false;  // Tracking started past the line.
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_RACING_LAP_TRACKER_H_
