#include "server/session/session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/util/status_macros.h"

namespace pitlane::session {

Session::Session(std::string id, SessionConfig config, sim::World world,
                 std::uint32_t max_ticks_per_step)
    : id_(std::move(id)),
      config_(std::move(config)),
      max_ticks_per_step_(max_ticks_per_step),
      world_(std::move(world)) {}

absl::StatusOr<std::vector<sim::VehicleId>> Session::SpawnVehicles(
    absl::Span<const sim::VehicleSpec> specs) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  return world_.Spawn(specs);
}

absl::Status Session::RemoveVehicle(sim::VehicleId id) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  return world_.Remove(id);
}

absl::StatusOr<std::vector<sim::ObstacleId>> Session::AddObstacles(
    absl::Span<const sim::ObstacleSpec> specs) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  return world_.AddObstacles(specs);
}

absl::Status Session::RemoveObstacle(sim::ObstacleId id) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  return world_.RemoveObstacle(id);
}

absl::StatusOr<SimTime> Session::SetControls(absl::Span<const sim::VehicleInput> inputs) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  RETURN_IF_ERROR(world_.SetInputs(inputs));
  return NowLocked();
}

absl::StatusOr<StepResult> Session::Step(std::uint32_t ticks,
                                         std::optional<std::uint64_t> expected_tick) {
  if (ticks < 1 || ticks > max_ticks_per_step_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ticks: must be in [1, ", max_ticks_per_step_, "], got ", ticks));
  }
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  if (expected_tick.has_value() && *expected_tick != world_.tick()) {
    return absl::AbortedError(absl::StrCat("expected_tick: the session is at tick ",
                                           world_.tick(), ", not ", *expected_tick));
  }
  StepResult result;
  std::shared_ptr<const Frame> last_published;
  std::vector<sim::ContactEvent> transitions;
  for (std::uint32_t i = 0; i < ticks; ++i) {
    transitions.clear();
    world_.Step(&transitions);
    AppendEvents(transitions, result.events);
    last_published = subscribers_.empty() ? nullptr : PublishLocked(transitions);
  }
  result.frame = last_published != nullptr ? last_published : MakeFrameLocked();
  FinishEvents(world_.contacts(), world_.tick(), result.events);
  return result;
}

std::shared_ptr<const Frame> Session::CurrentFrame() const {
  absl::MutexLock lock(&mu_);
  return MakeFrameLocked();
}

SessionDescription Session::Describe(bool with_vehicles) const {
  absl::MutexLock lock(&mu_);
  SessionDescription description{
      .id = id_,
      .config = config_,
      .time = NowLocked(),
      .vehicle_count = world_.vehicle_count(),
      .obstacle_count = world_.obstacles().size(),
  };
  if (with_vehicles) {
    description.vehicles = world_.DescribeVehicles();
    description.obstacles = world_.obstacles();
  }
  return description;
}

SimTime Session::Now() const {
  absl::MutexLock lock(&mu_);
  return NowLocked();
}

std::uint64_t Session::StateHash() const {
  absl::MutexLock lock(&mu_);
  return world_.StateHash();
}

absl::StatusOr<std::uint64_t> Session::Subscribe(std::uint32_t every_n_ticks,
                                                 std::shared_ptr<FrameSink> sink) {
  if (every_n_ticks < 1) {
    return absl::InvalidArgumentError("every_n_ticks: must be >= 1, got 0");
  }
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  const std::uint64_t handle = next_subscription_++;
  // The first frame: contacts that began at its tick count as begun, the rest as ongoing.
  FrameEvents events;
  const std::uint64_t tick = world_.tick();
  for (const sim::Contact& contact : world_.contacts()) {
    if (contact.began_tick == tick) {
      events.events.push_back({.tick = tick, .phase = sim::ContactPhase::kBegan, .contact = contact});
    }
  }
  FinishEvents(world_.contacts(), tick, events);
  sink->OnFrame(MakeFrameLocked(), std::move(events));
  subscribers_.push_back({handle, every_n_ticks, std::move(sink), {}});
  return handle;
}

void Session::Unsubscribe(std::uint64_t subscription) {
  absl::MutexLock lock(&mu_);
  std::erase_if(subscribers_,
                [subscription](const Subscriber& s) { return s.handle == subscription; });
}

std::size_t Session::subscriber_count() const {
  absl::MutexLock lock(&mu_);
  return subscribers_.size();
}

SimTime Session::Close() {
  std::vector<Subscriber> subscribers;
  SimTime now;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    subscribers.swap(subscribers_);
    now = NowLocked();
  }
  // Outside the lock: a sink may finish its stream and unsubscribe right away.
  for (const Subscriber& subscriber : subscribers) subscriber.sink->OnSessionClosed();
  return now;
}

SimTime Session::NowLocked() const {
  return SimTime{.tick = world_.tick(), .sim_time_s = world_.sim_time_s()};
}

std::shared_ptr<const Frame> Session::MakeFrameLocked() const {
  return std::make_shared<const Frame>(Frame{
      .time = NowLocked(), .vehicles = world_.Snapshot(), .contacts = world_.contacts()});
}

absl::Status Session::CheckOpenLocked() const {
  if (!closed_) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("session_id: session ", id_, " was deleted"));
}

std::shared_ptr<const Frame> Session::PublishLocked(
    absl::Span<const sim::ContactEvent> transitions) {
  const std::uint64_t tick = world_.tick();
  std::shared_ptr<const Frame> frame;
  for (Subscriber& subscriber : subscribers_) {
    AppendEvents(transitions, subscriber.pending);
    if (tick % subscriber.every_n_ticks != 0) continue;
    if (frame == nullptr) frame = MakeFrameLocked();
    FinishEvents(frame->contacts, tick, subscriber.pending);
    subscriber.sink->OnFrame(frame, std::exchange(subscriber.pending, {}));
  }
  return frame;
}

void AppendEvents(absl::Span<const sim::ContactEvent> events, FrameEvents& into) {
  const std::size_t room = kMaxEventsPerFrame - std::min(kMaxEventsPerFrame, into.events.size());
  const std::size_t kept = std::min(room, events.size());
  into.events.insert(into.events.end(), events.begin(), events.begin() + kept);
  into.dropped += events.size() - kept;
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

}  // namespace pitlane::session
