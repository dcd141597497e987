// Contacts between a vehicle and another object, and the events that track them over time.
#ifndef PITLANE_SERVER_SIM_COLLISION_CONTACTS_H_
#define PITLANE_SERVER_SIM_COLLISION_CONTACTS_H_

#include <algorithm>
#include <compare>
#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "server/sim/world/ids.h"

namespace pitlane::sim {

// Who touches whom. Vehicle-vehicle pairs name the lower id first. Ordered by
// (vehicle, other_kind, other_id): the order contacts and events are reported in.
struct ContactPair {
  VehicleId vehicle = 0;
  ObjectKind other_kind = ObjectKind::kVehicle;
  std::uint64_t other_id = 0;  // A VehicleId, ObstacleId or Wall, by other_kind.
  friend auto operator<=>(const ContactPair&, const ContactPair&) = default;
};

// A contact in effect at some tick.
struct Contact {
  ContactPair pair;
  // Unit normal from the vehicle towards the other object (the axis of least overlap).
  double normal_x = 0.0;
  double normal_y = 0.0;
  double depth_m = 0.0;         // Overlap along the normal, metres, >= 0.
  std::uint64_t began_tick = 0;  // First tick of this contact.
};

// Whether `vehicle` is one side of `contact`: its first side, or its other side when that is
// a vehicle (an obstacle or a wall may share the number of a vehicle id).
inline bool Involves(const Contact& contact, VehicleId vehicle) {
  return contact.pair.vehicle == vehicle ||
         (contact.pair.other_kind == ObjectKind::kVehicle && contact.pair.other_id == vehicle);
}

// Whether a vehicle of `sorted_vehicles` (ascending, unique) is one side of `contact`.
inline bool InvolvesAnyOf(const Contact& contact, absl::Span<const VehicleId> sorted_vehicles) {
  const auto has = [sorted_vehicles](VehicleId id) {
    return std::binary_search(sorted_vehicles.begin(), sorted_vehicles.end(), id);
  };
  return has(contact.pair.vehicle) ||
         (contact.pair.other_kind == ObjectKind::kVehicle && has(contact.pair.other_id));
}

enum class ContactPhase : std::uint8_t {
  kBegan = 1,    // In contact at this tick, not at the one before.
  kOngoing = 2,  // In contact at this tick and the one before.
  kEnded = 3,    // In contact at the tick before, not at this one.
};

struct ContactEvent {
  std::uint64_t tick = 0;  // The tick whose step produced the event.
  ContactPhase phase = ContactPhase::kBegan;
  // For kEnded: the contact as last seen (normal and depth of the tick before).
  Contact contact;
};

// Compares the contacts of two consecutive ticks, both sorted by pair, and appends to
// `transitions` a kBegan event for each pair only in `current` and a kEnded event for each
// pair only in `previous`, in pair order. Sets began_tick in `current`: carried over from
// `previous` for continuing pairs, `tick` for new ones.
void DiffContacts(absl::Span<const Contact> previous, std::uint64_t tick,
                  absl::Span<Contact> current, std::vector<ContactEvent>& transitions);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_COLLISION_CONTACTS_H_
