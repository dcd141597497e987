#include "server/sim/racing/race.h"

#include <algorithm>
#include <cmath>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace pitlane::sim {
namespace {

absl::Status InRange(const char* field, double value, double low, double high, bool open_low) {
  if ((open_low ? value > low : value >= low) && value <= high) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("race.", field, ": must be in ",
                                                 open_low ? "(" : "[", low, ", ", high,
                                                 "], got ", value));
}

}  // namespace

absl::Status ValidateRaceRules(const RaceRules& rules) {
  if (rules.laps < 1 || rules.laps > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("race.laps: must be in [1, 1000], got ", rules.laps));
  }
  for (const absl::Status& status :
       {InRange("countdown_s", rules.countdown_s, 0, 60, false),
        InRange("jump_start_m", rules.jump_start_m, 0, 100, true),
        InRange("penalty_jump_start_s", rules.penalty_jump_start_s, 0, 3600, false),
        InRange("penalty_contact_s", rules.penalty_contact_s, 0, 3600, false),
        InRange("penalty_off_track_s", rules.penalty_off_track_s, 0, 3600, false),
        InRange("finish_timeout_s", rules.finish_timeout_s, 0, 86400, true)}) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<Race> Race::Create(const TrackGeometry& track, const RaceRules& rules,
                                  std::vector<Entry> entries, double now_s) {
  if (absl::Status valid = ValidateRaceRules(rules); !valid.ok()) return valid;
  if (entries.empty()) return absl::InvalidArgumentError("entries: a race needs a car");
  absl::flat_hash_set<VehicleId> entered;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!entered.insert(entries[i].vehicle).second) {
      return absl::InvalidArgumentError(absl::StrCat("entries[", i, "].vehicle_id: vehicle ",
                                                     entries[i].vehicle, " is entered twice"));
    }
  }
  return Race(track, rules, std::move(entries), now_s);
}

Race::Race(const TrackGeometry& track, const RaceRules& rules, std::vector<Entry> entries,
           double now_s)
    : track_(&track), rules_(rules), start_s_(now_s + rules.countdown_s),
      race_time_s_(-rules.countdown_s), last_update_s_(now_s) {
  for (std::size_t i = 0; i < entries.size(); ++i) {
    cars_.push_back({.entry = std::move(entries[i]), .grid = static_cast<std::uint32_t>(i)});
  }
  std::sort(cars_.begin(), cars_.end(),
            [](const Car& a, const Car& b) { return a.entry.vehicle < b.entry.vehicle; });
}

void Race::Penalize(Car& car, double seconds, RaceEvent::Cause cause, double time_s,
                    std::vector<RaceEvent>* events) {
  if (seconds <= 0.0) return;
  car.penalties_s += seconds;
  events->push_back({.kind = RaceEvent::Kind::kPenalty, .vehicle = car.entry.vehicle,
                     .time_s = time_s, .value = seconds, .cause = cause});
}

void Race::Update(double now_s, const std::function<std::optional<Pose2>(VehicleId)>& pose_of,
                  absl::Span<const VehicleId> contacts_begun, std::vector<RaceEvent>* events) {
  if (phase_ == RacePhase::kFinished) return;
  const double dt_s = now_s - last_update_s_;
  last_update_s_ = now_s;
  const auto retire = [&](Car& car) {
    car.retired = true;
    car.retired_at_s = std::max(race_time_s_, 0.0);
    events->push_back({.kind = RaceEvent::Kind::kRetired, .vehicle = car.entry.vehicle,
                       .time_s = race_time_s_});
  };
  if (phase_ == RacePhase::kCountdown) {
    race_time_s_ = now_s - start_s_;
    const bool starting = now_s >= start_s_;
    if (starting) {
      start_s_ = now_s;  // The start is this tick: race time 0.
      race_time_s_ = 0.0;
      phase_ = RacePhase::kRacing;
      events->push_back({.kind = RaceEvent::Kind::kStart, .time_s = 0.0});
    }
    for (Car& car : cars_) {
      if (car.retired) continue;
      const std::optional<Pose2> pose = pose_of(car.entry.vehicle);
      if (!pose.has_value()) {
        retire(car);
        continue;
      }
      if (starting) {
        car.tracker.emplace(*track_, *pose);
        continue;
      }
      const double dx = pose->x_m - car.entry.grid_pose.x_m;
      const double dy = pose->y_m - car.entry.grid_pose.y_m;
      if (!car.entry.held && car.jump_starts == 0 &&
          dx * dx + dy * dy > rules_.jump_start_m * rules_.jump_start_m) {
        ++car.jump_starts;
        events->push_back({.kind = RaceEvent::Kind::kJumpStart, .vehicle = car.entry.vehicle,
                           .time_s = race_time_s_});
        Penalize(car, rules_.penalty_jump_start_s, RaceEvent::Cause::kJumpStart, race_time_s_,
                 events);
      }
    }
  } else {
    race_time_s_ = now_s - start_s_;
    for (const VehicleId vehicle : contacts_begun) {
      Car* car = Find(vehicle);
      if (car == nullptr || car->retired || car->finished) continue;
      ++car->contacts;
      Penalize(*car, rules_.penalty_contact_s, RaceEvent::Cause::kContact, race_time_s_, events);
    }
    // Each car's tick; the laps completed are sorted by their time before any finishes, so
    // that of two cars completing the last lap in one tick the earlier takes the flag.
    std::vector<std::pair<LapEvent, Car*>> completed;
    for (Car& car : cars_) {
      if (car.retired || car.finished) continue;
      const std::optional<Pose2> pose = pose_of(car.entry.vehicle);
      if (!pose.has_value()) {
        retire(car);
        continue;
      }
      const std::uint32_t off_before = car.tracker->progress().off_track_count;
      std::vector<LapEvent> lap_events;
      car.tracker->Update(*pose, dt_s, &lap_events);
      for (std::uint32_t k = off_before; k < car.tracker->progress().off_track_count; ++k) {
        ++car.off_tracks;
        Penalize(car, rules_.penalty_off_track_s, RaceEvent::Cause::kOffTrack, race_time_s_,
                 events);
      }
      for (const LapEvent& lap : lap_events) {
        if (lap.kind == LapEvent::Kind::kLap) completed.emplace_back(lap, &car);
        events->push_back({.kind = lap.kind == LapEvent::Kind::kLap ? RaceEvent::Kind::kLap
                                                                    : RaceEvent::Kind::kSector,
                           .vehicle = car.entry.vehicle, .time_s = lap.time_s, .lap = lap.lap,
                           .sector = lap.sector, .value = lap.duration_s});
      }
    }
    std::stable_sort(completed.begin(), completed.end(), [](const auto& a, const auto& b) {
      return a.first.time_s < b.first.time_s;
    });
    for (const auto& [lap, car] : completed) {
      car->last_lap_done_s = lap.time_s;
      if (car->finished) continue;
      if (!flag_s_.has_value() && lap.lap < rules_.laps) continue;
      // Past the time allowed after the flag: not classified (retired below).
      if (flag_s_.has_value() && lap.time_s > *flag_s_ + rules_.finish_timeout_s) continue;
      if (!flag_s_.has_value()) flag_s_ = lap.time_s;  // The leader takes the flag.
      car->finished = true;
      car->finish_time_s = lap.time_s;
      events->push_back({.kind = RaceEvent::Kind::kFinish, .vehicle = car->entry.vehicle,
                         .time_s = lap.time_s, .lap = lap.lap});
    }
    if (flag_s_.has_value() && race_time_s_ >= *flag_s_ + rules_.finish_timeout_s) {
      for (Car& car : cars_) {
        if (!car.finished && !car.retired) retire(car);
      }
    }
  }
  if (std::all_of(cars_.begin(), cars_.end(),
                  [](const Car& car) { return car.finished || car.retired; })) {
    phase_ = RacePhase::kFinished;
    events->push_back({.kind = RaceEvent::Kind::kRaceFinished, .time_s = race_time_s_});
  }
}

std::vector<RaceStanding> Race::Standings() const {
  std::vector<RaceStanding> standings;
  for (const Car& car : cars_) {
    RaceStanding standing;
    standing.vehicle = car.entry.vehicle;
    standing.name = car.entry.name;
    standing.grid_position = car.grid + 1;
    standing.finished = car.finished;
    standing.retired = car.retired;
    standing.race_time_s = car.finished  ? car.finish_time_s
                           : car.retired ? car.retired_at_s
                                         : std::max(race_time_s_, 0.0);
    standing.laps_done_at_s = car.last_lap_done_s;
    standing.penalties_s = car.penalties_s;
    standing.jump_starts = car.jump_starts;
    standing.contacts = car.contacts;
    standing.off_tracks = car.off_tracks;
    if (car.tracker.has_value()) {
      const LapProgress& progress = car.tracker->progress();
      standing.laps = progress.laps_completed;
      standing.distance_m = progress.distance_m;
      standing.best_lap_s = progress.best_lap_s;
      standing.last_lap_s = progress.last_lap_s;
    }
    standings.push_back(standing);
  }
  // On the grid: its order. From the start: running or finished before retired; more laps;
  // at equal laps two finished cars by time plus penalties, others by when they completed
  // them (or, none yet, by distance); then the lower id.
  if (phase_ == RacePhase::kCountdown) {
    std::sort(standings.begin(), standings.end(), [](const RaceStanding& a, const RaceStanding& b) {
      return a.grid_position < b.grid_position;
    });
  } else {
    std::sort(standings.begin(), standings.end(), [](const RaceStanding& a, const RaceStanding& b) {
      if (a.retired != b.retired) return !a.retired;
      if (a.laps != b.laps) return a.laps > b.laps;
      if (a.finished && b.finished) {
        const double ta = a.race_time_s + a.penalties_s, tb = b.race_time_s + b.penalties_s;
        if (ta != tb) return ta < tb;
      } else if (a.laps > 0) {
        if (a.laps_done_at_s != b.laps_done_at_s) return a.laps_done_at_s < b.laps_done_at_s;
      } else if (a.distance_m != b.distance_m) {
        return a.distance_m > b.distance_m;
      }
      return a.vehicle < b.vehicle;
    });
  }
  for (std::size_t i = 0; i < standings.size(); ++i) {
    RaceStanding& standing = standings[i];
    const RaceStanding& leader = standings[0];
    standing.position = static_cast<std::uint32_t>(i + 1);
    standing.gap_laps = leader.laps - std::min(leader.laps, standing.laps);
    standing.gap_m = leader.distance_m - standing.distance_m;
    if (standing.finished && leader.finished && standing.laps == leader.laps) {
      standing.gap_s = (standing.race_time_s + standing.penalties_s) -
                       (leader.race_time_s + leader.penalties_s);
    }
  }
  return standings;
}

const Race::Car* Race::Find(VehicleId vehicle) const {
  const auto it = std::lower_bound(
      cars_.begin(), cars_.end(), vehicle,
      [](const Car& car, VehicleId id) { return car.entry.vehicle < id; });
  return it != cars_.end() && it->entry.vehicle == vehicle ? &*it : nullptr;
}

bool Race::Entered(VehicleId vehicle) const { return Find(vehicle) != nullptr; }

const LapTracker* Race::TrackerOf(VehicleId vehicle) const {
  const Car* car = Find(vehicle);
  return car != nullptr && car->tracker.has_value() ? &*car->tracker : nullptr;
}

}  // namespace pitlane::sim
