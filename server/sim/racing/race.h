// Race control on one track (docs/racing.md): a countdown with the cars on their grid slots, a
// start, laps, a finish, penalties and standings, driven tick by tick by the session.
//
// The rules:
//   - Countdown: the race starts `countdown_s` after it is called (at the first tick at or
//     after then). A car that moves more than `jump_start_m` from its grid pose before the
//     start has jumped it: once, with a penalty (not a car the server holds: Entry::held).
//   - Laps are counted from the start by each car's LapTracker (lap_tracker.h): lap 1 from the
//     start, every lap line to line.
//   - Finish: the first car to complete `laps` laps takes the flag; after the flag every other
//     car finishes when it next completes a lap. Those that have not `finish_timeout_s` after
//     the flag, and cars removed from the session, are not classified (DNF).
//   - Penalties, added to a finished car's race time: per jump start, per contact the car
//     begins during the race (with a vehicle, an obstacle or a wall: both cars of a
//     collision), per excursion off the track.
//   - Standings: during the countdown, the grid's order (the order of the entries); from the
//     start, cars still in the race (running or finished) before those that retired;
//     then more laps first; at equal laps, two finished cars by race time plus penalties,
//     others by when they completed that many laps (earlier first), or, with no lap yet, by
//     distance along the track (further first); what is still equal, by the lower vehicle id.
#ifndef PITLANE_SERVER_SIM_RACING_RACE_H_
#define PITLANE_SERVER_SIM_RACING_RACE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/sim/racing/lap_tracker.h"
#include "server/sim/racing/track.h"
#include "server/sim/vehicles/vehicle.h"

namespace pitlane::sim {

struct RaceRules {
  std::uint32_t laps = 3;            // In [1, 1000].
  double countdown_s = 3.0;          // In [0, 60].
  double jump_start_m = 0.5;         // In (0, 100].
  double penalty_jump_start_s = 10;  // Each in [0, 3600].
  double penalty_contact_s = 2;
  double penalty_off_track_s = 1;
  double finish_timeout_s = 120;     // In (0, 86400].
};

// InvalidArgument naming the field ("race.laps: ...").
absl::Status ValidateRaceRules(const RaceRules& rules);

enum class RacePhase { kCountdown, kRacing, kFinished };

struct RaceEvent {
  enum class Kind {
    kStart,         // The race started (vehicle 0).
    kJumpStart,     // A car jumped the start.
    kSector,        // A car ended a sector.
    kLap,           // A car completed a lap.
    kPenalty,       // A penalty was given (seconds in `value`).
    kFinish,        // A car finished.
    kRetired,       // A car left the race (removed, or not finished in time).
    kRaceFinished,  // Every car finished or retired (vehicle 0).
  };
  Kind kind = Kind::kStart;
  VehicleId vehicle = 0;
  double time_s = 0.0;     // Race time (since the start; negative during the countdown).
  std::uint32_t lap = 0;   // kSector, kLap: the lap.
  std::uint32_t sector = 0;
  double value = 0.0;      // kSector, kLap: its time; kPenalty: the seconds added.
  enum class Cause { kNone, kJumpStart, kContact, kOffTrack };
  Cause cause = Cause::kNone;  // kPenalty.
};

struct RaceStanding {
  VehicleId vehicle = 0;
  std::string name;            // The vehicle's, as it was when the race was called.
  std::uint32_t position = 0;  // 1-based.
  std::uint32_t grid_position = 0;  // 1-based: its place in the order of the entries.
  std::uint32_t laps = 0;
  double distance_m = 0.0;     // From the line, counted on from the start (LapProgress::distance_m).
  bool finished = false;
  bool retired = false;
  double race_time_s = 0.0;    // Finished: its finish time; retired: when; else the race time now.
  double laps_done_at_s = 0.0;  // Race time its last completed lap ended (0: none yet).
  double penalties_s = 0.0;
  // Lap times as its LapTracker keeps them: from a grid past the line, lap 1 is partial and
  // no lap time.
  std::optional<double> best_lap_s;
  std::optional<double> last_lap_s;
  // Behind the leader: laps, metres along the track, and (finished on the leader's lap)
  // seconds of race time plus penalties.
  std::uint32_t gap_laps = 0;
  double gap_m = 0.0;
  std::optional<double> gap_s;
  std::uint32_t jump_starts = 0, contacts = 0, off_tracks = 0;
};

class Race {
 public:
  struct Entry {
    VehicleId vehicle = 0;
    Pose2 grid_pose;  // Where it stands for the start.
    std::string name = {};  // Its label in the standings.
    // Held still by the server during the countdown (a built-in driver braking to a stop):
    // never a jump start.
    bool held = false;
  };
  // Calls a race on `track` (it must outlive the race) at time `now_s` (the session's
  // simulated time), with the cars of `entries`. InvalidArgument for rules out of range (as
  // ValidateRaceRules), no entries, or a vehicle entered twice ("entries[3].vehicle_id").
  // With no countdown the race starts at the first Update.
  static absl::StatusOr<Race> Create(const TrackGeometry& track, const RaceRules& rules,
                                     std::vector<Entry> entries, double now_s);

  // After a tick: the session's time, each entry's pose (nullopt: the vehicle is gone), the
  // entries that began a contact in this tick. Appends what happened to `events` (not null).
  void Update(double now_s, const std::function<std::optional<Pose2>(VehicleId)>& pose_of,
              absl::Span<const VehicleId> contacts_begun, std::vector<RaceEvent>* events);

  RacePhase phase() const { return phase_; }
  const RaceRules& rules() const { return rules_; }
  double start_time_s() const { return start_s_; }  // Session time of the start (planned).
  // Since the start, as of the last Update (negative during the countdown).
  double race_time_s() const { return race_time_s_; }
  // The standings now (final once finished), by position.
  std::vector<RaceStanding> Standings() const;
  // Calls `visit` with every number of the race's state, in a fixed order (for a state hash):
  // vehicle ids as VehicleId (std::uint64_t; nothing else is), then bools, counts and times.
  template <typename Visit>
  void VisitState(Visit&& visit) const {
    visit(static_cast<std::uint32_t>(phase_));
    visit(start_s_);
    visit(race_time_s_);
    visit(flag_s_.value_or(-1.0));
    for (const Car& car : cars_) {
      visit(car.entry.vehicle);
      visit(car.grid);
      visit(car.finished);
      visit(car.retired);
      visit(car.finish_time_s);
      visit(car.retired_at_s);
      visit(car.last_lap_done_s);
      visit(car.penalties_s);
      visit(car.jump_starts);
      visit(car.contacts);
      visit(car.off_tracks);
      if (car.tracker.has_value()) {
        visit(car.tracker->progress().distance_m);
        visit(car.tracker->progress().laps_completed);
      }
    }
  }

  // Whether the vehicle was entered in the race. O(log n).
  bool Entered(VehicleId vehicle) const;
  // The car's lap tracker, once the race started (null before, or for an unknown car).
  const LapTracker* TrackerOf(VehicleId vehicle) const;

 private:
  struct Car {
    Entry entry;
    std::uint32_t grid = 0;  // Its place in the entries' order.
    std::optional<LapTracker> tracker;
    bool finished = false, retired = false;
    double finish_time_s = 0.0;
    double retired_at_s = 0.0;     // Race time it retired (its time stops there).
    double last_lap_done_s = 0.0;  // Race time its last completed lap ended.
    double penalties_s = 0.0;
    std::uint32_t jump_starts = 0, contacts = 0, off_tracks = 0;
  };
  Race(const TrackGeometry& track, const RaceRules& rules, std::vector<Entry> entries,
       double now_s);
  // The car of `vehicle` (cars_ is by id), or null. O(log n).
  const Car* Find(VehicleId vehicle) const;
  Car* Find(VehicleId vehicle) {
    return const_cast<Car*>(static_cast<const Race*>(this)->Find(vehicle));
  }
  void Penalize(Car& car, double seconds, RaceEvent::Cause cause, double time_s,
                std::vector<RaceEvent>* events);

  const TrackGeometry* track_;  // Shared by copies of the race.
  RaceRules rules_;
  std::vector<Car> cars_;  // By ascending vehicle id.
  RacePhase phase_ = RacePhase::kCountdown;
  double start_s_ = 0.0;     // Session time the race starts at.
  double race_time_s_ = 0.0;  // Since the start, as of the last Update.
  double last_update_s_ = 0.0;
  std::optional<double> flag_s_;  // Race time the leader took the flag.
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_RACING_RACE_H_
