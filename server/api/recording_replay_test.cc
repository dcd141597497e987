// Re-simulation from a recording file: a run recorded (through the recorder and the protobuf
// encoder, as the server records) is run again from the file with the same state hash at
// every tick; a file with one command changed reports its divergence at the first tick it
// changed; a file cut short is re-simulated up to its cut; a reset before the recording.
#include "server/api/recording_replay.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/api/convert.h"
#include "server/api/recording_codec.h"
#include "server/record/mcap_reader.h"
#include "server/record/mcap_writer.h"
#include "server/record/recorder.h"
#include "server/session/replay.h"
#include "server/session/session_manager.h"

namespace pitlane::api {
namespace {

using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "replay_test";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::filesystem::remove(path);
  return path;
}

v1::SessionConfig ProtoConfig() {
  v1::SessionConfig config;
  config.set_name("replayed");
  config.set_seed(5);
  config.set_collision_policy(v1::COLLISION_POLICY_STOP);
  v1::Track* ring = config.add_tracks();
  ring->set_name("ring");
  ring->set_closed(true);
  for (const auto& [x, y] : {std::pair{0.0, 0.0}, {80.0, 0.0}, {80.0, 50.0}, {0.0, 50.0}}) {
    v1::Point2D* point = ring->add_points();
    point->set_x_m(x);
    point->set_y_m(y);
  }
  for (int i = 0; i < 3; ++i) {  // Three cars that a route follower drives, from tick 0.
    v1::VehicleSpec* car = config.add_vehicles();
    car->mutable_kinematic_bicycle();
    car->mutable_initial_pose()->set_x_m(10.0 + 20.0 * i);
    car->mutable_driver()->mutable_route_follower()->set_track("ring");
  }
  return config;
}

class ReplayTest : public ::testing::Test {
 protected:
  std::shared_ptr<session::Session> Create(const v1::SessionConfig& config,
                                           sim::IdCounters first_ids = {}) {
    absl::StatusOr<session::SessionRequest> request = SessionRequestFromProto(config);
    EXPECT_TRUE(request.ok()) << request.status();
    request->first_ids = first_ids;
    absl::StatusOr<std::shared_ptr<session::Session>> session = sessions_.Create(*request);
    EXPECT_TRUE(session.ok()) << session.status();
    return *session;
  }
  // Records `run(session)` on a session of ProtoConfig(); returns the file and the hashes of
  // every tick (an in-memory log of the same run).
  std::pair<std::string, std::vector<session::TickHash>> Record(
      const std::string& name, const std::function<void(session::Session&)>& before,
      const std::function<void(session::Session&)>& run) {
    auto session = Create(ProtoConfig());
    before(*session);
    auto log = std::make_shared<session::CommandLog>();
    session->AddObserver(log);
    const std::string path = TempPath(name);
    absl::StatusOr<std::unique_ptr<record::Recorder>> recorder = record::Recorder::Start(
        session,
        {.recording_id = "r-test", .session_id = session->id(), .config = session->config(),
         .telemetry_every_n_ticks = 10},
        {.path = path, .mcap = {.chunk_bytes = 4096}}, std::make_unique<ProtoRecordingEncoder>(),
        &clock_);
    EXPECT_TRUE(recorder.ok()) << recorder.status();
    run(*session);
    (*recorder)->Stop();
    return {path, log->hashes()};
  }
  absl::StatusOr<ReplayOutcome> Replay(const std::string& path,
                                       std::shared_ptr<session::Session>* replayed = nullptr) {
    absl::StatusOr<v1::RecordingHeader> header = ReadRecordingHeader(path);
    if (!header.ok()) return header.status();
    auto session = Create(header->config(), {.next_vehicle_id = header->first_vehicle_id(),
                                             .next_obstacle_id = header->first_obstacle_id()});
    if (replayed != nullptr) *replayed = session;
    const std::atomic<bool> cancel{false};
    return ReplayRecordingFile(path, *header, *session, cancel);
  }

  session::FakeClock clock_;
  session::SessionManager sessions_{session::ServerLimits{.max_ticks_per_step = 500}};
};

// A run with every kind of change: the drivers' cars, a client's car and its controls, an
// obstacle, a removal, a reset, more after it.
void RichRun(session::Session& session) {
  sim::VehicleSpec mine;
  mine.initial_pose = {.x_m = 40.0, .y_m = 25.0, .yaw_rad = 0.3};
  const auto ids = session.SpawnVehicles({mine});
  ASSERT_TRUE(ids.ok());
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(session.SetControls({{.id = (*ids)[0], .acceleration_mps2 = 1.0,
                                      .steering_angle_rad = 0.01 * (i % 7)}})
                    .ok());
    ASSERT_TRUE(session.Step(7, std::nullopt).ok());
  }
  const auto obstacles = session.AddObstacles({{.center_x_m = 60.0, .center_y_m = 2.0}});
  ASSERT_TRUE(obstacles.ok());
  // More than a batch (kReplayBatchTicks) of ticks between two commands that the replay
  // applies (Steps it does not).
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session.Step(450, std::nullopt).ok());
  ASSERT_TRUE(session.RemoveVehicle(1).ok());
  ASSERT_TRUE(session.Step(30, std::nullopt).ok());
  ASSERT_TRUE(session.Reset().ok());
  ASSERT_TRUE(session.SpawnVehicles({mine}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(session.Step(500, std::nullopt).ok());
}

TEST_F(ReplayTest, TheRecordingReSimulatesWithTheSameHashAtEveryTick) {
  const auto [path, hashes] = Record("rich.mcap", [](session::Session&) {}, RichRun);
  ASSERT_EQ(hashes.size(), 280u + 1350 + 30 + 1500);
  std::shared_ptr<session::Session> replayed;
  const absl::StatusOr<ReplayOutcome> outcome = Replay(path, &replayed);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->matched()) << (outcome->divergence.has_value()
                                          ? outcome->divergence->reason()
                                          : outcome->stopped_reason);
  EXPECT_EQ(outcome->ticks_compared, hashes.size());
  EXPECT_EQ(outcome->commands_applied, 1u + 40 + 1 + 1 + 1 + 1);  // Clock and Steps skipped.
  EXPECT_EQ(replayed->Now().tick, 1500u);
  EXPECT_EQ(replayed->StateHash(), hashes.back().state_hash);
}

// The same file with one control changed (read and written again with that one message
// edited): the re-simulation reports the first tick that differs, the one after the command.
TEST_F(ReplayTest, AFileWithOneCommandChangedReportsItsFirstDivergingTick) {
  const auto [path, hashes] = Record("edited-source.mcap", [](session::Session&) {}, RichRun);
  const std::string edited = TempPath("edited.mcap");
  std::uint64_t edited_tick = 0;
  {
    record::StringSink sink;
    record::McapWriter writer(sink, {.chunk_bytes = 4096});
    ASSERT_TRUE(writer.Start().ok());
    std::map<std::string, std::uint16_t> channels;
    int controls_seen = 0;
    const absl::StatusOr<record::McapReadSummary> read = record::ReadMcapFile(
        path, [&](const record::McapChannel& channel, const record::McapSchema* schema,
                  const record::McapMessage& message) {
          if (!channels.contains(channel.topic)) {
            const std::uint16_t id = *writer.AddSchema(schema->name, schema->encoding, schema->data);
            channels[channel.topic] =
                *writer.AddChannel(id, channel.topic, channel.message_encoding, channel.metadata);
          }
          std::string data(message.data);
          if (channel.topic == kRecordingCommandsTopic) {
            v1::RecordedCommand command;
            command.ParseFromString(data);
            if (command.has_set_controls() && ++controls_seen == 20) {
              command.mutable_set_controls()->mutable_controls(0)->set_steering_angle_rad(0.2);
              edited_tick = command.tick();
              data = command.SerializeAsString();
            }
          }
          return writer.Write(channels[channel.topic], message.log_time, message.publish_time,
                              data);
        });
    ASSERT_TRUE(read.ok()) << read.status();
    ASSERT_TRUE(writer.Finish().ok());
    std::ofstream(edited, std::ios::binary) << sink.bytes();
  }
  ASSERT_GT(edited_tick, 0u);
  const absl::StatusOr<ReplayOutcome> outcome = Replay(edited);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  ASSERT_TRUE(outcome->divergence.has_value());
  EXPECT_EQ(outcome->divergence->tick(), edited_tick + 1);
  EXPECT_EQ(outcome->divergence->run(), 0u);
  EXPECT_THAT(outcome->divergence->reason(), HasSubstr("state hash: recorded 0x"));
  EXPECT_FALSE(outcome->matched());
}

TEST_F(ReplayTest, AFileCutShortIsReSimulatedUpToItsCut) {
  const auto [path, hashes] = Record("cut-source.mcap", [](session::Session&) {}, RichRun);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // Cut in the data (the summary, with its copies of the schemas, is most of a small file):
  // halved until the cut falls in it.
  bool cut_in_the_data = false;
  for (std::size_t size = bytes.size() / 2; size > 1000 && !cut_in_the_data; size /= 2) {
    const std::string cut = TempPath("cut.mcap");
    std::ofstream(cut, std::ios::binary) << bytes.substr(0, size);
    const absl::StatusOr<ReplayOutcome> outcome = Replay(cut);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    EXPECT_FALSE(outcome->divergence.has_value());
    EXPECT_THAT(outcome->stopped_reason, HasSubstr("cut short"));
    cut_in_the_data = outcome->ticks_compared < hashes.size();
    if (cut_in_the_data) {
      EXPECT_GT(outcome->ticks_compared, 0u);
    }
  }
  EXPECT_TRUE(cut_in_the_data);
}

// Recorded right after a reset: the world's ids go on from the first one's, and the header
// says from where.
TEST_F(ReplayTest, ARecordingStartedAfterAResetReSimulatesWithItsIds) {
  const auto [path, hashes] = Record(
      "after-reset.mcap",
      [](session::Session& session) {
        ASSERT_TRUE(session.Step(20, std::nullopt).ok());
        ASSERT_TRUE(session.Reset().ok());
      },
      [](session::Session& session) {
        ASSERT_TRUE(session.RemoveVehicle(5).ok());  // An id of the world after the reset.
        ASSERT_TRUE(session.Step(200, std::nullopt).ok());
      });
  const absl::StatusOr<v1::RecordingHeader> header = ReadRecordingHeader(path);
  ASSERT_TRUE(header.ok());
  EXPECT_TRUE(header->replayable_from_start());
  EXPECT_EQ(header->first_vehicle_id(), 4u);
  EXPECT_EQ(header->start_run(), 1u);
  const absl::StatusOr<ReplayOutcome> outcome = Replay(path);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->matched());
  EXPECT_EQ(outcome->ticks_compared, 200u);
}

TEST_F(ReplayTest, NotARecordingIsRefused) {
  const std::string path = TempPath("not-a-recording.mcap");
  std::ofstream(path) << "hello";
  EXPECT_THAT(ReadRecordingHeader(path).status().message(), HasSubstr("not an MCAP file"));
}

}  // namespace
}  // namespace pitlane::api
