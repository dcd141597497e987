// The recorder: a session's commands, hashes and frames written off its tick thread, read back
// by Foxglove's reader (@mcap/core, tests/web/mcap_read.mjs); gaps when the writer falls
// behind; the limits; the ends.
#include "server/record/recorder.h"

#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/record/testing/mcap_core.h"
#include "server/session/replay.h"
#include "server/session/session.h"

namespace pitlane::record {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr std::uint64_t kOrigin_ns = 1'700'000'000'000'000'000;

// Foxglove's reader through the index, CRCs checked.
Json ReadWithMcapCore(const std::string& path) {
  Json json = testutil::ReadWithMcapCore(path);
  EXPECT_FALSE(json.contains("error")) << json["error"];
  if (json.contains("data_section_crc_ok")) {
    EXPECT_EQ(json["data_section_crc_ok"], true);
  }
  return json;
}

const char* CommandName(const session::Command& command) {
  static constexpr const char* kNames[] = {"spawn",  "remove_vehicle", "add_obstacles",
                                           "remove_obstacle", "controls", "attach",
                                           "detach", "clock", "reset", "step"};
  return kNames[command.index()];
}

// A plain JSON encoder; Frame can be held back (a slow disk).
class TestEncoder final : public RecordingEncoder {
 public:
  struct Gate {
    std::mutex mu;
    std::condition_variable changed;
    bool closed = false;
    int frames_waiting = 0;
  };
  explicit TestEncoder(std::shared_ptr<Gate> gate = nullptr) : gate_(std::move(gate)) {}

  void Begin(const RecordingStart& start, RecordingOutput& out) override {
    out.Write(Channel(out, "/begin"), start.time_origin_ns,
              Json{{"id", start.recording_id},
                   {"tick", start.start.tick},
                   {"run", start.start.run},
                   {"hash", start.start.state_hash},
                   {"pristine", start.start.pristine}}
                  .dump());
  }
  void Command(std::uint64_t run, std::uint64_t tick, const session::Command& command,
               std::uint64_t time_ns, RecordingOutput& out) override {
    out.Write(Channel(out, "/commands"), time_ns,
              Json{{"run", run}, {"tick", tick}, {"kind", CommandName(command)}}.dump());
  }
  void Hash(std::uint64_t run, std::uint64_t tick, std::uint64_t state_hash, std::uint64_t time_ns,
            RecordingOutput& out) override {
    out.Write(Channel(out, "/hashes"), time_ns,
              Json{{"run", run}, {"tick", tick}, {"hash", std::to_string(state_hash)}}.dump());
  }
  void Frame(const session::Delivery& delivery, std::uint64_t time_ns,
             RecordingOutput& out) override {
    if (gate_ != nullptr) {
      std::unique_lock lock(gate_->mu);
      ++gate_->frames_waiting;
      gate_->changed.notify_all();
      gate_->changed.wait(lock, [&] { return gate_->closed; });
    }
    out.Write(Channel(out, "/frames"), time_ns,
              Json{{"run", delivery.frame->run},
                   {"tick", delivery.frame->time.tick},
                   {"vehicles", delivery.frame->lean ? delivery.frame->motion.size()
                                                     : delivery.frame->vehicles.size()},
                   {"lean", delivery.frame->lean},
                   {"first", delivery.first_frame}}
                  .dump());
  }
  void Gap(const RecordingGap& gap, std::uint64_t time_ns, RecordingOutput& out) override {
    out.Write(Channel(out, "/gaps"), time_ns,
              Json{{"kind", gap.kind == RecordingGap::Kind::kFrames ? "frames" : "commands"},
                   {"count", gap.count},
                   {"first_tick", gap.first_tick},
                   {"last_tick", gap.last_tick}}
                  .dump());
  }
  void End(const RecordingProgress& progress, std::uint64_t time_ns,
           RecordingOutput& out) override {
    out.Write(Channel(out, "/end"), time_ns,
              Json{{"reason", progress.end_reason}, {"ticks", progress.ticks}}.dump());
  }

 private:
  static std::uint16_t Channel(RecordingOutput& out, const std::string& topic) {
    return out.Channel({.topic = topic,
                        .message_encoding = "json",
                        .schema_name = "test" + topic,
                        .schema_encoding = "jsonschema",
                        .schema = R"({"type":"object"})"});
  }
  std::shared_ptr<Gate> gate_;
};

session::SessionConfig Config() {
  return session::SessionConfig{.name = "rec", .world = {.tick_rate_hz = 50, .max_vehicles = 8}};
}

class RecorderTest : public ::testing::Test {
 protected:
  std::shared_ptr<session::Session> MakeSession(session::SessionConfig config = Config()) {
    auto session = std::make_shared<session::Session>("s-rec", config, *session::BuildWorld(config),
                                                      1000, nullptr);
    session->Start();
    return session;
  }
  std::string Path(const std::string& name) {
    const std::filesystem::path dir =
        std::filesystem::path(::testing::TempDir()) / "recorder_test";
    std::filesystem::create_directories(dir);
    const std::string path = (dir / name).string();
    std::filesystem::remove(path);
    return path;
  }
  absl::StatusOr<std::unique_ptr<Recorder>> Start(std::shared_ptr<session::Session> session,
                                                  RecorderOptions options,
                                                  std::shared_ptr<TestEncoder::Gate> gate = nullptr,
                                                  std::uint32_t every_n_ticks = 5) {
    return Recorder::Start(session,
                           {.recording_id = "r-test",
                            .session_id = "s-rec",
                            .config = session->config(),
                            .telemetry_every_n_ticks = every_n_ticks,
                            .time_origin_ns = kOrigin_ns},
                           std::move(options), std::make_unique<TestEncoder>(std::move(gate)),
                           &clock_);
  }
  // The messages of `topic`, as JSON, in file order.
  static std::vector<Json> On(const Json& read, const std::string& topic) {
    int channel = -1;
    for (const Json& c : read["channels"]) {
      if (c["topic"] == topic) channel = c["id"];
    }
    std::vector<Json> out;
    for (const Json& m : read["messages"]) {
      if (m["channel"] == channel) {
        Json data = Json::parse(m["data"].get<std::string>());
        data["log_time"] = std::stoull(m["log_time"].get<std::string>());
        out.push_back(data);
      }
    }
    return out;
  }

  session::FakeClock clock_;
};

// Everything a run did, in the file, at the recording's own times: the commands and every
// tick's hash (the same as an in-memory log of the same run), frames every 5 ticks, across a
// reset.
TEST_F(RecorderTest, RecordsEveryCommandAndTickHashAndTheFramesAtTheirSimulatedTimes) {
  auto session = MakeSession();
  auto log = std::make_shared<session::CommandLog>();
  session->AddObserver(log);
  const std::string path = Path("run.mcap");
  auto recorder = Start(session, {.path = path});
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  EXPECT_TRUE((*recorder)->start().start.pristine);

  sim::VehicleSpec fast;
  fast.initial_speed_mps = 5.0;
  ASSERT_TRUE(session->SpawnVehicles({fast, sim::VehicleSpec{}}).ok());
  ASSERT_TRUE(session->SetControls({{.id = 1, .acceleration_mps2 = 1.0}}).ok());
  ASSERT_TRUE(session->Step(40, std::nullopt).ok());
  ASSERT_TRUE(session->Reset().ok());
  ASSERT_TRUE(session->SpawnVehicles({fast}).ok());
  ASSERT_TRUE(session->Step(12, std::nullopt).ok());
  const RecordingProgress progress = (*recorder)->Stop();
  EXPECT_TRUE(progress.ended);
  EXPECT_TRUE(progress.end_status.ok()) << progress.end_status;
  EXPECT_EQ(progress.end_reason, "stopped");
  EXPECT_EQ(progress.ticks, 52u);
  EXPECT_EQ(progress.frames_lost, 0u);
  EXPECT_EQ(session->subscriber_count(), 0u);  // Let go of.
  EXPECT_EQ(progress.bytes, std::filesystem::file_size(path));

  const Json read = ReadWithMcapCore(path);
  ASSERT_TRUE(read.is_object());
  EXPECT_EQ(std::to_string(progress.messages), read["statistics"]["message_count"]);
  const std::vector<Json> begin = On(read, "/begin");
  ASSERT_EQ(begin.size(), 1u);
  EXPECT_EQ(begin[0]["pristine"], true);
  EXPECT_EQ(begin[0]["tick"], 0);

  const std::vector<session::RecordedCommand> commands = log->commands();
  const std::vector<Json> recorded_commands = On(read, "/commands");
  ASSERT_EQ(recorded_commands.size(), commands.size());
  for (std::size_t i = 0; i < commands.size(); ++i) {
    EXPECT_EQ(recorded_commands[i]["tick"], commands[i].tick) << i;
    EXPECT_EQ(recorded_commands[i]["kind"], CommandName(commands[i].command)) << i;
  }
  EXPECT_EQ(recorded_commands.back()["run"], 1);  // The spawn after the reset.

  // Every tick's hash, at origin + ticks recorded x 20 ms (the second run goes on after the
  // first's 40 ticks).
  const std::vector<session::TickHash> hashes = log->hashes();
  const std::vector<Json> recorded_hashes = On(read, "/hashes");
  ASSERT_EQ(recorded_hashes.size(), hashes.size());
  ASSERT_EQ(hashes.size(), 52u);
  for (std::size_t i = 0; i < hashes.size(); ++i) {
    EXPECT_EQ(recorded_hashes[i]["tick"], hashes[i].tick);
    EXPECT_EQ(recorded_hashes[i]["hash"], std::to_string(hashes[i].state_hash));
    EXPECT_EQ(recorded_hashes[i]["log_time"], kOrigin_ns + (i + 1) * 20'000'000) << i;
  }
  // Frames: the first (tick 0), every 5th tick, the reset's tick-0 frame, every 5th after.
  std::vector<std::pair<int, int>> frame_ticks;
  for (const Json& frame : On(read, "/frames")) {
    frame_ticks.emplace_back(frame["run"], frame["tick"]);
    const std::uint64_t elapsed = frame["run"] == 0 ? frame["tick"].get<int>()
                                                    : 40 + frame["tick"].get<int>();
    EXPECT_EQ(frame["log_time"], kOrigin_ns + elapsed * 20'000'000) << frame;
  }
  std::vector<std::pair<int, int>> expected_ticks;
  for (int t = 0; t <= 40; t += 5) expected_ticks.emplace_back(0, t);
  for (int t = 0; t <= 12; t += 5) expected_ticks.emplace_back(1, t);
  EXPECT_EQ(frame_ticks, expected_ticks);
  // With no Foxglove channels the recorder takes lean frames, but for the first frames and a
  // Step's last tick (the Step's answer is made whole anyway); both hold every vehicle.
  std::vector<std::pair<int, int>> full_ticks;
  for (const Json& frame : On(read, "/frames")) {
    if (!frame["lean"].get<bool>()) full_ticks.emplace_back(frame["run"], frame["tick"]);
    // The first frames come before the spawns.
    const int vehicles = frame["first"].get<bool>() ? 0 : frame["run"] == 0 ? 2 : 1;
    EXPECT_EQ(frame["vehicles"], vehicles) << frame;
  }
  EXPECT_EQ(full_ticks, (std::vector<std::pair<int, int>>{{0, 0}, {0, 40}, {1, 0}}));
  const std::vector<Json> end = On(read, "/end");
  ASSERT_EQ(end.size(), 1u);
  EXPECT_EQ(end[0]["reason"], "stopped");
  EXPECT_TRUE(On(read, "/gaps").empty());
}

// Started mid-run: not pristine, starts at the session's tick.
TEST_F(RecorderTest, AStartAfterTheFirstTickIsNotPristine) {
  auto session = MakeSession();
  ASSERT_TRUE(session->Step(7, std::nullopt).ok());
  auto recorder = Start(session, {.path = Path("late.mcap")});
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  EXPECT_FALSE((*recorder)->start().start.pristine);
  EXPECT_EQ((*recorder)->start().start.tick, 7u);
  EXPECT_EQ((*recorder)->start().start.state_hash, session->StateHash());
  ASSERT_TRUE(session->Step(3, std::nullopt).ok());
  EXPECT_EQ((*recorder)->Stop().ticks, 3u);
}

// A writer that cannot keep up: frames and then commands are lost, each run of them recorded
// as a gap with its count; the clock never waited.
TEST_F(RecorderTest, AWriterThatFallsBehindRecordsEveryGap) {
  auto session = MakeSession();
  auto gate = std::make_shared<TestEncoder::Gate>();
  const std::string path = Path("gaps.mcap");
  auto recorder = Start(session,
                        {.path = path,
                         .max_queued_bytes = 64 * 1024,
                         .max_queued_frames = 4},
                        gate, /*every_n_ticks=*/1);
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  {
    // The writer is held in its first frame (tick 0)...
    std::unique_lock lock(gate->mu);
    gate->changed.wait(lock, [&] { return gate->frames_waiting > 0; });
  }
  // ...while the session steps 5,000 ticks.
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(session->Step(1000, std::nullopt).ok());
  {
    std::lock_guard lock(gate->mu);
    gate->closed = true;
    gate->changed.notify_all();
  }
  ASSERT_TRUE(session->Step(10, std::nullopt).ok());
  const RecordingProgress progress = (*recorder)->Stop();
  EXPECT_GT(progress.frames_lost, 4000u);
  EXPECT_GT(progress.commands_lost, 1000u);

  const Json read = ReadWithMcapCore(path);
  ASSERT_TRUE(read.is_object());
  std::uint64_t frames_lost = 0, commands_lost = 0;
  for (const Json& gap : On(read, "/gaps")) {
    (gap["kind"] == "frames" ? frames_lost : commands_lost) += gap["count"].get<std::uint64_t>();
    EXPECT_LE(gap["first_tick"].get<int>(), gap["last_tick"].get<int>());
  }
  EXPECT_EQ(frames_lost, progress.frames_lost);
  EXPECT_EQ(commands_lost, progress.commands_lost);
  // Every tick and every Step is accounted for: in the file or counted in a gap.
  EXPECT_EQ(On(read, "/hashes").size() + On(read, "/commands").size() + commands_lost,
            5010u + 6u);
  EXPECT_EQ(On(read, "/frames").size() + frames_lost, 5011u);  // With tick 0's.
}

// The limits end a recording by themselves, with a complete file, and let go of the session.
TEST_F(RecorderTest, TheDurationAndSizeLimitsEndTheRecordingWithACompleteFile) {
  {
    auto session = MakeSession();
    ASSERT_TRUE(session->SpawnVehicles({sim::VehicleSpec{}}).ok());
    const std::string path = Path("duration.mcap");
    std::atomic<int> ends{0};
    auto recorder = Start(session, {.path = path, .max_ticks = 100, .on_end = [&](const auto&) {
                                      ++ends;
                                    }});
    ASSERT_TRUE(recorder.ok()) << recorder.status();
    ASSERT_TRUE(session->Step(300, std::nullopt).ok());
    for (int i = 0; i < 500 && ends == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_EQ(ends, 1);
    EXPECT_EQ(session->subscriber_count(), 0u);
    const RecordingProgress progress = (*recorder)->Stop();
    EXPECT_THAT(progress.end_reason, HasSubstr("max_duration_s"));
    EXPECT_EQ(progress.ticks, 100u);
    const Json read = ReadWithMcapCore(path);
    ASSERT_TRUE(read.is_object());
    EXPECT_EQ(On(read, "/hashes").size(), 100u);
    for (const Json& frame : On(read, "/frames")) EXPECT_LE(frame["tick"].get<int>(), 100);
  }
  {
    auto session = MakeSession();
    ASSERT_TRUE(session->SpawnVehicles({sim::VehicleSpec{}, sim::VehicleSpec{}}).ok());
    const std::string path = Path("size.mcap");
    auto recorder = Start(session, {.path = path,
                                    .max_bytes = 20'000,
                                    .mcap = {.compression = McapCompression::kNone,
                                             .chunk_bytes = 2048}},
                          nullptr, 1);
    ASSERT_TRUE(recorder.ok()) << recorder.status();
    for (int i = 0; i < 40; ++i) ASSERT_TRUE(session->Step(50, std::nullopt).ok());
    const RecordingProgress progress = (*recorder)->Stop();
    EXPECT_TRUE(progress.end_status.ok());
    EXPECT_THAT(progress.end_reason, HasSubstr("max_bytes"));
    // The limit counts the summary still to write: the file stays within it (by a message).
    EXPECT_GT(progress.bytes, 10'000u);
    EXPECT_LE(progress.bytes, 20'000u + 500);
    const Json read = ReadWithMcapCore(path);
    ASSERT_TRUE(read.is_object());
    EXPECT_EQ(On(read, "/end").size(), 1u);
  }
}

TEST_F(RecorderTest, TheQuotaEndsARecordingAndCountsWhatEveryRecordingWrote) {
  auto session = MakeSession();
  DiskQuota quota(30'000);
  auto recorder = Start(session, {.path = Path("quota.mcap"),
                                  .quota = &quota,
                                  .quota_name = "--record_quota_mib=1",
                                  .mcap = {.compression = McapCompression::kNone,
                                           .chunk_bytes = 2048}},
                        nullptr, 1);
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  ASSERT_TRUE(session->SpawnVehicles({sim::VehicleSpec{}, sim::VehicleSpec{}}).ok());
  for (int i = 0; i < 40; ++i) ASSERT_TRUE(session->Step(50, std::nullopt).ok());
  const RecordingProgress progress = (*recorder)->Stop();
  EXPECT_EQ(progress.end_status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(progress.end_reason, HasSubstr("--record_quota_mib=1"));
  // What it wrote, its summary too, is counted.
  EXPECT_EQ(quota.left(), 30'000 - static_cast<std::int64_t>(progress.bytes));
}

TEST_F(RecorderTest, TheSessionsEndEndsTheRecording) {
  auto session = MakeSession();
  const std::string path = Path("closed.mcap");
  auto recorder = Start(session, {.path = path});
  ASSERT_TRUE(recorder.ok()) << recorder.status();
  ASSERT_TRUE(session->Step(10, std::nullopt).ok());
  session->Close();
  const RecordingProgress progress = (*recorder)->Stop();
  EXPECT_EQ(progress.end_reason, "the session was deleted");
  EXPECT_EQ(progress.ticks, 10u);
  EXPECT_TRUE(ReadWithMcapCore(path).is_object());
}

TEST_F(RecorderTest, StartRefusesAnExistingFileAndAClosedSessionLeavesNoFile) {
  auto session = MakeSession();
  const std::string path = Path("exists.mcap");
  {
    std::FILE* file = std::fopen(path.c_str(), "w");
    std::fclose(file);
  }
  EXPECT_EQ(Start(session, {.path = path}).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(std::filesystem::file_size(path), 0u);  // Untouched.

  session->Close();
  const std::string closed = Path("closed-session.mcap");
  EXPECT_EQ(Start(session, {.path = closed}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(closed));
}

}  // namespace
}  // namespace pitlane::record
