// A race in a session: its call through the door, its events to Step and to subscribers
// (filtered by vehicle), its standings in frames; and the results as CSV and JSON, read back
// by independent parsers' rules (RFC 4180 quoting; nlohmann::json).
#include "server/session/race_results.h"

#include <cmath>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/session/session.h"
#include "server/session/testing/recording_transport.h"

namespace pitlane::session {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kRadius_m = 50.0;

// A session with a 50 m circle (a race track) and two physics bodies that circle it at 10 m/s.
std::unique_ptr<Session> MakeRaceSession() {
  SessionConfig config{.name = "race", .world = {.tick_rate_hz = 50, .max_vehicles = 10}};
  sim::Route circle{.closed = true, .lane_width_m = 8.0};
  for (int k = 0; k < 72; ++k) {
    const double theta = -std::numbers::pi / 2 + 2 * std::numbers::pi * k / 72;
    circle.points.push_back({kRadius_m * std::cos(theta), kRadius_m + kRadius_m * std::sin(theta)});
  }
  config.world.routes.push_back(circle);
  config.route_names = {"circle"};
  auto world = BuildWorld(config);
  EXPECT_TRUE(world.ok()) << world.status();
  auto session = std::make_unique<Session>("s-race", config, *std::move(world), 10000);
  std::vector<sim::VehicleSpec> specs(2);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    specs[i].name = i == 0 ? "=HYPERLINK(\"x\")" : "Ada, \"the\" fast";
    specs[i].model = sim::PhysicsBodySpec{.drag_factor_per_frame = 1.0};
    specs[i].initial_speed_mps = 10.0;  // Circling from the start (so no countdown below).
    const double back = 10.0 * static_cast<double>(i);  // Car 2 10 m behind car 1.
    const double theta = -std::numbers::pi / 2 - back / kRadius_m;
    specs[i].initial_pose = {kRadius_m * std::cos(theta), kRadius_m + kRadius_m * std::sin(theta),
                             theta + std::numbers::pi / 2};
  }
  EXPECT_TRUE(session->SpawnVehicles(specs).ok());
  const double speed = 10.0;
  EXPECT_TRUE(session
                  ->SetControls({{.id = 1, .target_speed_mps = speed, .yaw_rate_radps = speed / kRadius_m},
                                 {.id = 2, .target_speed_mps = speed, .yaw_rate_radps = speed / kRadius_m}})
                  .ok());
  return session;
}

std::vector<sim::RaceEvent::Kind> RaceKinds(const FrameEvents& events) {
  std::vector<sim::RaceEvent::Kind> kinds;
  for (const TrackEvent& event : events.race_events) {
    if (const auto* race = std::get_if<sim::RaceEvent>(&event.event)) kinds.push_back(race->kind);
  }
  return kinds;
}

TEST(SessionRace, EventsReachStepsAndTheSubscribersOfTheirVehicles) {
  auto session = MakeRaceSession();
  EXPECT_THAT(session->Race().status().message(), HasSubstr("no race was called"));
  auto [only_two, subscriber] = testutil::RecordingTransport::Make(
      session->clock(), {.kind = SubscriberOptions::Kind::kLossless, .vehicle_ids = {2},
                         .queue_capacity = 1 << 20});
  ASSERT_TRUE(session->Subscribe(subscriber).ok());
  const absl::StatusOr<RaceReport> called =
      session->StartRace({.route = 0, .rules = {.laps = 1, .countdown_s = 0.0}});
  ASSERT_TRUE(called.ok()) << called.status();
  EXPECT_EQ(called->track, "circle");
  EXPECT_EQ(called->status.phase, sim::RacePhase::kCountdown);

  // Two laps' time: both finish (a lap of 2 pi 50 m at 10 m/s is 31.4 s).
  const absl::StatusOr<StepResult> step = session->Step(2000, std::nullopt);
  ASSERT_TRUE(step.ok()) << step.status();
  using K = sim::RaceEvent::Kind;
  EXPECT_THAT(RaceKinds(step->events),
              ElementsAre(K::kStart, K::kSector, K::kLap, K::kFinish, K::kSector, K::kLap,
                          K::kFinish, K::kRaceFinished));
  // The Step's frame carries the final standings.
  ASSERT_NE(step->frame->race, nullptr);
  EXPECT_EQ(step->frame->race->phase, sim::RacePhase::kFinished);
  EXPECT_EQ(RaceTrackName(*step->frame), "circle");
  // The lap timers' own events too (each car: a sector and a lap, twice at most).
  std::size_t laps = 0;
  for (const TrackEvent& event : step->events.lap_events) {
    laps += std::holds_alternative<sim::VehicleLapEvent>(event.event) ? 1 : 0;
  }
  EXPECT_GE(laps, 4u);
  // A subscriber of vehicle 2 gets its events and the race's own, not vehicle 1's.
  std::vector<K> seen;
  for (const Delivery& delivery : only_two->deliveries()) {
    for (const std::vector<TrackEvent>* list :
         {&delivery.events.lap_events, &delivery.events.race_events}) {
      for (const TrackEvent& event : *list) {
        EXPECT_THAT(event.vehicle(), ::testing::AnyOf(0u, 2u));
        if (const auto* race = std::get_if<sim::RaceEvent>(&event.event)) {
          seen.push_back(race->kind);
        }
      }
    }
  }
  EXPECT_THAT(seen, ElementsAre(K::kStart, K::kSector, K::kLap, K::kFinish, K::kRaceFinished));

  // A reset forgets it.
  ASSERT_TRUE(session->Reset().ok());
  EXPECT_EQ(session->Race().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(SessionRace, ResultsAsCsvQuoteNamesAndDisarmFormulas) {
  auto session = MakeRaceSession();
  ASSERT_TRUE(session->StartRace({.route = 0, .rules = {.laps = 1, .countdown_s = 0.0}}).ok());
  ASSERT_TRUE(session->Step(2000, std::nullopt).ok());
  const absl::StatusOr<RaceReport> race = session->Race();
  ASSERT_TRUE(race.ok());
  const std::string csv = RaceResultsCsv(*race);
  const std::vector<std::string> lines = absl::StrSplit(csv, "\r\n");
  ASSERT_EQ(lines.size(), 4u);  // Header, two cars, and the empty piece after the last CRLF.
  EXPECT_EQ(lines[0],
            "position,vehicle_id,vehicle_name,state,grid_position,laps,race_time_s,penalties_s,"
            "total_time_s,gap_s,gap_laps,gap_m,best_lap_s,last_lap_s,distance_m,jump_starts,"
            "contacts,off_tracks");
  EXPECT_EQ(lines[3], "");
  // Car 1 started 0.2 m past the line (green at the first tick): lap 1 is 2 pi r / v, less
  // that tick.
  const std::vector<std::string> first = absl::StrSplit(lines[1], ',');
  EXPECT_EQ(first[0], "1");
  EXPECT_EQ(first[1], "1");
  EXPECT_EQ(first[2], "\"'=HYPERLINK(\"\"x\"\")\"");  // Quoted, and no formula.
  EXPECT_EQ(first[3], "finished");
  EXPECT_NEAR(std::stod(first[8]), 2 * std::numbers::pi * kRadius_m / 10.0 - 0.02, 0.002);
  EXPECT_EQ(first[9], "0.000");  // The leader's gap.
  // Car 2 (10 m behind the line): its name quoted whole, its comma kept.
  EXPECT_THAT(lines[2], HasSubstr(",2,\"Ada, \"\"the\"\" fast\",finished,2,1,"));
}

TEST(SessionRace, ResultsAsJsonParseWithTheirNullsAndRules) {
  auto session = MakeRaceSession();
  ASSERT_TRUE(session->StartRace({.route = 0, .rules = {.laps = 2, .countdown_s = 1.0}}).ok());
  ASSERT_TRUE(session->Step(100, std::nullopt).ok());  // Racing, no lap yet.
  const absl::StatusOr<RaceReport> race = session->Race();
  ASSERT_TRUE(race.ok());
  const nlohmann::json doc = nlohmann::json::parse(RaceResultsJson(*race));
  EXPECT_EQ(doc["session_id"], "s-race");
  EXPECT_EQ(doc["track"], "circle");
  EXPECT_EQ(doc["phase"], "racing");
  EXPECT_EQ(doc["tick"], 100);
  EXPECT_EQ(doc["rules"]["laps"], 2);
  EXPECT_DOUBLE_EQ(doc["rules"]["countdown_s"].get<double>(), 1.0);
  ASSERT_EQ(doc["standings"].size(), 2u);
  const nlohmann::json& leader = doc["standings"][0];
  EXPECT_EQ(leader["vehicle_name"], "=HYPERLINK(\"x\")");  // JSON needs no disarming.
  EXPECT_EQ(leader["state"], "running");
  EXPECT_TRUE(leader["gap_s"].is_null());
  EXPECT_TRUE(leader["best_lap_s"].is_null());
  EXPECT_DOUBLE_EQ(leader["race_time_s"].get<double>(), 1.0);  // 2 s in, green at 1 s.
  // The race events as JSON: a start, with its tick.
  FrameEvents events;
  events.race_events.push_back({.tick = 7, .event = sim::RaceEvent{.kind = sim::RaceEvent::Kind::kPenalty,
                                                                    .vehicle = 2, .time_s = 3.25,
                                                                    .value = 2.0,
                                                                    .cause = sim::RaceEvent::Cause::kContact}});
  const nlohmann::json list = nlohmann::json::parse(RaceEventsJson(events.race_events));
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0]["kind"], "penalty");
  EXPECT_EQ(list[0]["cause"], "contact");
  EXPECT_DOUBLE_EQ(list[0]["penalty_s"].get<double>(), 2.0);
  EXPECT_EQ(list[0]["tick"], 7);
}

TEST(SessionRace, LapAndRaceEventsAreCappedAndCountedApart) {
  FrameEvents into;
  std::vector<TrackEvent> laps(kMaxEventsPerFrame + 5, TrackEvent{.event = sim::VehicleLapEvent{}});
  AppendTrackEvents(laps, into);
  const TrackEvent finish{.tick = 9, .event = sim::RaceEvent{.kind = sim::RaceEvent::Kind::kFinish}};
  AppendTrackEvents({&finish, 1}, into);
  EXPECT_EQ(into.lap_events.size(), kMaxEventsPerFrame);
  EXPECT_EQ(into.dropped_lap_events, 5u);
  ASSERT_EQ(into.race_events.size(), 1u);  // Lap events never crowd the race's out.
  EXPECT_EQ(into.dropped_race_events, 0u);
  const FrameEvents merged = MergeEvents(std::move(into), FrameEvents{.race_events = {finish}});
  EXPECT_EQ(merged.race_events.size(), 2u);
  EXPECT_EQ(merged.dropped_lap_events, 5u);
}

}  // namespace
}  // namespace pitlane::session
