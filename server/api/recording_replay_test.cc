// Re-simulation from a recording file: a run recorded (through the recorder and the protobuf
// encoder, as the server records) is run again from the file with the same state hash at
// every tick; a file with one command changed reports its divergence at the first tick it
// changed; a file cut short is re-simulated up to its cut; a reset before the recording.
#include "server/api/recording_replay.h"
#include "server/api/recording_frames.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <set>
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

namespace pitlane::api {
namespace {

TEST_F(ReplayTest, FramesComeBackFromTheFileByTimeAChunkAtATime) {
  auto session = Create(ProtoConfig());
  std::vector<sim::VehicleSpec> specs(3);
  for (int i = 0; i < 3; ++i) {
    specs[i].name = absl::StrCat("car-", i);
    specs[i].initial_pose = {.x_m = 10.0 * i, .y_m = -3.0 * i, .yaw_rad = 0.4 * i - 0.4};
    specs[i].initial_speed_mps = 4.0 + i;
  }
  ASSERT_TRUE(session->SpawnVehicles(specs).ok());
  const std::string path = TempPath("frames.mcap");
  std::shared_ptr<session::Session> held = session;
  absl::StatusOr<std::unique_ptr<record::Recorder>> recorder = record::Recorder::Start(
      session,
      {.recording_id = "r-test", .session_id = session->id(), .config = session->config(),
       .telemetry_every_n_ticks = 10},
      {.path = path, .mcap = {.chunk_bytes = 1024}},
      std::make_unique<ProtoRecordingEncoder>(
          nullptr, [held] { return held->Describe(/*with_vehicles=*/true).vehicles; }),
      &clock_);
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  // Every telemetry frame as the session made it: at ticks 0, 10, ..., 300.
  std::vector<std::shared_ptr<const session::Frame>> live = {session->CurrentFrame()};
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(session->SetControls({{.id = 4, .acceleration_mps2 = 0.5,
                                       .steering_angle_rad = 0.05 * (i % 5)}}).ok());
    ASSERT_TRUE(session->Step(10, std::nullopt).ok());
    live.push_back(session->CurrentFrame());
  }
  (*recorder)->Stop();

  absl::StatusOr<std::unique_ptr<RecordingFrames>> frames = RecordingFrames::Open(path);
  ASSERT_TRUE(frames.ok()) << frames.status();
  EXPECT_EQ((*frames)->header().session_id(), session->id());
  ASSERT_EQ((*frames)->frames().size(), live.size());
  ASSERT_EQ((*frames)->vehicles().size(), 6u);  // The config's three and these.
  EXPECT_EQ((*frames)->vehicles().at(5).name, "car-1");
  std::set<std::uint64_t> chunks;
  for (const RecordingFrames::Entry& entry : (*frames)->frames()) chunks.insert(entry.chunk_offset);
  EXPECT_GT(chunks.size(), 3u);
  // In any order (back to front, then by time), each frame as it was, to the file's precision.
  const double tick_s = 1.0 / session->config().world.tick_rate_hz;
  for (std::size_t k = 0; k < 2 * live.size(); ++k) {
    const std::size_t i = k < live.size() ? live.size() - 1 - k : k - live.size();
    const std::size_t at = k < live.size()
                               ? i
                               : (*frames)->IndexAt(static_cast<std::uint64_t>(
                                     (10.0 * i + 3) * tick_s * 1e9));  // 3 ticks after it.
    ASSERT_EQ(at, i);
    absl::StatusOr<std::shared_ptr<const session::Frame>> frame = (*frames)->Frame(at);
    ASSERT_TRUE(frame.ok()) << frame.status();
    const session::Frame& expected = *live[i];
    EXPECT_EQ((*frame)->time.tick, expected.time.tick);
    EXPECT_EQ((*frame)->run, expected.run);
    ASSERT_EQ((*frame)->vehicles.size(), expected.vehicles.size());
    for (std::size_t v = 0; v < expected.vehicles.size(); ++v) {
      const sim::VehicleSnapshot& want = expected.vehicles[v];
      const sim::VehicleSnapshot& got = (*frame)->vehicles[v];
      EXPECT_EQ(got.id, want.id);
      EXPECT_EQ(got.kind, want.kind);
      EXPECT_NEAR(got.pose.x_m, want.pose.x_m, 0.5e-3);
      EXPECT_NEAR(got.pose.y_m, want.pose.y_m, 0.5e-3);
      EXPECT_NEAR(got.pose.yaw_rad, want.pose.yaw_rad, 0.5e-4);
      EXPECT_NEAR(got.speed_mps, want.speed_mps, 0.5e-3);
      EXPECT_EQ(got.crashed, want.crashed);
    }
  }
  EXPECT_EQ((*frames)->IndexAt(0), 0u);
  EXPECT_EQ((*frames)->IndexAt(~std::uint64_t{0}), live.size() - 1);
  EXPECT_EQ((*frames)->Frame(live.size()).status().code(), absl::StatusCode::kOutOfRange);

  // Opened through the indexes (above) or read whole (the same file without its summary, as
  // a killed server leaves it): the same frames in the same places, the same vehicles.
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  const record::McapSummary summary = *record::McapFileReader::FromBytes(bytes)->ReadSummary();
  ASSERT_FALSE(summary.chunks.empty());
  const std::uint64_t data_end =
      summary.chunks.back().offset + summary.chunks.back().length;  // Then its indexes.
  absl::StatusOr<std::unique_ptr<RecordingFrames>> whole = RecordingFrames::FromReader(
      record::McapFileReader::FromBytes(absl::string_view(bytes).substr(0, data_end)));
  ASSERT_TRUE(whole.ok()) << whole.status();
  ASSERT_EQ((*whole)->frames().size(), (*frames)->frames().size());
  for (std::size_t i = 0; i < (*frames)->frames().size(); ++i) {
    EXPECT_EQ((*whole)->frames()[i].time_ns, (*frames)->frames()[i].time_ns) << i;
    EXPECT_EQ((*whole)->frames()[i].chunk_offset, (*frames)->frames()[i].chunk_offset) << i;
  }
  EXPECT_EQ((*whole)->vehicles().size(), (*frames)->vehicles().size());
  EXPECT_EQ((*whole)->header().session_id(), session->id());
}

TEST(RecordedStatesToFrame, RefusesColumnsThatDoNotFit) {
  v1::RecordedStates states;
  states.add_vehicle_id_steps(1);
  states.add_x_mm(1);
  EXPECT_EQ(RecordedStatesToFrame(states, {}).status().code(), absl::StatusCode::kInvalidArgument);
  states.add_y_mm(2);
  states.add_yaw_100urad(3);
  states.add_speed_mmps(4);
  ASSERT_TRUE(RecordedStatesToFrame(states, {}).ok());
  states.add_vehicle_id_steps(0);  // Ids must ascend.
  states.add_x_mm(1);
  states.add_y_mm(2);
  states.add_yaw_100urad(3);
  states.add_speed_mmps(4);
  EXPECT_EQ(RecordedStatesToFrame(states, {}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pitlane::api
