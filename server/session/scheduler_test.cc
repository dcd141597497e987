#include "server/session/scheduler.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/session/clock.h"
#include "server/session/session.h"
#include "server/session/testing/recording_transport.h"
#include "server/sim/world/world.h"
#include "server/util/status_matchers.h"

namespace pitlane::session {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kMs = 1'000'000;

// A job that records when it ran and asks to run again `period_ns` after its last run.
class Recorder final : public ScheduledJob {
 public:
  explicit Recorder(std::int64_t period_ns, int runs = 1 << 30)
      : period_ns_(period_ns), runs_left_(runs) {}
  std::optional<std::int64_t> RunScheduled(std::int64_t now_ns) override {
    ran_at.push_back(now_ns);
    if (--runs_left_ == 0) return std::nullopt;
    return now_ns + period_ns_;
  }
  std::vector<std::int64_t> ran_at;

 private:
  std::int64_t period_ns_;
  int runs_left_;
};

TEST(Scheduler, RunsJobsWhenDueEarliestFirst) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto slow = std::make_shared<Recorder>(30 * kMs);
  auto fast = std::make_shared<Recorder>(10 * kMs);
  scheduler.Schedule(slow, 5 * kMs);
  scheduler.Schedule(fast, 2 * kMs);
  EXPECT_EQ(scheduler.RunDue(), 0);  // Nothing due at 0.
  clock.Set(100 * kMs);
  // Each job runs once per RunDue turn it is due in; jobs rescheduled to the past run again.
  EXPECT_EQ(scheduler.RunDue(), 2);
  EXPECT_EQ(fast->ran_at, std::vector<std::int64_t>{100 * kMs});
  EXPECT_EQ(slow->ran_at, std::vector<std::int64_t>{100 * kMs});
  clock.Set(115 * kMs);
  EXPECT_EQ(scheduler.RunDue(), 1);  // Only fast (due at 110 ms).
  EXPECT_EQ(fast->ran_at.size(), 2u);
}

TEST(Scheduler, CancelAndRescheduleReplaceTheEntry) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto job = std::make_shared<Recorder>(10 * kMs);
  scheduler.Schedule(job, 50 * kMs);
  scheduler.Schedule(job, 20 * kMs);  // Replaces the 50 ms entry.
  clock.Set(60 * kMs);
  EXPECT_EQ(scheduler.RunDue(), 1);
  EXPECT_EQ(job->ran_at, std::vector<std::int64_t>{60 * kMs});
  scheduler.Cancel(job.get());
  EXPECT_EQ(scheduler.size(), 0u);
  clock.Set(1000 * kMs);
  EXPECT_EQ(scheduler.RunDue(), 0);
}

TEST(Scheduler, AJobThatIsDoneLeavesTheQueue) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto job = std::make_shared<Recorder>(0, /*runs=*/3);
  scheduler.Schedule(job, 0);
  EXPECT_EQ(scheduler.RunDue(), 3);
  EXPECT_EQ(scheduler.size(), 0u);
}

// Worker threads run a due job without anyone calling RunDue.
TEST(Scheduler, WorkersRunDueJobs) {
  class Notifier final : public ScheduledJob {
   public:
    std::optional<std::int64_t> RunScheduled(std::int64_t) override {
      done.Notify();
      return std::nullopt;
    }
    absl::Notification done;
  };
  FakeClock clock;
  Scheduler scheduler(&clock, 2);
  auto job = std::make_shared<Notifier>();
  scheduler.Schedule(job, 0);
  EXPECT_TRUE(job->done.WaitForNotificationWithTimeout(absl::Seconds(10)));
}

// With two workers, a job due while the other worker is busy runs on the idle one, even when
// it was queued behind an earlier job while both workers slept (so that nobody was woken for
// it then): A (due in 5 ms) holds its worker until B (due in 10 ms) has run.
TEST(Scheduler, AnIdleWorkerTakesWhatFallsDueWhileTheOtherIsBusy) {
  class Job final : public ScheduledJob {
   public:
    explicit Job(absl::Notification* wait_for) : wait_for_(wait_for) {}
    std::optional<std::int64_t> RunScheduled(std::int64_t) override {
      started.Notify();
      if (wait_for_ != nullptr) released = wait_for_->WaitForNotificationWithTimeout(absl::Seconds(5));
      return std::nullopt;
    }
    absl::Notification started;
    bool released = false;

   private:
    absl::Notification* const wait_for_;
  };
  SteadyClock clock;
  Scheduler scheduler(&clock, 2);
  auto far = std::make_shared<Job>(nullptr);
  scheduler.Schedule(far, clock.NowNanos() + 60'000 * kMs);
  absl::SleepFor(absl::Milliseconds(50));  // Both workers asleep until `far`.
  auto b = std::make_shared<Job>(nullptr);
  auto a = std::make_shared<Job>(&b->started);
  const std::int64_t now_ns = clock.NowNanos();
  scheduler.Schedule(a, now_ns + 5 * kMs);
  scheduler.Schedule(b, now_ns + 10 * kMs);
  ASSERT_TRUE(a->started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  ASSERT_TRUE(b->started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  scheduler.CancelAndWait(a.get());
  EXPECT_TRUE(a->released);  // B started while A still held its worker.
  scheduler.Cancel(far.get());
}

// CancelAndWait returns only once a run in progress on a worker has ended, and the job does
// not run again.
TEST(Scheduler, CancelAndWaitWaitsForTheRunInProgress) {
  class Blocking final : public ScheduledJob {
   public:
    std::optional<std::int64_t> RunScheduled(std::int64_t now_ns) override {
      started.Notify();
      release.WaitForNotification();
      ++runs;
      return now_ns;  // Would run again at once.
    }
    absl::Notification started;
    absl::Notification release;
    std::atomic<int> runs{0};
  };
  FakeClock clock;
  Scheduler scheduler(&clock, 1);
  auto job = std::make_shared<Blocking>();
  scheduler.Schedule(job, 0);
  ASSERT_TRUE(job->started.WaitForNotificationWithTimeout(absl::Seconds(10)));
  std::atomic<bool> cancelled{false};
  std::thread canceller([&] {
    scheduler.CancelAndWait(job.get());
    cancelled = true;
  });
  // The canceller waits while the run is blocked (checked before releasing it).
  absl::SleepFor(absl::Milliseconds(20));
  EXPECT_FALSE(cancelled);
  job->release.Notify();
  canceller.join();
  EXPECT_TRUE(cancelled);
  EXPECT_EQ(job->runs, 1);
  EXPECT_EQ(scheduler.size(), 0u);
}

// --- Sessions on a fake clock ---------------------------------------------------------

std::shared_ptr<Session> MakeSession(Scheduler* scheduler, ClockSettings clock,
                                     double tick_rate_hz = 50.0) {
  SessionConfig config{.name = "paced",
                       .world = {.tick_rate_hz = tick_rate_hz, .max_vehicles = 4},
                       .clock = clock};
  auto session = std::make_shared<Session>("s-1", config, *sim::World::Create(config.world),
                                           1000, scheduler);
  session->Start();
  return session;
}

// Advances the fake clock in `step_ns` increments up to `until_ns`, running what is due.
void RunFor(FakeClock& clock, Scheduler& scheduler, std::int64_t step_ns, std::int64_t until_ns) {
  while (clock.NowNanos() < until_ns) {
    clock.Advance(step_ns);
    scheduler.RunDue();
  }
}

TEST(SessionClock, RealtimeTicksAtTheTickRateTimesTheFactor) {
  struct Case {
    double rate_hz;
    double factor;
    std::uint64_t ticks_in_one_second;
  };
  for (const Case c : {Case{50, 1, 50}, Case{50, 2, 100}, Case{50, 0.5, 25}, Case{100, 1, 100},
                       Case{30, 1, 30}}) {
    FakeClock clock;
    Scheduler scheduler(&clock, 0);
    auto session = MakeSession(
        &scheduler, {.mode = ClockMode::kRealtime, .real_time_factor = c.factor}, c.rate_hz);
    RunFor(clock, scheduler, kMs, 1000 * kMs);
    EXPECT_EQ(session->Now().tick, c.ticks_in_one_second) << c.rate_hz << " Hz x " << c.factor;
    const ClockStats stats = session->Describe(false).clock_stats;
    EXPECT_EQ(stats.paced_ticks, c.ticks_in_one_second);
    EXPECT_EQ(stats.missed_deadlines, 0u);
    EXPECT_LE(stats.lateness_max_ms, 1.0);  // The 1 ms clock step.
  }
}

// Deadlines are anchor + k * period, never summed: with a 7 ms clock step, 30 s of 50 Hz is
// still exactly 1500 ticks, each started at most 7 ms late.
TEST(SessionClock, PacingDoesNotDrift) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler, {.mode = ClockMode::kRealtime});
  RunFor(clock, scheduler, 7 * kMs, 30'000 * kMs + 1);
  EXPECT_EQ(session->Now().tick, 1500u);
  const ClockStats stats = session->Describe(false).clock_stats;
  EXPECT_EQ(stats.missed_deadlines, 0u);
  EXPECT_LE(stats.lateness_max_ms, 7.0);
  EXPECT_GT(stats.lateness_p99_ms, 0.0);
}

TEST(SessionClock, PauseStopsTimeAndResumePacesFromNow) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler, {.mode = ClockMode::kRealtime});
  RunFor(clock, scheduler, kMs, 100 * kMs);
  EXPECT_EQ(session->Now().tick, 5u);
  ASSERT_TRUE(session->SetClock({.paused = true}).ok());
  // Paused: Step works (single-stepping), the clock adds nothing.
  ASSERT_TRUE(session->Step(2, std::nullopt).ok());
  RunFor(clock, scheduler, kMs, 600 * kMs);
  EXPECT_EQ(session->Now().tick, 7u);
  ASSERT_TRUE(session->SetClock({.paused = false}).ok());
  // No catching up on the 500 ms paused: 100 ms later, exactly 5 more ticks.
  RunFor(clock, scheduler, kMs, 700 * kMs);
  EXPECT_EQ(session->Now().tick, 12u);
  EXPECT_EQ(session->Describe(false).clock_stats.missed_deadlines, 0u);
}

TEST(SessionClock, StepIsRefusedWhileThePacedClockRuns) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler, {.mode = ClockMode::kRealtime});
  EXPECT_EQ(session->Step(1, std::nullopt).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(session->SetClock({.mode = ClockMode::kLockstep}).ok());
  EXPECT_TRUE(session->Step(1, std::nullopt).ok());
  RunFor(clock, scheduler, kMs, 200 * kMs);
  EXPECT_EQ(session->Now().tick, 1u);  // Lockstep: the scheduler adds nothing.
  EXPECT_EQ(scheduler.size(), 0u);
}

// A session that falls far behind (a stalled server) skips the backlog instead of running a
// burst of ticks, and counts what it skipped as missed.
TEST(SessionClock, AStallSkipsTheBacklogAndCountsItMissed) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler, {.mode = ClockMode::kRealtime});
  RunFor(clock, scheduler, kMs, 100 * kMs);  // Ticks 1..5 on time.
  clock.Advance(1000 * kMs);                 // A 1 s stall: tick 6 was due at 120 ms.
  EXPECT_EQ(scheduler.RunDue(), 1);          // One tick, not 50.
  EXPECT_EQ(session->Now().tick, 6u);
  // 980 ms late = 49 periods skipped.
  EXPECT_EQ(session->Describe(false).clock_stats.missed_deadlines, 49u);
  RunFor(clock, scheduler, kMs, 1200 * kMs);  // Paced from the stall on: 5 more in 100 ms.
  EXPECT_EQ(session->Now().tick, 11u);
}

// A short delay is caught up: ticks run back to back until on schedule again, each counted
// late only if it started more than a period after its deadline.
TEST(SessionClock, AShortDelayIsCaughtUp) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler, {.mode = ClockMode::kRealtime});
  RunFor(clock, scheduler, kMs, 100 * kMs);
  clock.Advance(65 * kMs);  // 165 ms: ticks 6, 7, 8 (due 120, 140, 160) are due.
  EXPECT_EQ(scheduler.RunDue(), 3);
  EXPECT_EQ(session->Now().tick, 8u);
  // Tick 6 started 45 ms late and tick 7 25 ms late (more than 20 ms); tick 8 5 ms.
  EXPECT_EQ(session->Describe(false).clock_stats.missed_deadlines, 2u);
}

TEST(SessionClock, FactorZeroRunsAsFastAsTheWorkersGo) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session =
      MakeSession(&scheduler, {.mode = ClockMode::kRealtime, .real_time_factor = 0.0});
  EXPECT_EQ(scheduler.RunDue(/*max_runs=*/100), 100);  // No time passes at all.
  EXPECT_EQ(session->Now().tick, 100u);
}

TEST(SessionClock, ClosingTakesTheSessionOffTheScheduler) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler, {.mode = ClockMode::kRealtime});
  EXPECT_EQ(scheduler.size(), 1u);
  session->Close();
  EXPECT_EQ(scheduler.size(), 0u);
  RunFor(clock, scheduler, kMs, 100 * kMs);
  EXPECT_EQ(session->Now().tick, 0u);
}

TEST(SessionClock, BadFactorsAreRejectedNamingTheField) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler, {});
  // Below kMinRealTimeFactor (1e-12 used to be accepted, and its period overflowed: the clock
  // ran flat out), above kMaxRealTimeFactor, negative, not a number.
  for (const double factor : {-1.0, 1000.5, std::nan(""), 1e-12, kMinRealTimeFactor / 2,
                              std::numeric_limits<double>::denorm_min()}) {
    const auto result = session->SetClock({.real_time_factor = factor});
    EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument,
                                 HasSubstr("real_time_factor: must be 0 (as fast as possible) "
                                           "or in [1e-06, 1000], got ")))
        << factor;
  }
  EXPECT_EQ(session->Describe(false).config.clock.real_time_factor, 1.0);
  for (const double factor : {0.0, kMinRealTimeFactor, kMaxRealTimeFactor}) {
    const auto result = session->SetClock({.real_time_factor = factor});
    ASSERT_TRUE(result.ok()) << factor << " " << result.status();
    EXPECT_EQ(result->real_time_factor, factor);
  }
}

// The slowest clock accepted (the smallest factor at the lowest tick rate: a period of 1e6 s)
// stands practically still, and its first tick comes exactly when it is due.
TEST(SessionClock, TheSmallestFactorAtTheLowestRateTicksOncePerPeriod) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler,
                             {.mode = ClockMode::kRealtime, .real_time_factor = kMinRealTimeFactor},
                             sim::kMinTickRate_hz);
  RunFor(clock, scheduler, 100 * kMs, 10'000 * kMs);
  EXPECT_EQ(session->Now().tick, 0u);
  const std::int64_t period_ns = 1'000'000'000'000'000;  // 1 s / 1e-6.
  clock.Set(period_ns - kMs);
  scheduler.RunDue();
  EXPECT_EQ(session->Now().tick, 0u);
  clock.Set(period_ns + kMs);
  scheduler.RunDue();
  EXPECT_EQ(session->Now().tick, 1u);
  EXPECT_EQ(session->Describe(false).clock_stats.missed_deadlines, 0u);
  EXPECT_EQ(scheduler.size(), 1u);  // Waiting for tick 2, a period on.
}

// Deadlines saturate instead of overflowing: a session whose next tick lies past the end of
// the clock's range waits for ever (here: a clock 1 s from the largest int64), whatever the
// factor and tick rate. (Before, anchor + period wrapped to a time long past, so the session
// ran flat out; undefined behaviour that UBSan reports.)
TEST(SessionClock, DeadlinesPastTheEndOfTheClockWaitForEver) {
  constexpr std::int64_t kEnd_ns = std::numeric_limits<std::int64_t>::max();
  struct Case {
    double rate_hz;
    double factor;
  };
  // Periods of 1e6 s, 20 s and 2 s: each next tick lies past the end.
  for (const Case c :
       {Case{sim::kMinTickRate_hz, kMinRealTimeFactor}, Case{50, 1e-3}, Case{1, 0.5}}) {
    FakeClock clock;
    clock.Set(kEnd_ns - 1000 * kMs);
    Scheduler scheduler(&clock, 0);
    auto session = MakeSession(
        &scheduler, {.mode = ClockMode::kRealtime, .real_time_factor = c.factor}, c.rate_hz);
    // Bounded runs: a session running flat out fails the test instead of hanging it.
    for (int i = 0; i < 9; ++i) {
      clock.Advance(100 * kMs);
      scheduler.RunDue(/*max_runs=*/100);
    }
    EXPECT_EQ(session->Now().tick, 0u) << c.rate_hz << " Hz x " << c.factor;
    // Resuming after a pause re-anchors there too.
    ASSERT_TRUE(session->SetClock({.paused = true}).ok());
    ASSERT_TRUE(session->SetClock({.paused = false}).ok());
    clock.Advance(50 * kMs);
    scheduler.RunDue(/*max_runs=*/100);
    EXPECT_EQ(session->Now().tick, 0u) << c.rate_hz << " Hz x " << c.factor;
  }
}

// The fastest clock accepted (the largest factor at the highest tick rate: 100 ns a tick)
// keeps exact pace over many ticks: deadlines are anchor + k x period, never summed.
TEST(SessionClock, TheLargestFactorAtTheHighestRateKeepsExactPace) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler,
                             {.mode = ClockMode::kRealtime, .real_time_factor = kMaxRealTimeFactor},
                             sim::kMaxTickRate_hz);
  for (int i = 0; i < 100'000; ++i) {
    clock.Advance(100);
    scheduler.RunDue();
  }
  EXPECT_EQ(session->Now().tick, 100'000u);
  EXPECT_EQ(session->Describe(false).clock_stats.missed_deadlines, 0u);
}

// BARRIER: a tick runs as soon as every controller has answered the latest observation, or
// once the timeout has passed since it was published; never with no controller attached.
TEST(SessionClock, BarrierWaitsForEveryControllerOrTheTimeout) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler, {.mode = ClockMode::kBarrier, .barrier_timeout_s = 0.1});
  ASSERT_TRUE(session->SpawnVehicles({sim::VehicleSpec{}, sim::VehicleSpec{}}).ok());
  RunFor(clock, scheduler, kMs, 500 * kMs);
  EXPECT_EQ(session->Now().tick, 0u);  // No controller: time stands still.

  const auto [sink_a, a] = testutil::RecordingTransport::Make(session->clock());
  const auto [sink_b, b_subscriber] = testutil::RecordingTransport::Make(session->clock());
  const Subscriber* b = b_subscriber.get();
  ASSERT_TRUE(session->AttachController(1, DisconnectAction::kHoldControls, a).ok());
  ASSERT_TRUE(session->AttachController(2, DisconnectAction::kHoldControls, b_subscriber).ok());
  EXPECT_EQ(session->AttachController(2, DisconnectAction::kHoldControls, b_subscriber)
                .status()
                .code(),
            absl::StatusCode::kAlreadyExists);
  // Both answer tick 0 at once: tick 1 runs without waiting.
  ASSERT_EQ(*session->ApplyControl(a.get(), 0, {.acceleration_mps2 = 1.0}), ControlReceipt::kOnTime);
  EXPECT_EQ(scheduler.RunDue(), 0);  // B has not answered.
  ASSERT_EQ(*session->ApplyControl(b, 0, {}), ControlReceipt::kOnTime);
  EXPECT_EQ(scheduler.RunDue(), 1);
  EXPECT_EQ(session->Now().tick, 1u);
  EXPECT_EQ(sink_a->last_tick(), 1u);
  // Only A answers tick 1: tick 2 waits the 100 ms timeout, and counts it.
  ASSERT_TRUE(session->ApplyControl(a.get(), 1, {}).ok());
  RunFor(clock, scheduler, kMs, clock.NowNanos() + 99 * kMs);
  EXPECT_EQ(session->Now().tick, 1u);
  RunFor(clock, scheduler, kMs, clock.NowNanos() + 2 * kMs);
  EXPECT_EQ(session->Now().tick, 2u);
  EXPECT_EQ(session->Describe(false).clock_stats.barrier_timeouts, 1u);
  // B's late answer to tick 1 is applied and counted late; one older than it is stale.
  EXPECT_EQ(*session->ApplyControl(b, 1, {}), ControlReceipt::kLate);
  EXPECT_EQ(*session->ApplyControl(b, 0, {}), ControlReceipt::kStale);
  EXPECT_THAT(session->ApplyControl(b, 7, {}), StatusIs(absl::StatusCode::kInvalidArgument));
  // A controller leaving: the other alone drives the barrier. Its ticks are known to be cheap
  // by now (this clock never moves), so the tick its control completes runs inside the call.
  session->DetachController(b);
  ASSERT_TRUE(session->ApplyControl(a.get(), 2, {}).ok());
  EXPECT_EQ(session->Now().tick, 3u);
  EXPECT_EQ(sink_a->last_tick(), 3u);
  EXPECT_EQ(scheduler.RunDue(), 0);  // Only the next timeout is left for the workers.
}

// A controller that leaves with kBrakeToStop: its vehicle brakes to exactly zero and stays.
TEST(SessionClock, ADepartingControllerBrakesItsVehicleToAStop) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler, {});
  sim::VehicleSpec spec;
  spec.initial_speed_mps = 10.0;
  ASSERT_TRUE(session->SpawnVehicles({spec}).ok());
  const auto [sink, controller] = testutil::RecordingTransport::Make(session->clock());
  ASSERT_TRUE(session->AttachController(1, DisconnectAction::kBrakeToStop, controller).ok());
  EXPECT_EQ(session->SetControls({{.id = 1}}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  session->DetachController(controller.get());
  // 10 m/s at the default 8 m/s² braking: 1.25 s = 63 ticks at 50 Hz, then it stands.
  ASSERT_TRUE(session->Step(62, std::nullopt).ok());
  EXPECT_GT(session->CurrentFrame()->vehicles[0].speed_mps, 0.0);
  ASSERT_TRUE(session->Step(50, std::nullopt).ok());
  EXPECT_EQ(session->CurrentFrame()->vehicles[0].speed_mps, 0.0);
  const double x = session->CurrentFrame()->vehicles[0].pose.x_m;
  ASSERT_TRUE(session->Step(50, std::nullopt).ok());
  EXPECT_EQ(session->CurrentFrame()->vehicles[0].pose.x_m, x);
  EXPECT_EQ(session->CurrentFrame()->vehicles[0].speed_mps, 0.0);
}

}  // namespace
}  // namespace pitlane::session
