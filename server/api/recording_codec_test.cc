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
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/dynamic_message.h"
#include "gtest/gtest.h"
#include "server/api/convert.h"
#include "server/api/frame_encoder.h"
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
  // A race of the cars timed on the loop (the route follower), placed on a grid slot.
  ASSERT_TRUE(original
                  ->StartRace({.route = 0,
                               .rules = {.laps = 2, .countdown_s = 0.1},
                               .grid = {{2.0, 0.5, 0.0}}})
                  .ok());
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
  // The race too.
  const absl::StatusOr<session::RaceReport> race = original->Race();
  const absl::StatusOr<session::RaceReport> replayed_race = copy->Race();
  ASSERT_TRUE(race.ok() && replayed_race.ok());
  EXPECT_EQ(replayed_race->status.rules.laps, 2u);
  EXPECT_EQ(replayed_race->status.phase, sim::RacePhase::kRacing);
  ASSERT_EQ(replayed_race->status.standings.size(), 1u);
  EXPECT_GT(race->status.standings[0].distance_m, 0.0);
  EXPECT_EQ(replayed_race->status.standings[0].distance_m, race->status.standings[0].distance_m);
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
  v1::RecordedCommand bad_race;
  bad_race.mutable_start_race()->mutable_rules()->set_laps(0);
  EXPECT_THAT(CommandFromProto(bad_race, {}).status().message(),
              HasSubstr("start_race.rules.laps: must be in [1, 1000]"));
}

}  // namespace
}  // namespace pitlane::api

namespace pitlane::api {
namespace {

TEST(RecordedStates, ColumnsInIdOrderToTheNearestStep) {
  session::Frame frame{.time = {.tick = 40, .sim_time_s = 0.8}, .run = 2};
  const struct {
    sim::VehicleId id;
    double x_m, y_m, yaw_rad, speed_mps;
    bool crashed;
  } vehicles[] = {
      {3, 1.2344, -1.2346, 3.14159265, -0.0005, false},  // Halves round away from zero.
      {4, -1000.0005, 0.0004999, -3.14159265, 42.0, true},
      {90, 1e13, -1e13, 1e-9, 1e300, false},  // Beyond 2^53 steps: held there.
  };
  for (const auto& v : vehicles) {
    sim::VehicleSnapshot snapshot;
    snapshot.id = v.id;
    snapshot.pose = {.x_m = v.x_m, .y_m = v.y_m, .yaw_rad = v.yaw_rad};
    snapshot.speed_mps = v.speed_mps;
    snapshot.crashed = v.crashed;
    frame.vehicles.push_back(snapshot);
  }
  v1::RecordedStates states;
  FrameToRecordedStates(frame, &states);
  EXPECT_EQ(states.run(), 2u);
  EXPECT_EQ(states.tick(), 40u);
  EXPECT_EQ(states.sim_time_s(), 0.8);
  EXPECT_THAT(states.vehicle_id_steps(), ::testing::ElementsAre(3, 1, 86));
  constexpr std::int64_t kMax = std::int64_t{1} << 53;
  EXPECT_THAT(states.x_mm(), ::testing::ElementsAre(1234, -1000001, kMax));
  EXPECT_THAT(states.y_mm(), ::testing::ElementsAre(-1235, 0, -kMax));
  EXPECT_THAT(states.yaw_100urad(), ::testing::ElementsAre(31416, -31416, 0));
  EXPECT_THAT(states.speed_mmps(), ::testing::ElementsAre(-1, 42000, kMax));
  EXPECT_THAT(states.crashed_vehicle_ids(), ::testing::ElementsAre(4));

  // A lean frame of the same numbers (a recorder's between its full ones): the same message.
  session::Frame lean{.time = frame.time, .run = frame.run, .lean = true};
  for (const auto& v : vehicles) {
    lean.motion.ids.push_back(v.id);
    lean.motion.x_m.push_back(v.x_m);
    lean.motion.y_m.push_back(v.y_m);
    lean.motion.yaw_rad.push_back(v.yaw_rad);
    lean.motion.speed_mps.push_back(v.speed_mps);
    lean.motion.crashed.push_back(v.crashed ? 1 : 0);
  }
  v1::RecordedStates from_lean;
  FrameToRecordedStates(lean, &from_lean);
  EXPECT_EQ(from_lean.SerializeAsString(), states.SerializeAsString());
}

// Keeps the topics written, in order.
class TopicsOutput final : public record::RecordingOutput {
 public:
  std::uint16_t Channel(const record::ChannelSpec& spec) override {
    for (std::size_t i = 0; i < topics_.size(); ++i) {
      if (topics_[i] == spec.topic) return static_cast<std::uint16_t>(i);
    }
    topics_.push_back(spec.topic);
    return static_cast<std::uint16_t>(topics_.size() - 1);
  }
  void Write(std::uint16_t channel, std::uint64_t /*time_ns*/, absl::string_view data) override {
    written.emplace_back(topics_[channel], std::string(data));
  }
  std::vector<std::pair<std::string, std::string>> written;

 private:
  std::vector<std::string> topics_;
};

TEST(ProtoRecordingEncoder, FoxgloveChannelsAtTheirOwnTicksWithTheEventsBetween) {
  std::vector<std::pair<std::uint64_t, std::size_t>> shown;  // (tick, events) per call.
  std::vector<bool> shown_first;
  ProtoRecordingEncoder encoder([&](const session::Delivery& delivery, std::uint64_t,
                                    record::RecordingOutput&) {
    shown.emplace_back(delivery.frame->time.tick, delivery.events.events.size());
    shown_first.push_back(delivery.first_frame);
  });
  TopicsOutput out;
  encoder.Begin({.recording_id = "r-test",
                 .session_id = "s-test",
                 .config = Config(),
                 .telemetry_every_n_ticks = 5,
                 .foxglove_every_n_ticks = 15},
                out);
  const auto deliver = [&](std::uint64_t tick, bool first, std::size_t events) {
    auto frame = std::make_shared<session::Frame>();
    frame->time.tick = tick;
    session::Delivery delivery{.frame = frame, .first_frame = first};
    for (std::size_t i = 0; i < events; ++i) {
      sim::ContactEvent event{.tick = tick, .phase = sim::ContactPhase::kBegan};
      event.contact.pair = {.vehicle = 1, .other_id = 2 + i};
      delivery.events.events.push_back(event);
    }
    encoder.Frame(delivery, tick * 20'000'000, out);
  };
  deliver(5, /*first=*/true, 1);  // The recording's first frame: shown at tick 15.
  deliver(10, false, 2);
  deliver(15, false, 0);
  deliver(20, false, 1);
  deliver(25, false, 0);
  deliver(0, /*first=*/true, 0);  // A reset: what came before it is not carried over.
  deliver(5, false, 3);
  deliver(15, false, 0);
  EXPECT_THAT(shown, ::testing::ElementsAre(::testing::Pair(15, 3), ::testing::Pair(0, 0),
                                            ::testing::Pair(15, 3)));
  EXPECT_THAT(shown_first, ::testing::ElementsAre(true, true, false));
  std::size_t states = 0, world_states = 0;
  for (const auto& [topic, data] : out.written) {
    states += topic == kRecordingStatesTopic;
    world_states += topic == "/s-test/world_state";
  }
  EXPECT_EQ(states, 8u);
  EXPECT_EQ(world_states, 3u);
}

TEST(ProtoRecordingEncoder, DescribesEachVehicleOnceWhenItFirstAppears) {
  std::vector<sim::VehicleDescription> session_now;
  int looked = 0;
  ProtoRecordingEncoder encoder(nullptr, [&] {
    ++looked;
    return session_now;
  });
  TopicsOutput out;
  encoder.Begin({.recording_id = "r-test", .session_id = "s-test", .config = Config(),
                 .telemetry_every_n_ticks = 1, .foxglove_every_n_ticks = 0},
                out);
  const auto named = [](sim::VehicleId id) {
    sim::VehicleDescription description{.id = id};
    description.spec.name = absl::StrCat("car-", id);
    return description;
  };
  const auto deliver = [&](std::vector<sim::VehicleId> ids) {
    auto frame = std::make_shared<session::Frame>();
    for (const sim::VehicleId id : ids) frame->vehicles.push_back({.id = id});
    encoder.Frame({.frame = frame}, 0, out);
  };
  session_now = {named(2), named(1)};
  deliver({1, 2});
  deliver({1, 2});     // Nothing new: the session is not asked.
  session_now = {named(1), named(2), named(3), named(4)};
  deliver({2, 3, 4});  // 3 and 4 are new.
  session_now = {named(2)};
  deliver({2, 6});     // 6 left before the writer looked: described without a spec.
  EXPECT_EQ(looked, 3);
  std::vector<std::string> described;
  for (const auto& [topic, data] : out.written) {
    if (topic != kRecordingVehiclesTopic) continue;
    v1::RecordedVehicles message;
    ASSERT_TRUE(message.ParseFromString(data));
    std::string line;
    for (const v1::RecordedVehicle& vehicle : message.vehicles()) {
      absl::StrAppend(&line, vehicle.vehicle_id(), "=",
                      vehicle.has_spec() ? vehicle.spec().name() : "?", " ");
    }
    described.push_back(line);
  }
  EXPECT_THAT(described, ::testing::ElementsAre("1=car-1 2=car-2 ", "3=car-3 4=car-4 ", "6=? "));
}

TEST(ProtoRecordingEncoder, NoFoxgloveChannelsAtRateZero) {
  int shown = 0;
  ProtoRecordingEncoder encoder(
      [&](const session::Delivery&, std::uint64_t, record::RecordingOutput&) { ++shown; });
  TopicsOutput out;
  encoder.Begin({.recording_id = "r-test", .session_id = "s-test", .config = Config(),
                 .telemetry_every_n_ticks = 1, .foxglove_every_n_ticks = 0},
                out);
  for (std::uint64_t tick = 0; tick < 10; ++tick) {
    auto frame = std::make_shared<session::Frame>();
    frame->time.tick = tick;
    encoder.Frame({.frame = frame}, tick, out);
  }
  EXPECT_EQ(shown, 0);
  for (const auto& [topic, data] : out.written) EXPECT_NE(topic, "/s-test/world_state");
}

}  // namespace
}  // namespace pitlane::api

namespace pitlane::api {
namespace {

namespace gp = ::google::protobuf;

// A descriptor set as a reader builds it: its files into a pool of their own, imports first.
std::unique_ptr<gp::DescriptorPool> PoolOf(const std::string& bytes) {
  gp::FileDescriptorSet set;
  EXPECT_TRUE(set.ParseFromString(bytes));
  auto pool = std::make_unique<gp::DescriptorPool>();
  for (const gp::FileDescriptorProto& file : set.file()) {
    EXPECT_NE(pool->BuildFile(file), nullptr) << file.name();
  }
  return pool;
}

TEST(DescriptorSetFor, HoldsWhatTheMessageNeedsAndDecodesIt) {
  const std::string whole = [] {
    gp::FileDescriptorProto file;
    v1::WorldState::descriptor()->file()->CopyTo(&file);
    return file.SerializeAsString();
  }();
  const gp::Descriptor* messages[] = {
      v1::WorldState::descriptor(),    v1::RecordingHeader::descriptor(),
      v1::RecordedCommand::descriptor(), v1::TickHash::descriptor(),
      v1::RecordedStates::descriptor(),  v1::RecordingGap::descriptor()};
  for (const gp::Descriptor* message : messages) {
    SCOPED_TRACE(message->full_name());
    const std::string bytes = DescriptorSetFor(message);
    EXPECT_LT(bytes.size(), whole.size());
    std::unique_ptr<gp::DescriptorPool> pool = PoolOf(bytes);
    const gp::Descriptor* found = pool->FindMessageTypeByName(message->full_name());
    ASSERT_NE(found, nullptr);
    // The same fields, with the same types (their messages and enums found in the pool).
    ASSERT_EQ(found->field_count(), message->field_count());
    for (int i = 0; i < message->field_count(); ++i) {
      EXPECT_EQ(found->field(i)->DebugString(), message->field(i)->DebugString());
    }
  }
  // The small ones are small: no other message comes with them.
  EXPECT_LT(DescriptorSetFor(v1::TickHash::descriptor()).size(), 200u);
  EXPECT_LT(DescriptorSetFor(v1::RecordedStates::descriptor()).size(), 600u);
}

TEST(DescriptorSetFor, AWorldStateDecodesThroughItWhole) {
  // Every kind of vehicle's state, with sensors and contacts, as the server encodes it.
  session::SessionConfig config = Config();
  auto session = MakeSession(config);
  (void)session->SpawnVehicles(EveryModel(config.route_names)).value();
  (void)session->Step(20, std::nullopt).value();
  v1::WorldState state;
  FrameToProto(*session->CurrentFrame(), &state);
  const std::string bytes = state.SerializeAsString();
  std::unique_ptr<gp::DescriptorPool> pool = PoolOf(WorldStateDescriptorSet());
  gp::DynamicMessageFactory factory(pool.get());
  std::unique_ptr<gp::Message> decoded(
      factory.GetPrototype(pool->FindMessageTypeByName("pitlane.v1.WorldState"))->New());
  ASSERT_TRUE(decoded->ParseFromString(bytes));
  EXPECT_TRUE(decoded->GetReflection()->GetUnknownFields(*decoded).empty());
  EXPECT_EQ(decoded->SerializeAsString(), bytes);
  EXPECT_GT(state.vehicles_size(), 7);
}

}  // namespace
}  // namespace pitlane::api
