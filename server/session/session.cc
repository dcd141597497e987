#include "server/session/session.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <new>
#include <iterator>
#include <limits>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "spdlog/spdlog.h"
#include "server/util/echo.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::session {

absl::StatusOr<sim::World> BuildWorld(const SessionConfig& config, sim::IdCounters first_ids,
                                      const sim::World* same_config) {
  absl::StatusOr<sim::World> created = sim::World::Create(config.world, first_ids, same_config);
  if (!created.ok()) {
    // The world's routes are the session's tracks, and named so.
    const absl::Status& status = created.status();
    if (!absl::StartsWith(status.message(), "routes[")) return status;
    return absl::Status(status.code(),
                        absl::StrCat("tracks", status.message().substr(std::strlen("routes"))));
  }
  sim::World world = *std::move(created);
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

absl::Status CheckClockSettings(const ClockSettings& settings, const ClockLimits& limits) {
  const double factor = settings.real_time_factor;
  // NaN fails both comparisons.
  if (factor != 0.0 && !(factor >= kMinRealTimeFactor && factor <= kMaxRealTimeFactor)) {
    return absl::InvalidArgumentError(
        absl::StrCat("real_time_factor: must be 0 (as fast as possible) or in [",
                     kMinRealTimeFactor, ", ", kMaxRealTimeFactor, "], got ", factor));
  }
  const double timeout_s = settings.barrier_timeout_s;
  if (!(timeout_s >= limits.min_barrier_timeout_s && timeout_s <= limits.max_barrier_timeout_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "barrier_timeout_s: must be in [", limits.min_barrier_timeout_s, ", ",
        limits.max_barrier_timeout_s,
        "] seconds (this server's --min_barrier_timeout_s and --max_barrier_timeout_s), got ",
        timeout_s));
  }
  return absl::OkStatus();
}

ClockSettings DefaultClock(const ClockLimits& limits) {
  ClockSettings settings;
  settings.barrier_timeout_s =
      std::min(std::max(settings.barrier_timeout_s, limits.min_barrier_timeout_s),
               limits.max_barrier_timeout_s);
  return settings;
}

ClockSettings UpdatedClock(ClockSettings settings, const ClockUpdate& update) {
  if (update.mode.has_value()) settings.mode = *update.mode;
  if (update.real_time_factor.has_value()) settings.real_time_factor = *update.real_time_factor;
  if (update.paused.has_value()) settings.paused = *update.paused;
  if (update.barrier_timeout_s.has_value()) settings.barrier_timeout_s = *update.barrier_timeout_s;
  return settings;
}

namespace {

// The clock sessions without a scheduler measure rate limits with.
const Clock* ProcessClock() {
  static const SteadyClock* const clock = new SteadyClock();
  return clock;
}

// Deadlines that never come: what a deadline beyond the int64 range saturates to.
constexpr std::int64_t kNever_ns = std::numeric_limits<std::int64_t>::max();

// `from_ns` + `after_ns` (>= 0; a period times a tick count, or a timeout), saturated at
// kNever_ns: exact while it fits, and no overflow (undefined behaviour) for any clock reading,
// real_time_factor or tick count. NaN (which validated settings never give) counts as never.
std::int64_t DeadlineAfter(std::int64_t from_ns, double after_ns) {
  if (after_ns <= 0.0) return from_ns;
  // 2^63: the first double past kNever_ns.
  if (!(after_ns < 0x1p63)) return kNever_ns;
  const auto after = static_cast<std::int64_t>(after_ns);
  return from_ns > kNever_ns - after ? kNever_ns : from_ns + after;
}

}  // namespace

Session::Session(std::string id, SessionConfig config, sim::World world,
                 std::uint32_t max_ticks_per_step, Scheduler* scheduler, ClockLimits clock_limits,
                 const SessionMetrics* metrics)
    : id_(std::move(id)),
      config_(std::move(config)),
      track_names_(std::make_shared<const std::vector<std::string>>(config_.route_names)),
      max_ticks_per_step_(max_ticks_per_step),
      clock_limits_(clock_limits),
      metrics_(metrics),
      scheduler_(scheduler),
      clock_(scheduler != nullptr ? &scheduler->clock() : ProcessClock()),
      world_(std::move(world)),
      clock_settings_(config_.clock) {}

void Session::Start() {
  Touch();
  std::optional<std::int64_t> first_run_ns;
  {
    TurnLock lock(this);
    if (scheduler_ == nullptr) return;
    first_run_ns = RestartPacingLocked();
  }
  if (first_run_ns.has_value()) scheduler_->Schedule(shared_from_this(), *first_run_ns);
}

void Session::Finish(AfterUnlock after) {
  for (const std::shared_ptr<Subscriber>& subscriber : after.ready) {
    subscriber->transport().OnReady();
  }
  // Each Step's callback is called once and dropped: it may own its caller.
  for (auto& [ticket, result] : after.finished) {
    std::exchange(ticket->on_done_, nullptr)(std::move(result));
  }
  if (after.schedule_at.has_value() && scheduler_ != nullptr) {
    scheduler_->Schedule(shared_from_this(), *after.schedule_at);
  }
}

// ---- The door -------------------------------------------------------------------------------

absl::Status Session::CheckCommandLocked(const Command& command) const {
  RETURN_IF_ERROR(CheckOpenLocked());
  if (playback_ != nullptr) {
    if (const auto* clock = std::get_if<SetClockCommand>(&command)) {
      if (clock->update.mode == ClockMode::kBarrier) {
        return absl::FailedPreconditionError(
            "clock_mode: a playback has no controllers to wait for; use REALTIME or LOCKSTEP");
      }
    } else if (!std::holds_alternative<ResetCommand>(command) &&
               !std::holds_alternative<StepCommand>(command) &&
               !std::holds_alternative<DetachControllerCommand>(command)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "session_id: session ", id_, " plays back recording ", playback_->name(),
          " and cannot be changed; replay the recording (ReplayRecording) for a session that "
          "can"));
    }
  }
  if (const auto* controls = std::get_if<SetControlsCommand>(&command)) {
    for (std::size_t i = 0; i < controls->inputs.size(); ++i) {
      for (const Controller& controller : controllers_) {
        if (controller.vehicle == controls->inputs[i].id) {
          return absl::FailedPreconditionError(absl::StrCat(
              "[", i, "].vehicle_id: vehicle ", controls->inputs[i].id,
              " is driven by a Drive stream; only its controller sets its controls"));
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status Session::ApplyLocked(const Command& command, std::vector<std::uint64_t>* ids) {
  const std::uint64_t tick = world_.tick();
  // A change to the world makes this tick's frame another one (dropped first: a command that
  // throws halfway may have changed it).
  if (!std::holds_alternative<SetClockCommand>(command) &&
      !std::holds_alternative<StepCommand>(command)) {
    frame_cache_.reset();
  }
  absl::Status status = std::visit(
      [&](const auto& c) -> absl::Status {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, SpawnVehiclesCommand>) {
          ASSIGN_OR_RETURN(std::vector<sim::VehicleId> spawned, world_.Spawn(c.specs));
          if (ids != nullptr) *ids = std::move(spawned);
          tick_cost_ns_ = -1;  // A bigger world: the last tick's cost says nothing of the next.
        } else if constexpr (std::is_same_v<T, RemoveVehicleCommand>) {
          RETURN_IF_ERROR(world_.Remove(c.vehicle_id));
        } else if constexpr (std::is_same_v<T, AddObstaclesCommand>) {
          ASSIGN_OR_RETURN(std::vector<sim::ObstacleId> added, world_.AddObstacles(c.specs));
          if (ids != nullptr) *ids = std::move(added);
          tick_cost_ns_ = -1;
        } else if constexpr (std::is_same_v<T, RemoveObstacleCommand>) {
          RETURN_IF_ERROR(world_.RemoveObstacle(c.obstacle_id));
        } else if constexpr (std::is_same_v<T, SetControlsCommand>) {
          RETURN_IF_ERROR(world_.SetInputs(c.inputs));
          // Controls take over from the brakes of a controller that left.
          for (const sim::VehicleInput& input : c.inputs) std::erase(braking_, input.id);
        } else if constexpr (std::is_same_v<T, AttachControllerCommand>) {
          std::erase(braking_, c.vehicle_id);  // A new controller takes over from the brakes.
        } else if constexpr (std::is_same_v<T, DetachControllerCommand>) {
          if (c.on_disconnect == DisconnectAction::kBrakeToStop && world_.Contains(c.vehicle_id)) {
            braking_.push_back(c.vehicle_id);
          }
        } else if constexpr (std::is_same_v<T, SetClockCommand>) {
          ASSIGN_OR_RETURN(clock_settings_, MergeClockLocked(c.update));
        } else if constexpr (std::is_same_v<T, ResetCommand>) {
          // A playback's first frame first: if the file cannot give it, nothing changes.
          std::shared_ptr<const Frame> first;
          if (playback_ != nullptr) {
            ASSIGN_OR_RETURN(first, PlaybackFrameLocked(PlaybackIndexAtLocked(0)));
          }
          // Built under the lock: the new world continues the old one's ids.
          // The same config: its tracks are shared, not built again.
          ASSIGN_OR_RETURN(sim::World world, BuildWorld(config_, world_.next_ids(), &world_));
          world_ = std::move(world);
          braking_.clear();
          if (playback_ != nullptr) {
            playback_frame_ = std::move(first);
            playback_index_ = PlaybackIndexAtLocked(0);
            playback_base_ns_ = 0;
            playback_base_tick_ = world_.tick();
          }
          ++run_;
          tick_cost_ns_ = -1;
          previous_tick_over_contact_budget_ = false;
        } else if constexpr (std::is_same_v<T, StepCommand>) {
          // Observed when a Step starts; its ticks are stepped by RunStepLocked.
        } else if constexpr (std::is_same_v<T, StartRaceCommand>) {
          RETURN_IF_ERROR(world_.StartRace(c.route, c.rules, c.vehicles, c.replace, c.grid));
        }
        return absl::OkStatus();
      },
      command);
  if (!status.ok()) return status;
  // Only a reset gives back the world its config builds; a clock change or a Step's start
  // leave it as it is (a Step's ticks move it on).
  if (std::holds_alternative<ResetCommand>(command)) {
    pristine_ = true;
  } else if (!std::holds_alternative<SetClockCommand>(command) &&
             !std::holds_alternative<StepCommand>(command)) {
    pristine_ = false;
  }
  for (const std::shared_ptr<CommandObserver>& observer : observers_) {
    observer->OnCommand(tick, command);
  }
  return absl::OkStatus();
}

absl::Status Session::Apply(const Command& command) {
  if (const auto* step = std::get_if<StepCommand>(&command)) {
    return Step(step->ticks, std::nullopt).status();
  }
  if (const auto* clock = std::get_if<SetClockCommand>(&command)) {
    return SetClock(clock->update).status();
  }
  if (std::holds_alternative<ResetCommand>(command)) return Reset().status();
  TurnLock lock(this);
  RETURN_IF_ERROR(CheckCommandLocked(command));
  return ApplyLocked(command);
}

absl::StatusOr<std::vector<sim::VehicleId>> Session::SpawnVehicles(
    absl::Span<const sim::VehicleSpec> specs) {
  const Command command = SpawnVehiclesCommand{{specs.begin(), specs.end()}};
  std::vector<std::uint64_t> ids;
  TurnLock lock(this);
  RETURN_IF_ERROR(CheckCommandLocked(command));
  RETURN_IF_ERROR(ApplyLocked(command, &ids));
  return ids;
}

absl::Status Session::RemoveVehicle(sim::VehicleId id) {
  const Command command = RemoveVehicleCommand{id};
  TurnLock lock(this);
  RETURN_IF_ERROR(CheckCommandLocked(command));
  return ApplyLocked(command);
}

absl::StatusOr<RaceReport> Session::StartRace(const StartRaceCommand& command) {
  TurnLock lock(this);
  RETURN_IF_ERROR(CheckCommandLocked(command));
  RETURN_IF_ERROR(ApplyLocked(command));
  return RaceLocked();
}

absl::StatusOr<std::uint32_t> Session::RaceTrack(absl::string_view name) const {
  TurnLock lock(this);
  const sim::WorldParams& params = world_.params();
  std::vector<std::string> tracks;
  for (std::size_t route = 0; route < config_.route_names.size(); ++route) {
    if (!params.IsRaceTrack(route)) continue;
    if (name.empty() || config_.route_names[route] == name) {
      return static_cast<std::uint32_t>(route);
    }
    if (tracks.size() < 10) tracks.push_back(absl::StrCat("\"", Echo(config_.route_names[route]), "\""));
  }
  const auto named = std::find(config_.route_names.begin(), config_.route_names.end(), name);
  if (name.empty() || named == config_.route_names.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "track: ", name.empty() ? "the session has no race track"
                                : absl::StrCat("no track \"", Echo(name), "\" in the session"),
        " (race tracks: ", tracks.empty() ? "none" : absl::StrJoin(tracks, ", "),
        "; a race track is a closed track, see docs/racing.md)"));
  }
  const std::size_t route = static_cast<std::size_t>(named - config_.route_names.begin());
  return absl::InvalidArgumentError(absl::StrCat(
      "track: \"", Echo(name), "\" is not a race track",
      route < params.not_raced_because.size() && !params.not_raced_because[route].empty()
          ? absl::StrCat(" (", params.not_raced_because[route], ")")
          : ""));
}

absl::StatusOr<RaceReport> Session::Race() const {
  TurnLock lock(this);
  RETURN_IF_ERROR(CheckOpenLocked());
  return RaceLocked();
}

absl::StatusOr<RaceReport> Session::RaceLocked() const {
  std::optional<sim::RaceStatus> status = world_.RaceNow();
  if (!status.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "session_id: no race was called in session ", id_,
        " since it was created or reset; call one with StartRace"));
  }
  const std::uint32_t route = status->route;
  return RaceReport{.session_id = id_,
                    .time = NowLocked(),
                    .track = route < config_.route_names.size() ? config_.route_names[route] : "",
                    .status = *std::move(status)};
}

absl::StatusOr<std::vector<sim::ObstacleId>> Session::AddObstacles(
    absl::Span<const sim::ObstacleSpec> specs) {
  const Command command = AddObstaclesCommand{{specs.begin(), specs.end()}};
  std::vector<std::uint64_t> ids;
  TurnLock lock(this);
  RETURN_IF_ERROR(CheckCommandLocked(command));
  RETURN_IF_ERROR(ApplyLocked(command, &ids));
  return ids;
}

absl::Status Session::RemoveObstacle(sim::ObstacleId id) {
  const Command command = RemoveObstacleCommand{id};
  TurnLock lock(this);
  RETURN_IF_ERROR(CheckCommandLocked(command));
  return ApplyLocked(command);
}

absl::StatusOr<SimTime> Session::SetControls(absl::Span<const sim::VehicleInput> inputs) {
  TurnLock lock(this);
  RETURN_IF_ERROR(SetControlsLocked(inputs));
  return NowLocked();
}

absl::Status Session::SetControlsLocked(absl::Span<const sim::VehicleInput> inputs) {
  const Command command = SetControlsCommand{{inputs.begin(), inputs.end()}};
  RETURN_IF_ERROR(CheckCommandLocked(command));
  return ApplyLocked(command);
}

absl::StatusOr<ClockSettings> Session::MergeClockLocked(const ClockUpdate& update) const {
  const ClockSettings settings = UpdatedClock(clock_settings_, update);
  RETURN_IF_ERROR(CheckClockSettings(settings, clock_limits_));
  if (settings.mode != ClockMode::kLockstep && scheduler_ == nullptr) {
    return absl::FailedPreconditionError(
        "clock_mode: this server runs no scheduler; only LOCKSTEP is available");
  }
  return settings;
}

absl::StatusOr<ClockSettings> Session::SetClock(const ClockUpdate& update) {
  const Command command = SetClockCommand{update};
  AfterUnlock after;
  ClockSettings settings;
  {
    TurnLock lock(this);
    RETURN_IF_ERROR(CheckCommandLocked(command));
    RETURN_IF_ERROR(ApplyLocked(command));
    settings = clock_settings_;
    after.schedule_at = RestartPacingLocked();
    // Not paced any more: a run now finds that out and leaves the queue. (Never Cancel here:
    // a concurrent SetClock that resumed the clock may have scheduled it meanwhile.) Queued
    // Steps run first in any case.
    if ((!after.schedule_at.has_value() || !steps_.empty()) && scheduler_ != nullptr) {
      after.schedule_at = clock_->NowNanos();
    }
  }
  Finish(std::move(after));
  return settings;
}

absl::StatusOr<std::shared_ptr<const Frame>> Session::Reset() {
  std::vector<std::shared_ptr<Subscriber>> ended;
  std::shared_ptr<const Frame> frame;
  AfterUnlock after;
  {
    TurnLock lock(this);
    const Command command = ResetCommand{};
    RETURN_IF_ERROR(CheckCommandLocked(command));
    const std::uint64_t reset_at = world_.tick();
    RETURN_IF_ERROR(ApplyLocked(command));
    // A Step running or queued belonged to the world that is gone: it ends here.
    for (std::shared_ptr<StepTicket>& ticket : steps_) {
      after.finished.emplace_back(
          ticket, absl::AbortedError(absl::StrCat(
                      "ticks: the session was reset at tick ", reset_at, " after ",
                      ticket->done_, " of the Step's ", ticket->ticks_, " ticks")));
    }
    steps_.clear();
    // Controllers' vehicles are gone: their streams end.
    for (const Controller& controller : controllers_) {
      const auto it = std::find_if(
          subscribers_.begin(), subscribers_.end(),
          [&](const std::shared_ptr<Subscriber>& s) { return s.get() == controller.subscriber; });
      if (it != subscribers_.end()) {
        ended.push_back(std::move(*it));
        subscribers_.erase(it);
      }
    }
    controllers_.clear();
    frame = MakeFrameLocked();
    // Every subscriber gets the tick-0 frame, as a new subscriber would.
    for (const std::shared_ptr<Subscriber>& subscriber : subscribers_) {
      if (subscriber->OfferFirst(frame)) after.ready.push_back(subscriber);
    }
    after.schedule_at = RestartPacingLocked();
  }
  for (const std::shared_ptr<Subscriber>& subscriber : ended) {
    subscriber->transport().OnClosed(
        absl::NotFoundError("vehicle_id: the session was reset; its vehicles are new"));
  }
  Finish(std::move(after));
  return frame;
}

// ---- Steps ----------------------------------------------------------------------------------

absl::Status Session::CheckStepLocked(std::uint32_t ticks) const {
  if (ticks < 1 || ticks > max_ticks_per_step_) {
    return absl::InvalidArgumentError(
        absl::StrCat("ticks: must be in [1, ", max_ticks_per_step_, "], got ", ticks));
  }
  RETURN_IF_ERROR(CheckOpenLocked());
  if (PacedLocked()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "clock_mode: session ", id_,
        " runs on the server's REALTIME or BARRIER clock; Step needs LOCKSTEP or a paused clock"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<StepTicket>> Session::StartStep(
    std::uint32_t ticks, std::optional<std::uint64_t> expected_tick,
    std::function<void(absl::StatusOr<StepResult>)> on_done, StepOptions options) {
  if (scheduler_ == nullptr) {
    return absl::FailedPreconditionError("ticks: this session has no workers to step it");
  }
  auto ticket = std::make_shared<StepTicket>();
  ticket->ticks_ = ticks;
  ticket->expected_tick_ = expected_tick;
  ticket->on_done_ = std::move(on_done);
  AfterUnlock after;
  std::exception_ptr failure;
  {
    TurnLock lock(this);
    RETURN_IF_ERROR(CheckStepLocked(ticks));
    if (steps_.size() >= kMaxQueuedSteps) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ticks: session ", id_, " already has ", kMaxQueuedSteps,
          " Steps queued; wait for them to finish"));
    }
    if (!options.controls.empty()) {
      if (const absl::Status set = SetControlsLocked(options.controls); !set.ok()) {
        if (options.controls_refused != nullptr) *options.controls_refused = true;
        return set;
      }
    }
    steps_.push_back(ticket);
    if (steps_.size() > 1) return ticket;  // The session is already scheduled for its Steps.
    if (options.may_run_here && CheapLocked(ticks)) {
      try {
        RunStepLocked(clock_->NowNanos() + kInlineBudget_ns, after);
      } catch (...) {
        failure = std::current_exception();
      }
      TakeReadyLocked(after);
    }
    // Not cheap, or it took longer than expected: the workers run the rest.
    if (!steps_.empty() && failure == nullptr) after.schedule_at = clock_->NowNanos();
  }
  Finish(std::move(after));
  if (failure != nullptr) Fail(failure);  // Ends the Step with the reason.
  return ticket;
}

absl::StatusOr<StepResult> Session::Step(std::uint32_t ticks,
                                         std::optional<std::uint64_t> expected_tick) {
  absl::StatusOr<StepResult> result;
  auto ticket = std::make_shared<StepTicket>();
  ticket->ticks_ = ticks;
  ticket->expected_tick_ = expected_tick;
  ticket->on_done_ = [&result](absl::StatusOr<StepResult> r) { result = std::move(r); };
  AfterUnlock after;
  {
    TurnLock lock(this);
    RETURN_IF_ERROR(CheckStepLocked(ticks));
    steps_.push_front(ticket);
    RunStepLocked(std::nullopt, after);
    TakeReadyLocked(after);
  }
  Finish(std::move(after));
  return result;
}

void Session::RunStepLocked(std::optional<std::int64_t> slice_end_ns, AfterUnlock& after) {
  const std::shared_ptr<StepTicket> ticket = steps_.front();
  const auto finish = [&](absl::StatusOr<StepResult> result) {
    after.finished.emplace_back(ticket, std::move(result));  // First: it may throw.
    steps_.pop_front();
  };
  if (!ticket->started_) {
    if (ticket->expected_tick_.has_value() && *ticket->expected_tick_ != NowLocked().tick) {
      finish(absl::AbortedError(absl::StrCat("expected_tick: the session is at tick ",
                                             NowLocked().tick, ", not ", *ticket->expected_tick_)));
      return;
    }
    ticket->started_ = true;
    (void)ApplyLocked(StepCommand{ticket->ticks_});  // Shows the Step to the observers.
  }
  std::int64_t tick_end_ns = clock_->NowNanos();
  while (ticket->done_ < ticket->ticks_ && !ticket->cancelled_) {
    if (playback_ != nullptr && PlaybackAtEndLocked()) {
      finish(absl::OutOfRangeError(absl::StrCat(
          "ticks: the playback reached the end of recording ", playback_->name(), " after ",
          ticket->done_, " of the Step's ", ticket->ticks_,
          " ticks; seek or reset to play it again")));
      return;
    }
    // The Step's answer is the last tick's whole frame: the subscribers get it too.
    tick_end_ns = TickLocked(&ticket->events_, tick_end_ns,
                             /*full_frame=*/ticket->done_ + 1 == ticket->ticks_);
    ++ticket->done_;
    // The slice ends when it has run its time, or when a subscriber waits to be told of a
    // frame: an idle reader gets every frame it can keep up with, as with paced ticks. (The
    // end of one tick is the start of the next: two clock reads a tick, not three.)
    if (slice_end_ns.has_value() && (!ready_.empty() || tick_end_ns >= *slice_end_ns)) break;
  }
  if (ticket->cancelled_ && ticket->done_ < ticket->ticks_) {
    finish(absl::CancelledError(absl::StrCat("ticks: the Step was cancelled after ",
                                             ticket->done_, " of ", ticket->ticks_,
                                             " ticks; the session is at tick ", world_.tick())));
  } else if (ticket->done_ == ticket->ticks_) {
    StepResult result{.frame = MakeFrameLocked(), .events = std::move(ticket->events_)};
    FinishEvents(world_.contacts(), world_.tick(), result.events);
    finish(std::move(result));
  }
}

// ---- The clock ------------------------------------------------------------------------------

std::optional<std::int64_t> Session::RestartPacingLocked() {
  if (!PacedLocked()) return std::nullopt;
  const std::int64_t now_ns = clock_->NowNanos();
  AnchorLocked(now_ns);
  if (clock_settings_.mode == ClockMode::kBarrier) {
    // Every controller answered already: the tick runs now, not at the timeout.
    return BarrierReadyLocked() ? now_ns : barrier_deadline_ns_;
  }
  return DeadlineLocked(world_.tick() + 1);
}

bool Session::PacedLocked() const {
  return !closed_ && clock_settings_.mode != ClockMode::kLockstep && !clock_settings_.paused;
}

void Session::AnchorLocked(std::int64_t now_ns) {
  anchor_tick_ = world_.tick();
  anchor_ns_ = now_ns;
  barrier_deadline_ns_ = DeadlineAfter(now_ns, clock_settings_.barrier_timeout_s * 1e9);
  // At most 1e15 ns (see kMinRealTimeFactor).
  period_ns_ = clock_settings_.real_time_factor > 0.0
                   ? world_.params().dt_s / clock_settings_.real_time_factor * 1e9
                   : 0.0;
}

std::int64_t Session::DeadlineLocked(std::uint64_t tick) const {
  // Ticks before the anchor (none while paced) are due at the anchor.
  const std::uint64_t since_anchor = tick > anchor_tick_ ? tick - anchor_tick_ : 0;
  return DeadlineAfter(anchor_ns_, static_cast<double>(since_anchor) * period_ns_);
}

std::optional<std::int64_t> Session::RunScheduled(std::int64_t now_ns) {
  try {
    return RunScheduledUnguarded(now_ns);
  } catch (...) {
    Fail(std::current_exception());
    return std::nullopt;
  }
}

void Session::Fail(std::exception_ptr failure) {
  absl::Status reason;
  try {
    std::rethrow_exception(failure);
  } catch (const PlaybackFailure& e) {
    reason = absl::DataLossError(
        absl::StrCat("session_id: session ", id_, " stopped: ", e.status().message()));
  } catch (const std::bad_alloc&) {
    reason = absl::ResourceExhaustedError(absl::StrCat(
        "session_id: session ", id_,
        " ran out of memory and was stopped; delete it and try a smaller world (fewer vehicles, "
        "obstacles or contacts)"));
  } catch (const std::exception& e) {
    reason = absl::InternalError(absl::StrCat("session_id: session ", id_, " failed (",
                                              absl::CEscape(e.what()).substr(0, 200),
                                              ") and was stopped; delete it"));
  } catch (...) {
    reason = absl::InternalError(
        absl::StrCat("session_id: session ", id_, " failed and was stopped; delete it"));
  }
  spdlog::error("{}", std::string(reason.message()));
  Close(reason);
}

std::optional<std::int64_t> Session::RunScheduledUnguarded(std::int64_t now_ns) {
  AfterUnlock after;
  std::optional<std::int64_t> next;
  bool stepped = false;
  {
    TurnLock lock(this);  // Behind the calls that wait already: at most one tick or slice.
    if (closed_) return std::nullopt;
    if (!steps_.empty()) {
      stepped = true;
      RunStepLocked(now_ns + kStepSlice_ns, after);
      // More Steps, or the rest of this one: behind the work already due. Then pacing, if the
      // clock was resumed meanwhile.
      next = !steps_.empty() ? std::optional<std::int64_t>(clock_->NowNanos())
                             : RestartPacingLocked();
    } else if (PacedLocked()) {
      next = clock_settings_.mode == ClockMode::kBarrier ? RunBarrierLocked(now_ns)
                                                         : RunRealtimeLocked(now_ns);
    }
    TakeReadyLocked(after);
  }
  // A Step's slice ends early when a subscriber waits for a frame: it is told now, before the
  // session is queued again, or another worker could run the next slice and replace that
  // frame before the subscriber took it.
  if (stepped && !after.ready.empty()) {
    AfterUnlock tell;
    tell.ready = std::move(after.ready);
    after.ready.clear();
    Finish(std::move(tell));
  }
  // Finished Steps are answered, and paced ticks' subscribers told, in AfterRun: once the
  // scheduler has queued the session again, so that its next work need not wait for their
  // encoding.
  absl::MutexLock lock(&deferred_mu_);
  deferred_.push_back(std::move(after));
  return next;
}

void Session::AfterRun() {
  std::vector<AfterUnlock> deferred;
  {
    absl::MutexLock lock(&deferred_mu_);
    deferred.swap(deferred_);
  }
  for (AfterUnlock& after : deferred) Finish(std::move(after));
}

bool Session::AllAnsweredLocked() const {
  const std::uint64_t tick = world_.tick();
  return std::all_of(controllers_.begin(), controllers_.end(), [&](const Controller& c) {
    // A controller whose vehicle was removed is about to leave; nobody waits for it.
    return (c.answered_tick.has_value() && *c.answered_tick >= tick) ||
           !world_.Contains(c.vehicle);
  });
}

bool Session::BarrierReadyLocked() const {
  return PacedLocked() && clock_settings_.mode == ClockMode::kBarrier && !controllers_.empty() &&
         AllAnsweredLocked();
}

std::optional<std::int64_t> Session::RunBarrierLocked(std::int64_t now_ns) {
  if (controllers_.empty()) return std::nullopt;  // Waits for a controller to attach.
  if (!AllAnsweredLocked()) {
    if (now_ns < barrier_deadline_ns_) return barrier_deadline_ns_;
    ++barrier_timeouts_;
    if (metrics_ != nullptr) metrics_->barrier_timeouts->Add();
  }
  ++paced_ticks_;
  TickLocked(nullptr, clock_->NowNanos());
  barrier_deadline_ns_ = DeadlineAfter(now_ns, clock_settings_.barrier_timeout_s * 1e9);
  return barrier_deadline_ns_;
}

std::optional<std::int64_t> Session::RunRealtimeLocked(std::int64_t now_ns) {
  if (period_ns_ == 0.0) {  // As fast as possible: one tick per turn.
    TickLocked(nullptr, clock_->NowNanos());
    ++paced_ticks_;
    return now_ns;
  }
  const std::uint64_t next_tick = world_.tick() + 1;
  std::int64_t deadline = DeadlineLocked(next_tick);
  if (deadline > now_ns) return deadline;  // Woken early.
  const std::int64_t late_ns = now_ns - deadline;
  if (static_cast<double>(late_ns) > period_ns_ * kMaxLagTicks) {
    // Too far behind to catch up without a burst: give up the backlog, pace from now.
    const auto given_up = static_cast<std::uint64_t>(static_cast<double>(late_ns) / period_ns_);
    missed_deadlines_ += given_up;
    if (metrics_ != nullptr) metrics_->missed_deadlines->Add(given_up);
    AnchorLocked(now_ns);
    anchor_tick_ = world_.tick() + 1;  // The tick about to run is due now.
    deadline = now_ns;
  }
  const std::int64_t lateness_ns = now_ns - deadline;
  if (static_cast<double>(lateness_ns) > period_ns_) {
    ++missed_deadlines_;
    if (metrics_ != nullptr) metrics_->missed_deadlines->Add();
  }
  if (metrics_ != nullptr) metrics_->lateness->ObserveNanos(lateness_ns);
  if (lateness_histogram_.empty()) lateness_histogram_.assign(kLatenessBuckets, 0);
  ++lateness_histogram_[std::min<std::size_t>(
      static_cast<std::size_t>(lateness_ns / kLatenessBucket_ns), kLatenessBuckets - 1)];
  lateness_max_ns_ = std::max(lateness_max_ns_, lateness_ns);
  ++paced_ticks_;
  TickLocked(nullptr, clock_->NowNanos());
  return DeadlineLocked(world_.tick() + 1);
}

bool Session::CheapLocked(std::uint64_t ticks) const {
  return tick_cost_ns_ >= 0 &&
         static_cast<double>(tick_cost_ns_) * static_cast<double>(ticks) <= kInlineBudget_ns;
}

std::int64_t Session::TickLocked(FrameEvents* events, std::int64_t start_ns, bool full_frame) {
  if (playback_ != nullptr) {
    PlaybackTickLocked();
    const std::int64_t end_ns = clock_->NowNanos();
    tick_cost_ns_ = end_ns - start_ns;
    return end_ns;
  }
  if (!braking_.empty()) BrakeLocked();
  transitions_.clear();
  world_.Step(&transitions_);
  tick_cost_ns_ = clock_->NowNanos() - start_ns;
  if (metrics_ != nullptr) {
    metrics_->ticks->Add();
    metrics_->tick_duration->ObserveNanos(tick_cost_ns_);
  }
  // This tick's events are partial if it dropped contacts, or if the one before did (a contact
  // dropped then and kept now looks as if it began now).
  const bool dropped_now = world_.contacts_dropped() > 0;
  const bool over_contact_budget = dropped_now || previous_tick_over_contact_budget_;
  previous_tick_over_contact_budget_ = dropped_now;
  track_events_.clear();
  for (const sim::VehicleLapEvent& lap : world_.lap_events()) {
    track_events_.push_back({.tick = world_.tick(), .event = lap});
  }
  for (const sim::RaceEvent& race : world_.race_events()) {
    track_events_.push_back({.tick = world_.tick(), .event = race});
  }
  if (events != nullptr) {
    AppendEvents(transitions_, *events);
    AppendTrackEvents(track_events_, *events);
    if (over_contact_budget) ++events->ticks_over_contact_budget;
  }
  for (const std::shared_ptr<CommandObserver>& observer : observers_) observer->OnTick(world_);
  if (subscribers_.empty()) return clock_->NowNanos();
  const std::uint64_t tick = world_.tick();
  bool wanted = false;
  bool full_wanted = full_frame;
  for (const std::shared_ptr<Subscriber>& subscriber : subscribers_) {
    subscriber->Accumulate(transitions_, track_events_, over_contact_budget);
    if (!subscriber->Wants(tick)) continue;
    wanted = true;
    full_wanted = full_wanted || !subscriber->TakesLean(tick);
  }
  if (!wanted) return clock_->NowNanos();
  // A recorder between its full frames takes a lean one, unless another subscriber wants
  // this tick's whole frame anyway.
  const std::shared_ptr<const Frame> frame = full_wanted ? MakeFrameLocked() : MakeLeanFrameLocked();
  for (const std::shared_ptr<Subscriber>& subscriber : subscribers_) {
    if (subscriber->Wants(tick) && subscriber->Offer(frame)) ready_.push_back(subscriber);
  }
  return clock_->NowNanos();
}

// ---- Playback -------------------------------------------------------------------------------

namespace {

std::uint64_t SaturatingAdd(std::uint64_t a, std::uint64_t b) {
  return a > ~std::uint64_t{0} - b ? ~std::uint64_t{0} : a + b;
}

}  // namespace

absl::Status Session::Play(std::shared_ptr<PlaybackSource> source, std::uint64_t start_ns) {
  TurnLock lock(this);
  if (playback_ != nullptr) return absl::FailedPreconditionError("session_id: plays back already");
  if (world_.vehicle_count() > 0) {
    return absl::InvalidArgumentError("vehicles: a playback's session starts with none");
  }
  if (source == nullptr || source->frame_count() == 0) {
    return absl::InvalidArgumentError("recording_id: the recording holds no frames");
  }
  playback_ = std::move(source);
  if (absl::Status shown = PlaybackMoveLocked(start_ns); !shown.ok()) {
    playback_.reset();
    return shown;
  }
  return absl::OkStatus();
}

absl::StatusOr<PlaybackPosition> Session::Seek(std::uint64_t position_ns) {
  AfterUnlock after;
  PlaybackPosition position;
  {
    TurnLock lock(this);
    RETURN_IF_ERROR(CheckOpenLocked());
    if (playback_ == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("session_id: session ", id_, " plays no recording back; only a playback seeks"));
    }
    RETURN_IF_ERROR(PlaybackMoveLocked(position_ns));
    // Every subscriber gets the new frame, as after a reset: the frames before it are of
    // another time.
    for (const std::shared_ptr<Subscriber>& subscriber : subscribers_) {
      if (subscriber->OfferFirst(playback_frame_)) after.ready.push_back(subscriber);
    }
    after.schedule_at = RestartPacingLocked();
    // Queued Steps run first in any case (as after SetClock).
    if (!steps_.empty() && scheduler_ != nullptr) after.schedule_at = clock_->NowNanos();
    position = PlaybackLocked();
  }
  Finish(std::move(after));
  return position;
}

std::uint64_t Session::PlaybackSlackNsLocked() const {
  return static_cast<std::uint64_t>(std::llround(0.5e9 / config_.world.tick_rate_hz));
}

std::size_t Session::PlaybackIndexAtLocked(std::uint64_t position_ns) const {
  // The last frame at or before the position (with the slack): the first after it, less one.
  const std::uint64_t reached_ns = SaturatingAdd(position_ns, PlaybackSlackNsLocked());
  std::size_t after = 0;
  std::size_t span = playback_->frame_count();
  while (span > 0) {
    const std::size_t half = span / 2;
    if (playback_->TimeOf(after + half) <= reached_ns) {
      after += half + 1;
      span -= half + 1;
    } else {
      span = half;
    }
  }
  return after == 0 ? 0 : after - 1;
}

absl::StatusOr<std::shared_ptr<const Frame>> Session::PlaybackFrameLocked(std::size_t index) const {
  absl::StatusOr<std::shared_ptr<const Frame>> frame = playback_->FrameAt(index);
  if (!frame.ok()) {
    return absl::DataLossError(absl::StrCat("recording ", playback_->name(),
                                            " cannot be read: ", frame.status().message()));
  }
  return frame;
}

std::uint64_t Session::PlaybackDurationNsLocked() const {
  return playback_->TimeOf(playback_->frame_count() - 1);
}

absl::Status Session::PlaybackMoveLocked(std::uint64_t position_ns) {
  position_ns = std::min(position_ns, PlaybackDurationNsLocked());
  const std::size_t index = PlaybackIndexAtLocked(position_ns);
  if (playback_frame_ == nullptr || index != playback_index_) {
    ASSIGN_OR_RETURN(playback_frame_, PlaybackFrameLocked(index));
    playback_index_ = index;
  }
  playback_base_ns_ = position_ns;
  playback_base_tick_ = world_.tick();
  return absl::OkStatus();
}

std::uint64_t Session::PlaybackPositionNsLocked() const {
  // As the recorder times its frames (ticks x 1e9 / rate, rounded), from the last move.
  const double since_ns = std::round(static_cast<double>(world_.tick() - playback_base_tick_) *
                                     1e9 / config_.world.tick_rate_hz);
  const std::uint64_t duration_ns = PlaybackDurationNsLocked();
  if (!(since_ns < static_cast<double>(duration_ns - playback_base_ns_))) return duration_ns;
  return playback_base_ns_ + static_cast<std::uint64_t>(since_ns);
}

bool Session::PlaybackAtEndLocked() const {
  return playback_index_ + 1 == playback_->frame_count() &&
         SaturatingAdd(PlaybackPositionNsLocked(), PlaybackSlackNsLocked()) >=
             playback_->TimeOf(playback_index_);
}

void Session::PlaybackTickLocked() {
  transitions_.clear();
  world_.Step(&transitions_);  // The clock: a world of obstacles alone, which never move.
  const std::uint64_t reached_ns =
      SaturatingAdd(PlaybackPositionNsLocked(), PlaybackSlackNsLocked());
  std::size_t index = playback_index_;
  while (index + 1 < playback_->frame_count() && playback_->TimeOf(index + 1) <= reached_ns) {
    ++index;
  }
  if (index != playback_index_) {
    absl::StatusOr<std::shared_ptr<const Frame>> frame = PlaybackFrameLocked(index);
    if (!frame.ok()) throw PlaybackFailure(frame.status());
    const std::shared_ptr<const Frame> before = std::exchange(playback_frame_, *std::move(frame));
    playback_index_ = index;
    // A subscriber that takes every n-th tick gets a frame that reaches a tick it takes since
    // the last frame shown (frames recorded every 5 ticks, taken every 7: about every 7).
    const std::uint64_t tick = playback_frame_->time.tick;
    const bool went_back = playback_frame_->run != before->run || tick < before->time.tick;
    for (const std::shared_ptr<Subscriber>& subscriber : subscribers_) {
      const std::uint64_t n = subscriber->options().every_n_ticks;
      if (!went_back && tick / n == before->time.tick / n) continue;
      if (subscriber->Offer(playback_frame_)) ready_.push_back(subscriber);
    }
  }
  if (PlaybackAtEndLocked() && clock_settings_.mode == ClockMode::kRealtime) {
    clock_settings_.paused = true;  // The end: it stops there, as a player does.
  }
}

bool Session::IsPlayback() const {
  TurnLock lock(this);
  return playback_ != nullptr;
}

PlaybackPosition Session::PlaybackLocked() const {
  return {.recording = playback_->name(),
          .position_ns = PlaybackPositionNsLocked(),
          .duration_ns = PlaybackDurationNsLocked(),
          .frame = playback_index_,
          .frame_count = playback_->frame_count(),
          .time = playback_frame_->time};
}

void Session::TakeReadyLocked(AfterUnlock& after) {
  after.ready.insert(after.ready.end(), std::make_move_iterator(ready_.begin()),
                     std::make_move_iterator(ready_.end()));
  ready_.clear();
}

void Session::BrakeLocked() {
  const double dt_s = world_.params().dt_s;
  std::erase_if(braking_, [&](sim::VehicleId id) {
    const std::optional<sim::World::Motion> motion = world_.MotionOf(id);
    if (!motion.has_value()) return true;
    const bool stopped = motion->speed_mps == 0.0;
    // A crashed vehicle accepts and ignores controls, so this cannot fail. Derived from the
    // state and the braking set alone, so a replay brakes the same.
    (void)world_.SetInputs({sim::BrakeToStopInput(motion->kind, id, motion->speed_mps, dt_s)});
    return stopped;  // Its last input (zero acceleration, or the brake) holds it still.
  });
}

// ---- Subscribers and controllers ------------------------------------------------------------

void Session::AddSubscriberLocked(std::shared_ptr<Subscriber> subscriber, AfterUnlock& after) {
  if (subscriber->OfferFirst(MakeFrameLocked())) after.ready.push_back(subscriber);
  subscribers_.push_back(std::move(subscriber));
}

absl::Status Session::Subscribe(std::shared_ptr<Subscriber> subscriber) {
  const SubscriberOptions& options = subscriber->options();
  if (options.every_n_ticks < 1) {
    return absl::InvalidArgumentError("every_n_ticks: must be >= 1, got 0");
  }
  if (options.max_rate_hz.has_value() && !(*options.max_rate_hz > 0.0)) {
    return absl::InvalidArgumentError("max_rate_hz: must be > 0");
  }
  if (options.kind == SubscriberOptions::Kind::kLossless && options.queue_capacity < 1) {
    return absl::InvalidArgumentError("queue_capacity: must be >= 1, got 0");
  }
  AfterUnlock after;
  {
    TurnLock lock(this);
    RETURN_IF_ERROR(CheckOpenLocked());
    AddSubscriberLocked(std::move(subscriber), after);
  }
  Finish(std::move(after));
  return absl::OkStatus();
}

void Session::Unsubscribe(const Subscriber* subscriber) {
  TurnLock lock(this);
  std::erase_if(subscribers_,
                [subscriber](const std::shared_ptr<Subscriber>& s) { return s.get() == subscriber; });
}

std::size_t Session::subscriber_count() const {
  TurnLock lock(this);
  return subscribers_.size();
}

Session::Controller* Session::FindControllerLocked(const Subscriber* subscriber) {
  for (Controller& controller : controllers_) {
    if (controller.subscriber == subscriber) return &controller;
  }
  return nullptr;
}

absl::StatusOr<bool> Session::AttachController(sim::VehicleId vehicle,
                                               DisconnectAction on_disconnect,
                                               std::shared_ptr<Subscriber> subscriber,
                                               std::string holder) {
  AfterUnlock after;
  std::shared_ptr<Subscriber> replaced;
  {
    TurnLock lock(this);
    RETURN_IF_ERROR(CheckOpenLocked());
    if (playback_ != nullptr) {  // Refused as the command would be, before it is looked up.
      RETURN_IF_ERROR(CheckCommandLocked(
          AttachControllerCommand{.vehicle_id = vehicle}));
    }
    if (!world_.Contains(vehicle)) {
      return absl::NotFoundError(
          absl::StrCat("vehicle_id: no vehicle ", vehicle, " in session ", id_));
    }
    if (world_.HasDriver(vehicle)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "vehicle_id: vehicle ", vehicle, " has a built-in driver; it takes no controller"));
    }
    const auto current = std::find_if(controllers_.begin(), controllers_.end(),
                                      [vehicle](const Controller& c) { return c.vehicle == vehicle; });
    if (current != controllers_.end()) {
      if (holder.empty() || current->holder != holder) {
        return absl::AlreadyExistsError(absl::StrCat(
            "vehicle_id: vehicle ", vehicle, " already has a controller (one per vehicle)"));
      }
      replaced = DetachLocked(current, after);  // Its holder is back on a new stream.
    }
    RETURN_IF_ERROR(ApplyLocked(AttachControllerCommand{vehicle}));
    controllers_.push_back({.subscriber = subscriber.get(),
                            .vehicle = vehicle,
                            .on_disconnect = on_disconnect,
                            .holder = std::move(holder)});
    AddSubscriberLocked(std::move(subscriber), after);
    if (PacedLocked() && clock_settings_.mode == ClockMode::kBarrier && controllers_.size() == 1) {
      // The first controller: the barrier starts counting from its first observation.
      barrier_deadline_ns_ =
          DeadlineAfter(clock_->NowNanos(), clock_settings_.barrier_timeout_s * 1e9);
      after.schedule_at = barrier_deadline_ns_;
    }
    if (!steps_.empty()) after.schedule_at = clock_->NowNanos();  // Steps go first.
  }
  Finish(std::move(after));
  if (replaced != nullptr) {
    replaced->transport().OnClosed(absl::AbortedError(
        "vehicle_id: a new Drive stream with the same token took this vehicle over"));
  }
  return replaced != nullptr;
}

absl::StatusOr<ControlReceipt> Session::ApplyControl(const Subscriber* subscriber,
                                                     std::uint64_t tick,
                                                     sim::VehicleInput input) {
  ControlReceipt receipt = ControlReceipt::kOnTime;
  AfterUnlock after;
  std::exception_ptr failure;
  {
    TurnLock lock(this);
    RETURN_IF_ERROR(CheckOpenLocked());
    Controller* controller = FindControllerLocked(subscriber);
    if (controller == nullptr) {
      return absl::NotFoundError("vehicle_id: the controller was detached from its vehicle");
    }
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
    RETURN_IF_ERROR(ApplyLocked(SetControlsCommand{{input}}));
    receipt = tick == now_tick ? ControlReceipt::kOnTime : ControlReceipt::kLate;
    controller->answered_tick = tick;
    if (BarrierReadyLocked()) {
      if (steps_.empty() && CheapLocked(1)) {
        // The tick this control completes, here (the session stays scheduled for its
        // barrier timeout, which the tick moves on).
        try {
          (void)RunBarrierLocked(clock_->NowNanos());
        } catch (...) {
          failure = std::current_exception();
        }
        TakeReadyLocked(after);
      } else {
        after.schedule_at = clock_->NowNanos();
      }
    }
  }
  Finish(std::move(after));
  if (failure != nullptr) {
    Fail(failure);
    TurnLock lock(this);
    return CheckOpenLocked();  // The failure's reason, or NotFound if deleted meanwhile.
  }
  return receipt;
}

bool Session::DetachController(const Subscriber* subscriber) {
  AfterUnlock after;
  {
    TurnLock lock(this);
    const auto it = std::find_if(controllers_.begin(), controllers_.end(),
                                 [subscriber](const Controller& c) { return c.subscriber == subscriber; });
    if (it == controllers_.end()) return false;
    (void)DetachLocked(it, after);
  }
  Finish(std::move(after));
  return true;
}

absl::StatusOr<SimTime> Session::DetachVehicleController(sim::VehicleId vehicle,
                                                         const absl::Status& reason) {
  AfterUnlock after;
  std::shared_ptr<Subscriber> detached;
  SimTime now;
  {
    TurnLock lock(this);
    RETURN_IF_ERROR(CheckOpenLocked());
    if (!world_.Contains(vehicle)) {
      return absl::NotFoundError(
          absl::StrCat("vehicle_id: no vehicle ", vehicle, " in session ", id_));
    }
    const auto it = std::find_if(controllers_.begin(), controllers_.end(),
                                 [vehicle](const Controller& c) { return c.vehicle == vehicle; });
    if (it == controllers_.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("vehicle_id: vehicle ", vehicle, " has no controller"));
    }
    detached = DetachLocked(it, after);
    now = NowLocked();
  }
  Finish(std::move(after));
  // Outside the lock: the transport may finish its stream (and call DetachController, which
  // finds nothing left to do) right away.
  if (detached != nullptr) detached->transport().OnClosed(reason);
  return now;
}

std::shared_ptr<Subscriber> Session::DetachLocked(std::vector<Controller>::iterator controller,
                                                  AfterUnlock& after) {
  if (!closed_) {
    (void)ApplyLocked(DetachControllerCommand{controller->vehicle,
                                              controller->on_disconnect});  // Never fails.
  }
  const Subscriber* subscriber = controller->subscriber;
  controllers_.erase(controller);
  std::shared_ptr<Subscriber> removed;
  std::erase_if(subscribers_, [&](const std::shared_ptr<Subscriber>& s) {
    if (s.get() != subscriber) return false;
    removed = s;
    return true;
  });
  if (BarrierReadyLocked()) after.schedule_at = clock_->NowNanos();
  return removed;
}

void Session::AddObserver(std::shared_ptr<CommandObserver> observer) {
  TurnLock lock(this);
  observer->OnAttach({.tick = world_.tick(),
                      .run = run_,
                      .state_hash = world_.StateHash(),
                      .pristine = pristine_ && world_.tick() == 0,
                      .first_ids = world_.params().first_ids});
  observers_.push_back(std::move(observer));
}

void Session::RemoveObserver(const CommandObserver* observer) {
  TurnLock lock(this);
  std::erase_if(observers_, [observer](const std::shared_ptr<CommandObserver>& o) {
    return o.get() == observer;
  });
}

// ---- Reading --------------------------------------------------------------------------------

std::pair<std::shared_ptr<const Frame>, std::uint64_t> Session::CurrentFrameAndHash() const {
  TurnLock lock(this);
  return {MakeFrameLocked(), playback_ != nullptr ? 0 : world_.StateHash()};
}

std::shared_ptr<const Frame> Session::CurrentFrame() const {
  TurnLock lock(this);
  return MakeFrameLocked();
}

Session::Counts Session::counts() const {
  TurnLock lock(this);
  return {.vehicles = playback_ != nullptr ? playback_frame_->vehicles.size()
                                           : world_.vehicle_count(),
          .obstacles = world_.obstacles().size(),
          .contacts = world_.contacts().size(),
          .subscribers = subscribers_.size(),
          .controllers = controllers_.size(),
          .clock_mode = clock_settings_.mode};
}

std::vector<std::optional<sim::VehicleInput>> Session::HeldControls(
    absl::Span<const sim::VehicleId> ids) const {
  absl::MutexLock lock(&mu_);
  return world_.HeldControls(ids);
}

SessionDescription Session::Describe(bool with_vehicles) const {
  TurnLock lock(this);
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
  if (playback_ != nullptr) {
    description.vehicle_count = playback_frame_->vehicles.size();
    description.playback = PlaybackLocked();
  }
  description.config.clock = clock_settings_;
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
    description.vehicles = playback_ != nullptr ? playback_->Describe(*playback_frame_)
                                                : world_.DescribeVehicles();
    description.obstacles = world_.obstacles();
  }
  return description;
}

absl::Status Session::CheckVehicle(sim::VehicleId vehicle) const {
  TurnLock lock(this);
  RETURN_IF_ERROR(CheckOpenLocked());
  if (playback_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("vehicle_id: session ", id_, " plays back recording ", playback_->name(),
                     "; its vehicles take no driver"));
  }
  if (world_.Contains(vehicle)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("vehicle_id: no vehicle ", vehicle, " in session ", id_));
}

SimTime Session::Now() const {
  TurnLock lock(this);
  return NowLocked();
}

std::uint64_t Session::StateHash() const {
  TurnLock lock(this);
  return playback_ != nullptr ? 0 : world_.StateHash();
}

void Session::Touch() {
  if (scheduler_ != nullptr) last_activity_ns_ = clock_->NowNanos();
}

std::int64_t Session::last_activity_ns() const { return last_activity_ns_; }

SimTime Session::Close(const absl::Status& reason) {
  std::vector<std::shared_ptr<Subscriber>> subscribers;
  AfterUnlock after;
  SimTime now;
  {
    TurnLock lock(this);
    if (!closed_) {
      closed_ = true;
      close_reason_ = reason;
      // Steps stop here, between two ticks.
      const absl::Status step_status = CheckOpenLocked();
      for (std::shared_ptr<StepTicket>& ticket : steps_) {
        after.finished.emplace_back(std::move(ticket), step_status);
      }
      steps_.clear();
    }
    subscribers.swap(subscribers_);
    ready_.clear();
    now = NowLocked();
  }
  if (scheduler_ != nullptr) scheduler_->Cancel(this);
  Finish(std::move(after));
  // Outside the lock: a transport may finish its stream and unsubscribe right away.
  for (const std::shared_ptr<Subscriber>& subscriber : subscribers) {
    subscriber->transport().OnClosed(reason);
  }
  return now;
}

Session::TurnLock::TurnLock(const Session* session) : session_(session) {
  {
    absl::MutexLock turns(&session_->turn_mu_);
    const std::uint64_t turn = session_->next_turn_++;
    while (session_->serving_turn_ != turn) session_->turn_cv_.Wait(&session_->turn_mu_);
  }
  session_->mu_.Lock();  // Uncontended: only the turn being served takes it.
}

Session::TurnLock::~TurnLock() {
  session_->mu_.Unlock();
  absl::MutexLock turns(&session_->turn_mu_);
  ++session_->serving_turn_;
  session_->turn_cv_.SignalAll();  // The next turn's holder goes; the others wait again.
}

SimTime Session::NowLocked() const {
  if (playback_ != nullptr) return playback_frame_->time;
  return SimTime{.tick = world_.tick(), .sim_time_s = world_.sim_time_s()};
}

std::shared_ptr<const Frame> Session::MakeFrameLocked() const {
  if (playback_ != nullptr) return playback_frame_;
  // The frame of this tick made already (for the subscribers, a Step's answer, a read), if
  // no command changed the world since.
  if (frame_cache_ != nullptr && frame_cache_->run == run_ &&
      frame_cache_->time.tick == world_.tick()) {
    return frame_cache_;
  }
  auto frame = std::make_shared<Frame>();
  frame->time = NowLocked();
  frame->run = run_;
  frame->vehicles = world_.Snapshot();
  frame->contacts = world_.contacts();
  frame->contacts_dropped = world_.contacts_dropped();
  if (!world_.state().timed.empty()) {
    frame->track = world_.TrackReadings();
    frame->track_names = track_names_;
  }
  if (std::optional<sim::RaceStatus> race = world_.RaceNow(); race.has_value()) {
    frame->race = std::make_shared<const sim::RaceStatus>(*std::move(race));
    frame->track_names = track_names_;
  }
  frame_cache_ = frame;
  return frame;
}

std::shared_ptr<const Frame> Session::MakeLeanFrameLocked() const {
  if (frame_cache_ != nullptr && frame_cache_->run == run_ &&
      frame_cache_->time.tick == world_.tick()) {
    return frame_cache_;  // A full one is made already.
  }
  auto frame = std::make_shared<Frame>();
  frame->time = NowLocked();
  frame->run = run_;
  frame->lean = true;
  frame->motion = world_.MotionSnapshot();
  frame->contacts = world_.contacts();
  frame->contacts_dropped = world_.contacts_dropped();
  return frame;
}

absl::Status Session::CheckOpenLocked() const {
  if (!closed_) return absl::OkStatus();
  if (!close_reason_.ok()) return close_reason_;  // The server is shutting down.
  return absl::NotFoundError(absl::StrCat("session_id: session ", id_, " was deleted"));
}

}  // namespace pitlane::session
