#include "server/session/session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::session {

absl::StatusOr<sim::World> BuildWorld(const SessionConfig& config, sim::IdCounters first_ids) {
  ASSIGN_OR_RETURN(sim::World world, sim::World::Create(config.world, first_ids));
  if (!config.obstacles.empty()) {
    const absl::Status added = world.AddObstacles(config.obstacles).status();
    // A limit error already names "obstacles"; a spec error names "[i].<field>".
    RETURN_IF_ERROR(added.code() == absl::StatusCode::kResourceExhausted
                        ? added
                        : PrefixField("obstacles", added));
  }
  if (!config.vehicles.empty()) {
    const absl::Status spawned = world.Spawn(config.vehicles).status();
    RETURN_IF_ERROR(spawned.code() == absl::StatusCode::kResourceExhausted
                        ? spawned
                        : PrefixField("vehicles", spawned));
  }
  return world;
}

absl::Status CheckClockSettings(const ClockSettings& settings) {
  RETURN_IF_ERROR(
      CheckInRange("real_time_factor", settings.real_time_factor, 0.0, kMaxRealTimeFactor));
  return CheckInRange("barrier_timeout_s", settings.barrier_timeout_s, kMinBarrierTimeout_s,
                      kMaxBarrierTimeout_s);
}

Session::Session(std::string id, SessionConfig config, sim::World world,
                 std::uint32_t max_ticks_per_step, Scheduler* scheduler)
    : id_(std::move(id)),
      config_(std::move(config)),
      max_ticks_per_step_(max_ticks_per_step),
      scheduler_(scheduler),
      world_(std::move(world)),
      clock_(config_.clock) {}

void Session::Start() {
  Touch();
  std::int64_t now_ns = 0;
  {
    absl::MutexLock lock(&mu_);
    if (!PacedLocked() || scheduler_ == nullptr) return;
    now_ns = scheduler_->clock().NowNanos();
    AnchorLocked(now_ns);
  }
  scheduler_->Schedule(shared_from_this(), now_ns + static_cast<std::int64_t>(period_ns_));
}

absl::StatusOr<ClockSettings> Session::SetClock(const ClockUpdate& update) {
  ClockSettings settings;
  std::optional<std::int64_t> next_run;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckOpenLocked());
    settings = clock_;
    if (update.mode.has_value()) settings.mode = *update.mode;
    if (update.real_time_factor.has_value()) settings.real_time_factor = *update.real_time_factor;
    if (update.paused.has_value()) settings.paused = *update.paused;
    if (update.barrier_timeout_s.has_value()) {
      settings.barrier_timeout_s = *update.barrier_timeout_s;
    }
    RETURN_IF_ERROR(CheckClockSettings(settings));
    if (settings.mode != ClockMode::kLockstep && scheduler_ == nullptr) {
      return absl::FailedPreconditionError(
          "clock_mode: this server runs no scheduler; only LOCKSTEP is available");
    }
    clock_ = settings;
    next_run = RestartPacingLocked();
    // Not paced any more: a run now finds that out and leaves the queue. (Never Cancel here:
    // a concurrent SetClock that resumed the clock may have scheduled it meanwhile.)
    if (!next_run.has_value() && scheduler_ != nullptr) next_run = scheduler_->clock().NowNanos();
  }
  if (next_run.has_value()) ScheduleAt(*next_run);
  return settings;
}

std::optional<std::int64_t> Session::RestartPacingLocked() {
  if (!PacedLocked()) return std::nullopt;
  const std::int64_t now_ns = scheduler_->clock().NowNanos();
  AnchorLocked(now_ns);
  return clock_.mode == ClockMode::kBarrier ? barrier_deadline_ns_
                                            : now_ns + static_cast<std::int64_t>(period_ns_);
}

bool Session::PacedLocked() const {
  return !closed_ && clock_.mode != ClockMode::kLockstep && !clock_.paused;
}

void Session::AnchorLocked(std::int64_t now_ns) {
  anchor_tick_ = world_.tick();
  anchor_ns_ = now_ns;
  barrier_deadline_ns_ =
      now_ns + static_cast<std::int64_t>(clock_.barrier_timeout_s * 1e9);
  period_ns_ = clock_.real_time_factor > 0.0
                   ? world_.params().dt_s / clock_.real_time_factor * 1e9
                   : 0.0;
}

std::int64_t Session::DeadlineLocked(std::uint64_t tick) const {
  return anchor_ns_ +
         static_cast<std::int64_t>(static_cast<double>(tick - anchor_tick_) * period_ns_);
}

std::optional<std::int64_t> Session::RunScheduled(std::int64_t now_ns) {
  absl::MutexLock lock(&mu_);
  if (!PacedLocked()) return std::nullopt;
  return clock_.mode == ClockMode::kBarrier ? RunBarrierLocked(now_ns) : RunRealtimeLocked(now_ns);
}

bool Session::AllAnsweredLocked() const {
  const std::uint64_t tick = world_.tick();
  return std::all_of(controllers_.begin(), controllers_.end(), [&](const Controller& c) {
    // A controller whose vehicle was removed is about to leave; nobody waits for it.
    return (c.answered_tick.has_value() && *c.answered_tick >= tick) ||
           !world_.Contains(c.vehicle);
  });
}

std::optional<std::int64_t> Session::RunBarrierLocked(std::int64_t now_ns) {
  if (controllers_.empty()) return std::nullopt;  // Waits for a controller to attach.
  if (!AllAnsweredLocked()) {
    if (now_ns < barrier_deadline_ns_) return barrier_deadline_ns_;
    ++barrier_timeouts_;
  }
  ++paced_ticks_;
  TickLocked(nullptr);
  barrier_deadline_ns_ = now_ns + static_cast<std::int64_t>(clock_.barrier_timeout_s * 1e9);
  return barrier_deadline_ns_;
}

std::optional<std::int64_t> Session::RunRealtimeLocked(std::int64_t now_ns) {
  if (period_ns_ == 0.0) {  // As fast as possible: one tick per turn.
    TickLocked(nullptr);
    ++paced_ticks_;
    return now_ns;
  }
  const std::uint64_t next_tick = world_.tick() + 1;
  std::int64_t deadline = DeadlineLocked(next_tick);
  if (deadline > now_ns) return deadline;  // Woken early.
  const std::int64_t late_ns = now_ns - deadline;
  if (late_ns > static_cast<std::int64_t>(period_ns_ * kMaxLagTicks)) {
    // Too far behind to catch up without a burst: give up the backlog, pace from now.
    missed_deadlines_ += static_cast<std::uint64_t>(static_cast<double>(late_ns) / period_ns_);
    AnchorLocked(now_ns);
    anchor_tick_ = world_.tick() + 1;  // The tick about to run is due now.
    deadline = now_ns;
  }
  const std::int64_t lateness_ns = now_ns - deadline;
  if (static_cast<double>(lateness_ns) > period_ns_) ++missed_deadlines_;
  if (lateness_histogram_.empty()) lateness_histogram_.assign(kLatenessBuckets, 0);
  ++lateness_histogram_[std::min<std::size_t>(
      static_cast<std::size_t>(lateness_ns / kLatenessBucket_ns), kLatenessBuckets - 1)];
  lateness_max_ns_ = std::max(lateness_max_ns_, lateness_ns);
  ++paced_ticks_;
  TickLocked(nullptr);
  return DeadlineLocked(world_.tick() + 1);
}

std::shared_ptr<const Frame> Session::TickLocked(FrameEvents* events) {
  if (!braking_.empty()) BrakeLocked();
  transitions_.clear();
  world_.Step(&transitions_);
  if (events != nullptr) AppendEvents(transitions_, *events);
  return subscribers_.empty() ? nullptr : PublishLocked(transitions_);
}

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

void Session::BrakeLocked() {
  const double dt_s = world_.params().dt_s;
  std::erase_if(braking_, [&](sim::VehicleId id) {
    const std::optional<sim::World::Motion> motion = world_.MotionOf(id);
    if (!motion.has_value()) return true;
    const bool stopped = motion->speed_mps == 0.0;
    // A crashed vehicle accepts and ignores controls, so this cannot fail.
    (void)world_.SetInputs({sim::BrakeToStopInput(motion->kind, id, motion->speed_mps, dt_s)});
    return stopped;  // Its last input (zero acceleration, or the brake) holds it still.
  });
}

Session::Controller* Session::FindControllerLocked(std::uint64_t handle) {
  for (Controller& controller : controllers_) {
    if (controller.handle == handle) return &controller;
  }
  return nullptr;
}

void Session::ScheduleAt(std::int64_t when_ns) {
  if (scheduler_ != nullptr) scheduler_->Schedule(shared_from_this(), when_ns);
}

absl::StatusOr<std::uint64_t> Session::AttachController(sim::VehicleId vehicle,
                                                        DisconnectAction on_disconnect,
                                                        std::shared_ptr<FrameSink> sink) {
  std::optional<std::int64_t> wake;
  std::uint64_t handle = 0;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckOpenLocked());
    if (!world_.Contains(vehicle)) {
      return absl::NotFoundError(
          absl::StrCat("vehicle_id: no vehicle ", vehicle, " in session ", id_));
    }
    if (world_.HasDriver(vehicle)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "vehicle_id: vehicle ", vehicle, " has a built-in driver; it takes no controller"));
    }
    for (const Controller& controller : controllers_) {
      if (controller.vehicle == vehicle) {
        return absl::AlreadyExistsError(absl::StrCat(
            "vehicle_id: vehicle ", vehicle, " already has a controller (one per vehicle)"));
      }
    }
    std::erase(braking_, vehicle);  // A new controller takes over from the brakes.
    handle = SubscribeLocked(1, std::move(sink));
    controllers_.push_back({.handle = handle, .vehicle = vehicle, .on_disconnect = on_disconnect});
    if (PacedLocked() && clock_.mode == ClockMode::kBarrier && controllers_.size() == 1) {
      // The first controller: the barrier starts counting from its first observation.
      barrier_deadline_ns_ = scheduler_->clock().NowNanos() +
                             static_cast<std::int64_t>(clock_.barrier_timeout_s * 1e9);
      wake = barrier_deadline_ns_;
    }
  }
  if (wake.has_value()) ScheduleAt(*wake);
  return handle;
}

absl::StatusOr<ControlReceipt> Session::ApplyControl(std::uint64_t handle, std::uint64_t tick,
                                                     sim::VehicleInput input) {
  ControlReceipt receipt = ControlReceipt::kOnTime;
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckOpenLocked());
    Controller* controller = FindControllerLocked(handle);
    if (controller == nullptr) return absl::NotFoundError("the controller was detached");
    const std::uint64_t now_tick = world_.tick();
    if (tick > now_tick) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tick: answers tick ", tick, ", which has not happened yet (the session is at tick ",
          now_tick, ")"));
    }
    if (controller->answered_tick.has_value() && tick < *controller->answered_tick) {
      return ControlReceipt::kStale;
    }
    input.id = controller->vehicle;
    const std::optional<sim::World::Motion> motion = world_.MotionOf(input.id);
    if (!motion.has_value()) {
      return absl::NotFoundError(absl::StrCat("vehicle_id: vehicle ", input.id, " was removed"));
    }
    RETURN_IF_ERROR(sim::CheckControls(motion->kind, input));  // Names the field, no index.
    RETURN_IF_ERROR(world_.SetInputs({input}));
    receipt = tick == now_tick ? ControlReceipt::kOnTime : ControlReceipt::kLate;
    controller->answered_tick = tick;
    wake = PacedLocked() && clock_.mode == ClockMode::kBarrier && AllAnsweredLocked();
  }
  if (wake) ScheduleAt(scheduler_->clock().NowNanos());
  return receipt;
}

void Session::DetachController(std::uint64_t handle) {
  bool wake = false;
  {
    absl::MutexLock lock(&mu_);
    const auto it = std::find_if(controllers_.begin(), controllers_.end(),
                                 [handle](const Controller& c) { return c.handle == handle; });
    if (it == controllers_.end()) return;
    if (it->on_disconnect == DisconnectAction::kBrakeToStop && world_.Contains(it->vehicle)) {
      braking_.push_back(it->vehicle);
    }
    controllers_.erase(it);
    std::erase_if(subscribers_, [handle](const Subscriber& s) { return s.handle == handle; });
    wake = PacedLocked() && clock_.mode == ClockMode::kBarrier && !controllers_.empty() &&
           AllAnsweredLocked();
  }
  if (wake) ScheduleAt(scheduler_->clock().NowNanos());
}

absl::StatusOr<SimTime> Session::SetControls(absl::Span<const sim::VehicleInput> inputs) {
  absl::MutexLock lock(&mu_);
  RETURN_IF_ERROR(CheckOpenLocked());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    for (const Controller& controller : controllers_) {
      if (controller.vehicle == inputs[i].id) {
        return absl::FailedPreconditionError(absl::StrCat(
            "[", i, "].vehicle_id: vehicle ", inputs[i].id,
            " is driven by a Drive stream; only its controller sets its controls"));
      }
    }
  }
  // A client's controls take over from the brakes of a controller that left.
  for (const sim::VehicleInput& input : inputs) std::erase(braking_, input.id);
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
  if (PacedLocked()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "clock_mode: session ", id_,
        " runs on the server's REALTIME clock; Step needs LOCKSTEP or a paused clock"));
  }
  if (expected_tick.has_value() && *expected_tick != world_.tick()) {
    return absl::AbortedError(absl::StrCat("expected_tick: the session is at tick ",
                                           world_.tick(), ", not ", *expected_tick));
  }
  StepResult result;
  std::shared_ptr<const Frame> last_published;
  for (std::uint32_t i = 0; i < ticks; ++i) last_published = TickLocked(&result.events);
  result.frame = last_published != nullptr ? last_published : MakeFrameLocked();
  FinishEvents(world_.contacts(), world_.tick(), result.events);
  return result;
}

std::pair<std::shared_ptr<const Frame>, std::uint64_t> Session::CurrentFrameAndHash() const {
  absl::MutexLock lock(&mu_);
  return {MakeFrameLocked(), world_.StateHash()};
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
      .clock_stats = {.paced_ticks = paced_ticks_,
                      .missed_deadlines = missed_deadlines_,
                      .lateness_max_ms = static_cast<double>(lateness_max_ns_) * 1e-6,
                      .barrier_timeouts = barrier_timeouts_},
      .time = NowLocked(),
      .vehicle_count = world_.vehicle_count(),
      .obstacle_count = world_.obstacles().size(),
  };
  description.config.clock = clock_;
  if (!lateness_histogram_.empty()) {
    std::uint64_t measured = 0;
    for (const std::uint32_t count : lateness_histogram_) measured += count;
    const auto percentile = [this, measured](double fraction) {
      const auto wanted = static_cast<std::uint64_t>(fraction * static_cast<double>(measured));
      std::uint64_t seen = 0;
      for (std::size_t i = 0; i < lateness_histogram_.size(); ++i) {
        seen += lateness_histogram_[i];
        // The bucket's upper edge: lateness is at most this.
        if (seen > wanted) return static_cast<double>((i + 1) * kLatenessBucket_ns) * 1e-6;
      }
      return static_cast<double>(lateness_max_ns_) * 1e-6;
    };
    description.clock_stats.lateness_p50_ms = percentile(0.5);
    description.clock_stats.lateness_p99_ms = percentile(0.99);
  }
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
  return SubscribeLocked(every_n_ticks, std::move(sink));
}

std::uint64_t Session::SubscribeLocked(std::uint32_t every_n_ticks,
                                       std::shared_ptr<FrameSink> sink) {
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

absl::StatusOr<std::shared_ptr<const Frame>> Session::Reset() {
  // Built outside the lock: the config never changes, and a big world takes a while.
  ASSIGN_OR_RETURN(sim::World world, BuildWorld(config_));
  std::vector<Subscriber> ended;
  std::shared_ptr<const Frame> frame;
  std::optional<std::int64_t> next_run;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckOpenLocked());
    world_ = std::move(world);
    braking_.clear();
    // Controllers' vehicles are gone (and their ids will be reused): their streams end.
    for (const Controller& controller : controllers_) {
      const auto it = std::find_if(subscribers_.begin(), subscribers_.end(),
                                   [&](const Subscriber& s) { return s.handle == controller.handle; });
      if (it != subscribers_.end()) {
        ended.push_back(std::move(*it));
        subscribers_.erase(it);
      }
    }
    controllers_.clear();
    frame = MakeFrameLocked();
    // Every subscriber gets the tick-0 frame, as a new subscriber would (events of tick 0).
    for (Subscriber& subscriber : subscribers_) {
      FrameEvents events;
      for (const sim::Contact& contact : world_.contacts()) {
        events.events.push_back({.tick = 0, .phase = sim::ContactPhase::kBegan, .contact = contact});
      }
      subscriber.pending = {};
      subscriber.sink->OnFrame(frame, std::move(events));
    }
    next_run = RestartPacingLocked();
  }
  for (const Subscriber& subscriber : ended) {
    subscriber.sink->OnSessionClosed(
        absl::NotFoundError("vehicle_id: the session was reset; its vehicles are new"));
  }
  if (next_run.has_value()) ScheduleAt(*next_run);
  return frame;
}

void Session::Touch() {
  if (scheduler_ != nullptr) last_activity_ns_ = scheduler_->clock().NowNanos();
}

std::int64_t Session::last_activity_ns() const { return last_activity_ns_; }

SimTime Session::Close(const absl::Status& reason) {
  std::vector<Subscriber> subscribers;
  SimTime now;
  {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    subscribers.swap(subscribers_);
    now = NowLocked();
  }
  if (scheduler_ != nullptr) scheduler_->Cancel(this);
  // Outside the lock: a sink may finish its stream and unsubscribe right away.
  for (const Subscriber& subscriber : subscribers) subscriber.sink->OnSessionClosed(reason);
  return now;
}

SimTime Session::NowLocked() const {
  return SimTime{.tick = world_.tick(), .sim_time_s = world_.sim_time_s()};
}

std::shared_ptr<const Frame> Session::MakeFrameLocked() const {
  auto frame = std::make_shared<Frame>();
  frame->time = NowLocked();
  frame->vehicles = world_.Snapshot();
  frame->contacts = world_.contacts();
  return frame;
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
