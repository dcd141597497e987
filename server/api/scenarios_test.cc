#include "server/api/scenarios.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "server/sim/racing/track.h"
#include "server/util/status_matchers.h"

namespace pitlane::api {
namespace {

using ::testing::HasSubstr;

TEST(Scenarios, EveryShippedScenarioParses) {
  std::vector<std::string> names;
  for (const ShippedScenario& scenario : ShippedScenarios()) {
    SCOPED_TRACE(scenario.name);
    names.emplace_back(scenario.name);
    const absl::StatusOr<v1::SessionConfig> config = LoadScenario(scenario.name, "");
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->name(), scenario.name);
    EXPECT_TRUE(config->scenario().empty());
  }
  EXPECT_THAT(names, ::testing::UnorderedElementsAre("demo", "oval-race", "parking-lot",
                                                     "intersection", "highway"));
}

// Malformed text: the error names the source, the line and the column, and what is wrong.
TEST(Scenarios, ParseErrorsPointAtTheLine) {
  struct Case {
    std::string text;
    std::string expected;  // Substring of the message.
  };
  const Case cases[] = {
      {"name: \"x\"\ntick_rate_hz: 50\nvehicels { }\n", "my.textproto:3:"},
      {"name: \"x\"\ntick_rate_hz: 50\nvehicels { }\n", "vehicels"},
      {"tick_rate_hz: \"fast\"\n", "my.textproto:1:"},
      {"vehicles {\n  kinematic_bicycle { wheelbase_m: 2.7 }\n", "my.textproto:3:"},
      {"clock_mode: CLOCK_MODE_SOMETIMES\n", "CLOCK_MODE_SOMETIMES"},
  };
  for (const Case& c : cases) {
    const absl::StatusOr<v1::SessionConfig> config = ParseScenario("my.textproto", c.text);
    ASSERT_FALSE(config.ok()) << c.text;
    EXPECT_THAT(config, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.expected)))
        << c.text;
  }
}

TEST(Scenarios, UnknownOrUnsafeNamesAreRejected) {
  EXPECT_THAT(LoadScenario("no-such-place", ""),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("demo")));  // Lists what is shipped.
  for (const char* bad : {"../etc/passwd", "", "a b", "demo.textproto"}) {
    EXPECT_THAT(LoadScenario(bad, ""), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
}

// A directory's file takes precedence over a shipped one of the same name; a scenario that
// names another scenario is refused.
TEST(Scenarios, ADirectoryOverridesAndChainsAreRefused) {
  const std::string dir = ::testing::TempDir();
  {
    std::ofstream(dir + "/demo.textproto") << "name: \"my demo\"\n";
    std::ofstream(dir + "/chained.textproto") << "scenario: \"demo\"\n";
    std::ofstream(dir + "/broken.textproto") << "name: \"b\"\nbounds { min_x_m: oops }\n";
  }
  EXPECT_EQ(LoadScenario("demo", dir)->name(), "my demo");
  EXPECT_THAT(LoadScenario("chained", dir), StatusIs(absl::StatusCode::kInvalidArgument));
  const absl::Status broken = LoadScenario("broken", dir).status();
  EXPECT_THAT(std::string(broken.message()), HasSubstr("broken.textproto:2:"));
  std::remove((dir + "/demo.textproto").c_str());
  std::remove((dir + "/chained.textproto").c_str());
  std::remove((dir + "/broken.textproto").c_str());
}

}  // namespace
}  // namespace pitlane::api

namespace pitlane::api {
namespace {

// The shipped scenarios' closed tracks can be raced (server/sim/racing/track.h's rules).
TEST(Scenarios, EveryShippedClosedTrackCanBeRaced) {
  int raced = 0;
  for (const ShippedScenario& scenario : ShippedScenarios()) {
    const absl::StatusOr<v1::SessionConfig> config = LoadScenario(scenario.name, "");
    ASSERT_TRUE(config.ok()) << config.status();
    for (const v1::Track& proto : config->tracks()) {
      if (!proto.closed()) continue;
      SCOPED_TRACE(absl::StrCat(scenario.name, " ", proto.name()));
      sim::Route route{.closed = true};
      if (proto.has_lane_width_m()) route.lane_width_m = proto.lane_width_m();
      for (const v1::Point2D& point : proto.points()) route.points.push_back({point.x_m(), point.y_m()});
      const absl::StatusOr<sim::RouteParams> params = sim::MakeRouteParams(route);
      ASSERT_TRUE(params.ok()) << params.status();
      const absl::StatusOr<sim::TrackGeometry> track = sim::MakeTrackGeometry(*params, {});
      EXPECT_TRUE(track.ok()) << track.status();
      ++raced;
    }
  }
  EXPECT_GT(raced, 0);
}

}  // namespace
}  // namespace pitlane::api
