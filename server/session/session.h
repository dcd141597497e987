// A session: one world, its clock, and the clients watching it.
//
// Every public method is thread-safe. Handlers reach the world only through this API: the
// world's state is owned by the session and changes only between ticks, under its lock, so
// a tick is atomic and anything a client sends applies from the next tick. The clock is
// LOCKSTEP (time moves only in Step) or REALTIME (the scheduler's workers step the session at
// tick_rate_hz x real_time_factor; see RunScheduled).
#ifndef PITLANE_SERVER_SESSION_SESSION_H_
#define PITLANE_SERVER_SESSION_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/session/scheduler.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/world.h"

namespace pitlane::session {

// How time advances in a session.
enum class ClockMode {
  kLockstep,  // Only Step() advances time.
  kRealtime,  // The server paces ticks at tick_rate_hz x real_time_factor.
  // Each tick waits until every attached controller has answered the previous observation,
  // or barrier_timeout_s has passed since it was published; then it runs with the last
  // controls received (the TORCS/SCR championship rule). No controller: no ticks.
  kBarrier,
};

inline constexpr double kMaxRealTimeFactor = 1000.0;

// A session's clock as configured.
struct ClockSettings {
  ClockMode mode = ClockMode::kLockstep;
  // REALTIME: simulated seconds per wall-clock second, in [0, kMaxRealTimeFactor]; 0 = as
  // fast as the workers can step it.
  double real_time_factor = 1.0;
  // REALTIME and BARRIER: no ticks while paused (Step works then, to single-step).
  bool paused = false;
  // BARRIER: the longest a tick waits for the controllers, seconds, in
  // [kMinBarrierTimeout_s, kMaxBarrierTimeout_s].
  double barrier_timeout_s = 0.5;
};

inline constexpr double kMinBarrierTimeout_s = 0.001;
inline constexpr double kMaxBarrierTimeout_s = 60.0;

// A change to a session's clock: unset fields stay as they are.
struct ClockUpdate {
  std::optional<ClockMode> mode;
  std::optional<double> real_time_factor;
  std::optional<bool> paused;
  std::optional<double> barrier_timeout_s;
};

// What a controller's vehicle does when its controller detaches.
enum class DisconnectAction {
  kBrakeToStop,   // Brakes to a stop (then holds still), steering straight.
  kHoldControls,  // Keeps the last controls it received.
};

// How a control from a controller was taken.
enum class ControlReceipt {
  kOnTime,  // Answers the latest observation: applies from the next tick.
  kLate,    // Answers an older observation, but is the newest received: applied.
  kStale,   // Older than a control already received from this controller: dropped.
};

// How well a paced session kept time, since creation.
struct ClockStats {
  std::uint64_t paced_ticks = 0;       // Ticks the scheduler ran.
  // Paced ticks that started more than one period after their deadline, plus ticks skipped
  // when the session fell too far behind to catch up.
  std::uint64_t missed_deadlines = 0;
  double lateness_p50_ms = 0.0;        // Start of a paced tick minus its deadline.
  double lateness_p99_ms = 0.0;
  double lateness_max_ms = 0.0;
  // BARRIER: ticks that ran because the timeout passed before every controller answered.
  std::uint64_t barrier_timeouts = 0;
};

// A route with the name clients gave it (drivers refer to routes by index in the core).
struct NamedRoute {
  std::string name;
  sim::Route route;
};

// A named pose where clients may put their vehicles.
struct SpawnPoint {
  std::string name;
  sim::Pose2 pose;
};

// A session as a client configures it (after the api layer filled in defaults): everything
// needed to build its world at tick 0, at creation and at every reset.
struct SessionConfig {
  std::string name;                   // Label, at most sim::kMaxNameBytes bytes.
  sim::WorldSpec world;               // Tick rate, seed, vehicle limit, walls, routes.
  ClockSettings clock;                // At creation; SetClock changes it.
  std::vector<sim::ObstacleSpec> obstacles;  // Placed at tick 0.
  std::vector<sim::VehicleSpec> vehicles;    // Spawned at tick 0, with their drivers.
  std::vector<std::string> route_names;      // Of world.routes, in order.
  std::vector<SpawnPoint> spawn_points;
};

// The world of `config` at tick 0: created, its obstacles placed, its vehicles spawned.
// Its ids start at `first_ids`: a reset passes the replaced world's next_ids(), so that ids
// are never reused in a session's life. InvalidArgument naming the field
// ("obstacles[2].length_m", "vehicles[0].driver.route").
absl::StatusOr<sim::World> BuildWorld(const SessionConfig& config,
                                      sim::IdCounters first_ids = {});

// Checks `settings` (real_time_factor in range). InvalidArgument naming the field.
absl::Status CheckClockSettings(const ClockSettings& settings);

// A point on a session's clock.
struct SimTime {
  std::uint64_t tick = 0;   // Ticks since creation.
  double sim_time_s = 0.0;  // tick / tick_rate_hz, seconds.
};

// The world at one tick, as published to clients. Immutable once made; shared by every
// subscriber that takes it.
struct Frame {
  SimTime time;
  std::vector<sim::VehicleSnapshot> vehicles;  // By ascending id.
  std::vector<sim::Contact> contacts;          // In effect at this tick, by pair.
  // The whole state in the wire encoding, made once (under encode_once) by the first stream
  // that sends this frame and shared by every other: the api layer's, opaque here.
  mutable absl::once_flag encode_once;
  mutable std::string encoded_state;
};

// Contact events that go with a frame (a Step result or a streamed frame).
//
// `events` holds the kBegan and kEnded events of every tick since the previous frame of the
// same call or stream (or of the ticks stepped), then kOngoing for each contact in effect at
// the frame's tick that began before it; all in (tick, pair) order. At most
// kMaxEventsPerFrame are kept; the transitions beyond are counted in `dropped`.
struct FrameEvents {
  std::vector<sim::ContactEvent> events;
  std::uint64_t dropped = 0;
  std::uint64_t dropped_ongoing = 0;  // The kOngoing events among `dropped`.
};

inline constexpr std::size_t kMaxEventsPerFrame = 100000;

// What Step returns.
struct StepResult {
  std::shared_ptr<const Frame> frame;  // After the last tick.
  FrameEvents events;                  // Of every tick stepped.
};

// Appends `events` to `into`, keeping at most kMaxEventsPerFrame and counting the rest.
void AppendEvents(absl::Span<const sim::ContactEvent> events, FrameEvents& into);
// Appends kOngoing events for the contacts in effect at `tick` that began before it and sorts
// `into` by (tick, pair).
void FinishEvents(absl::Span<const sim::Contact> contacts, std::uint64_t tick, FrameEvents& into);

// Receives a session's frames. Implementations must not block and must not call back into
// the session: they are called with the session's lock held, on the thread that steps it.
class FrameSink {
 public:
  virtual ~FrameSink() = default;
  // A new frame for this sink (decimation already applied), with the contact events since
  // the previous one this sink received (for the first frame: kBegan for contacts that began
  // at its tick, kOngoing for the others).
  virtual void OnFrame(std::shared_ptr<const Frame> frame, FrameEvents events) = 0;
  // The session closed: no more frames will come. `reason` is OK when a client deleted it,
  // Unavailable when the server shuts down; streams end with it.
  virtual void OnSessionClosed(const absl::Status& reason) = 0;
};

// What a session reports about itself.
struct SessionDescription {
  std::string id;
  SessionConfig config;  // config.clock is the clock now.
  ClockStats clock_stats;
  SimTime time;
  std::size_t vehicle_count = 0;
  std::vector<sim::VehicleDescription> vehicles;  // Only when asked for.
  std::size_t obstacle_count = 0;
  std::vector<sim::Obstacle> obstacles;           // Only when asked for.
};

class Session final : public ScheduledJob, public std::enable_shared_from_this<Session> {
 public:
  // `config` must already be validated by Create's caller (SessionManager checks it with
  // sim::World::Create, whose result is passed here). `scheduler` paces the session when its
  // clock is REALTIME; it must outlive the session (null: LOCKSTEP only). Call Start() once
  // the session is owned by a shared_ptr.
  Session(std::string id, SessionConfig config, sim::World world,
          std::uint32_t max_ticks_per_step, Scheduler* scheduler = nullptr);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& id() const { return id_; }
  // As created (the clock in it is the initial one; Describe has the current clock).
  const SessionConfig& config() const { return config_; }

  // Starts the clock if it is paced (a REALTIME session not paused).
  void Start();
  // Changes the clock. InvalidArgument for a bad value (naming it); FailedPrecondition for
  // REALTIME without a scheduler; NotFound once closed. A paced clock restarts its pacing
  // from now at the current tick (no catching up on the time it was paused or slower).
  absl::StatusOr<ClockSettings> SetClock(const ClockUpdate& update);

  // ScheduledJob: runs the tick due at `now_ns` if the clock is paced, and returns the time of
  // the next one. Pacing: tick k is due at anchor + (k - anchor_tick) x period, period = dt /
  // real_time_factor (no drift: never summed). A tick that starts more than a period late is
  // a missed deadline; a session more than kMaxLagTicks behind gives up the backlog (counted
  // as missed) and restarts its pacing from now. Factor 0: one tick per run, rescheduled at
  // once (behind every session already due).
  std::optional<std::int64_t> RunScheduled(std::int64_t now_ns) override;

  // See sim::World::Spawn. Every method that reaches the world fails with NotFound
  // ("session_id") once the session is closed.
  absl::StatusOr<std::vector<sim::VehicleId>> SpawnVehicles(absl::Span<const sim::VehicleSpec> specs);
  // See sim::World::Remove.
  absl::Status RemoveVehicle(sim::VehicleId id);
  // See sim::World::AddObstacles and RemoveObstacle.
  absl::StatusOr<std::vector<sim::ObstacleId>> AddObstacles(
      absl::Span<const sim::ObstacleSpec> specs);
  absl::Status RemoveObstacle(sim::ObstacleId id);
  // Replaces held controls; they apply from the next tick on. See sim::World::SetInputs.
  // Returns the time at which they were set.
  absl::StatusOr<SimTime> SetControls(absl::Span<const sim::VehicleInput> inputs);

  // Advances `ticks` ticks and returns the frame after the last, with the contact events of
  // the ticks stepped. Errors: InvalidArgument ("ticks") unless 1 <= ticks <=
  // max_ticks_per_step; FailedPrecondition if the clock is paced (REALTIME and not paused);
  // Aborted if `expected_tick` is set and differs from the current tick (nothing is stepped).
  absl::StatusOr<StepResult> Step(std::uint32_t ticks, std::optional<std::uint64_t> expected_tick);

  // The current frame.
  std::shared_ptr<const Frame> CurrentFrame() const;
  // The current frame and the world's StateHash, of the same tick.
  std::pair<std::shared_ptr<const Frame>, std::uint64_t> CurrentFrameAndHash() const;
  SessionDescription Describe(bool with_vehicles) const;
  SimTime Now() const;
  std::uint64_t StateHash() const;

  // Adds a subscriber that receives the current frame at once and then the frame after every
  // tick that is a multiple of `every_n_ticks` (>= 1). Returns a handle for Unsubscribe.
  // InvalidArgument ("every_n_ticks") for 0; NotFound if the session is closed.
  absl::StatusOr<std::uint64_t> Subscribe(std::uint32_t every_n_ticks,
                                          std::shared_ptr<FrameSink> sink);
  // Removes a subscriber; unknown handles are ignored (the session may have closed).
  void Unsubscribe(std::uint64_t subscription);

  // Attaches a controller (a Drive stream) to `vehicle`: `sink` receives the current frame at
  // once and then the frame after every tick, and only this controller may set the vehicle's
  // controls from now on (SetControls for it is FailedPrecondition). Returns the handle.
  // NotFound ("vehicle_id") for a vehicle not alive; AlreadyExists ("vehicle_id") if it
  // has a controller.
  absl::StatusOr<std::uint64_t> AttachController(sim::VehicleId vehicle,
                                                 DisconnectAction on_disconnect,
                                                 std::shared_ptr<FrameSink> sink);
  // A control from controller `handle` that answers the observation of `tick`. The
  // vehicle's model checks it (InvalidArgument naming the field). InvalidArgument ("tick")
  // for a tick not yet observed; NotFound if the controller or its vehicle is gone.
  absl::StatusOr<ControlReceipt> ApplyControl(std::uint64_t handle, std::uint64_t tick,
                                              sim::VehicleInput input);
  // Detaches a controller, applying its disconnect action. Unknown handles are ignored.
  void DetachController(std::uint64_t handle);
  std::size_t subscriber_count() const;

  // Back to tick 0 as created (BuildWorld of the config; same seed): vehicles spawned and
  // controls set since are gone. Subscribers get the new tick-0 frame; controllers' streams
  // end (their vehicles are gone) with NotFound. The clock keeps its mode, paced from now.
  // Returns the new frame.
  absl::StatusOr<std::shared_ptr<const Frame>> Reset();

  // Closes the session: tells every subscriber (with `reason`), drops them, and fails later
  // calls with NotFound. Idempotent. Returns the final time.
  SimTime Close(const absl::Status& reason = absl::OkStatus());

  // Activity, for the idle reaper: the last time a client call reached this session, on the
  // scheduler's clock (0 without a scheduler), and whether a stream is attached.
  void Touch();
  std::int64_t last_activity_ns() const;
  // A kept session is never reaped (the one the server starts with --scenario).
  void Keep() { kept_ = true; }
  bool kept() const { return kept_; }

 private:
  struct Controller {
    std::uint64_t handle;  // Also its subscription's handle.
    sim::VehicleId vehicle;
    DisconnectAction on_disconnect;
    // The tick of the observation the newest control answered; nullopt before the first.
    std::optional<std::uint64_t> answered_tick;
  };

  struct Subscriber {
    std::uint64_t handle;
    std::uint32_t every_n_ticks;
    std::shared_ptr<FrameSink> sink;
    FrameEvents pending;  // Transitions of the ticks since its last frame.
  };

  SimTime NowLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PacedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One tick of the world, published to the subscribers; appends its transitions to `events`
  // if not null.
  std::shared_ptr<const Frame> TickLocked(FrameEvents* events) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // If the clock is paced: restarts its pacing from now at the current tick and returns when
  // the session should next run; nullopt otherwise.
  std::optional<std::int64_t> RestartPacingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Restarts pacing at `now_ns` from the current tick.
  void AnchorLocked(std::int64_t now_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::int64_t DeadlineLocked(std::uint64_t tick) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<std::int64_t> RunRealtimeLocked(std::int64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<std::int64_t> RunBarrierLocked(std::int64_t now_ns)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // BARRIER: whether every controller answered the observation of the current tick.
  bool AllAnsweredLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the controls that brake the vehicles in braking_ to a stop for the coming tick;
  // forgets those that are gone or stopped.
  void BrakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Controller* FindControllerLocked(std::uint64_t handle) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::uint64_t SubscribeLocked(std::uint32_t every_n_ticks, std::shared_ptr<FrameSink> sink)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Schedules the session to run at `when_ns` (outside the lock).
  void ScheduleAt(std::int64_t when_ns);
  std::shared_ptr<const Frame> MakeFrameLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckOpenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the frame of the tick just stepped, and its contact transitions, to the
  // subscribers whose decimation takes it (the others keep the transitions for later);
  // returns the frame if one was made.
  std::shared_ptr<const Frame> PublishLocked(absl::Span<const sim::ContactEvent> transitions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string id_;
  const SessionConfig config_;
  const std::uint32_t max_ticks_per_step_;
  Scheduler* const scheduler_;

  mutable absl::Mutex mu_;
  sim::World world_ ABSL_GUARDED_BY(mu_);
  ClockSettings clock_ ABSL_GUARDED_BY(mu_);
  // Pacing: tick anchor_tick_ was due at anchor_ns_.
  std::uint64_t anchor_tick_ ABSL_GUARDED_BY(mu_) = 0;
  std::int64_t anchor_ns_ ABSL_GUARDED_BY(mu_) = 0;
  double period_ns_ ABSL_GUARDED_BY(mu_) = 0.0;  // 0 for factor 0.
  std::uint64_t paced_ticks_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t missed_deadlines_ ABSL_GUARDED_BY(mu_) = 0;
  // Lateness of paced ticks in kLatenessBucket_ns buckets; the last counts everything later.
  std::vector<std::uint32_t> lateness_histogram_ ABSL_GUARDED_BY(mu_);
  std::int64_t lateness_max_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<sim::ContactEvent> transitions_ ABSL_GUARDED_BY(mu_);  // Scratch of a tick.
  std::vector<Controller> controllers_ ABSL_GUARDED_BY(mu_);
  // BARRIER: the current tick runs at the latest at this time (its observation's timeout).
  std::int64_t barrier_deadline_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t barrier_timeouts_ ABSL_GUARDED_BY(mu_) = 0;
  // Vehicles whose controller left with kBrakeToStop, braking until they stand still.
  std::vector<sim::VehicleId> braking_ ABSL_GUARDED_BY(mu_);
  std::atomic<std::int64_t> last_activity_ns_{0};
  std::atomic<bool> kept_{false};
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Subscriber> subscribers_ ABSL_GUARDED_BY(mu_);
  std::uint64_t next_subscription_ ABSL_GUARDED_BY(mu_) = 1;
};

// A paced session more than this many ticks behind its schedule gives up the backlog.
inline constexpr std::uint64_t kMaxLagTicks = 10;
inline constexpr std::int64_t kLatenessBucket_ns = 10'000;   // 10 µs.
inline constexpr std::size_t kLatenessBuckets = 10'000;      // Up to 100 ms.

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_SESSION_H_
