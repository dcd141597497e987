// Race control: countdown and jump starts, the flag and the finish, penalties, retirements,
// standings and their tie-breaks, against times worked out by hand for cars at constant speed.
#include "server/sim/racing/race.h"

#include <cmath>
#include <map>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pitlane::sim {
namespace {

using ::testing::HasSubstr;

constexpr double kDt = 0.02;

// The 300 m rectangle of racing_test.cc, 10 m wide.
const TrackGeometry& Rectangle() {
  static const TrackGeometry* track = new TrackGeometry(*MakeTrackGeometry(
      *MakeRouteParams({.points = {{0, 0}, {100, 0}, {100, 50}, {0, 50}}, .closed = true,
                        .lane_width_m = 10.0}),
      {}));
  return *track;
}

Pose2 At(double s) {
  std::uint32_t segment = 0;
  const RoutePoint p = RoutePointAt(Rectangle().route, s, segment);
  const RouteVertex& v = Rectangle().route.vertices[segment];
  return {.x_m = p.x_m, .y_m = p.y_m, .yaw_rad = std::atan2(v.dir_y, v.dir_x)};
}

// A car that waits on its grid slot (s) through the countdown, except for `creep_m` it
// rolls forward at once, then drives the centre line at `speed` from the start.
struct Car {
  VehicleId id;
  double grid_s;
  double speed;
  double creep_m = 0.0;
  std::optional<double> removed_at_s;  // Race time it is taken out of the session.
};

struct Outcome {
  std::vector<RaceEvent> events;
  std::vector<RaceStanding> standings;
  RacePhase phase;
};

Outcome RunRace(const RaceRules& rules, const std::vector<Car>& cars, double max_s,
            const std::map<int, std::vector<VehicleId>>& contacts_at_tick = {}) {
  std::vector<Race::Entry> entries;
  for (const Car& car : cars) entries.push_back({.vehicle = car.id, .grid_pose = At(car.grid_s)});
  absl::StatusOr<Race> created = Race::Create(Rectangle(), rules, entries, 0.0);
  EXPECT_TRUE(created.ok()) << created.status();
  Race& race = *created;
  Outcome outcome;
  for (int tick = 1; tick * kDt <= max_s && race.phase() != RacePhase::kFinished; ++tick) {
    const double now = tick * kDt;
    const double race_time = now - race.start_time_s();
    const bool started = race.phase() != RacePhase::kCountdown;
    const auto pose_of = [&](VehicleId id) -> std::optional<Pose2> {
      for (const Car& car : cars) {
        if (car.id != id) continue;
        if (car.removed_at_s.has_value() && started && race_time >= *car.removed_at_s) {
          return std::nullopt;
        }
        const double moved = started ? car.speed * std::max(0.0, race_time) : 0.0;
        return At(car.grid_s + car.creep_m + moved);
      }
      return std::nullopt;
    };
    const auto contacts = contacts_at_tick.find(tick);
    race.Update(now, pose_of,
                contacts != contacts_at_tick.end() ? contacts->second : std::vector<VehicleId>{},
                &outcome.events);
  }
  outcome.standings = race.Standings();
  outcome.phase = race.phase();
  return outcome;
}

std::vector<VehicleId> Order(const Outcome& outcome) {
  std::vector<VehicleId> order;
  for (const RaceStanding& standing : outcome.standings) order.push_back(standing.vehicle);
  return order;
}

TEST(Race, ThreeCarsAtConstantSpeedFinishWhenWorkedOutByHand) {
  RaceRules rules{.laps = 2, .countdown_s = 1.0};
  // Grid slots 10, 20 and 30 m behind the line; car 3 creeps 1 m forward before the start.
  const Outcome outcome = RunRace(rules, {{1, 290, 10.0}, {2, 280, 9.0}, {3, 270, 8.0, 1.0}}, 200);
  ASSERT_EQ(outcome.phase, RacePhase::kFinished);
  // The leader covers 10 + 600 m: the flag at 61 s. The others finish at their next line:
  // car 2 after 620 m, car 3 after 629 m, plus its jump start's 10 s.
  ASSERT_EQ(outcome.standings.size(), 3u);
  const RaceStanding& first = outcome.standings[0];
  const RaceStanding& second = outcome.standings[1];
  const RaceStanding& third = outcome.standings[2];
  EXPECT_EQ(Order(outcome), (std::vector<VehicleId>{1, 2, 3}));
  EXPECT_NEAR(first.race_time_s, 61.0, 1e-6);
  EXPECT_NEAR(second.race_time_s, 620.0 / 9.0, 1e-6);
  EXPECT_NEAR(third.race_time_s, 629.0 / 8.0, 1e-6);
  EXPECT_EQ(third.jump_starts, 1u);
  EXPECT_EQ(third.penalties_s, 10.0);
  EXPECT_NEAR(*second.gap_s, 620.0 / 9.0 - 61.0, 1e-6);
  EXPECT_NEAR(*third.gap_s, 629.0 / 8.0 + 10.0 - 61.0, 1e-6);
  for (const RaceStanding& standing : outcome.standings) {
    EXPECT_TRUE(standing.finished);
    EXPECT_EQ(standing.laps, 2u);
  }
  EXPECT_NEAR(*first.best_lap_s, 30.0, 1e-6);  // Line to line.
  EXPECT_NEAR(*first.last_lap_s, 30.0, 1e-6);
  // The events: the jump start in the countdown, the start, the finishes in order.
  std::vector<std::pair<RaceEvent::Kind, VehicleId>> kinds;
  for (const RaceEvent& event : outcome.events) {
    if (event.kind != RaceEvent::Kind::kSector && event.kind != RaceEvent::Kind::kLap) {
      kinds.emplace_back(event.kind, event.vehicle);
    }
  }
  using K = RaceEvent::Kind;
  EXPECT_THAT(kinds, ::testing::ElementsAre(
                         ::testing::Pair(K::kJumpStart, 3), ::testing::Pair(K::kPenalty, 3),
                         ::testing::Pair(K::kStart, 0), ::testing::Pair(K::kFinish, 1),
                         ::testing::Pair(K::kFinish, 2), ::testing::Pair(K::kFinish, 3),
                         ::testing::Pair(K::kRaceFinished, 0)));
}

TEST(Race, PenaltiesReorderTheFinishers) {
  RaceRules rules{.laps = 1, .countdown_s = 0.0, .penalty_contact_s = 30.0};
  // Car 2 finishes 2.2 s behind car 1 and 1.7 s before car 3, but began two contacts.
  const Outcome outcome = RunRace(rules, {{1, 299, 10.0}, {2, 298, 9.7}, {3, 297, 9.5}}, 100,
                              {{100, {2}}, {200, {2, 99}}});
  EXPECT_EQ(Order(outcome), (std::vector<VehicleId>{1, 3, 2}));
  EXPECT_EQ(outcome.standings[2].contacts, 2u);
  EXPECT_EQ(outcome.standings[2].penalties_s, 60.0);
}

TEST(Race, TiesGoToTheLowerIdAndUnfinishedCarsRankByDistance) {
  RaceRules rules{.laps = 1, .countdown_s = 0.0, .finish_timeout_s = 5.0};
  // Cars 4 and 2 side by side; car 7 and car 5 crawl, car 5 further ahead.
  const Outcome outcome =
      RunRace(rules, {{4, 290, 10.0}, {2, 290, 10.0}, {7, 280, 1.0}, {5, 285, 1.0}}, 100);
  ASSERT_EQ(outcome.phase, RacePhase::kFinished);
  EXPECT_EQ(Order(outcome), (std::vector<VehicleId>{2, 4, 5, 7}));
  EXPECT_EQ(*outcome.standings[1].gap_s, 0.0);
  // The crawlers had 5 s after the flag: retired, not classified as finishers.
  EXPECT_TRUE(outcome.standings[2].retired);
  EXPECT_FALSE(outcome.standings[2].finished);
  EXPECT_EQ(outcome.standings[3].gap_laps, 1u);
}

TEST(Race, ACarRemovedFromTheSessionRetiresAndRanksLast) {
  RaceRules rules{.laps = 1, .countdown_s = 0.5};
  Car removed{3, 295, 12.0};
  removed.removed_at_s = 10.0;
  const Outcome outcome = RunRace(rules, {{1, 290, 10.0}, {2, 285, 10.0}, removed}, 100);
  EXPECT_EQ(Order(outcome), (std::vector<VehicleId>{1, 2, 3}));
  EXPECT_TRUE(outcome.standings[2].retired);
  EXPECT_GT(outcome.standings[2].distance_m, 100.0);  // It led when it left.
}

TEST(Race, TheEarlierOfTwoCarsOnTheLineInOneTickTakesTheFlag) {
  RaceRules rules{.laps = 1, .countdown_s = 0.0};
  // Car 2 reaches the line 0.004 s before car 1, within one 0.02 s tick.
  const Outcome outcome = RunRace(rules, {{1, 290.0, 10.0}, {2, 290.04, 10.0}}, 100);
  EXPECT_EQ(Order(outcome), (std::vector<VehicleId>{2, 1}));
  EXPECT_NEAR(*outcome.standings[1].gap_s, 0.004, 1e-9);
}

TEST(Race, NoCarFinishesPastTheTimeAllowedAfterTheFlag) {
  // The leader's flag at 31 s; car 2 would complete its lap at 33 s, 2 s after: with 1.99 s
  // allowed it is not classified, with 2.01 s it is.
  const std::vector<Car> cars = {{1, 290, 10.0}, {2, 300, 10.0 * 300 / 330}};
  const Outcome late = RunRace({.laps = 1, .countdown_s = 0.0, .finish_timeout_s = 1.99}, cars, 100);
  EXPECT_TRUE(late.standings[1].retired);
  const Outcome in_time =
      RunRace({.laps = 1, .countdown_s = 0.0, .finish_timeout_s = 2.01}, cars, 100);
  EXPECT_TRUE(in_time.standings[1].finished);
  EXPECT_NEAR(in_time.standings[1].race_time_s, 33.0, 1e-6);
}

TEST(Race, OnTheLeadersLapACarStillRacingRanksAheadOfOneLappedThatFinished) {
  // Two laps of 300 m. Car 1 takes the flag at 61 s. Car 2, a lap down, finishes at its next
  // line, at 62 s, with 1 lap; car 3 completed its first lap at 33.2 s and is still on its
  // second (until 64.7 s). At 63 s car 3 is ahead of car 2.
  const std::vector<Car> cars = {{1, 290, 10.0}, {2, 280, 320.0 / 62.0}, {3, 285, 9.5}};
  const Outcome at_63 = RunRace({.laps = 2, .countdown_s = 0.0}, cars, 63.0);
  EXPECT_EQ(at_63.phase, RacePhase::kRacing);
  EXPECT_EQ(Order(at_63), (std::vector<VehicleId>{1, 3, 2}));
  EXPECT_TRUE(at_63.standings[2].finished);
  EXPECT_FALSE(at_63.standings[1].finished);
  const Outcome final = RunRace({.laps = 2, .countdown_s = 0.0}, cars, 100.0);
  EXPECT_EQ(Order(final), (std::vector<VehicleId>{1, 3, 2}));
  EXPECT_EQ(final.standings[2].gap_laps, 1u);
}

TEST(Race, EntriesAreChecked) {
  EXPECT_THAT(Race::Create(Rectangle(), {}, {}, 0.0).status().message(), HasSubstr("entries"));
  EXPECT_THAT(Race::Create(Rectangle(), {}, {{1, At(0)}, {2, At(5)}, {1, At(10)}}, 0.0)
                  .status()
                  .message(),
              HasSubstr("entries[2].vehicle_id"));
  EXPECT_THAT(Race::Create(Rectangle(), {.laps = 0}, {{1, At(0)}}, 0.0).status().message(),
              HasSubstr("race.laps"));
}

TEST(Race, RulesAreCheckedNamingTheirField) {
  EXPECT_TRUE(ValidateRaceRules({}).ok());
  const struct {
    RaceRules rules;
    const char* field;
  } bad[] = {
      {{.laps = 0}, "race.laps"},
      {{.laps = 1001}, "race.laps"},
      {{.countdown_s = -1}, "race.countdown_s"},
      {{.countdown_s = NAN}, "race.countdown_s"},
      {{.jump_start_m = 0}, "race.jump_start_m"},
      {{.penalty_contact_s = -1}, "race.penalty_contact_s"},
      {{.penalty_off_track_s = INFINITY}, "race.penalty_off_track_s"},
      {{.finish_timeout_s = 0}, "race.finish_timeout_s"},
  };
  for (const auto& c : bad) {
    const absl::Status status = ValidateRaceRules(c.rules);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(status.message(), HasSubstr(c.field));
  }
}

}  // namespace
}  // namespace pitlane::sim
