#include "server/sim/collision/contacts.h"

namespace pitlane::sim {

void DiffContacts(absl::Span<const Contact> previous, std::uint64_t tick,
                  absl::Span<Contact> current, std::vector<ContactEvent>& transitions) {
  std::size_t p = 0;
  std::size_t c = 0;
  while (p < previous.size() || c < current.size()) {
    if (c == current.size() || (p < previous.size() && previous[p].pair < current[c].pair)) {
      transitions.push_back({.tick = tick, .phase = ContactPhase::kEnded, .contact = previous[p]});
      ++p;
    } else if (p == previous.size() || current[c].pair < previous[p].pair) {
      current[c].began_tick = tick;
      transitions.push_back({.tick = tick, .phase = ContactPhase::kBegan, .contact = current[c]});
      ++c;
    } else {
      current[c].began_tick = previous[p].began_tick;
      ++p;
      ++c;
    }
  }
}

}  // namespace pitlane::sim
