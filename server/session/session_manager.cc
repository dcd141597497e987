#include "server/session/session_manager.h"

#include <malloc.h>

#include <algorithm>
#include <utility>

#include "absl/base/macros.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/session/random_id.h"
#include "server/util/echo.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"
#include "spdlog/spdlog.h"

namespace pitlane::session {

// Runs ReapIdle on the scheduler. Holds a plain pointer: the manager cancels it before dying.
class SessionManager::Reaper final : public ScheduledJob {
 public:
  Reaper(SessionManager* manager, std::int64_t period_ns)
      : manager_(manager), period_ns_(period_ns) {}
  std::optional<std::int64_t> RunScheduled(std::int64_t now_ns) override {
    manager_->ReapIdle(now_ns);
    return now_ns + period_ns_;
  }

 private:
  SessionManager* const manager_;
  const std::int64_t period_ns_;
};

SessionManager::SessionManager(const ServerLimits& limits, Scheduler* scheduler,
                               std::function<void(absl::string_view)> on_deleted,
                               const SessionMetrics* metrics)
    : limits_(limits),
      scheduler_(scheduler),
      on_deleted_(std::move(on_deleted)),
      metrics_(metrics) {
  if (scheduler_ != nullptr && limits_.session_idle_timeout_s > 0.0) {
    const auto period_ns = static_cast<std::int64_t>(
        std::min(1e9, limits_.session_idle_timeout_s * 1e9 / 10.0));
    reaper_ = std::make_shared<Reaper>(this, period_ns);
    scheduler_->Schedule(reaper_, scheduler_->clock().NowNanos() + period_ns);
  }
}

SessionManager::~SessionManager() {
  // Waits for a run in progress: the reaper points at this manager.
  if (reaper_ != nullptr) scheduler_->CancelAndWait(reaper_.get());
  // Streams still open on a session end when it closes.
  for (const std::shared_ptr<Session>& session : List()) session->Close();
}

int SessionManager::ReapIdle(std::int64_t now_ns) {
  const auto timeout_ns = static_cast<std::int64_t>(limits_.session_idle_timeout_s * 1e9);
  std::vector<std::string> reaped;
  for (const std::shared_ptr<Session>& session : List()) {
    if (session->kept() || session->subscriber_count() > 0) continue;  // Kept, or watched.
    const std::int64_t idle_ns = now_ns - session->last_activity_ns();
    if (idle_ns <= timeout_ns) continue;
    if (Delete(session->id()).ok()) reaped.push_back(session->id());
  }
  if (!reaped.empty()) {
    // One line per run however many were reaped: clients decide how many sessions idle.
    constexpr std::size_t kNamed = 8;
    const std::size_t named = std::min(reaped.size(), kNamed);
    spdlog::info(
        "{} session(s) reaped after more than {} s without a call or a stream: {}{}", reaped.size(),
        limits_.session_idle_timeout_s, absl::StrJoin(reaped.begin(), reaped.begin() + named, ", "),
        reaped.size() > named ? absl::StrCat(" and ", reaped.size() - named, " more") : "");
  }
  return static_cast<int>(reaped.size());
}

void SessionManager::Shutdown(const absl::Status& reason) {
  std::vector<std::shared_ptr<Session>> sessions;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    sessions = order_;
  }
  for (const std::shared_ptr<Session>& session : sessions) session->Close(reason);
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Create(const SessionRequest& request) {
  if (request.name.size() > sim::kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat("name: at most ", sim::kMaxNameBytes,
                                                   " bytes, got ", request.name.size()));
  }
  const std::uint32_t max_vehicles =
      request.max_vehicles.value_or(limits_.max_vehicles_per_session);
  if (max_vehicles < 1 || max_vehicles > limits_.max_vehicles_per_session) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_vehicles: must be in [1, ", limits_.max_vehicles_per_session,
                     "] (the server's --max_vehicles_per_session), got ", max_vehicles));
  }
  const std::uint32_t max_contacts = request.max_contacts.value_or(limits_.max_contacts_per_tick);
  if (max_contacts < 1 || max_contacts > limits_.max_contacts_per_tick) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_contacts_per_tick: must be in [1, ", limits_.max_contacts_per_tick,
                     "] (the server's --max_contacts_per_tick), got ", max_contacts));
  }
  if (request.first_ids.next_vehicle_id < 1 || request.first_ids.next_obstacle_id < 1) {
    return absl::InvalidArgumentError("first_ids: must be >= 1");
  }
  SessionConfig config{
      .name = request.name,
      .world = {.tick_rate_hz = request.tick_rate_hz.value_or(kDefaultTickRate_hz),
                .seed = request.seed,
                .max_vehicles = max_vehicles,
                .max_contacts = max_contacts,
                .collision_policy = request.collision_policy,
                .bounds = request.bounds},
      .clock = UpdatedClock(DefaultClock(limits_.clock_limits), request.clock),
      .obstacles = request.obstacles,
      .vehicles = request.vehicles,
      .spawn_points = request.spawn_points,
      .race_rules = request.race_rules,
  };
  for (const NamedRoute& route : request.routes) {
    config.world.routes.push_back(route.route);
    config.route_names.push_back(route.name);
  }
  RETURN_IF_ERROR(CheckClockSettings(config.clock, limits_.clock_limits));
  RETURN_IF_ERROR(sim::ValidateRaceRules(config.race_rules));
  if (config.clock.mode != ClockMode::kLockstep && scheduler_ == nullptr) {
    return absl::FailedPreconditionError(
        "clock_mode: this server runs no scheduler; only LOCKSTEP is available");
  }
  RETURN_IF_ERROR(CheckRoom());  // Before building it: a refused session costs nothing.
  ASSIGN_OR_RETURN(sim::World world, BuildWorld(config, request.first_ids));
  ASSIGN_OR_RETURN(std::string id, NewSessionId(limits_.replica));

  // When the last holder lets go, the allocator hands the freed pages back to the system: a
  // big session's memory must not stay with the process after it is deleted.
  std::shared_ptr<Session> session(
      new Session(id, std::move(config), std::move(world), limits_.max_ticks_per_step,
                  scheduler_, limits_.clock_limits, metrics_),
      [](Session* gone) {
        delete gone;
        malloc_trim(0);
      });
  // A playback is one before anyone can find it (and spawn into it).
  if (request.playback != nullptr) {
    RETURN_IF_ERROR(session->Play(request.playback, request.playback_start_ns));
  }
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckRoomLocked());  // Again: others may have been made meanwhile.
    // 128 random bits: two equal ids would take about 2^64 sessions.
    [[maybe_unused]] const bool inserted = sessions_.emplace(std::move(id), session).second;
    ABSL_ASSERT(inserted);
    order_.push_back(session);
  }
  session->Start();
  return session;
}

absl::Status SessionManager::CheckRoom() const {
  absl::MutexLock lock(&mu_);
  return CheckRoomLocked();
}

absl::Status SessionManager::CheckRoomLocked() const {
  if (shutting_down_) return absl::UnavailableError("the server is shutting down");
  if (sessions_.size() >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat("sessions: the server holds its maximum of ", limits_.max_sessions,
                     " sessions (--max_sessions); delete one first"));
  }
  return absl::OkStatus();
}

absl::Status NoSuchSession(absl::string_view id) {
  return absl::NotFoundError(absl::StrCat("session_id: no session \"", Echo(id), "\""));
}

absl::StatusOr<std::shared_ptr<Session>> SessionManager::Find(absl::string_view id) const {
  if (id.empty()) return absl::InvalidArgumentError("session_id: required");
  absl::MutexLock lock(&mu_);
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return NoSuchSession(id);
  it->second->Touch();
  return it->second;
}

absl::StatusOr<SimTime> SessionManager::Delete(absl::string_view id) {
  ASSIGN_OR_RETURN(std::shared_ptr<Session> session, Find(id));
  {
    absl::MutexLock lock(&mu_);
    // Another Delete may have won the race since Find.
    if (sessions_.erase(id) == 0) return NoSuchSession(id);
    std::erase(order_, session);
  }
  const SimTime time = session->Close();
  if (on_deleted_) on_deleted_(session->id());
  return time;
}

void SessionManager::AddGauges(metrics::Registry& registry) const {
  // One pass over the sessions per scrape (each counted under its lock, briefly), so that the
  // families agree with each other.
  registry.AddGauges(
      {{"pitlane_sessions", "Open sessions, by clock mode."},
       {"pitlane_vehicles", "Vehicles in all sessions."},
       {"pitlane_subscribers", "Open state streams of all sessions (StreamStates and Drive)."},
       {"pitlane_controllers", "Drive streams attached to a vehicle."}},
      [this] {
        double sessions[3] = {0, 0, 0};  // By ClockMode.
        double vehicles = 0, subscribers = 0, controllers = 0;
        for (const std::shared_ptr<Session>& session : List()) {
          const Session::Counts counts = session->counts();
          sessions[static_cast<int>(counts.clock_mode)] += 1;
          vehicles += static_cast<double>(counts.vehicles);
          subscribers += static_cast<double>(counts.subscribers);
          controllers += static_cast<double>(counts.controllers);
        }
        return std::vector<std::vector<metrics::Sample>>{
            {{.labels = {{"clock_mode", "lockstep"}}, .value = sessions[0]},
             {.labels = {{"clock_mode", "realtime"}}, .value = sessions[1]},
             {.labels = {{"clock_mode", "barrier"}}, .value = sessions[2]}},
            {{.value = vehicles}},
            {{.value = subscribers}},
            {{.value = controllers}}};
      });
}

std::vector<std::shared_ptr<Session>> SessionManager::List() const {
  absl::MutexLock lock(&mu_);
  return order_;
}

std::size_t SessionManager::size() const {
  absl::MutexLock lock(&mu_);
  return sessions_.size();
}

}  // namespace pitlane::session
