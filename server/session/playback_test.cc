// A session playing frames back: its clock moves the position, Steps, seeks and resets move
// it, and nothing changes its world.
#include "server/session/playback.h"

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/session/clock.h"
#include "server/session/scheduler.h"
#include "server/session/session_manager.h"
#include "server/session/testing/recording_transport.h"
#include "server/util/status_matchers.h"

namespace pitlane::session {
namespace {

using ::testing::HasSubstr;

constexpr std::int64_t kMs = 1'000'000;

// The value of a call that must succeed (the test stops here if it did not).
template <typename T>
T Ok(absl::StatusOr<T> result) {
  EXPECT_TRUE(result.ok()) << result.status();
  return *std::move(result);
}

// Ten frames recorded at 50 Hz every 5 ticks (every 100 ms): frame i at tick 5i, with one
// vehicle (id 7) at x = i metres. Frame `broken` (if any) cannot be read.
class Frames final : public PlaybackSource {
 public:
  explicit Frames(std::size_t broken = 99) : broken_(broken) {}
  const std::string& name() const override { return name_; }
  std::size_t frame_count() const override { return 10; }
  std::uint64_t TimeOf(std::size_t index) const override { return index * 100 * kMs; }
  absl::StatusOr<std::shared_ptr<const Frame>> FrameAt(std::size_t index) override {
    ++reads;
    if (index == broken_) return absl::InvalidArgumentError("chunk at byte 1234: bad CRC");
    auto frame = std::make_shared<Frame>();
    frame->time = {.tick = 5 * index, .sim_time_s = 0.1 * static_cast<double>(index)};
    sim::VehicleSnapshot vehicle;
    vehicle.id = 7;
    vehicle.pose.x_m = static_cast<double>(index);
    frame->vehicles.push_back(vehicle);
    return frame;
  }
  std::vector<sim::VehicleDescription> Describe(const Frame& frame) const override {
    std::vector<sim::VehicleDescription> out;
    for (const auto& vehicle : frame.vehicles) out.push_back({.id = vehicle.id});
    return out;
  }
  int reads = 0;

 private:
  const std::string name_ = "r-test";
  const std::size_t broken_;
};

struct Fixture {
  explicit Fixture(ClockMode mode, std::shared_ptr<Frames> frames = std::make_shared<Frames>(),
                   std::uint64_t start_ns = 0)
      : scheduler(&clock, 0), sessions({.max_sessions = 4}, &scheduler) {
    source = frames;
    SessionRequest request{.name = "playback", .clock = {.mode = mode}};
    request.playback = frames;
    request.playback_start_ns = start_ns;
    absl::StatusOr<std::shared_ptr<Session>> created = sessions.Create(request);
    EXPECT_TRUE(created.ok()) << created.status();
    session = *created;
  }
  double ShownX() const { return session->CurrentFrame()->vehicles.at(0).pose.x_m; }

  FakeClock clock;
  Scheduler scheduler;
  SessionManager sessions;
  std::shared_ptr<Frames> source;
  std::shared_ptr<Session> session;
};

TEST(Playback, ShowsTheFrameAtItsStartAndDescribesItself) {
  Fixture f(ClockMode::kLockstep, std::make_shared<Frames>(), /*start_ns=*/250 * kMs);
  EXPECT_EQ(f.ShownX(), 2.0);  // The last frame at or before 250 ms.
  EXPECT_EQ(f.session->Now().tick, 10u);  // The recorded tick of frame 2.
  const SessionDescription described = f.session->Describe(/*with_vehicles=*/true);
  ASSERT_TRUE(described.playback.has_value());
  EXPECT_EQ(described.playback->recording, "r-test");
  EXPECT_EQ(described.playback->position_ns, 250u * kMs);
  EXPECT_EQ(described.playback->duration_ns, 900u * kMs);
  EXPECT_EQ(described.playback->frame, 2u);
  EXPECT_EQ(described.playback->frame_count, 10u);
  EXPECT_EQ(described.vehicle_count, 1u);
  ASSERT_EQ(described.vehicles.size(), 1u);
  EXPECT_EQ(described.vehicles[0].id, 7u);
  EXPECT_TRUE(f.session->IsPlayback());
  EXPECT_EQ(f.session->StateHash(), 0u);
  // Its vehicles take no driver (no driver tokens for them).
  EXPECT_THAT(f.session->CheckVehicle(7), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(Playback, RefusesEveryChangeToItsWorld) {
  Fixture f(ClockMode::kLockstep);
  const auto read_only = StatusIs(absl::StatusCode::kFailedPrecondition,
                                  HasSubstr("plays back recording r-test"));
  EXPECT_THAT(f.session->SpawnVehicles({sim::VehicleSpec{}}), read_only);
  EXPECT_THAT(f.session->RemoveVehicle(7), read_only);
  EXPECT_THAT(f.session->AddObstacles({sim::ObstacleSpec{}}), read_only);
  EXPECT_THAT(f.session->RemoveObstacle(1), read_only);
  EXPECT_THAT(f.session->SetControls({sim::VehicleInput{.id = 7}}), read_only);
  const auto [sink, subscriber] = testutil::RecordingTransport::Make(f.session->clock());
  EXPECT_THAT(f.session->AttachController(7, DisconnectAction::kBrakeToStop, subscriber),
              read_only);
  EXPECT_THAT(f.session->SetClock({.mode = ClockMode::kBarrier}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("clock_mode")));
  EXPECT_EQ(f.ShownX(), 0.0);
  EXPECT_EQ(f.session->counts().vehicles, 1u);
}

TEST(Playback, StepsMoveItByTicksOfTheRecordedRate) {
  Fixture f(ClockMode::kLockstep);
  const auto [sink, subscriber] = testutil::RecordingTransport::Make(f.session->clock());
  ASSERT_TRUE(f.session->Subscribe(subscriber).ok());
  // 50 Hz: a tick is 20 ms, a frame every 5 ticks.
  const StepResult four = Ok(f.session->Step(4, std::nullopt));
  EXPECT_EQ(four.frame->vehicles.at(0).pose.x_m, 0.0);  // 80 ms: frame 0 still.
  const StepResult one = Ok(f.session->Step(1, std::nullopt));
  EXPECT_EQ(one.frame->vehicles.at(0).pose.x_m, 1.0);  // 100 ms.
  EXPECT_EQ(one.frame->time.tick, 5u);
  const StepResult more = Ok(f.session->Step(17, 5));  // expected_tick: recorded.
  EXPECT_EQ(more.frame->vehicles.at(0).pose.x_m, 4.0);  // 440 ms.
  EXPECT_EQ(f.session->Describe(false).playback->position_ns, 440u * kMs);
  // The subscriber saw frame 0, then each new frame once (not the ticks between them).
  std::vector<double> seen;
  for (const auto& delivery : sink->deliveries()) seen.push_back(delivery.frame->vehicles.at(0).pose.x_m);
  EXPECT_EQ(seen.front(), 0.0);
  EXPECT_EQ(seen.back(), 4.0);
  for (std::size_t i = 1; i < seen.size(); ++i) EXPECT_LT(seen[i - 1], seen[i]);
}

TEST(Playback, AStepStopsAtTheEndSayingSo) {
  Fixture f(ClockMode::kLockstep, std::make_shared<Frames>(), 800 * kMs);
  EXPECT_THAT(f.session->Step(100, std::nullopt),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("after 5 of the Step's 100")));
  EXPECT_EQ(f.ShownX(), 9.0);
  EXPECT_THAT(f.session->Step(1, std::nullopt),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("after 0 of")));
  // Reset: back to the first frame.
  const auto first = Ok(f.session->Reset());
  EXPECT_EQ(first->vehicles.at(0).pose.x_m, 0.0);
  EXPECT_EQ(f.session->Describe(false).playback->position_ns, 0u);
  ASSERT_TRUE(f.session->Step(5, std::nullopt).ok());
  EXPECT_EQ(f.ShownX(), 1.0);
}

TEST(Playback, SeekShowsTheFrameToEveryWatcher) {
  Fixture f(ClockMode::kLockstep);
  const auto [sink, subscriber] = testutil::RecordingTransport::Make(f.session->clock());
  ASSERT_TRUE(f.session->Subscribe(subscriber).ok());
  const PlaybackPosition later = Ok(f.session->Seek(730 * kMs));
  EXPECT_EQ(later.frame, 7u);
  EXPECT_EQ(later.position_ns, 730u * kMs);
  EXPECT_EQ(sink->deliveries().back().frame->vehicles.at(0).pose.x_m, 7.0);
  EXPECT_TRUE(sink->deliveries().back().first_frame);
  const PlaybackPosition back = Ok(f.session->Seek(120 * kMs));
  EXPECT_EQ(back.frame, 1u);
  EXPECT_EQ(sink->deliveries().back().frame->vehicles.at(0).pose.x_m, 1.0);
  const PlaybackPosition past = Ok(f.session->Seek(10'000 * kMs));
  EXPECT_EQ(past.frame, 9u);
  EXPECT_EQ(past.position_ns, 900u * kMs);
  EXPECT_TRUE(past.at_end());
}

TEST(Playback, SeekIsOnlyForPlaybacks) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  SessionManager sessions({.max_sessions = 4}, &scheduler);
  const auto live = Ok(sessions.Create({}));
  EXPECT_THAT(live->Seek(0), StatusIs(absl::StatusCode::kFailedPrecondition,
                                      HasSubstr("plays no recording back")));
  EXPECT_FALSE(live->IsPlayback());
}

TEST(Playback, ASessionWithVehiclesCannotPlay) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  SessionManager sessions({.max_sessions = 4}, &scheduler);
  SessionRequest request{.vehicles = {sim::VehicleSpec{}}};
  request.playback = std::make_shared<Frames>();
  EXPECT_THAT(sessions.Create(request),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vehicles")));
  EXPECT_EQ(sessions.size(), 0u);
}

TEST(Playback, RealtimePlaysAtItsFactorAndPausesAtTheEnd) {
  Fixture f(ClockMode::kRealtime);
  ASSERT_TRUE(f.session->SetClock({.real_time_factor = 2.0}).ok());
  // At 2x, a 20 ms tick every 10 ms of wall time: 300 ms of recorded time in 150 ms.
  for (int i = 0; i < 15; ++i) {
    f.clock.Advance(10 * kMs);
    f.scheduler.RunDue();
  }
  EXPECT_EQ(f.ShownX(), 3.0);
  EXPECT_FALSE(f.session->Describe(false).config.clock.paused);
  for (int i = 0; i < 100; ++i) {
    f.clock.Advance(10 * kMs);
    f.scheduler.RunDue();
  }
  EXPECT_EQ(f.ShownX(), 9.0);
  const SessionDescription ended = f.session->Describe(false);
  EXPECT_TRUE(ended.config.clock.paused);
  EXPECT_TRUE(ended.playback->at_end());
  EXPECT_EQ(f.scheduler.size(), 0u);  // Paused: not scheduled.
  // Back to the start and on again.
  ASSERT_TRUE(f.session->Seek(0).ok());
  ASSERT_TRUE(f.session->SetClock({.paused = false}).ok());
  for (int i = 0; i < 10; ++i) {
    f.clock.Advance(10 * kMs);
    f.scheduler.RunDue();
  }
  EXPECT_EQ(f.ShownX(), 2.0);
}

TEST(Playback, AFrameThatCannotBeReadStopsTheSessionWithDataLoss) {
  Fixture f(ClockMode::kRealtime, std::make_shared<Frames>(/*broken=*/3));
  const auto [sink, subscriber] = testutil::RecordingTransport::Make(f.session->clock());
  ASSERT_TRUE(f.session->Subscribe(subscriber).ok());
  for (int i = 0; i < 30; ++i) {
    f.clock.Advance(20 * kMs);
    f.scheduler.RunDue();
  }
  ASSERT_TRUE(sink->closed().has_value());
  EXPECT_THAT(*sink->closed(),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("chunk at byte 1234: bad CRC")));
  EXPECT_THAT(f.session->Step(1, std::nullopt), StatusIs(absl::StatusCode::kDataLoss));
  // A seek onto it fails and changes nothing.
  Fixture g(ClockMode::kLockstep, std::make_shared<Frames>(/*broken=*/3));
  EXPECT_THAT(g.session->Seek(300 * kMs),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("recording r-test cannot be read")));
  EXPECT_EQ(g.ShownX(), 0.0);
  EXPECT_EQ(g.session->Describe(false).playback->position_ns, 0u);
}

TEST(Playback, AResetWhoseFirstFrameCannotBeReadChangesNothing) {
  Fixture f(ClockMode::kLockstep, std::make_shared<Frames>(/*broken=*/0), 500 * kMs);
  ASSERT_TRUE(f.session->Step(10, std::nullopt).ok());  // 700 ms.
  EXPECT_THAT(f.session->Reset(), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_EQ(f.ShownX(), 7.0);
  EXPECT_EQ(f.session->Describe(false).playback->position_ns, 700u * kMs);
  ASSERT_TRUE(f.session->Step(5, std::nullopt).ok());
  EXPECT_EQ(f.ShownX(), 8.0);
}

// Frames every tick of a 60 Hz recording, timed as the recorder times them (k x 1e9 / 60,
// rounded): each Step of one tick shows the next, although the times are no whole number of
// nanoseconds apart.
class EveryTick final : public PlaybackSource {
 public:
  const std::string& name() const override { return name_; }
  std::size_t frame_count() const override { return 600; }
  std::uint64_t TimeOf(std::size_t index) const override {
    return static_cast<std::uint64_t>(std::llround(static_cast<double>(index) * 1e9 / 60.0));
  }
  absl::StatusOr<std::shared_ptr<const Frame>> FrameAt(std::size_t index) override {
    auto frame = std::make_shared<Frame>();
    frame->time = {.tick = index, .sim_time_s = static_cast<double>(index) / 60.0};
    return frame;
  }
  std::vector<sim::VehicleDescription> Describe(const Frame&) const override { return {}; }

 private:
  const std::string name_ = "r-60";
};

TEST(Playback, EveryRecordedTickIsShownOnceAtAnyTickRate) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  SessionManager sessions({.max_sessions = 4}, &scheduler);
  SessionRequest request{.tick_rate_hz = 60.0};
  request.playback = std::make_shared<EveryTick>();
  const auto session = Ok(sessions.Create(request));
  for (std::uint64_t tick = 1; tick < 600; ++tick) {
    ASSERT_EQ(Ok(session->Step(1, std::nullopt)).frame->time.tick, tick);
  }
  EXPECT_THAT(session->Step(1, std::nullopt), StatusIs(absl::StatusCode::kOutOfRange));
}

TEST(Playback, ADecimatedWatcherGetsAFrameForEachTickItTakes) {
  Fixture f(ClockMode::kLockstep);  // Frames at ticks 0, 5, 10, ...
  const auto [sink, subscriber] = testutil::RecordingTransport::Make(
      f.session->clock(), {.kind = SubscriberOptions::Kind::kLossless, .every_n_ticks = 7,
                           .queue_capacity = 100});
  ASSERT_TRUE(f.session->Subscribe(subscriber).ok());
  ASSERT_TRUE(f.session->Step(45, std::nullopt).ok());  // To tick 45, frame 9.
  // Taking ticks 7, 14, 21, 28, 35, 42: the first frame at or after each.
  EXPECT_EQ(sink->ticks(), (std::vector<std::uint64_t>{0, 10, 15, 25, 30, 35, 45}));
}

}  // namespace
}  // namespace pitlane::session
