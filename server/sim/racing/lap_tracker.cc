#include "server/sim/racing/lap_tracker.h"

#include <algorithm>
#include <cmath>

namespace pitlane::sim {

LapTracker::LapTracker(const TrackGeometry& track, const Pose2& pose) : track_(&track) {
  const double length = track.route.length_m;
  // The nearest point of the whole centre line: where tracking starts.
  const std::uint32_t start = ProjectOntoRoute(track.route, pose.x_m, pose.y_m).segment;
  progress_.position = PlaceOnTrack(track, pose.x_m, pose.y_m, start);
  yaw_rad_ = pose.yaw_rad;
  const double s = progress_.position.s_m;
  progress_.distance_m = s < length / 2 ? s : s - length;
  first_lap_partial_ = progress_.distance_m > 0.0;
  // A start past the first sectors' ends: those sectors of lap 1 take no time.
  while (progress_.sector < track.sector_starts_m.size() &&
         track.sector_starts_m[progress_.sector] <= progress_.distance_m) {
    progress_.sector_times_s.push_back(0.0);
    ++progress_.sector;
  }
}

LapProgress LapTracker::Reading() const {
  LapProgress reading = progress_;
  reading.position.heading_rad = HeadingOnTrack(*track_, progress_.position.segment, yaw_rad_);
  return reading;
}

double LapTracker::NextBoundary() const {
  const std::vector<double>& starts = track_->sector_starts_m;
  const double lap_start = track_->route.length_m * progress_.laps_completed;
  return lap_start + (progress_.sector < starts.size() ? starts[progress_.sector]
                                                       : track_->route.length_m);
}

void LapTracker::Update(const Pose2& pose, double dt_s, std::vector<LapEvent>* events) {
  const double length = track_->route.length_m;
  if (!(std::isfinite(pose.x_m) && std::isfinite(pose.y_m) && std::isfinite(pose.yaw_rad))) {
    // Nowhere: the time passes, the place stays.
    progress_.total_time_s += dt_s;
    progress_.lap_time_s = progress_.total_time_s - lap_started_s_;
    return;
  }
  const TrackPosition position =
      PlaceOnTrack(*track_, pose.x_m, pose.y_m, progress_.position.segment);
  yaw_rad_ = pose.yaw_rad;
  // The change of arc length the short way round.
  double delta = position.s_m - progress_.position.s_m;
  if (delta > length / 2) {
    delta -= length;
  } else if (delta <= -length / 2) {
    delta += length;
  }
  const double d_before = progress_.distance_m;
  const double d_after = d_before + delta;
  const double t_before = progress_.total_time_s;
  // Every boundary reached for the first time (each lies beyond the furthest d so far).
  for (double boundary = NextBoundary(); d_after >= boundary; boundary = NextBoundary()) {
    const double t = t_before + dt_s * ((boundary - d_before) / (d_after - d_before));
    const std::uint32_t lap = progress_.laps_completed + 1;
    const double sector_time = t - sector_started_s_;
    progress_.sector_times_s.push_back(sector_time);
    if (events != nullptr) {
      events->push_back({.kind = LapEvent::Kind::kSector, .lap = lap,
                         .sector = progress_.sector, .time_s = t, .duration_s = sector_time});
    }
    sector_started_s_ = t;
    if (progress_.sector < track_->sector_starts_m.size()) {
      ++progress_.sector;
      continue;
    }
    const double lap_time = t - lap_started_s_;
    if (lap > 1 || !first_lap_partial_) {
      progress_.last_lap_s = lap_time;
      progress_.best_lap_s = progress_.best_lap_s.has_value()
                                 ? std::min(*progress_.best_lap_s, lap_time)
                                 : lap_time;
      progress_.last_sector_times_s = std::move(progress_.sector_times_s);
    }
    progress_.sector_times_s.clear();
    progress_.laps_completed = lap;
    progress_.sector = 0;
    lap_started_s_ = t;
    if (events != nullptr) {
      events->push_back({.kind = LapEvent::Kind::kLap, .lap = lap,
                         .sector = static_cast<std::uint32_t>(track_->sector_starts_m.size()),
                         .time_s = t, .duration_s = lap_time});
    }
  }
  progress_.distance_m = d_after;
  progress_.total_time_s = t_before + dt_s;
  progress_.lap_time_s = progress_.total_time_s - lap_started_s_;
  if (!position.on_track) {
    if (progress_.position.on_track) ++progress_.off_track_count;
    progress_.off_track_s += dt_s;
  }
  progress_.position = position;
}

}  // namespace pitlane::sim
