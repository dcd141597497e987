// A session: one world, its clock, and the clients watching it.
//
// Every public method is thread-safe. Handlers reach the world only through this API: the
// world's state is owned by the session and changes only between ticks, under its lock, so
// a tick is atomic and anything a client sends applies from the next tick. The clock is
// LOCKSTEP (time moves only in Steps), REALTIME (the scheduler's workers step the session at
// tick_rate_hz x real_time_factor) or BARRIER (each tick waits for the controllers); see
// RunScheduled.
#ifndef PITLANE_SERVER_SESSION_SESSION_H_
#define PITLANE_SERVER_SESSION_SESSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/session/command.h"
#include "server/session/frame.h"
#include "server/session/race_results.h"
#include "server/session/playback.h"
#include "server/session/scheduler.h"
#include "server/session/session_metrics.h"
#include "server/session/subscriber.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/world.h"

namespace pitlane::session {

// REALTIME: the range of real_time_factor above 0 (0 itself means as fast as possible). The
// tick period is dt / factor; at the floor and the slowest tick rate (1 Hz) it is 1e6 s
// (11.6 days) = 1e15 ns, far inside the 2^63 ns (292 years) of a deadline's int64: a session
// that slow stands practically still, and its deadlines are computed exactly. (The deadline
// arithmetic saturates as well, so no clock reading or tick count can overflow it.)
inline constexpr double kMinRealTimeFactor = 1e-6;
inline constexpr double kMaxRealTimeFactor = 1000.0;

// BARRIER: the widest range of barrier_timeout_s, seconds; a server may narrow it
// (ClockLimits).
inline constexpr double kMinBarrierTimeout_s = 0.001;
inline constexpr double kMaxBarrierTimeout_s = 60.0;
inline constexpr double kDefaultBarrierTimeout_s = 0.5;

// A session's clock as configured.
struct ClockSettings {
  ClockMode mode = ClockMode::kLockstep;
  // REALTIME: simulated seconds per wall-clock second: 0 (as fast as the workers can step
  // it) or in [kMinRealTimeFactor, kMaxRealTimeFactor].
  double real_time_factor = 1.0;
  // REALTIME and BARRIER: no ticks while paused (Step works then, to single-step).
  bool paused = false;
  // BARRIER: the longest a tick waits for the controllers, seconds, in the server's
  // ClockLimits range.
  double barrier_timeout_s = kDefaultBarrierTimeout_s;
};

// The server's bounds on its sessions' clocks (--min_barrier_timeout_s and
// --max_barrier_timeout_s): so that one silent controller cannot hold a BARRIER race for
// long, nor a tiny timeout make the session tick without waiting for anyone.
struct ClockLimits {
  // barrier_timeout_s must be in [min, max], seconds; both in [kMinBarrierTimeout_s,
  // kMaxBarrierTimeout_s], min <= max.
  double min_barrier_timeout_s = kMinBarrierTimeout_s;
  double max_barrier_timeout_s = kMaxBarrierTimeout_s;
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
  // What a race called in the session uses for the rules its call leaves unset.
  sim::RaceRules race_rules;
};

// The world of `config` at tick 0: created, its obstacles placed, its vehicles spawned.
// Its ids start at `first_ids`: a reset passes the replaced world's next_ids(), so that ids
// are never reused in a session's life. InvalidArgument naming the field
// ("obstacles[2].length_m", "vehicles[0].driver.route", "tracks[1].sector_starts_m[0]").
// `same_config`: a world built from this config, whose routes and tracks are shared.
absl::StatusOr<sim::World> BuildWorld(const SessionConfig& config,
                                      sim::IdCounters first_ids = {},
                                      const sim::World* same_config = nullptr);

// Checks `settings`: real_time_factor 0 or in [kMinRealTimeFactor, kMaxRealTimeFactor],
// barrier_timeout_s in `limits`' range. InvalidArgument naming the field and its range
// ("barrier_timeout_s: must be in [0.1, 5] seconds (this server's --min_barrier_timeout_s
// and --max_barrier_timeout_s), got 10").
absl::Status CheckClockSettings(const ClockSettings& settings, const ClockLimits& limits = {});
// A new session's clock before a client's settings: the defaults, with the default
// barrier_timeout_s moved into `limits`' range.
ClockSettings DefaultClock(const ClockLimits& limits);
// `update`'s fields that are set, over `settings`. Unchecked.
ClockSettings UpdatedClock(ClockSettings settings, const ClockUpdate& update);

// What Step returns.
struct StepResult {
  std::shared_ptr<const Frame> frame;  // After the last tick.
  FrameEvents events;                  // Of every tick stepped.
};

// A Step queued or running on the session's workers.
class StepTicket {
 public:
  // Stops the Step between two ticks: it finishes with Cancelled, and the ticks it made stay
  // made (the session is consistent at the tick it reached). Thread-safe; any time.
  void Cancel() { cancelled_ = true; }

 private:
  friend class Session;
  std::atomic<bool> cancelled_{false};
  std::uint32_t ticks_ = 0;
  std::optional<std::uint64_t> expected_tick_;
  std::uint32_t done_ = 0;
  bool started_ = false;
  FrameEvents events_;
  std::function<void(absl::StatusOr<StepResult>)> on_done_;
};

// Most Steps one session queues (one runs, the others wait their turn).
inline constexpr std::size_t kMaxQueuedSteps = 64;
// How long a Step runs before it lets other work on the same workers go first, ns.
inline constexpr std::int64_t kStepSlice_ns = 2'000'000;
// Work the caller's thread may do itself instead of handing it to a worker, ns: a Step whose
// ticks are expected to take at most this (from the last tick's cost) runs at once on the
// caller's thread, and so does a BARRIER tick that a control completes. Crossing to a worker
// and back costs tens of microseconds, as much as a small session's whole Step.
inline constexpr std::int64_t kInlineBudget_ns = 200'000;

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
  std::optional<PlaybackPosition> playback;       // A playback's (Session::Play).
};

// Session::StartStep's options beyond the Step itself.
struct StepOptions {
  // False: even a cheap Step goes to the workers (a caller with many Steps to start hands
  // some of them on, to run in parallel with the ones it runs itself).
  bool may_run_here = true;
  // Set as Session::SetControls does, under the lock that queues the Step, once the Step's own
  // checks passed (a Step that cannot be queued sets no controls; controls refused queue no
  // Step). Like SetControls they take effect from the next tick: if another Step is running
  // or queued before this one, from that Step's next tick. A refusal of the controls
  // themselves (SetControls's errors) also sets *controls_refused, when given.
  absl::Span<const sim::VehicleInput> controls;
  bool* controls_refused = nullptr;
};

// A session: one world, its clock, its subscribers and its controllers.
//
// Every change to the world comes in as a Command (command.h) and is applied by the one
// private ApplyLocked, between two ticks, under the session's lock; the public methods
// below check a command and hand it in. Ticks run on the scheduler's workers: paced ones
// (REALTIME, BARRIER) and a client's Steps alike, never on the caller's thread (except the
// synchronous Step, for tests and replays). A long Step runs in slices of kStepSlice_ns, so
// other sessions' work on the same workers and calls on this session wait at most a slice.
class Session final : public ScheduledJob, public std::enable_shared_from_this<Session> {
 public:
  // `config` must already be validated: `world` is BuildWorld(config). `scheduler` runs the
  // session's ticks; it must outlive the session (null: only the synchronous Step and the
  // commands work). Call Start() once the session is owned by a shared_ptr.
  // `clock_limits` bound what SetClock accepts (config.clock must be within them).
  // `metrics` (may be null) is added to at every tick; it must outlive the session.
  Session(std::string id, SessionConfig config, sim::World world, std::uint32_t max_ticks_per_step,
          Scheduler* scheduler = nullptr, ClockLimits clock_limits = {},
          const SessionMetrics* metrics = nullptr);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& id() const { return id_; }
  // The most ticks one Step may advance.
  std::uint32_t max_ticks_per_step() const { return max_ticks_per_step_; }
  // As created (the clock in it is the initial one; Describe has the current clock).
  const SessionConfig& config() const { return config_; }
  // The clock pacing and rate limits are measured with (the scheduler's, or a steady clock).
  const Clock& clock() const { return *clock_; }

  // Starts the clock if it is paced (REALTIME or BARRIER, not paused).
  void Start();

  // Makes this session play `source` back (playback.h), from `start_ns` since the
  // recording's start (clamped to its last frame); before Start, once. From then on it
  // refuses every command that would change its world (FailedPrecondition, "session_id")
  // except the clock's, Reset (back to the first frame) and Step (on by ticks); its frames,
  // Now and Describe are the recording's; its StateHash is 0. InvalidArgument for a session
  // with vehicles; the source's error for a first frame it cannot give.
  absl::Status Play(std::shared_ptr<PlaybackSource> source, std::uint64_t start_ns = 0);
  // A playback: moves to `position_ns` since the recording's start (clamped to its last
  // frame) and shows that frame to every subscriber as a first frame (as after a reset); the
  // clock keeps its mode, paced from here. FailedPrecondition ("session_id") if the session
  // is no playback; NotFound if it is closed.
  absl::StatusOr<PlaybackPosition> Seek(std::uint64_t position_ns);
  bool IsPlayback() const;

  // The door, for replays: applies a command as it was recorded (see Replay). Errors as the
  // typed methods below. A StepCommand steps synchronously; controllers' commands change only
  // the brakes (a live controller attaches with AttachController).
  absl::Status Apply(const Command& command);

  // Adds every vehicle of `specs`, or none; returns their ids. See sim::World::Spawn. Every
  // method that reaches the world fails with NotFound ("session_id") once the session is
  // closed.
  absl::StatusOr<std::vector<sim::VehicleId>> SpawnVehicles(absl::Span<const sim::VehicleSpec> specs);
  // See sim::World::Remove.
  absl::Status RemoveVehicle(sim::VehicleId id);
  // See sim::World::AddObstacles and RemoveObstacle.
  absl::StatusOr<std::vector<sim::ObstacleId>> AddObstacles(
      absl::Span<const sim::ObstacleSpec> specs);
  absl::Status RemoveObstacle(sim::ObstacleId id);
  // Replaces held controls; they apply from the next tick on. See sim::World::SetInputs;
  // FailedPrecondition ("[i].vehicle_id") for a vehicle a controller drives. Returns the time
  // at which they were set.
  absl::StatusOr<SimTime> SetControls(absl::Span<const sim::VehicleInput> inputs);
  // Changes the clock. InvalidArgument for a bad value (naming it); FailedPrecondition for a
  // paced mode without a scheduler. A paced clock restarts its pacing from now at the
  // current tick (no catching up on the time it was paused or slower).
  absl::StatusOr<ClockSettings> SetClock(const ClockUpdate& update);
  // Back to tick 0 as created (BuildWorld of the config; same seed), with new ids: vehicles
  // and obstacles spawned since are gone, and no id is ever reused, so a stale id is
  // NotFound. Subscribers get the new tick-0 frame; controllers' streams end (their vehicles
  // are gone) with NotFound. The clock keeps its mode, paced from now. Returns the new frame.
  absl::StatusOr<std::shared_ptr<const Frame>> Reset();

  // Calls a race: see sim::World::StartRace (its errors). Returns the race as called: in its
  // countdown (with countdown_s 0, it starts at the next tick).
  absl::StatusOr<RaceReport> StartRace(const StartRaceCommand& command);
  // The route of the race track named `name` (empty: the session's first race track).
  // InvalidArgument ("track") naming the tracks there are, or why that one is not raced.
  absl::StatusOr<std::uint32_t> RaceTrack(absl::string_view name) const;
  // The race called last, as it stands now; FailedPrecondition ("session_id") if none was
  // called since the session was created or reset.
  absl::StatusOr<RaceReport> Race() const;

  // Queues a Step of `ticks` ticks on the session's workers and returns at once (a cheap
  // Step with nothing queued before it runs at once, on the caller's thread: see
  // kInlineBudget_ns); `on_done` is called exactly once: in this call (on the caller's thread,
  // for a Step that ran at once), on a worker, or in
  // Close, with the frame after the last tick and the events of the ticks stepped, or with an
  // error: ResourceExhausted if a tick ran out of memory (the session is stopped); Aborted if `expected_tick` is set and
  // differs from the tick when the Step starts (nothing is stepped); Cancelled if the ticket
  // was cancelled (the ticks made stay made); NotFound if the session is deleted meanwhile,
  // Unavailable if the server shuts down (at the next tick). Errors returned at once:
  // InvalidArgument ("ticks") unless 1 <= ticks <= max_ticks_per_step; FailedPrecondition if
  // the clock is paced (REALTIME or BARRIER, not paused) or there is no scheduler;
  // ResourceExhausted beyond kMaxQueuedSteps queued Steps.
  // `options`: see StepOptions.
  absl::StatusOr<std::shared_ptr<StepTicket>> StartStep(
      std::uint32_t ticks, std::optional<std::uint64_t> expected_tick,
      std::function<void(absl::StatusOr<StepResult>)> on_done, StepOptions options = {});
  // The same Step, run on the caller's thread (tests, replays, tools). Errors as StartStep.
  absl::StatusOr<StepResult> Step(std::uint32_t ticks, std::optional<std::uint64_t> expected_tick);

  // ScheduledJob: runs a slice of the Step at the head of the queue, or the paced tick due
  // at `now_ns`, and returns when to run next. Pacing: tick k is due at anchor + (k -
  // anchor_tick) x period, period = dt / real_time_factor (no drift: never summed). A tick
  // that starts more than a period late is a missed deadline; a session more than
  // kMaxLagTicks behind gives up the backlog (counted as missed) and restarts its pacing from
  // now. Factor 0: one tick per run, rescheduled at once (behind every session already due).
  // An exception while it runs (std::bad_alloc: a world too big for the memory left) stops
  // this session alone: it is closed with ResourceExhausted (Internal for other exceptions),
  // which every later call on it gets, until it is deleted.
  std::optional<std::int64_t> RunScheduled(std::int64_t now_ns) override;
  // ScheduledJob: tells the subscribers of the frames the last runs made and answers the
  // Steps they finished.
  void AfterRun() override;

  // The current frame.
  std::shared_ptr<const Frame> CurrentFrame() const;
  // The current frame and the world's StateHash, of the same tick.
  std::pair<std::shared_ptr<const Frame>, std::uint64_t> CurrentFrameAndHash() const;
  SessionDescription Describe(bool with_vehicles) const;
  // The controls the vehicles of `ids` hold now (sim::World::HeldControls).
  std::vector<std::optional<sim::VehicleInput>> HeldControls(
      absl::Span<const sim::VehicleId> ids) const;
  // What the session holds now, cheaply (for sizing a response before making it).
  struct Counts {
    std::size_t vehicles = 0;
    std::size_t obstacles = 0;
    std::size_t contacts = 0;
    std::size_t subscribers = 0;  // Streams of every kind, Drive controllers included.
    std::size_t controllers = 0;  // Drive streams attached to a vehicle.
    ClockMode clock_mode = ClockMode::kLockstep;
  };
  Counts counts() const;
  // Whether `vehicle` is alive (NotFound naming vehicle_id if not, as AttachController says;
  // FailedPrecondition in a playback, whose vehicles take no driver).
  absl::Status CheckVehicle(sim::VehicleId vehicle) const;
  SimTime Now() const;
  std::uint64_t StateHash() const;

  // Adds a subscriber (made by its transport with this session's clock()): it is offered the
  // current frame at once and then the frame after every tick its decimation takes.
  // InvalidArgument for bad options (every_n_ticks 0, max_rate_hz <= 0, queue_capacity 0);
  // NotFound if the session is closed.
  absl::Status Subscribe(std::shared_ptr<Subscriber> subscriber);
  // Removes a subscriber; unknown ones are ignored (the session may have closed).
  void Unsubscribe(const Subscriber* subscriber);
  std::size_t subscriber_count() const;

  // Attaches a controller (a Drive stream) to `vehicle`: `subscriber` is offered the current
  // frame at once and then the frame after every tick, and only this controller may set the
  // vehicle's controls from now on (SetControls for it is FailedPrecondition). NotFound
  // ("vehicle_id") for a vehicle not alive; FailedPrecondition for a vehicle with a built-in
  // driver; AlreadyExists ("vehicle_id") if it has a controller, unless that controller was
  // attached by the same non-empty `holder` (the token a Drive stream came with): then the
  // old controller is detached (its stream ends ABORTED) and this one takes its place, so a
  // driver whose connection died without a word gets its car back with its own token.
  // Returns whether it took the vehicle over so.
  absl::StatusOr<bool> AttachController(sim::VehicleId vehicle, DisconnectAction on_disconnect,
                                        std::shared_ptr<Subscriber> subscriber,
                                        std::string holder = "");
  // A control from the controller of `subscriber` that answers the observation of `tick`.
  // The vehicle's model checks it (InvalidArgument naming the field, no prefix).
  // InvalidArgument ("tick") for a tick not yet observed; NotFound ("vehicle_id") if the
  // controller or its vehicle is gone. A BARRIER tick that this control completes runs in this
  // call when ticks are cheap (kInlineBudget_ns): subscribers' transports are then told
  // (OnReady) on this thread, and a tick that runs out of memory stops the session and is
  // returned (ResourceExhausted).
  absl::StatusOr<ControlReceipt> ApplyControl(const Subscriber* subscriber, std::uint64_t tick,
                                              sim::VehicleInput input);
  // Detaches a controller, applying its disconnect action. Unknown ones are ignored (it was
  // detached already: by the owner, a revocation, a take-over, a reset). Returns whether it
  // detached one.
  bool DetachController(const Subscriber* subscriber);
  // Detaches the controller of `vehicle` as DetachController does, and ends its stream with
  // `reason` (the session's owner, or the revocation of its token). Returns the time.
  // NotFound ("vehicle_id") for a vehicle not alive; FailedPrecondition if it has no
  // controller.
  absl::StatusOr<SimTime> DetachVehicleController(sim::VehicleId vehicle,
                                                  const absl::Status& reason);

  // Observers see every command applied and every tick stepped from now on, after
  // CommandObserver::OnAttach tells them where they start.
  void AddObserver(std::shared_ptr<CommandObserver> observer);
  void RemoveObserver(const CommandObserver* observer);

  // Closes the session: stops its Steps at the next tick (their callers get NotFound, or
  // `reason` if it is an error), tells every subscriber (with `reason`), drops them, and
  // fails later calls with NotFound. Idempotent. Returns the final time.
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
    const Subscriber* subscriber;  // Its observations' subscriber; identifies it.
    sim::VehicleId vehicle;
    DisconnectAction on_disconnect;
    std::string holder;  // Who attached it (a token id), or empty: see AttachController.
    // The tick of the observation the newest control answered; nullopt before the first.
    std::optional<std::uint64_t> answered_tick;
  };

  std::optional<std::int64_t> RunScheduledUnguarded(std::int64_t now_ns);
  // Closes the session for an exception thrown while it ticked (see RunScheduled).
  void Fail(std::exception_ptr failure);

  // What the lock-holding part of a call leaves to do once the lock is released.
  struct AfterUnlock {
    std::vector<std::shared_ptr<Subscriber>> ready;  // Transports to tell (OnReady).
    std::vector<std::pair<std::shared_ptr<StepTicket>, absl::StatusOr<StepResult>>> finished;
    std::optional<std::int64_t> schedule_at;  // Run the session then.
  };

  // The one place a command changes the session: applies an already checked command and
  // shows it to the observers. Returns the new ids of a spawn or obstacle command, the new
  // frame of a reset.
  absl::Status ApplyLocked(const Command& command, std::vector<std::uint64_t>* ids = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Session-level checks of a client's command (the world checks the rest).
  absl::Status CheckCommandLocked(const Command& command) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SetControls under the lock: checked, then applied (both StartStep's controls and
  // SetControls go through it).
  absl::Status SetControlsLocked(absl::Span<const sim::VehicleInput> inputs)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<ClockSettings> MergeClockLocked(const ClockUpdate& update) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves the subscribers that TickLocked left in ready_ into `after`.
  void TakeReadyLocked(AfterUnlock& after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Tells the transports, finishes Steps and schedules, outside the lock.
  void Finish(AfterUnlock after);

  SimTime NowLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<RaceReport> RaceLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PacedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One tick of the world, shown to the observers and offered to the subscribers; appends its
  // transitions to `events` if not null. Measures its cost (tick_cost_ns_).
  // `start_ns`: the clock's time as the tick begins (a Step's ticks pass the end of the one
  // before). Returns the clock's time once the tick is done, its subscribers offered the
  // frame. Its cost (tick_cost_ns_, the tick_duration metric) is from `start_ns` to the
  // end of the world's step, for paced and stepped ticks alike. `full_frame`: the tick's
  // whole frame is wanted after it (a Step's answer), so subscribers that would take a lean
  // one get that.
  std::int64_t TickLocked(FrameEvents* events, std::int64_t start_ns, bool full_frame = false)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `ticks` ticks are expected to fit kInlineBudget_ns (false before any tick was
  // measured).
  bool CheapLocked(std::uint64_t ticks) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckStepLocked(std::uint32_t ticks) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs the Step at the head of the queue until it is done, cancelled, or `slice_end_ns`
  // passes (nullopt: no limit); a finished Step goes to `after`.
  void RunStepLocked(std::optional<std::int64_t> slice_end_ns, AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
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
  // Whether a BARRIER tick should be tried now (every controller answered).
  bool BarrierReadyLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets the controls that brake the vehicles in braking_ to a stop for the coming tick;
  // forgets those that are gone or stopped.
  void BrakeLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Controller* FindControllerLocked(const Subscriber* subscriber) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the controller's disconnect action and forgets it and its subscriber (returned).
  std::shared_ptr<Subscriber> DetachLocked(std::vector<Controller>::iterator controller,
                                           AfterUnlock& after) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Registers `subscriber` and offers it the current frame.
  void AddSubscriberLocked(std::shared_ptr<Subscriber> subscriber, AfterUnlock& after)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<const Frame> MakeFrameLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // This tick's frame with the vehicles' motion alone (Frame::lean), for subscribers that take
  // one; the full frame when it is made already. Not kept.
  std::shared_ptr<const Frame> MakeLeanFrameLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A playback's tick (see TickLocked): the world's clock moves on, and the frame at the new
  // position is offered if it is another one.
  void PlaybackTickLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A playback: where it is at the world's tick now (clamped to its duration).
  std::uint64_t PlaybackPositionNsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::uint64_t PlaybackDurationNsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Half a tick: a frame counts as reached that much early (the recorder's times and the
  // playback clock's are rounded to the nanosecond apart).
  std::uint64_t PlaybackSlackNsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The frame to show at `position_ns`: the last recorded at or before it, with the slack.
  std::size_t PlaybackIndexAtLocked(std::uint64_t position_ns) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Frame `index` of the recording; DataLoss naming the recording if the file cannot give it.
  absl::StatusOr<std::shared_ptr<const Frame>> PlaybackFrameLocked(std::size_t index) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether the last frame is shown and reached: the playback cannot move on.
  bool PlaybackAtEndLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A playback: shows the frame at `position_ns` (clamped to the last frame's time) from the
  // world's tick now on. The source's error if it cannot give that frame (nothing changes).
  absl::Status PlaybackMoveLocked(std::uint64_t position_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  PlaybackPosition PlaybackLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckOpenLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string id_;
  const SessionConfig config_;
  // config_.route_names, shared by the frames that name tracks.
  const std::shared_ptr<const std::vector<std::string>> track_names_;
  const std::uint32_t max_ticks_per_step_;
  const ClockLimits clock_limits_;
  const SessionMetrics* const metrics_;  // May be null.
  Scheduler* const scheduler_;
  const Clock* const clock_;

  // mu_ taken in turn, first come first served: client calls and the session's own scheduled
  // runs alike. absl::Mutex lets the thread that just released a lock take it again before a
  // woken waiter runs, so a session whose ticks took all its time (a realtime pile of
  // thousands of vehicles, a long Step) starved every call to it, and the idle reaper with
  // them; a waiter now waits for at most the holders that came before it.
  class ABSL_SCOPED_LOCKABLE TurnLock {
   public:
    explicit TurnLock(const Session* session) ABSL_EXCLUSIVE_LOCK_FUNCTION(session->mu_);
    ~TurnLock() ABSL_UNLOCK_FUNCTION();
    TurnLock(const TurnLock&) = delete;
    TurnLock& operator=(const TurnLock&) = delete;

   private:
    const Session* const session_;
  };

  mutable absl::Mutex mu_;
  // The turns (see TurnLock): a ticket lock on its own small mutex and condition variable, in
  // front of mu_ (which its holder then takes uncontended). Not absl::Condition on mu_: absl
  // evaluates a waiter's condition from the releasing thread, which ThreadSanitizer cannot
  // order with the waiter's stack.
  mutable absl::Mutex turn_mu_;
  mutable absl::CondVar turn_cv_;
  mutable std::uint64_t next_turn_ ABSL_GUARDED_BY(turn_mu_) = 0;     // The next locker's.
  mutable std::uint64_t serving_turn_ ABSL_GUARDED_BY(turn_mu_) = 0;  // The holder's.
  sim::World world_ ABSL_GUARDED_BY(mu_);
  ClockSettings clock_settings_ ABSL_GUARDED_BY(mu_);
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
  std::vector<TrackEvent> track_events_ ABSL_GUARDED_BY(mu_);         // Scratch of a tick.
  // What the last tick took on the clock, ns; -1 before the first and after the world grew.
  std::int64_t tick_cost_ns_ ABSL_GUARDED_BY(mu_) = -1;
  // Whether the last tick dropped contacts (see TickLocked).
  bool previous_tick_over_contact_budget_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<Controller> controllers_ ABSL_GUARDED_BY(mu_);
  // BARRIER: the current tick runs at the latest at this time (its observation's timeout).
  std::int64_t barrier_deadline_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t barrier_timeouts_ ABSL_GUARDED_BY(mu_) = 0;
  // Vehicles whose controller left with kBrakeToStop, braking until they stand still.
  std::vector<sim::VehicleId> braking_ ABSL_GUARDED_BY(mu_);
  // Resets so far (Frame::run); whether no command changed the world since it was built.
  std::uint64_t run_ ABSL_GUARDED_BY(mu_) = 0;
  bool pristine_ ABSL_GUARDED_BY(mu_) = true;
  std::deque<std::shared_ptr<StepTicket>> steps_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Subscriber>> subscribers_ ABSL_GUARDED_BY(mu_);
  // Subscribers offered a frame whose transports are still to be told (see Finish).
  std::vector<std::shared_ptr<Subscriber>> ready_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<CommandObserver>> observers_ ABSL_GUARDED_BY(mu_);
  // The last frame made (MakeFrameLocked), while it is the world's at its tick: a Step's
  // answer, the subscribers and the reads of one tick share it. Dropped by every command that
  // changes the world.
  mutable std::shared_ptr<const Frame> frame_cache_ ABSL_GUARDED_BY(mu_);
  // A playback's (Play): its recording, and its position: playback_base_ns_ at the world's
  // tick playback_base_tick_, on by the world's dt every tick; the frame shown and its index.
  std::shared_ptr<PlaybackSource> playback_ ABSL_GUARDED_BY(mu_);
  std::uint64_t playback_base_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::uint64_t playback_base_tick_ ABSL_GUARDED_BY(mu_) = 0;
  std::size_t playback_index_ ABSL_GUARDED_BY(mu_) = 0;
  std::shared_ptr<const Frame> playback_frame_ ABSL_GUARDED_BY(mu_);
  // What runs left for AfterRun (see RunScheduled).
  absl::Mutex deferred_mu_;
  std::vector<AfterUnlock> deferred_ ABSL_GUARDED_BY(deferred_mu_);
  std::atomic<std::int64_t> last_activity_ns_{0};
  std::atomic<bool> kept_{false};
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // Why it closed: OK when deleted, an error (Unavailable) when the server shuts down.
  absl::Status close_reason_ ABSL_GUARDED_BY(mu_);
};

// A paced session more than this many ticks behind its schedule gives up the backlog.
inline constexpr std::uint64_t kMaxLagTicks = 10;
inline constexpr std::int64_t kLatenessBucket_ns = 10'000;   // 10 µs.
inline constexpr std::size_t kLatenessBuckets = 10'000;      // Up to 100 ms.

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_SESSION_H_
