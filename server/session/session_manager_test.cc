#include "server/session/session_manager.h"

#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/session/clock.h"
#include "server/session/scheduler.h"
#include "server/session/testing/recording_transport.h"
#include "server/util/status_matchers.h"

namespace pitlane::session {
namespace {

using ::testing::HasSubstr;

TEST(SessionManager, CreatesSessionsWithUniqueIdsAndDefaults) {
  SessionManager sessions({.max_sessions = 4, .max_vehicles_per_session = 20});
  const auto a = sessions.Create({});
  const auto b = sessions.Create({.name = "team 2", .tick_rate_hz = 100, .seed = 9,
                                  .max_vehicles = 5});
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(b.ok());
  EXPECT_NE((*a)->id(), (*b)->id());
  EXPECT_THAT((*a)->id(), ::testing::MatchesRegex("s-[a-z2-7]{26}"));  // NewSessionId's.
  const SessionDescription da = (*a)->Describe(false);
  EXPECT_EQ(da.config.world.tick_rate_hz, 50.0);
  EXPECT_EQ(da.config.world.max_vehicles, 20u);
  const SessionDescription db = (*b)->Describe(false);
  EXPECT_EQ(db.config.name, "team 2");
  EXPECT_EQ(db.config.world.tick_rate_hz, 100.0);
  EXPECT_EQ(db.config.world.seed, 9u);
  ASSERT_EQ(sessions.List().size(), 2u);
  EXPECT_EQ(sessions.List()[0], *a);  // Creation order.
}

TEST(SessionManager, RejectsBadConfigsNamingTheField) {
  SessionManager sessions({.max_sessions = 4, .max_vehicles_per_session = 20});
  struct Case {
    SessionRequest request;
    std::string field;
  };
  const Case cases[] = {
      {{.tick_rate_hz = 0.0}, "tick_rate_hz"},
      {{.tick_rate_hz = -1.0}, "tick_rate_hz"},
      {{.tick_rate_hz = std::numeric_limits<double>::quiet_NaN()}, "tick_rate_hz"},
      {{.max_vehicles = 0u}, "max_vehicles"},
      {{.max_vehicles = 21u}, "max_vehicles"},
      {{.name = std::string(200, 'n')}, "name"},
  };
  for (const Case& c : cases) {
    const auto session = sessions.Create(c.request);
    EXPECT_THAT(session, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.field)))
        << c.field;
  }
  EXPECT_EQ(sessions.size(), 0u);
}

// --min_barrier_timeout_s and --max_barrier_timeout_s: every session's barrier_timeout_s,
// at creation and in SetClock, stays in the server's range; the default moves into it.
TEST(SessionManager, BarrierTimeoutsStayInTheServersRange) {
  SessionManager sessions(
      {.clock_limits = {.min_barrier_timeout_s = 1.0, .max_barrier_timeout_s = 2.0}});
  const auto defaulted = sessions.Create({});
  ASSERT_TRUE(defaulted.ok()) << defaulted.status();
  EXPECT_EQ((*defaulted)->Describe(false).config.clock.barrier_timeout_s, 1.0);  // Not 0.5.
  const std::string range =
      "barrier_timeout_s: must be in [1, 2] seconds (this server's --min_barrier_timeout_s and "
      "--max_barrier_timeout_s), got ";
  for (const double timeout_s :
       {0.5, 0.999, 2.001, 0.001, 60.0, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_THAT(sessions.Create({.clock = {.barrier_timeout_s = timeout_s}}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(range)))
        << timeout_s;
    EXPECT_THAT((*defaulted)->SetClock({.barrier_timeout_s = timeout_s}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(range)))
        << timeout_s;
  }
  EXPECT_EQ(sessions.size(), 1u);
  EXPECT_EQ((*defaulted)->Describe(false).config.clock.barrier_timeout_s, 1.0);  // Unchanged.
  for (const double timeout_s : {1.0, 1.5, 2.0}) {
    const auto created = sessions.Create({.clock = {.barrier_timeout_s = timeout_s}});
    ASSERT_TRUE(created.ok()) << created.status();
    EXPECT_EQ((*created)->Describe(false).config.clock.barrier_timeout_s, timeout_s);
    ASSERT_TRUE(sessions.Delete((*created)->id()).ok());
    const auto set = (*defaulted)->SetClock({.barrier_timeout_s = timeout_s});
    ASSERT_TRUE(set.ok()) << set.status();
    EXPECT_EQ(set->barrier_timeout_s, timeout_s);
  }
  // The default range is the widest a session allows.
  SessionManager widest({});
  EXPECT_EQ((*widest.Create({}))->Describe(false).config.clock.barrier_timeout_s,
            kDefaultBarrierTimeout_s);
  EXPECT_TRUE(widest.Create({.clock = {.barrier_timeout_s = kMinBarrierTimeout_s}}).ok());
  EXPECT_TRUE(widest.Create({.clock = {.barrier_timeout_s = kMaxBarrierTimeout_s}}).ok());
}

// A client's id is echoed short and on one line: a 1 MiB session_id must not make a 1 MiB
// status message.
TEST(SessionManager, UnknownIdsAreEchoedCutAndEscaped) {
  SessionManager sessions({});
  const std::string huge(1 << 20, 'x');
  const std::string cut = "session_id: no session \"" + std::string(64, 'x') + "...\"";
  EXPECT_THAT(sessions.Find(huge), StatusIs(absl::StatusCode::kNotFound, cut));
  EXPECT_THAT(sessions.Delete(huge), StatusIs(absl::StatusCode::kNotFound, cut));
  EXPECT_THAT(sessions.Find("s-\"x\"\nINFO forged"),
              StatusIs(absl::StatusCode::kNotFound,
                       "session_id: no session \"s-\\\"x\\\"\\nINFO forged\""));
}

TEST(SessionManager, EnforcesTheSessionLimit) {
  SessionManager sessions({.max_sessions = 2});
  ASSERT_TRUE(sessions.Create({}).ok());
  const auto second = sessions.Create({});
  ASSERT_TRUE(second.ok());
  EXPECT_THAT(sessions.Create({}), StatusIs(absl::StatusCode::kResourceExhausted));
  ASSERT_TRUE(sessions.Delete((*second)->id()).ok());
  EXPECT_TRUE(sessions.Create({}).ok());
}

TEST(SessionManager, FindAndDelete) {
  SessionManager sessions({});
  const auto session = *sessions.Create({});
  EXPECT_EQ(*sessions.Find(session->id()), session);
  EXPECT_THAT(sessions.Find(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sessions.Find("s-999"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_TRUE(session->Step(3, std::nullopt).ok());
  EXPECT_EQ(sessions.Delete(session->id())->tick, 3u);
  EXPECT_THAT(sessions.Find(session->id()), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(sessions.Delete(session->id()), StatusIs(absl::StatusCode::kNotFound));
  // A handler still holding the session sees it closed.
  EXPECT_THAT(session->Step(1, std::nullopt), StatusIs(absl::StatusCode::kNotFound));
}

TEST(SessionManager, SessionsAreIndependent) {
  SessionManager sessions({});
  const auto a = *sessions.Create({});
  const auto b = *sessions.Create({});
  sim::VehicleSpec spec;
  spec.initial_speed_mps = 3;
  ASSERT_TRUE(a->SpawnVehicles({spec}).ok());
  ASSERT_TRUE(b->SpawnVehicles({spec}).ok());
  const std::uint64_t b_hash = b->StateHash();
  ASSERT_TRUE(a->Step(50, std::nullopt).ok());
  EXPECT_EQ(b->Now().tick, 0u);
  EXPECT_EQ(b->StateHash(), b_hash);
  EXPECT_EQ(b->CurrentFrame()->vehicles[0].pose.x_m, 0.0);
  ASSERT_TRUE(sessions.Delete(a->id()).ok());
  EXPECT_TRUE(b->Step(1, std::nullopt).ok());
}

}  // namespace
}  // namespace pitlane::session

namespace pitlane::session {
namespace {

constexpr std::int64_t kSecond = 1'000'000'000;


// The reaper deletes sessions with neither a call nor a stream for longer than the timeout;
// a call (Find) or an open stream keeps a session alive, and a kept session is never reaped.
TEST(SessionManager, ReapsIdleSessionsOnly) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  SessionManager sessions({.max_sessions = 8, .session_idle_timeout_s = 10.0}, &scheduler);
  const std::string called = (*sessions.Create({}))->id();
  const std::string idle = (*sessions.Create({}))->id();
  const auto watched = *sessions.Create({});
  const auto kept = *sessions.Create({});
  kept->Keep();
  const auto [sink, subscriber] = testutil::RecordingTransport::Make(watched->clock());
  ASSERT_TRUE(watched->Subscribe(subscriber).ok());
  for (int s = 0; s < 6; ++s) {
    clock.Advance(kSecond);
    scheduler.RunDue();
  }
  ASSERT_TRUE(sessions.Find(called).ok());  // A call at t = 6 s.
  for (int s = 0; s < 6; ++s) {
    clock.Advance(kSecond);
    scheduler.RunDue();
  }
  // t = 12 s: `idle` went 12 s without anything; `called` 6 s; `watched` has a stream.
  EXPECT_THAT(sessions.Find(idle), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(sessions.Find(called).ok());
  EXPECT_TRUE(sessions.Find(watched->id()).ok());
  EXPECT_TRUE(sessions.Find(kept->id()).ok());
  EXPECT_FALSE(sink->closed().has_value());
  EXPECT_EQ(sessions.size(), 3u);
}

TEST(SessionManager, NoTimeoutMeansNoReaping) {
  FakeClock clock;
  Scheduler scheduler(&clock, 0);
  SessionManager sessions({.max_sessions = 8}, &scheduler);
  ASSERT_TRUE(sessions.Create({}).ok());
  clock.Advance(1000 * kSecond);
  scheduler.RunDue();
  EXPECT_EQ(sessions.size(), 1u);
  EXPECT_EQ(scheduler.size(), 0u);
}

TEST(SessionManager, ShutdownClosesStreamsWithTheReasonAndRefusesNewSessions) {
  SessionManager sessions({.max_sessions = 8});
  const auto session = *sessions.Create({});
  const auto [sink, subscriber] = testutil::RecordingTransport::Make(session->clock());
  ASSERT_TRUE(session->Subscribe(subscriber).ok());
  sessions.Shutdown(absl::UnavailableError("the server is shutting down"));
  ASSERT_TRUE(sink->closed().has_value());
  EXPECT_THAT(*sink->closed(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(sessions.Create({}), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_THAT(session->SpawnVehicles({sim::VehicleSpec{}}), StatusIs(absl::StatusCode::kUnavailable));
}

}  // namespace
}  // namespace pitlane::session
