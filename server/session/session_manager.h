// The sessions of one server process: creation with limits, lookup by id, deletion.
#ifndef PITLANE_SERVER_SESSION_SESSION_MANAGER_H_
#define PITLANE_SERVER_SESSION_SESSION_MANAGER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/session/playback.h"
#include "server/session/session.h"
#include "server/util/metrics.h"

namespace pitlane::session {

// Server-wide limits, from flags.
struct ServerLimits {
  std::uint32_t max_sessions = 256;                // Sessions alive at once.
  std::uint32_t max_vehicles_per_session = 100000;  // Default and cap of a session's limit.
  std::uint32_t max_ticks_per_step = 10000;         // Ticks one Step call may advance.
  // Contacts one tick of a session keeps (sim::World::contacts_dropped).
  std::uint32_t max_contacts_per_tick = sim::kDefaultMaxContactsPerTick;
  // A session with no client call and no stream for this long is deleted, seconds; 0 = never.
  double session_idle_timeout_s = 0.0;
  // Every session's clock must stay within these (CreateSession and SetClock).
  ClockLimits clock_limits;
  // This server's name among the replicas behind a proxy (--replica; IsReplicaName), which
  // ends each session id; "" for a server on its own.
  std::string replica;
};

// A session's config as the client gave it; unset optional fields take the server's
// defaults.
struct SessionRequest {
  std::string name;
  std::optional<double> tick_rate_hz;           // Default 50 Hz.
  std::uint64_t seed = 0;
  std::optional<std::uint32_t> max_vehicles;    // Default max_vehicles_per_session.
  // Unset fields take DefaultClock(ServerLimits::clock_limits).
  ClockUpdate clock;
  sim::CollisionPolicy collision_policy = sim::CollisionPolicy::kReport;
  std::optional<sim::WorldBounds> bounds;      // No walls when unset.
  std::vector<sim::ObstacleSpec> obstacles;    // Placed at tick 0.
  std::vector<sim::VehicleSpec> vehicles;      // Spawned at tick 0.
  std::vector<NamedRoute> routes;              // For the built-in drivers, by index.
  std::vector<SpawnPoint> spawn_points;
  sim::RaceRules race_rules;  // Checked (sim::ValidateRaceRules).
  // A re-simulation's (a recording's): the world's first ids (a session reset before the
  // recording started goes on from the ids of the world before), and its contact budget
  // (unset: the server's; at most the server's).
  sim::IdCounters first_ids;
  std::optional<std::uint32_t> max_contacts;
  // A playback's (PlayRecording): the recording it shows (Session::Play), from this time
  // since the recording's start, ns. `vehicles` must be empty.
  std::shared_ptr<PlaybackSource> playback;
  std::uint64_t playback_start_ns = 0;
};

inline constexpr double kDefaultTickRate_hz = 50.0;

// What Find says of an id that names no session: NotFound ("session_id", the id cut and
// escaped by Echo).
absl::Status NoSuchSession(absl::string_view id);

// Thread-safe. Sessions are handed out as shared_ptr: a handler may still be using a session
// while another deletes it, and the session must outlive both; Session::Close makes the
// stragglers fail cleanly.
class SessionManager {
 public:
  // `scheduler` paces REALTIME sessions; it must outlive the manager. Null: LOCKSTEP only.
  // `on_deleted` is called with the id of each session deleted (by Delete or ReapIdle), after
  // it is closed; it must be thread-safe.
  // `metrics` (may be null; must outlive the manager) is given to every session.
  explicit SessionManager(const ServerLimits& limits, Scheduler* scheduler = nullptr,
                          std::function<void(absl::string_view)> on_deleted = {},
                          const SessionMetrics* metrics = nullptr);
  ~SessionManager();

  const ServerLimits& limits() const { return limits_; }

  // The new session's id is unguessable (NewSessionId): "s-" and 26 base32 characters, then
  // "." and limits().replica if set.
  // Errors: InvalidArgument naming the field ("tick_rate_hz", "max_vehicles", "name",
  // "real_time_factor", "barrier_timeout_s", "bounds.max_x_m", "obstacles[2].length_m");
  // ResourceExhausted when max_sessions sessions exist; Internal if the OS gives no randomness.
  absl::StatusOr<std::shared_ptr<Session>> Create(const SessionRequest& request);
  // NotFound ("session_id", with the id cut to kEchoMaxBytes and escaped: see Echo) for an
  // unknown id; InvalidArgument for an empty one. Counts as activity of the session (see
  // ReapIdle).
  absl::StatusOr<std::shared_ptr<Session>> Find(absl::string_view id) const;
  // Removes and closes a session; returns its final time. Errors as Find.
  absl::StatusOr<SimTime> Delete(absl::string_view id);
  // Every session, in creation order.
  std::vector<std::shared_ptr<Session>> List() const;
  // Gauges of the open sessions in `registry`, read at each scrape (this manager must outlive
  // the registry's scrapes): pitlane_sessions by clock mode, pitlane_vehicles,
  // pitlane_subscribers and pitlane_controllers.
  void AddGauges(metrics::Registry& registry) const;
  std::size_t size() const;

  // Deletes the sessions that had no client call and no stream for longer than the idle
  // timeout, as of `now_ns` on the scheduler's clock, except kept ones (Session::Keep).
  // Returns how many, and logs one line naming them if any. (A job on the scheduler calls it
  // every timeout / 10, at least every second: at most 10 such lines a second.)
  int ReapIdle(std::int64_t now_ns);
  // The server is stopping: new sessions are refused (Unavailable) and every session closes,
  // its streams ending with `reason`.
  void Shutdown(const absl::Status& reason);

 private:
  class Reaper;

  // Unavailable when shutting down; ResourceExhausted at max_sessions.
  absl::Status CheckRoom() const;
  absl::Status CheckRoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ServerLimits limits_;
  Scheduler* const scheduler_;
  const std::function<void(absl::string_view)> on_deleted_;
  const SessionMetrics* const metrics_;
  std::shared_ptr<Reaper> reaper_;  // When idle sessions are reaped.
  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, std::shared_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  // Creation order, for listings. Same sessions as sessions_.
  std::vector<std::shared_ptr<Session>> order_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_SESSION_MANAGER_H_
