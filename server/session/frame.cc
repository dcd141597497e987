#include "server/session/frame.h"

#include <algorithm>
#include <utility>

namespace pitlane::session {

void AppendEvents(absl::Span<const sim::ContactEvent> events, FrameEvents& into) {
  const std::size_t room = kMaxEventsPerFrame - std::min(kMaxEventsPerFrame, into.events.size());
  const std::size_t kept = std::min(room, events.size());
  into.events.insert(into.events.end(), events.begin(), events.begin() + kept);
  into.dropped += events.size() - kept;
}

void AppendTrackEvents(absl::Span<const TrackEvent> events, FrameEvents& into) {
  for (const TrackEvent& event : events) {
    const bool lap = std::holds_alternative<sim::VehicleLapEvent>(event.event);
    std::vector<TrackEvent>& kept = lap ? into.lap_events : into.race_events;
    if (kept.size() < kMaxEventsPerFrame) {
      kept.push_back(event);
    } else {
      ++(lap ? into.dropped_lap_events : into.dropped_race_events);
    }
  }
}

sim::VehicleId TrackEvent::vehicle() const {
  if (const auto* lap = std::get_if<sim::VehicleLapEvent>(&event)) return lap->id;
  return std::get<sim::RaceEvent>(event).vehicle;
}

void FinishEvents(absl::Span<const sim::Contact> contacts, std::uint64_t tick,
                  FrameEvents& into) {
  for (const sim::Contact& contact : contacts) {
    if (contact.began_tick >= tick) continue;
    if (into.events.size() >= kMaxEventsPerFrame) {
      ++into.dropped;
      ++into.dropped_ongoing;
      continue;
    }
    into.events.push_back({.tick = tick, .phase = sim::ContactPhase::kOngoing, .contact = contact});
  }
  std::stable_sort(into.events.begin(), into.events.end(),
                   [](const sim::ContactEvent& a, const sim::ContactEvent& b) {
                     if (a.tick != b.tick) return a.tick < b.tick;
                     return a.contact.pair < b.contact.pair;
                   });
}

FrameEvents MergeEvents(FrameEvents older, FrameEvents newer) {
  std::erase_if(older.events, [](const sim::ContactEvent& event) {
    return event.phase == sim::ContactPhase::kOngoing;
  });
  older.dropped -= older.dropped_ongoing;
  older.dropped += newer.dropped;
  older.dropped_ongoing = newer.dropped_ongoing;
  older.ticks_over_contact_budget += newer.ticks_over_contact_budget;
  AppendEvents(newer.events, older);
  older.dropped_lap_events += newer.dropped_lap_events;
  older.dropped_race_events += newer.dropped_race_events;
  AppendTrackEvents(newer.lap_events, older);
  AppendTrackEvents(newer.race_events, older);
  return older;
}

const sim::VehicleTrackReading* TrackReadingOf(const Frame& frame, sim::VehicleId id) {
  const auto reading = std::lower_bound(
      frame.track.begin(), frame.track.end(), id,
      [](const sim::VehicleTrackReading& r, sim::VehicleId wanted) { return r.id < wanted; });
  return reading != frame.track.end() && reading->id == id ? &*reading : nullptr;
}

const std::string& TrackNameOf(const Frame& frame, const sim::VehicleTrackReading& reading) {
  static const std::string* const kNone = new std::string();
  return frame.track_names != nullptr && reading.route < frame.track_names->size()
             ? (*frame.track_names)[reading.route]
             : *kNone;
}

const std::string& RaceTrackName(const Frame& frame) {
  static const std::string* const kNone = new std::string();
  return frame.race != nullptr && frame.track_names != nullptr &&
                 frame.race->route < frame.track_names->size()
             ? (*frame.track_names)[frame.race->route]
             : *kNone;
}

std::size_t FrameBytes(const Frame& frame) {
  std::size_t bytes = sizeof(Frame) + frame.vehicles.size() * sizeof(sim::VehicleSnapshot) +
                      frame.contacts.size() * sizeof(sim::Contact) +
                      frame.motion.size() * (5 * sizeof(double) + sizeof(std::uint8_t));
  for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
    if (vehicle.range_scan.has_value()) bytes += vehicle.range_scan->ranges_m.size() * sizeof(double);
    if (vehicle.nearest_objects.has_value()) {
      bytes += vehicle.nearest_objects->size() * sizeof(sim::NearbyObject);
    }
  }
  if (frame.race != nullptr) bytes += frame.race->standings.size() * sizeof(sim::RaceStanding);
  for (const sim::VehicleTrackReading& reading : frame.track) {
    bytes += sizeof(reading) + (reading.progress.sector_times_s.size() +
                                reading.progress.last_sector_times_s.size()) * sizeof(double);
    if (reading.sensor.has_value()) bytes += reading.sensor->edge_distances_m.size() * sizeof(double);
  }
  return bytes;
}

}  // namespace pitlane::session
