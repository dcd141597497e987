#include "server/session/session.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/session/testing/recording_transport.h"
#include "server/util/status_matchers.h"

namespace pitlane::session {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Session> MakeSession(std::uint32_t max_ticks_per_step = 1000) {
  SessionConfig config{.name = "test", .world = {.tick_rate_hz = 50, .max_vehicles = 10}};
  auto world = sim::World::Create(config.world);
  EXPECT_TRUE(world.ok());
  return std::make_unique<Session>("s-test", config, *std::move(world), max_ticks_per_step);
}

using testutil::RecordingTransport;

// Subscribes a transport that records every frame the decimation takes.
std::pair<std::shared_ptr<RecordingTransport>, std::shared_ptr<Subscriber>> Record(
    Session& session, std::uint32_t every_n_ticks) {
  auto [transport, subscriber] = RecordingTransport::Make(
      session.clock(), {.kind = SubscriberOptions::Kind::kLossless,
                        .every_n_ticks = every_n_ticks,
                        .queue_capacity = 1 << 20});
  EXPECT_TRUE(session.Subscribe(subscriber).ok());
  return {transport, subscriber};
}

TEST(Session, StepValidatesTicks) {
  auto session = MakeSession(/*max_ticks_per_step=*/100);
  for (const std::uint32_t ticks : {0u, 101u, 4000000000u}) {
    const auto frame = session->Step(ticks, std::nullopt);
    EXPECT_THAT(frame, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ticks"))) << ticks;
  }
  EXPECT_EQ(session->Now().tick, 0u);
  EXPECT_EQ(session->Step(100, std::nullopt)->frame->time.tick, 100u);
}

TEST(Session, ATicksFrameIsMadeOnceUntilACommandChangesTheWorld) {
  auto session = MakeSession();
  const std::shared_ptr<const Frame> stepped = session->Step(3, std::nullopt)->frame;
  EXPECT_EQ(session->CurrentFrame(), stepped);  // The Step's answer, shared.
  ASSERT_TRUE(session->SpawnVehicles({sim::VehicleSpec{}}).ok());
  const std::shared_ptr<const Frame> spawned = session->CurrentFrame();
  EXPECT_NE(spawned, stepped);
  EXPECT_EQ(spawned->vehicles.size(), 1u);
  EXPECT_EQ(spawned->time.tick, 3u);
  ASSERT_TRUE(session->SetControls({{.id = spawned->vehicles[0].id, .acceleration_mps2 = 1.0}}).ok());
  EXPECT_NE(session->CurrentFrame(), spawned);
  ASSERT_TRUE(session->SetClock({.paused = true}).ok());  // The clock changes no frame.
  const std::shared_ptr<const Frame> held = session->CurrentFrame();
  EXPECT_EQ(session->CurrentFrame(), held);
  const std::shared_ptr<const Frame> reset = *session->Reset();
  EXPECT_NE(reset, held);
  EXPECT_EQ(reset->time.tick, 0u);
  EXPECT_TRUE(reset->vehicles.empty());
}

TEST(Session, ExpectedTickGuardsAStep) {
  auto session = MakeSession();
  ASSERT_TRUE(session->Step(5, 0).ok());
  const auto stale = session->Step(5, 0);
  EXPECT_THAT(stale, StatusIs(absl::StatusCode::kAborted, HasSubstr("expected_tick")));
  EXPECT_EQ(session->Now().tick, 5u);
  EXPECT_EQ(session->Step(1, 5)->frame->time.tick, 6u);
}

TEST(Session, StepReturnsTheStateAfterTheLastTick) {
  auto session = MakeSession();
  sim::VehicleSpec spec;
  spec.initial_speed_mps = 10;
  ASSERT_THAT(*session->SpawnVehicles({spec}), ElementsAre(1));
  const auto set = session->SetControls({{.id = 1, .acceleration_mps2 = 2.0}});
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->tick, 0u);
  const auto frame = session->Step(25, std::nullopt)->frame;
  EXPECT_EQ(frame->time.tick, 25u);
  EXPECT_EQ(frame->time.sim_time_s, 25 / 50.0);
  ASSERT_EQ(frame->vehicles.size(), 1u);
  EXPECT_THAT(frame->vehicles[0].speed_mps, DoubleNear(10 + 2.0 * 0.5, 1e-12));
  EXPECT_EQ(session->CurrentFrame()->vehicles[0].speed_mps, frame->vehicles[0].speed_mps);
}

TEST(Session, SubscribersGetTheCurrentFrameThenEveryNthTick) {
  auto session = MakeSession();
  ASSERT_TRUE(session->Step(2, std::nullopt).ok());
  const auto [every3, every3_subscriber] = Record(*session, 3);
  const auto [every1, every1_subscriber] = Record(*session, 1);
  EXPECT_EQ(session->subscriber_count(), 2u);
  // One multi-tick Step publishes every tick it passes, not just the last.
  ASSERT_TRUE(session->Step(5, std::nullopt).ok());
  ASSERT_TRUE(session->Step(3, std::nullopt).ok());
  EXPECT_THAT(every3->ticks(), ElementsAre(2, 3, 6, 9));
  EXPECT_THAT(every1->ticks(), ElementsAre(2, 3, 4, 5, 6, 7, 8, 9, 10));
  // Subscribers with a common tick share one immutable frame.
  EXPECT_EQ(every3->frame(1), every1->frame(1));

  session->Unsubscribe(every1_subscriber.get());
  ASSERT_TRUE(session->Step(3, std::nullopt).ok());
  EXPECT_EQ(every1->ticks().back(), 10u);
  EXPECT_EQ(every3->ticks().back(), 12u);
  auto bad = RecordingTransport::Make(session->clock(), {.every_n_ticks = 0});
  EXPECT_THAT(session->Subscribe(bad.second), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A subscriber that takes lean frames (a recorder) gets them between its full ones, unless
// another subscriber or a Step's answer wants the tick's whole frame; a lean frame holds the
// same motion as the whole one.
TEST(Session, LeanFramesComeBetweenFullOnesWhenNobodyElseWantsTheWhole) {
  auto session = MakeSession();
  std::vector<sim::VehicleSpec> specs(3);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    specs[i].initial_speed_mps = 7.5;
    specs[i].initial_pose.y_m = 10.0 * static_cast<double>(i);
  }
  ASSERT_TRUE(session->SpawnVehicles(specs).ok());
  ASSERT_TRUE(session->SetControls({{.id = 2, .acceleration_mps2 = 1.0, .steering_angle_rad = 0.2}}).ok());
  auto [lean, lean_subscriber] = RecordingTransport::Make(
      session->clock(), {.kind = SubscriberOptions::Kind::kLossless,
                         .full_every_n_ticks = 4,
                         .queue_capacity = 1 << 20});
  ASSERT_TRUE(session->Subscribe(lean_subscriber).ok());
  ASSERT_TRUE(session->Step(10, std::nullopt).ok());
  const auto [every5, every5_subscriber] = Record(*session, 5);
  ASSERT_TRUE(session->Step(10, std::nullopt).ok());
  EXPECT_THAT(lean->ticks(), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                         17, 18, 19, 20));
  std::vector<std::uint64_t> full_ticks;
  for (std::size_t i = 0; i < lean->ticks().size(); ++i) {
    const std::shared_ptr<const Frame> frame = lean->frame(i);
    if (!frame->lean) {
      full_ticks.push_back(frame->time.tick);
      EXPECT_TRUE(frame->motion.ids.empty());
      continue;
    }
    EXPECT_TRUE(frame->vehicles.empty());
    EXPECT_THAT(frame->motion.ids, ElementsAre(1, 2, 3));
  }
  // The first frame; multiples of 4; the Steps' last ticks (10, 20); ticks another subscriber
  // took whole (15).
  EXPECT_THAT(full_ticks, ElementsAre(0, 4, 8, 10, 12, 15, 16, 20));
  EXPECT_EQ(every5->frame(1), lean->frame(15));  // Shared.

  // The lean frame's columns are the whole frame's numbers, bit for bit: tick 19 made lean
  // here, and whole in a session run the same way.
  auto twin = MakeSession();
  ASSERT_TRUE(twin->SpawnVehicles(specs).ok());
  ASSERT_TRUE(twin->SetControls({{.id = 2, .acceleration_mps2 = 1.0, .steering_angle_rad = 0.2}}).ok());
  const std::shared_ptr<const Frame> whole = twin->Step(19, std::nullopt)->frame;
  const std::shared_ptr<const Frame> lean19 = lean->frame(19);
  ASSERT_TRUE(lean19->lean);
  ASSERT_EQ(lean19->time.tick, 19u);
  ASSERT_EQ(whole->vehicles.size(), lean19->motion.size());
  for (std::size_t i = 0; i < whole->vehicles.size(); ++i) {
    const sim::VehicleSnapshot& vehicle = whole->vehicles[i];
    EXPECT_EQ(lean19->motion.ids[i], vehicle.id);
    EXPECT_EQ(lean19->motion.x_m[i], vehicle.pose.x_m);
    EXPECT_EQ(lean19->motion.y_m[i], vehicle.pose.y_m);
    EXPECT_EQ(lean19->motion.yaw_rad[i], vehicle.pose.yaw_rad);
    EXPECT_EQ(lean19->motion.speed_mps[i], vehicle.speed_mps);
    EXPECT_EQ(lean19->motion.crashed[i] != 0, vehicle.crashed);
  }
  EXPECT_NE(lean19->motion.yaw_rad[1], 0.0);  // Vehicle 2 turned.
  EXPECT_EQ(lean19->contacts.size(), whole->contacts.size());
  EXPECT_LT(FrameBytes(*lean19), FrameBytes(*whole));
}

TEST(Session, CloseEndsSubscriptionsAndLaterCalls) {
  auto session = MakeSession();
  const auto [sink, subscriber] = Record(*session, 1);
  ASSERT_TRUE(session->Step(4, std::nullopt).ok());
  EXPECT_EQ(session->Close().tick, 4u);
  EXPECT_TRUE(sink->closed().has_value());
  EXPECT_EQ(session->subscriber_count(), 0u);
  EXPECT_THAT(session->Step(1, std::nullopt), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(session->SpawnVehicles({sim::VehicleSpec{}}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(session->SetControls({}), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(session->RemoveVehicle(1), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(session->Subscribe(subscriber), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(session->Close().tick, 4u);  // Idempotent.
}

// Two cars 8 m apart (body centres) closing at 1 m/s each: 0.04 m per tick, touching when
// 8 - 0.04 t <= 4.5, t = 87.5 -> 88; passing through (REPORT) and separating once
// 0.04 t - 8 > 4.5, t = 312.5 -> 313.
std::unique_ptr<Session> MakeHeadOnSession() {
  auto session = MakeSession();
  sim::VehicleSpec west;
  west.initial_pose = {.x_m = -4.0 - 1.35};
  west.initial_speed_mps = 1.0;
  sim::VehicleSpec east;
  east.initial_pose = {.x_m = 4.0 + 1.35, .yaw_rad = sim::kPi};
  east.initial_speed_mps = 1.0;
  EXPECT_TRUE(session->SpawnVehicles({west, east}).ok());
  return session;
}

std::vector<std::pair<std::uint64_t, sim::ContactPhase>> TicksAndPhases(const FrameEvents& e) {
  std::vector<std::pair<std::uint64_t, sim::ContactPhase>> out;
  for (const sim::ContactEvent& event : e.events) out.emplace_back(event.tick, event.phase);
  return out;
}

TEST(Session, StepReportsTransitionsOfEveryTickAndOngoingAtTheEnd) {
  using P = std::pair<std::uint64_t, sim::ContactPhase>;
  auto session = MakeHeadOnSession();
  EXPECT_THAT(TicksAndPhases(session->Step(87, std::nullopt)->events), ::testing::IsEmpty());
  EXPECT_THAT(TicksAndPhases(session->Step(1, std::nullopt)->events),
              ElementsAre(P{88, sim::ContactPhase::kBegan}));
  EXPECT_THAT(TicksAndPhases(session->Step(10, std::nullopt)->events),
              ElementsAre(P{98, sim::ContactPhase::kOngoing}));
  // 98 -> 400: ends at 313, nothing in effect at the end.
  const StepResult result = *session->Step(302, std::nullopt);
  EXPECT_THAT(TicksAndPhases(result.events), ElementsAre(P{313, sim::ContactPhase::kEnded}));
  EXPECT_EQ(result.events.events[0].contact.began_tick, 88u);
  EXPECT_EQ(result.events.dropped, 0u);
  EXPECT_TRUE(result.frame->contacts.empty());
}

// A decimated subscriber still sees every transition: those of the ticks it skipped come with
// its next frame.
TEST(Session, DecimatedSubscriberKeepsTransitionsOfSkippedTicks) {
  using P = std::pair<std::uint64_t, sim::ContactPhase>;
  auto session = MakeHeadOnSession();
  const auto [every100, subscriber] = Record(*session, 100);
  ASSERT_TRUE(session->Step(400, std::nullopt).ok());
  EXPECT_THAT(every100->ticks(), ElementsAre(0, 100, 200, 300, 400));
  EXPECT_THAT(TicksAndPhases(every100->events(1)), ElementsAre(P{88, sim::ContactPhase::kBegan},
                                                               P{100, sim::ContactPhase::kOngoing}));
  EXPECT_THAT(TicksAndPhases(every100->events(2)), ElementsAre(P{200, sim::ContactPhase::kOngoing}));
  EXPECT_THAT(TicksAndPhases(every100->events(4)), ElementsAre(P{313, sim::ContactPhase::kEnded}));
  // A late subscriber's first frame reports what is in effect.
  auto fresh = MakeHeadOnSession();
  ASSERT_TRUE(fresh->Step(88, std::nullopt).ok());
  const auto [late, late_subscriber] = Record(*fresh, 1);
  ASSERT_TRUE(fresh->Step(1, std::nullopt).ok());
  EXPECT_THAT(TicksAndPhases(late->events(0)), ElementsAre(P{88, sim::ContactPhase::kBegan}));
  EXPECT_THAT(TicksAndPhases(late->events(1)), ElementsAre(P{89, sim::ContactPhase::kOngoing}));
}

TEST(Session, EventsBeyondTheCapAreCounted) {
  FrameEvents into;
  std::vector<sim::ContactEvent> batch(kMaxEventsPerFrame - 1);
  AppendEvents(batch, into);
  AppendEvents(std::vector<sim::ContactEvent>(5), into);
  EXPECT_EQ(into.events.size(), kMaxEventsPerFrame);
  EXPECT_EQ(into.dropped, 4u);
  FinishEvents(std::vector<sim::Contact>(3), 10, into);
  EXPECT_EQ(into.events.size(), kMaxEventsPerFrame);
  EXPECT_EQ(into.dropped, 7u);
  EXPECT_EQ(into.dropped_ongoing, 3u);
}

// A reset rebuilds the world from the config and continues the old world's id counters, so a
// stale id from before the reset is NotFound instead of naming a car of the new world.
// Once a controller or its vehicle is gone, its controls are NotFound naming the field that
// attached it (vehicle_id, or session_id once the session is closed): the Drive stream passes
// these on as they are, never under its control's field path.
TEST(Session, ControlsOfAControllerThatIsGoneAreNotFoundNamingTheField) {
  auto session = MakeSession();
  sim::VehicleInput input;
  input.acceleration_mps2 = 1.0;
  const auto attach = [&](sim::VehicleId vehicle) {
    auto [transport, subscriber] = RecordingTransport::Make(session->clock());
    EXPECT_TRUE(
        session->AttachController(vehicle, DisconnectAction::kHoldControls, subscriber).ok());
    return subscriber;
  };
  const auto first = session->SpawnVehicles({sim::VehicleSpec{}});
  ASSERT_TRUE(first.ok());
  const std::shared_ptr<Subscriber> reset_away = attach((*first)[0]);
  ASSERT_TRUE(session->ApplyControl(reset_away.get(), 0, input).ok());
  ASSERT_TRUE(session->Reset().ok());
  EXPECT_THAT(session->ApplyControl(reset_away.get(), 0, input),
              StatusIs(absl::StatusCode::kNotFound,
                       "vehicle_id: the controller was detached from its vehicle"));

  const auto second = session->SpawnVehicles({sim::VehicleSpec{}});
  ASSERT_TRUE(second.ok());
  const std::shared_ptr<Subscriber> removed = attach((*second)[0]);
  ASSERT_TRUE(session->RemoveVehicle((*second)[0]).ok());
  EXPECT_THAT(session->ApplyControl(removed.get(), 0, input),
              StatusIs(absl::StatusCode::kNotFound,
                       absl::StrCat("vehicle_id: vehicle ", (*second)[0], " was removed")));

  const auto third = session->SpawnVehicles({sim::VehicleSpec{}});
  ASSERT_TRUE(third.ok());
  const std::shared_ptr<Subscriber> closed = attach((*third)[0]);
  session->Close();
  EXPECT_THAT(session->ApplyControl(closed.get(), 0, input),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("session_id: ")));
}

// One controller per vehicle; the holder that attached it (a token) may attach again, which
// ends the old stream (its connection may have died without a word) and keeps the car.
TEST(Session, OnlyTheSameHolderTakesAControlledVehicleOver) {
  auto session = MakeSession();
  const auto ids = session->SpawnVehicles({sim::VehicleSpec{}});
  ASSERT_TRUE(ids.ok());
  const sim::VehicleId car = (*ids)[0];
  auto [first_sink, first] = RecordingTransport::Make(session->clock());
  ASSERT_TRUE(
      session->AttachController(car, DisconnectAction::kHoldControls, first, "tok_a").ok());
  for (const std::string holder : {"", "tok_b"}) {
    auto [sink, other] = RecordingTransport::Make(session->clock());
    EXPECT_THAT(session->AttachController(car, DisconnectAction::kHoldControls, other, holder),
                StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("vehicle_id: ")));
    EXPECT_FALSE(first_sink->closed().has_value());
  }
  auto [second_sink, second] = RecordingTransport::Make(session->clock());
  ASSERT_TRUE(
      session->AttachController(car, DisconnectAction::kHoldControls, second, "tok_a").ok());
  ASSERT_TRUE(first_sink->closed().has_value());
  EXPECT_THAT(*first_sink->closed(),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("same token took this vehicle")));
  EXPECT_THAT(session->ApplyControl(first.get(), 0, {}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("vehicle_id: ")));
  EXPECT_TRUE(session->ApplyControl(second.get(), 0, {}).ok());

  // Without a holder (a server without tokens) nobody takes a car over.
  auto [third_sink, third] = RecordingTransport::Make(session->clock());
  session->DetachController(second.get());
  ASSERT_TRUE(session->AttachController(car, DisconnectAction::kHoldControls, third).ok());
  auto [fourth_sink, fourth] = RecordingTransport::Make(session->clock());
  EXPECT_THAT(session->AttachController(car, DisconnectAction::kHoldControls, fourth),
              StatusIs(absl::StatusCode::kAlreadyExists));
}

TEST(BuildWorld, ContinuesTheIdsOfTheWorldItReplaces) {
  const SessionConfig config{.world = {.tick_rate_hz = 50, .max_vehicles = 10},
                             .obstacles = {{.center_x_m = 50}},
                             .vehicles = {{}, {.initial_pose = {.x_m = 10}}}};
  absl::StatusOr<sim::World> before = BuildWorld(config);
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_THAT(*before->Spawn({{.initial_pose = {.x_m = 20}}}), ElementsAre(3));

  absl::StatusOr<sim::World> after = BuildWorld(config, before->next_ids());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_THAT(after->Snapshot(), ElementsAre(testing::Field(&sim::VehicleSnapshot::id, 4),
                                             testing::Field(&sim::VehicleSnapshot::id, 5)));
  EXPECT_EQ(after->obstacles().front().id, 2u);
  for (const sim::VehicleId stale : {1, 2, 3}) {
    EXPECT_THAT(after->Remove(stale), StatusIs(absl::StatusCode::kNotFound)) << stale;
  }
  EXPECT_THAT(after->RemoveObstacle(1), StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace pitlane::session
