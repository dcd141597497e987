// The session core: Steps on the workers (slices, cancellation, closing), the lossless
// subscriber, and the command door's record and replay.
#include <atomic>
#include <chrono>
#include <memory>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/session/clock.h"
#include "server/session/replay.h"
#include "server/session/scheduler.h"
#include "server/session/session.h"
#include "server/session/testing/recording_transport.h"

namespace pitlane::session {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A clock that moves 1 ms each time it is read: a Step's slice (kStepSlice_ns) ends after a
// couple of ticks, deterministically.
class TickingClock final : public Clock {
 public:
  std::int64_t NowNanos() const override { return now_ns_ += 1'000'000; }

 private:
  mutable std::atomic<std::int64_t> now_ns_{0};
};

SessionConfig Config(std::uint32_t max_vehicles = 8) {
  return SessionConfig{.name = "door", .world = {.tick_rate_hz = 50, .max_vehicles = max_vehicles}};
}

std::shared_ptr<Session> MakeSession(Scheduler* scheduler, SessionConfig config = Config(),
                                     std::uint32_t max_ticks_per_step = 1000) {
  auto session = std::make_shared<Session>("s-door", config, *BuildWorld(config),
                                           max_ticks_per_step, scheduler);
  session->Start();
  return session;
}

// What a Step's callback received.
struct Outcome {
  int calls = 0;
  std::optional<absl::StatusOr<StepResult>> result;
};

std::function<void(absl::StatusOr<StepResult>)> Into(Outcome& outcome) {
  return [&outcome](absl::StatusOr<StepResult> result) {
    ++outcome.calls;
    outcome.result = std::move(result);
  };
}

TEST(Steps, RunOnTheWorkersInSlicesAndFinishOnce) {
  TickingClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler);
  Outcome outcome;
  ASSERT_TRUE(session->StartStep(100, std::nullopt, Into(outcome)).ok());
  EXPECT_EQ(session->Now().tick, 0u);  // Nothing ran on the caller's thread.
  EXPECT_EQ(scheduler.RunDue(1), 1);
  const std::uint64_t after_one_slice = session->Now().tick;
  EXPECT_GE(after_one_slice, 1u);
  EXPECT_LT(after_one_slice, 100u);  // A slice, not the whole Step.
  EXPECT_EQ(outcome.calls, 0);
  while (scheduler.RunDue() > 0) {
  }
  ASSERT_EQ(outcome.calls, 1);
  ASSERT_TRUE(outcome.result->ok());
  EXPECT_EQ((*outcome.result)->frame->time.tick, 100u);
  EXPECT_EQ(session->Now().tick, 100u);
}

TEST(Steps, AnotherSessionsStepRunsBetweenTheSlicesOfALongOne) {
  TickingClock clock;
  Scheduler scheduler(&clock, 0);
  auto long_session = MakeSession(&scheduler);
  auto short_session = MakeSession(&scheduler);
  Outcome long_outcome;
  Outcome short_outcome;
  ASSERT_TRUE(long_session->StartStep(1000, std::nullopt, Into(long_outcome)).ok());
  EXPECT_EQ(scheduler.RunDue(1), 1);  // The long Step's first slice.
  ASSERT_TRUE(short_session->StartStep(1, std::nullopt, Into(short_outcome)).ok());
  // At most one more slice of the long Step goes first (it was due before the short one).
  EXPECT_EQ(scheduler.RunDue(1), 1);
  EXPECT_EQ(scheduler.RunDue(1), 1);
  EXPECT_EQ(short_outcome.calls, 1);
  EXPECT_EQ(long_outcome.calls, 0);
  while (scheduler.RunDue() > 0) {
  }
  EXPECT_EQ(long_outcome.calls, 1);
  EXPECT_EQ(long_session->Now().tick, 1000u);
}

TEST(Steps, ACancelledStepStopsBetweenTicksAndKeepsThem) {
  TickingClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler);
  Outcome outcome;
  const auto ticket = session->StartStep(1000, std::nullopt, Into(outcome));
  ASSERT_TRUE(ticket.ok());
  EXPECT_EQ(scheduler.RunDue(1), 1);
  (*ticket)->Cancel();
  while (scheduler.RunDue() > 0) {
  }
  ASSERT_EQ(outcome.calls, 1);
  const std::uint64_t reached = session->Now().tick;
  EXPECT_GT(reached, 0u);
  EXPECT_LT(reached, 1000u);
  EXPECT_EQ(outcome.result->status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(outcome.result->status().message(),
              HasSubstr(absl::StrCat("the session is at tick ", reached)));
  // The session is consistent and usable.
  Outcome next;
  ASSERT_TRUE(session->StartStep(5, reached, Into(next)).ok());
  while (scheduler.RunDue() > 0) {
  }
  ASSERT_TRUE(next.result->ok());
  EXPECT_EQ(session->Now().tick, reached + 5);
}

// Three cars on one spot with a budget of one contact: two contacts are dropped until the
// cars part. Each tick that dropped contacts, and the tick after the last (whose events may
// show a kept contact as new), counts as over the budget.
TEST(Steps, TicksOverTheContactBudgetIncludeTheTickAfter) {
  SessionConfig config = Config();
  config.world.max_contacts = 1;
  auto session = MakeSession(nullptr, config);
  sim::VehicleSpec east, west, still;
  east.initial_speed_mps = 10.0;
  west.initial_speed_mps = 10.0;
  west.initial_pose.yaw_rad = 3.141592653589793;
  ASSERT_TRUE(session->SpawnVehicles({east, west, still}).ok());
  std::uint64_t dropping_ticks = 0;
  std::uint64_t reported = 0;
  for (int t = 0; t < 100; ++t) {
    const absl::StatusOr<StepResult> result = session->Step(1, std::nullopt);
    ASSERT_TRUE(result.ok());
    EXPECT_LE(result->frame->contacts.size(), 1u);
    if (result->frame->contacts_dropped > 0) ++dropping_ticks;
    reported += result->events.ticks_over_contact_budget;
  }
  ASSERT_GT(dropping_ticks, 0u);
  ASSERT_LT(dropping_ticks, 99u);  // They parted.
  EXPECT_EQ(reported, dropping_ticks + 1);
}

// Throws std::bad_alloc when the world reaches `tick`, as an allocation in a tick would.
class FailingObserver final : public CommandObserver {
 public:
  explicit FailingObserver(std::uint64_t tick) : tick_(tick) {}
  void OnCommand(std::uint64_t, const Command&) override {}
  void OnTick(const sim::World& world) override {
    if (world.tick() == tick_) throw std::bad_alloc();
  }

 private:
  const std::uint64_t tick_;
};

// Running out of memory in a tick stops that session alone, with a status that says so, on
// the workers and on the caller's thread alike.
TEST(Steps, AnAllocationFailureStopsOneSessionWithAClearStatus) {
  for (const bool cheap : {false, true}) {
    SCOPED_TRACE(cheap ? "on the caller's thread" : "on the workers");
    FakeClock clock;
    Scheduler scheduler(&clock, 0);
    auto failing = MakeSession(&scheduler);
    auto healthy = MakeSession(&scheduler);
    if (cheap) {  // A first Step measures the tick cost (0 on this clock): the next runs inline.
      Outcome warm_up;
      ASSERT_TRUE(failing->StartStep(1, std::nullopt, Into(warm_up)).ok());
      while (scheduler.RunDue() > 0) {
      }
    }
    failing->AddObserver(std::make_shared<FailingObserver>(3));
    Outcome outcome;
    Outcome other;
    ASSERT_TRUE(failing->StartStep(5, std::nullopt, Into(outcome)).ok());
    ASSERT_TRUE(healthy->StartStep(5, std::nullopt, Into(other)).ok());
    while (scheduler.RunDue() > 0) {
    }
    ASSERT_EQ(outcome.calls, 1);
    EXPECT_EQ(outcome.result->status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(outcome.result->status().message(), HasSubstr("ran out of memory"));
    // Every later call says why; the other session goes on.
    EXPECT_EQ(failing->SpawnVehicles({sim::VehicleSpec{}}).status().code(),
              absl::StatusCode::kResourceExhausted);
    ASSERT_EQ(other.calls, 1);
    EXPECT_TRUE(other.result->ok());
    EXPECT_EQ(healthy->Now().tick, 5u);
  }
}

// A tick that keeps its thread busy for `ms` milliseconds, as a pile of thousands of vehicles
// does.
class SlowTicks final : public CommandObserver {
 public:
  explicit SlowTicks(int ms) : ms_(ms) {}
  void OnCommand(std::uint64_t, const Command&) override {}
  void OnTick(const sim::World&) override {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms_);
    while (std::chrono::steady_clock::now() < end) {
    }
  }

 private:
  const int ms_;
};

// A session whose ticks take all a worker's time (real time factor 0, slow ticks) still lets
// every call in between two ticks: the worker that releases the lock does not take it back
// ahead of a waiting call (it used to, and a GetState or DeleteSession waited for ever).
TEST(Steps, CallsGetInBetweenBackToBackTicks) {
  for (const bool stepping : {false, true}) {
    SCOPED_TRACE(stepping ? "a long Step" : "a realtime clock at factor 0");
    SteadyClock clock;
    Scheduler scheduler(&clock, 1);
    auto session = MakeSession(&scheduler);
    session->AddObserver(std::make_shared<SlowTicks>(2));
    Outcome step;
    if (stepping) {
      ASSERT_TRUE(session->StartStep(1'000'000 / 1000, std::nullopt, Into(step)).ok());
    } else {
      ASSERT_TRUE(session->SetClock({.mode = ClockMode::kRealtime, .real_time_factor = 0.0}).ok());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // Ticking back to back.
    const std::uint64_t first = session->Now().tick;
    std::uint64_t last = first;
    for (int call = 0; call < 50; ++call) {
      const std::uint64_t now = session->Now().tick;
      // Each call waits for at most the tick under way (and the few a slow thread lets by).
      EXPECT_LE(now - last, 10u) << "call " << call;
      last = now;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));  // A client's pace.
    }
    EXPECT_GT(last, first);  // The ticks went on meanwhile.
    session->Close();
    scheduler.Stop();
  }
}

TEST(Steps, ClosingEndsRunningAndQueuedSteps) {
  TickingClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler);
  Outcome first;
  Outcome second;
  ASSERT_TRUE(session->StartStep(1000, std::nullopt, Into(first)).ok());
  ASSERT_TRUE(session->StartStep(10, std::nullopt, Into(second)).ok());
  EXPECT_EQ(scheduler.RunDue(1), 1);
  session->Close(absl::UnavailableError("the server is shutting down"));
  ASSERT_EQ(first.calls, 1);
  ASSERT_EQ(second.calls, 1);
  EXPECT_EQ(first.result->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(second.result->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(scheduler.RunDue(), 0);  // Nothing left to run.
  // Deleted (OK reason): the Step's caller hears NotFound.
  auto deleted = MakeSession(&scheduler);
  Outcome third;
  ASSERT_TRUE(deleted->StartStep(10, std::nullopt, Into(third)).ok());
  deleted->Close();
  EXPECT_EQ(third.result->status().code(), absl::StatusCode::kNotFound);
}

TEST(Steps, ACheapStepRunsOnTheCallersThreadUnlessOthersAreQueued) {
  FakeClock clock;  // Never moves: every tick costs 0 ns.
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler);
  Outcome first;
  ASSERT_TRUE(session->StartStep(2, std::nullopt, Into(first)).ok());
  EXPECT_EQ(first.calls, 0);  // No tick measured yet: the workers run it.
  while (scheduler.RunDue() > 0) {
  }
  ASSERT_EQ(first.calls, 1);
  Outcome inline_step;
  ASSERT_TRUE(session->StartStep(3, 2, Into(inline_step)).ok());
  ASSERT_EQ(inline_step.calls, 1);  // Done before StartStep returned.
  ASSERT_TRUE(inline_step.result->ok());
  EXPECT_EQ((*inline_step.result)->frame->time.tick, 5u);
  EXPECT_EQ(scheduler.RunDue(), 0);  // Nothing was left for the workers.
  // A bigger world: the last tick's cost says nothing of the next, which goes to the workers.
  ASSERT_TRUE(session->SpawnVehicles({sim::VehicleSpec{}}).ok());
  Outcome after_spawn;
  ASSERT_TRUE(session->StartStep(1, std::nullopt, Into(after_spawn)).ok());
  EXPECT_EQ(after_spawn.calls, 0);
  while (scheduler.RunDue() > 0) {
  }
  EXPECT_EQ(after_spawn.calls, 1);
  // Behind a queued Step, a cheap one waits its turn.
  TickingClock ticking;
  Scheduler slow_scheduler(&ticking, 0);
  auto slow = MakeSession(&slow_scheduler);
  Outcome queued_long, queued_short;
  ASSERT_TRUE(slow->StartStep(10, std::nullopt, Into(queued_long)).ok());
  ASSERT_TRUE(slow->StartStep(1, std::nullopt, Into(queued_short)).ok());
  EXPECT_EQ(queued_short.calls, 0);
  while (slow_scheduler.RunDue() > 0) {
  }
  EXPECT_EQ(queued_long.calls, 1);
  EXPECT_EQ(queued_short.calls, 1);
  EXPECT_EQ(slow->Now().tick, 11u);
}

TEST(Steps, ChecksWhatItCanAtOnceAndTheExpectedTickWhenItStarts) {
  TickingClock clock;  // Every tick costs 1 ms: the Steps queue on the workers.
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler);
  Outcome unused;
  EXPECT_EQ(session->StartStep(0, std::nullopt, Into(unused)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session->StartStep(1001, std::nullopt, Into(unused)).status().code(),
            absl::StatusCode::kInvalidArgument);
  Outcome first;
  Outcome stale;
  ASSERT_TRUE(session->StartStep(3, 0, Into(first)).ok());
  ASSERT_TRUE(session->StartStep(3, 0, Into(stale)).ok());  // Still at tick 0 when queued.
  while (scheduler.RunDue() > 0) {
  }
  EXPECT_TRUE(first.result->ok());
  EXPECT_EQ(stale.result->status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(session->Now().tick, 3u);
  for (std::size_t i = 0; i < kMaxQueuedSteps; ++i) {
    ASSERT_TRUE(session->StartStep(1, std::nullopt, Into(unused)).ok());
  }
  EXPECT_EQ(session->StartStep(1, std::nullopt, Into(unused)).status().code(),
            absl::StatusCode::kResourceExhausted);
  ASSERT_TRUE(session->SetClock({.mode = ClockMode::kRealtime}).ok());
  while (scheduler.RunDue() > 0) {
  }
  EXPECT_EQ(session->StartStep(1, std::nullopt, Into(unused)).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A lossless subscriber whose reader stalls loses frames when its queue is full, and its next
// delivery says exactly which.
TEST(Subscribers, LosslessQueueReportsExactlyWhatItLost) {
  auto session = MakeSession(nullptr);
  auto [reader, subscriber] = testutil::RecordingTransport::Make(
      session->clock(), {.kind = SubscriberOptions::Kind::kLossless, .queue_capacity = 2});
  reader->Hold();
  ASSERT_TRUE(session->Subscribe(subscriber).ok());
  ASSERT_TRUE(session->Step(5, std::nullopt).ok());  // Ticks 0 and 1 queued; 2 to 5 lost.
  reader->Release();
  ASSERT_TRUE(session->Step(1, std::nullopt).ok());
  const std::vector<Delivery> deliveries = reader->deliveries();
  EXPECT_THAT(reader->ticks(), ElementsAre(0, 1, 6));
  EXPECT_EQ(deliveries[1].lost_frames, 0u);
  EXPECT_EQ(deliveries[2].lost_frames, 4u);
  EXPECT_EQ(deliveries[2].lost_first_tick, 2u);
  EXPECT_EQ(deliveries[2].lost_last_tick, 5u);
  EXPECT_FALSE(subscriber->TakeLost().has_value());  // Nothing lost since.

  // Frames lost after the last one queued, when no more come: TakeLost says which.
  reader->Hold();
  ASSERT_TRUE(session->Step(4, std::nullopt).ok());  // 7 and 8 queued, 9 and 10 lost.
  session->Unsubscribe(subscriber.get());
  while (subscriber->Take().has_value()) {
  }
  const std::optional<Delivery> lost = subscriber->TakeLost();
  ASSERT_TRUE(lost.has_value());
  EXPECT_EQ(lost->frame, nullptr);
  EXPECT_EQ(lost->lost_frames, 2u);
  EXPECT_EQ(lost->lost_first_tick, 9u);
  EXPECT_EQ(lost->lost_last_tick, 10u);
  EXPECT_FALSE(subscriber->TakeLost().has_value());
}

// A lossless queue bounded in bytes: it holds what fits (at least one frame), and says what
// it lost as the count-bounded queue does.
TEST(Subscribers, ALosslessQueueBoundedInBytesLosesWhatDoesNotFit) {
  auto session = MakeSession(nullptr);
  ASSERT_TRUE(session->SpawnVehicles({sim::VehicleSpec{}, sim::VehicleSpec{}}).ok());
  const std::size_t frame_bytes = FrameBytes(*session->CurrentFrame());
  EXPECT_GT(frame_bytes, 2 * sizeof(sim::VehicleSnapshot));
  auto [reader, subscriber] = testutil::RecordingTransport::Make(
      session->clock(), {.kind = SubscriberOptions::Kind::kLossless,
                         .queue_capacity = 100,
                         .queue_bytes = frame_bytes * 5 / 2});
  reader->Hold();
  ASSERT_TRUE(session->Subscribe(subscriber).ok());
  ASSERT_TRUE(session->Step(5, std::nullopt).ok());  // Ticks 0 and 1 fit; 2 to 5 lost.
  reader->Release();
  ASSERT_TRUE(session->Step(1, std::nullopt).ok());
  EXPECT_THAT(reader->ticks(), ElementsAre(0, 1, 6));
  EXPECT_EQ(reader->deliveries()[2].lost_frames, 4u);

  // A frame bigger than the whole budget still goes into an empty queue.
  auto [big_reader, big] = testutil::RecordingTransport::Make(
      session->clock(),
      {.kind = SubscriberOptions::Kind::kLossless, .queue_capacity = 100, .queue_bytes = 1});
  big_reader->Hold();
  ASSERT_TRUE(session->Subscribe(big).ok());
  ASSERT_TRUE(session->Step(2, std::nullopt).ok());
  big_reader->Release();
  ASSERT_TRUE(session->Step(1, std::nullopt).ok());
  EXPECT_THAT(big_reader->ticks(), ElementsAre(6, 9));
  EXPECT_EQ(big_reader->deliveries()[1].lost_frames, 2u);
}

// A kLatest subscriber holds one frame: the newest. Frames replaced while its reader held a
// delivery are counted as skipped.
TEST(Subscribers, LatestKeepsTheNewestAndCountsWhatTheBusyReaderMissed) {
  auto session = MakeSession(nullptr);
  struct Manual final : SubscriberTransport {
    void OnReady() override { ++ready; }
    void OnClosed(const absl::Status&) override {}
    int ready = 0;
  };
  auto transport = std::make_shared<Manual>();
  auto subscriber = std::make_shared<Subscriber>(SubscriberOptions{}, transport, &session->clock());
  ASSERT_TRUE(session->Subscribe(subscriber).ok());
  EXPECT_EQ(transport->ready, 1);
  ASSERT_EQ(subscriber->Take()->frame->time.tick, 0u);  // Busy with tick 0 now.
  ASSERT_TRUE(session->Step(3, std::nullopt).ok());
  EXPECT_EQ(transport->ready, 1);  // Busy: not told again; it takes when its write is done.
  const std::optional<Delivery> newest = subscriber->Take();
  ASSERT_TRUE(newest.has_value());
  EXPECT_EQ(newest->frame->time.tick, 3u);
  EXPECT_EQ(newest->skipped_frames, 2u);  // Ticks 1 and 2.
  EXPECT_FALSE(subscriber->Take().has_value());
}

// The door: a run's commands, recorded through the observer, applied again to a fresh session
// of the same config, give the same state hash at every tick.
TEST(CommandDoor, ReplayingTheRecordedCommandsGivesTheSameHashAtEveryTick) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  SessionConfig config = Config();
  config.world.seed = 7;
  config.world.collision_policy = sim::CollisionPolicy::kStop;
  auto original = MakeSession(&scheduler, config);
  auto log = std::make_shared<CommandLog>();
  original->AddObserver(log);

  sim::VehicleSpec fast;
  fast.initial_speed_mps = 8.0;
  sim::VehicleSpec crossing = fast;
  crossing.initial_pose = {.x_m = 20.0, .y_m = -10.0, .yaw_rad = 1.5707963267948966};
  const auto ids = original->SpawnVehicles({fast, crossing, sim::VehicleSpec{}});
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(original->SetControls({{.id = (*ids)[0], .acceleration_mps2 = 1.0,
                                      .steering_angle_rad = 0.05}}).ok());
  ASSERT_TRUE(original->Step(20, std::nullopt).ok());
  const auto obstacles = original->AddObstacles({{.center_x_m = 40.0, .center_y_m = 3.0}});
  ASSERT_TRUE(obstacles.ok());
  // Paced ticks between two clock changes.
  ASSERT_TRUE(original->SetClock({.mode = ClockMode::kRealtime}).ok());
  for (int i = 0; i < 15; ++i) {
    clock.Advance(20'000'000);
    scheduler.RunDue();
  }
  ASSERT_TRUE(original->SetClock({.mode = ClockMode::kLockstep}).ok());
  // A controller drives the third car, then leaves it braking.
  auto [reader, controller] = testutil::RecordingTransport::Make(original->clock());
  ASSERT_TRUE(original->AttachController((*ids)[2], DisconnectAction::kBrakeToStop, controller).ok());
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(original->ApplyControl(controller.get(), original->Now().tick,
                                       {.acceleration_mps2 = 2.0, .steering_angle_rad = -0.1})
                    .ok());
    ASSERT_TRUE(original->Step(3, std::nullopt).ok());
  }
  original->DetachController(controller.get());
  ASSERT_TRUE(original->Step(40, std::nullopt).ok());
  ASSERT_TRUE(original->RemoveVehicle((*ids)[1]).ok());
  ASSERT_TRUE(original->RemoveObstacle((*obstacles)[0]).ok());
  ASSERT_TRUE(original->Step(5, std::nullopt).ok());
  ASSERT_TRUE(original->Reset().ok());
  ASSERT_TRUE(original->SpawnVehicles({fast}).ok());
  ASSERT_TRUE(original->Step(30, std::nullopt).ok());

  const std::vector<RecordedCommand> commands = log->commands();
  const std::vector<TickHash> expected = log->hashes();
  ASSERT_GT(expected.size(), 100u);

  const auto replay = [&](std::vector<RecordedCommand> recorded) {
    auto copy = MakeSession(nullptr, config);
    auto replayed = std::make_shared<CommandLog>();
    copy->AddObserver(replayed);
    EXPECT_TRUE(Replay(*copy, recorded, original->Now().tick).ok());
    return replayed->hashes();
  };
  EXPECT_EQ(replay(commands), expected);

  // One control changed: the run diverges at the tick after it, and not before.
  std::vector<RecordedCommand> edited = commands;
  std::uint64_t edited_tick = 0;
  for (RecordedCommand& recorded : edited) {
    if (auto* controls = std::get_if<SetControlsCommand>(&recorded.command)) {
      controls->inputs[0].acceleration_mps2 += 0.5;
      edited_tick = recorded.tick;
      break;
    }
  }
  const std::vector<TickHash> diverged = replay(edited);
  ASSERT_EQ(diverged.size(), expected.size());
  std::size_t first_difference = 0;
  while (diverged[first_difference] == expected[first_difference]) ++first_difference;
  EXPECT_EQ(expected[first_difference].tick, edited_tick + 1);
}

// The review's cases: each failed before its fix.

TEST(Steps, AFinishedStepDropsItsCallback) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler);
  auto owner = std::make_shared<int>(0);  // Stands for what a callback owns (its gRPC call).
  const auto ticket = session->StartStep(
      3, std::nullopt, [owner](absl::StatusOr<StepResult>) { ++*owner; });
  ASSERT_TRUE(ticket.ok());
  while (scheduler.RunDue() > 0) {
  }
  EXPECT_EQ(*owner, 1);
  EXPECT_EQ(owner.use_count(), 1);  // The ticket no longer holds it.
}

TEST(Steps, AResetEndsTheStepsOfTheWorldItReplaces) {
  TickingClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler);
  Outcome running;
  Outcome queued;
  ASSERT_TRUE(session->StartStep(100, 0, Into(running)).ok());
  ASSERT_TRUE(session->StartStep(5, std::nullopt, Into(queued)).ok());
  EXPECT_EQ(scheduler.RunDue(1), 1);  // A slice of the first.
  ASSERT_TRUE(session->Reset().ok());
  ASSERT_EQ(running.calls, 1);
  ASSERT_EQ(queued.calls, 1);
  EXPECT_EQ(running.result->status().code(), absl::StatusCode::kAborted);
  EXPECT_THAT(running.result->status().message(), HasSubstr("reset"));
  EXPECT_EQ(queued.result->status().code(), absl::StatusCode::kAborted);
  while (scheduler.RunDue() > 0) {
  }
  EXPECT_EQ(session->Now().tick, 0u);
}

TEST(Subscribers, ALosslessQueueKeepsItsFramesAcrossAReset) {
  auto session = MakeSession(nullptr);
  auto [reader, subscriber] = testutil::RecordingTransport::Make(
      session->clock(), {.kind = SubscriberOptions::Kind::kLossless, .queue_capacity = 16});
  reader->Hold();
  ASSERT_TRUE(session->Subscribe(subscriber).ok());
  ASSERT_TRUE(session->Step(5, std::nullopt).ok());
  ASSERT_TRUE(session->Reset().ok());
  reader->Release();
  EXPECT_THAT(reader->ticks(), ElementsAre(0, 1, 2, 3, 4, 5, 0));
  const std::vector<Delivery> deliveries = reader->deliveries();
  EXPECT_TRUE(deliveries.front().first_frame);
  EXPECT_FALSE(deliveries[1].first_frame);
  EXPECT_TRUE(deliveries.back().first_frame);
  EXPECT_EQ(deliveries.back().lost_frames, 0u);
}

TEST(Steps, QueuedStepsAreNotDelayedByALaterScheduleOfTheClock) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  SessionConfig config = Config();
  config.clock = {.mode = ClockMode::kBarrier, .paused = true, .barrier_timeout_s = 60.0};
  auto session = MakeSession(&scheduler, config);
  ASSERT_TRUE(session->SpawnVehicles({sim::VehicleSpec{}}).ok());
  Outcome outcome;
  ASSERT_TRUE(session->StartStep(3, std::nullopt, Into(outcome)).ok());
  ASSERT_TRUE(session->SetClock({.paused = false}).ok());
  auto [reader, controller] = testutil::RecordingTransport::Make(session->clock());
  ASSERT_TRUE(session->AttachController(1, DisconnectAction::kHoldControls, controller).ok());
  scheduler.RunDue();  // Now, not in 60 s.
  ASSERT_EQ(outcome.calls, 1);
  EXPECT_TRUE(outcome.result->ok());
}

TEST(Steps, ARateLimitedSubscriberDoesNotCutAStepIntoOneTickSlices) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  auto session = MakeSession(&scheduler);
  auto [reader, subscriber] =
      testutil::RecordingTransport::Make(session->clock(), {.max_rate_hz = 10.0});
  ASSERT_TRUE(session->Subscribe(subscriber).ok());  // Takes tick 0: the next slot is later.
  Outcome outcome;
  ASSERT_TRUE(session->StartStep(1000, std::nullopt, Into(outcome)).ok());
  EXPECT_EQ(scheduler.RunDue(), 1);  // The fake clock stands still: one slice does it all.
  EXPECT_EQ(outcome.calls, 1);
  EXPECT_THAT(reader->ticks(), ElementsAre(0));
  clock.Advance(200'000'000);  // Its next slot: the next offer tells it.
  ASSERT_TRUE(session->Step(1, std::nullopt).ok());
  EXPECT_THAT(reader->ticks(), ElementsAre(0, 1001));
}

TEST(Steps, ABarrierClockResumedWhenEveryControllerAnsweredTicksAtOnce) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  SessionConfig config = Config();
  config.clock = {.mode = ClockMode::kBarrier, .paused = true, .barrier_timeout_s = 0.5};
  auto session = MakeSession(&scheduler, config);
  ASSERT_TRUE(session->SpawnVehicles({sim::VehicleSpec{}}).ok());
  auto [reader, controller] = testutil::RecordingTransport::Make(session->clock());
  ASSERT_TRUE(session->AttachController(1, DisconnectAction::kHoldControls, controller).ok());
  ASSERT_TRUE(session->ApplyControl(controller.get(), 0, {}).ok());
  ASSERT_TRUE(session->SetClock({.paused = false}).ok());
  clock.Advance(1'000'000);  // 1 ms, far less than the timeout.
  scheduler.RunDue(1);
  EXPECT_EQ(session->Now().tick, 1u);
}

TEST(CommandDoor, AReplayStepsWithinTheSessionsLimit) {
  auto original = MakeSession(nullptr);
  auto log = std::make_shared<CommandLog>();
  original->AddObserver(log);
  ASSERT_TRUE(original->SpawnVehicles({sim::VehicleSpec{}}).ok());
  ASSERT_TRUE(original->Step(20, std::nullopt).ok());
  ASSERT_TRUE(original->SetControls({{.id = 1, .acceleration_mps2 = 1.0}}).ok());
  ASSERT_TRUE(original->Step(20, std::nullopt).ok());
  auto copy = MakeSession(nullptr, Config(), /*max_ticks_per_step=*/8);
  ASSERT_TRUE(Replay(*copy, log->commands(), 40).ok());
  EXPECT_EQ(copy->StateHash(), original->StateHash());
}

TEST(Subscribers, ATinyRateLimitHoldsFramesBackWithoutOverflowing) {
  auto session = MakeSession(nullptr);
  auto [reader, subscriber] =
      testutil::RecordingTransport::Make(session->clock(), {.max_rate_hz = 1e-300});
  ASSERT_TRUE(session->Subscribe(subscriber).ok());
  ASSERT_TRUE(session->Step(3, std::nullopt).ok());
  EXPECT_THAT(reader->ticks(), ElementsAre(0));  // The next slot is a year away.
}

// Where an observer starts: the tick, the run (resets so far, also in every frame), the hash,
// and whether the config alone rebuilds the world from there (a replay can start there).
TEST(CommandDoor, AnObserverIsToldWhereItStartsAndWhetherTheConfigRebuildsIt) {
  struct Starts final : CommandObserver {
    void OnAttach(const ObservedStart& start) override { seen.push_back(start); }
    void OnCommand(std::uint64_t, const Command&) override {}
    void OnTick(const sim::World&) override {}
    std::vector<ObservedStart> seen;
  };
  SessionConfig config = Config();
  config.vehicles.push_back(sim::VehicleSpec{});  // Built by the config: still pristine.
  auto session = MakeSession(nullptr, config);
  const auto start = [&] {
    auto observer = std::make_shared<Starts>();
    session->AddObserver(observer);
    session->RemoveObserver(observer.get());
    return observer->seen.at(0);
  };
  const ObservedStart fresh = start();
  EXPECT_EQ(fresh.tick, 0u);
  EXPECT_EQ(fresh.run, 0u);
  EXPECT_EQ(fresh.state_hash, session->StateHash());
  EXPECT_TRUE(fresh.pristine);
  // A clock change leaves the world as built.
  ASSERT_TRUE(session->SetClock({.real_time_factor = 2.0}).ok());
  EXPECT_TRUE(start().pristine);
  // Controls at tick 0 change what the next tick does: no longer what the config builds.
  ASSERT_TRUE(session->SetControls({{.id = 1, .acceleration_mps2 = 1.0}}).ok());
  EXPECT_FALSE(start().pristine);
  // A reset gives it back, in a new run; a tick takes it away again.
  ASSERT_TRUE(session->Reset().ok());
  const ObservedStart reset = start();
  EXPECT_TRUE(reset.pristine);
  EXPECT_EQ(reset.run, 1u);
  EXPECT_EQ(reset.first_ids.next_vehicle_id, 2u);  // The ids go on from the first world's.
  EXPECT_EQ(fresh.first_ids.next_vehicle_id, 1u);
  EXPECT_EQ(session->CurrentFrame()->run, 1u);
  ASSERT_TRUE(session->Step(2, std::nullopt).ok());
  const ObservedStart stepped = start();
  EXPECT_FALSE(stepped.pristine);
  EXPECT_EQ(stepped.tick, 2u);
  EXPECT_EQ(stepped.state_hash, session->StateHash());
}

}  // namespace
}  // namespace pitlane::session
