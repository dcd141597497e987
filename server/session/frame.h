// What a session publishes after a tick: an immutable frame, and the contact events that go
// with it.
#ifndef PITLANE_SERVER_SESSION_FRAME_H_
#define PITLANE_SERVER_SESSION_FRAME_H_

#include <cstdint>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/types/span.h"
#include "server/sim/collision/contacts.h"
#include "server/sim/racing/readings.h"
#include "server/sim/vehicles/vehicle.h"

namespace pitlane::session {

// A point on a session's clock.
struct SimTime {
  std::uint64_t tick = 0;   // Ticks since creation (or the last reset).
  double sim_time_s = 0.0;  // tick / tick_rate_hz, seconds.
};

// The world at one tick, as published to clients. Immutable once made; shared by every
// subscriber that takes it. Encodings of it (protobuf, JSON, ...) belong to the layers that
// make them, not to the frame.
struct Frame {
  SimTime time;
  // Resets of the session before this frame: (run, time.tick) orders a session's frames.
  std::uint64_t run = 0;
  std::vector<sim::VehicleSnapshot> vehicles;  // By ascending id; empty when lean.
  // A lean frame, made for subscribers that take one (SubscriberOptions::full_every_n_ticks)
  // when no other wants this tick's frame, has the vehicles' motion alone, in `motion`.
  bool lean = false;
  sim::MotionColumns motion;
  // The vehicles timed on a race track: their progress (and track sensors), by ascending id;
  // empty when lean. The tracks' names, by route index (null: none).
  std::vector<sim::VehicleTrackReading> track;
  std::shared_ptr<const std::vector<std::string>> track_names;
  // The race called last in the session, as it stands at this tick (null: none; and when
  // lean). Its track is (*track_names)[race->route].
  std::shared_ptr<const sim::RaceStatus> race;
  std::vector<sim::Contact> contacts;          // In effect at this tick, by pair.
  // Contacts in effect beyond the world's budget, not in `contacts` (sim::World::contacts_dropped).
  std::uint64_t contacts_dropped = 0;
};

// A lap or sector a timed vehicle completed (its lap timer: sim::World::lap_events), or what a
// race did (sim::World::race_events), in the step to `tick`.
struct TrackEvent {
  std::uint64_t tick = 0;
  std::variant<sim::VehicleLapEvent, sim::RaceEvent> event;
  // The vehicle it is about; 0 for the race's own (its start and its end).
  sim::VehicleId vehicle() const;
};

// Contact events that go with a frame (a Step result or a delivered frame).
//
// `events` holds the kBegan and kEnded events of every tick since the previous frame of the
// same call or subscriber (or of the ticks stepped), then kOngoing for each contact in effect
// at the frame's tick that began before it; all in (tick, pair) order. At most
// kMaxEventsPerFrame are kept; the transitions beyond are counted in `dropped`.
struct FrameEvents {
  std::vector<sim::ContactEvent> events;
  std::uint64_t dropped = 0;
  std::uint64_t dropped_ongoing = 0;  // The kOngoing events among `dropped`.
  // Ticks among those covered whose kBegan and kEnded events may be partial: those that
  // dropped contacts (the world's budget) and the tick after each.
  std::uint64_t ticks_over_contact_budget = 0;
  // The track events of the same ticks, in tick order: laps and sectors of the timed vehicles
  // (VehicleLapEvent: by vehicle within a tick) and the race's (RaceEvent). At most
  // kMaxEventsPerFrame of each kind; those beyond are counted.
  std::vector<TrackEvent> lap_events;
  std::vector<TrackEvent> race_events;
  std::uint64_t dropped_lap_events = 0;
  std::uint64_t dropped_race_events = 0;
};

inline constexpr std::size_t kMaxEventsPerFrame = 100000;

// The memory a frame holds, bytes (its vehicles, their sensor readings, its contacts).
std::size_t FrameBytes(const Frame& frame);

// Vehicle `id`'s progress on its race track in `frame`, or null when it is timed on none.
const sim::VehicleTrackReading* TrackReadingOf(const Frame& frame, sim::VehicleId id);
// The name of `reading`'s track ("" when the frame names none).
const std::string& TrackNameOf(const Frame& frame, const sim::VehicleTrackReading& reading);

// The name of the track of `frame`'s race ("" when it has none).
const std::string& RaceTrackName(const Frame& frame);

// Appends `events` to `into`, keeping at most kMaxEventsPerFrame and counting the rest.
void AppendEvents(absl::Span<const sim::ContactEvent> events, FrameEvents& into);
// Appends `events` to `into`'s lap or race events, by kind, keeping at most
// kMaxEventsPerFrame of each.
void AppendTrackEvents(absl::Span<const TrackEvent> events, FrameEvents& into);
// Appends kOngoing events for the contacts in effect at `tick` that began before it and sorts
// `into` by (tick, pair).
void FinishEvents(absl::Span<const sim::Contact> contacts, std::uint64_t tick, FrameEvents& into);
// Folds `older` (events of an undelivered frame) in front of `newer` (the next frame's): the
// older transitions stay, its kOngoing events give way to the newer frame's.
FrameEvents MergeEvents(FrameEvents older, FrameEvents newer);

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_FRAME_H_
