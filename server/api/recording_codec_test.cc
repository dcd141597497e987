// A recording's commands in protobuf: every kind of command, converted to
// pitlane.v1.RecordedCommand and back (through its bytes), replays the run exactly: the same
// state hash at every tick as the original. And what a malformed one says.
#include "server/api/recording_codec.h"

#include <memory>
#include <set>
#include <variant>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/convert.h"
#include "server/session/replay.h"
#include "server/session/session.h"
#include "server/session/testing/recording_transport.h"

namespace pitlane::api {
namespace {

using ::testing::HasSubstr;

session::SessionConfig Config() {
  session::SessionConfig config{.name = "codec",
                                .world = {.tick_rate_hz = 50, .seed = 11, .max_vehicles = 32}};
  config.world.routes.push_back(
      {.points = {{0, 0}, {60, 0}, {60, 40}, {0, 40}}, .closed = true, .lane_width_m = 4.0});
  config.route_names = {"loop"};
  return config;
}

std::shared_ptr<session::Session> MakeSession(const session::SessionConfig& config) {
  auto session = std::make_shared<session::Session>("s-codec", config,
                                                    *session::BuildWorld(config), 1000, nullptr);
  session->Start();
  return session;
}

// One vehicle of each model, sensors and drivers among them.
std::vector<sim::VehicleSpec> EveryModel(absl::Span<const std::string> route_names) {
  std::vector<v1::VehicleSpec> protos(8);
  protos[0].mutable_kinematic_bicycle();
  protos[0].mutable_range_scan()->set_beam_count(9);
  protos[1].mutable_single_track();
  protos[1].mutable_initial_pose()->set_y_m(6.0);
  protos[1].set_initial_speed_mps(7.0);
  protos[2].mutable_four_wheel();
  protos[2].mutable_initial_pose()->set_y_m(12.0);
  protos[3].mutable_front_wheel_drive();
  protos[3].mutable_initial_pose()->set_y_m(18.0);
  protos[4].mutable_all_wheel_drive();
  protos[4].mutable_initial_pose()->set_y_m(24.0);
  protos[4].mutable_nearest_objects()->set_count(2);
  protos[5].mutable_force_based();
  protos[5].mutable_initial_pose()->set_y_m(30.0);
  protos[6].mutable_physics_body();
  protos[6].mutable_initial_pose()->set_x_m(30.0);
  protos[7].mutable_kinematic_bicycle();
  protos[7].mutable_initial_pose()->set_x_m(10.0);
  protos[7].mutable_driver()->mutable_route_follower()->set_track("loop");
  std::vector<sim::VehicleSpec> specs;
  for (const v1::VehicleSpec& proto : protos) {
    absl::StatusOr<sim::VehicleSpec> spec = VehicleSpecFromProto(proto, route_names);
    EXPECT_TRUE(spec.ok()) << spec.status();
    specs.push_back(*spec);
  }
  return specs;
}

TEST(RecordingCodec, EveryCommandThroughItsBytesReplaysTheRunExactly) {
  const session::SessionConfig config = Config();
  auto original = MakeSession(config);
  auto log = std::make_shared<session::CommandLog>();
  original->AddObserver(log);
  const auto ids = original->SpawnVehicles(EveryModel(config.route_names));
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_TRUE(original->SetControls({{.id = (*ids)[0], .acceleration_mps2 = 1.5,
                                      .steering_angle_rad = 0.2},
                                     {.id = (*ids)[2], .acceleration_mps2 = -0.5,
                                      .steering_angle_rad = -0.1},
                                     {.id = (*ids)[3], .steering_angle_rad = 0.05, .throttle = 0.6},
                                     {.id = (*ids)[5], .throttle = 0.3, .brake = 0.1}})
                  .ok());
  ASSERT_TRUE(original->Step(30, std::nullopt).ok());
  const auto obstacles = original->AddObstacles(
      {{.center_x_m = 25.0, .center_y_m = 1.0, .yaw_rad = 0.4, .length_m = 2.0, .width_m = 3.0}});
  ASSERT_TRUE(obstacles.ok()) << obstacles.status();
  // (No scheduler here for a paced clock: the mode is in the second change.)
  ASSERT_TRUE(original->SetClock({.real_time_factor = 2.0,
                                  .paused = true,
                                  .barrier_timeout_s = 0.5})
                  .ok());
  ASSERT_TRUE(original->SetClock({.mode = session::ClockMode::kLockstep, .paused = false}).ok());
  auto [reader, controller] = session::testutil::RecordingTransport::Make(original->clock());
  ASSERT_TRUE(original
                  ->AttachController((*ids)[1], session::DisconnectAction::kBrakeToStop,
                                     controller)
                  .ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(original->ApplyControl(controller.get(), original->Now().tick,
                                       {.acceleration_mps2 = 2.0, .steering_angle_rad = 0.1 * i})
                    .ok());
    ASSERT_TRUE(original->Step(4, std::nullopt).ok());
  }
  original->DetachController(controller.get());
  ASSERT_TRUE(original->SetControls({{.id = (*ids)[6], .target_speed_mps = 4.0,
                                      .yaw_rate_radps = 0.3}})
                  .ok());
  ASSERT_TRUE(original->Step(25, std::nullopt).ok());
  ASSERT_TRUE(original->RemoveVehicle((*ids)[4]).ok());
  ASSERT_TRUE(original->RemoveObstacle((*obstacles)[0]).ok());
  ASSERT_TRUE(original->Step(10, std::nullopt).ok());
  ASSERT_TRUE(original->Reset().ok());
  ASSERT_TRUE(original->SpawnVehicles({EveryModel(config.route_names)[7]}).ok());
  ASSERT_TRUE(original->Step(20, std::nullopt).ok());

  // Every kind, converted to bytes and back.
  std::vector<session::RecordedCommand> decoded;
  std::set<std::size_t> kinds;
  for (const session::RecordedCommand& recorded : log->commands()) {
    kinds.insert(recorded.command.index());
    v1::RecordedCommand proto;
    CommandToProto(/*run=*/0, recorded.tick, recorded.command, config.route_names, &proto);
    v1::RecordedCommand parsed;
    ASSERT_TRUE(parsed.ParseFromString(proto.SerializeAsString()));
    absl::StatusOr<session::RecordedCommand> back = CommandFromProto(parsed, config.route_names);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->tick, recorded.tick);
    EXPECT_EQ(back->command.index(), recorded.command.index());
    decoded.push_back(*std::move(back));
  }
  EXPECT_EQ(kinds.size(), std::variant_size_v<session::Command>);

  auto copy = MakeSession(config);
  auto replayed = std::make_shared<session::CommandLog>();
  copy->AddObserver(replayed);
  ASSERT_TRUE(session::Replay(*copy, decoded, original->Now().tick).ok());
  const std::vector<session::TickHash> expected = log->hashes();
  ASSERT_GT(expected.size(), 100u);
  EXPECT_EQ(replayed->hashes(), expected);
}

TEST(RecordingCodec, AMalformedCommandNamesItsField) {
  v1::RecordedCommand none;
  EXPECT_THAT(CommandFromProto(none, {}).status().message(), HasSubstr("command: none set"));
  v1::RecordedCommand bad_spawn;
  bad_spawn.mutable_spawn()->add_vehicles()->set_length_m(-1.0);
  bad_spawn.mutable_spawn()->mutable_vehicles(0)->mutable_kinematic_bicycle();
  // Checked by the world when applied, or here: either names the field.
  const absl::StatusOr<session::RecordedCommand> spawn = CommandFromProto(bad_spawn, {});
  if (!spawn.ok()) {
    EXPECT_THAT(spawn.status().message(), HasSubstr("spawn."));
  }
  v1::RecordedCommand bad_route;
  bad_route.mutable_spawn()->add_vehicles()->mutable_driver()->mutable_route_follower()->set_track(
      "nowhere");
  EXPECT_THAT(CommandFromProto(bad_route, {"loop"}).status().message(),
              HasSubstr("spawn.vehicles[0]"));
  v1::RecordedCommand bad_enum;
  bad_enum.mutable_detach_controller()->set_on_disconnect(
      static_cast<v1::DisconnectAction>(99));
  EXPECT_THAT(CommandFromProto(bad_enum, {}).status().message(),
              HasSubstr("detach_controller.on_disconnect"));
  v1::RecordedCommand bad_clock;
  bad_clock.mutable_set_clock()->set_clock_mode(static_cast<v1::ClockMode>(42));
  EXPECT_THAT(CommandFromProto(bad_clock, {}).status().message(), HasSubstr("set_clock."));
}

}  // namespace
}  // namespace pitlane::api
