// What recording costs. Run:
//   build/bin/record_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// BM_SessionTick: a 1,000-vehicle 50 Hz session's Steps on the stepping thread, without and
// with a recording (telemetry at 10 Hz, the Foxglove channels at 2 Hz: the defaults; written to a file under $TMPDIR by its own thread, as
// the server does), the writer caught up between frames as in a session paced at 50 Hz:
// `per_tick` is the stepping thread's time per tick. driven:0 is the
// cheapest world there is (bicycles on a lattice, no drivers, never in contact); driven:1 has
// a route follower drive each car round a ring, 10 m behind the next.
// BM_WriterFrame: the writer's work for one telemetry frame of N vehicles (its
// /pitlane/states message, and on every `foxglove_every`-th frame (0: none) the protobuf
// WorldState and the Foxglove JSON channels; MCAP with zstd chunks) into a sink that counts:
// `vehicle_states` is its throughput, `bytes_per_vehicle_state` what reaches the disk.
// BM_RecordingOverhead: BM_SessionTick's two variants side by side, by turns in one run
// (the medians of 400 blocks each, and the time recording adds); recorded:0 is the control.
// BM_StateHash, BM_Frame: the parts of the stepping thread's extra work.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "server/api/convert.h"
#include "server/api/recording_codec.h"
#include "server/record/mcap_writer.h"
#include "server/record/recorder.h"
#include "server/session/scheduler.h"
#include "server/session/session.h"
#include "server/web/recorded_channels.h"

namespace pitlane {
namespace {

session::SessionConfig Config(std::uint32_t vehicles) {
  session::SessionConfig config{.name = "bench",
                                .world = {.tick_rate_hz = 50, .seed = 1,
                                          .max_vehicles = vehicles}};
  return config;
}

// `n` kinematic bicycles on a 10 m lattice (they never touch), each with its own controls;
// or, `driven`, `n` cars that a route follower drives round a 10 km ring, 10 m apart.
// `scheduler` (may be null) runs its paced ticks.
std::shared_ptr<session::Session> MakeSession(std::uint32_t n, bool driven = false,
                                              session::Scheduler* scheduler = nullptr) {
  session::SessionConfig config = Config(n);
  constexpr double kRadius_m = 1600.0;
  if (driven) {
    sim::Route ring{.closed = true, .lane_width_m = 4.0};
    for (int i = 0; i < 400; ++i) {
      const double angle = 2 * M_PI * i / 400;
      ring.points.push_back({kRadius_m * std::cos(angle), kRadius_m * std::sin(angle)});
    }
    config.world.routes.push_back(ring);
    config.route_names = {"ring"};
  }
  auto session = std::make_shared<session::Session>("s-bench", config,
                                                    *session::BuildWorld(config), 100000, scheduler);
  session->Start();
  if (driven) {
    std::vector<sim::VehicleSpec> specs;
    for (std::uint32_t i = 0; i < n; ++i) {
      v1::VehicleSpec proto;
      proto.set_name(absl::StrCat("car-", i));
      const double angle = 2 * M_PI * i / n;
      proto.mutable_initial_pose()->set_x_m(kRadius_m * std::cos(angle));
      proto.mutable_initial_pose()->set_y_m(kRadius_m * std::sin(angle));
      proto.mutable_initial_pose()->set_yaw_rad(angle + M_PI / 2);
      proto.set_initial_speed_mps(10.0);
      proto.mutable_kinematic_bicycle();
      proto.mutable_driver()->mutable_route_follower()->set_track("ring");
      specs.push_back(*api::VehicleSpecFromProto(proto, config.route_names));
    }
    (void)session->SpawnVehicles(specs).value();
    return session;
  }
  std::vector<sim::VehicleSpec> specs(n);
  std::vector<sim::VehicleInput> inputs(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    specs[i].name = absl::StrCat("car-", i);
    specs[i].initial_pose = {.x_m = 10.0 * (i % 100), .y_m = 10.0 * (i / 100)};
    specs[i].initial_speed_mps = 5.0 + (i % 20);
    inputs[i] = {.id = i + 1, .acceleration_mps2 = 0.1 * ((i % 7) - 3.0),
                 .steering_angle_rad = 0.02 * ((i % 11) - 5.0)};
  }
  (void)session->SpawnVehicles(specs).value();
  (void)session->SetControls(inputs).ok();
  return session;
}

std::unique_ptr<record::RecordingEncoder> EncoderFor(
    const std::shared_ptr<session::Session>& session) {
  auto channels = std::make_shared<web::RecordedChannels>(session);
  return std::make_unique<api::ProtoRecordingEncoder>(
      [channels](const session::Delivery& delivery, std::uint64_t time_ns,
                 record::RecordingOutput& out) { channels->Write(delivery, time_ns, out); },
      [session] { return session->Describe(/*with_vehicles=*/true).vehicles; });
}

std::string TempFile(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  const std::filesystem::path path =
      std::filesystem::path(dir != nullptr ? dir : "/tmp") / ("pitlane-record-bench-" + name);
  std::filesystem::remove(path);
  return path.string();
}

// A recording of `session` into `path` with the defaults at 50 Hz (telemetry at 10 Hz, the
// Foxglove channels at 2 Hz), written by its own thread as the server's are.
std::unique_ptr<record::Recorder> StartRecorder(const std::shared_ptr<session::Session>& session,
                                                const std::string& path,
                                                const session::Clock& clock) {
  return *record::Recorder::Start(session,
                                  {.recording_id = "r-bench",
                                   .session_id = session->id(),
                                   .config = session->config(),
                                   .telemetry_every_n_ticks = 5,
                                   .foxglove_every_n_ticks = 25,
                                   .time_origin_ns = 0},
                                  {.path = path}, EncoderFor(session), &clock);
}

void BM_SessionTick(benchmark::State& state) {
  const bool recording = state.range(0) != 0;
  auto session = MakeSession(1000, /*driven=*/state.range(1) != 0);
  session::FakeClock clock;
  std::unique_ptr<record::Recorder> recorder;
  const std::string path = TempFile("tick.mcap");
  if (recording) {
    recorder = StartRecorder(session, path, clock);
  }
  // One telemetry frame's worth of ticks per iteration; then, untimed, the writer catches up
  // (as it does between the frames of a session paced at 50 Hz, where it has 100 ms for
  // each): what is timed is the session's own thread.
  constexpr std::uint32_t kTicks = 5;
  std::uint64_t stepped = 0;
  for (auto _ : state) {
    if (!session->Step(kTicks, std::nullopt).ok()) state.SkipWithError("Step failed");
    stepped += kTicks;
    // Both ways the thread pauses as a paced session's would (100 ms of a 50 Hz session's
    // time here is 10 ms), so that both find their caches as cold.
    state.PauseTiming();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    while (recorder != nullptr && recorder->progress().ticks < stepped) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    state.ResumeTiming();
  }
  if (recorder != nullptr) {
    const record::RecordingProgress progress = recorder->Stop();
    state.counters["frames_lost"] = static_cast<double>(progress.frames_lost);
    state.counters["file_mib"] = static_cast<double>(progress.bytes) / (1 << 20);
  }
  std::filesystem::remove(path);
  state.counters["per_tick"] = benchmark::Counter(
      kTicks, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SessionTick)->ArgNames({"recording", "driven"})->ArgsProduct({{0, 1}, {0, 1}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// The same measure side by side: two equal sessions, one recorded, stepped by turns (which
// goes first alternates), 5 ticks at a time after the same 10 ms pause, each block timed on
// its own; the median of the ratios of the pairs of blocks run one after the other (the
// machine's drifts fall on both of a pair alike), and the medians of each. The writer
// catches up after the recorded session's block, untimed. paced:0 steps
// them with Step (whose answer is a frame of the last tick); paced:1 runs them as REALTIME
// sessions at 50 Hz on a fake clock, each tick a scheduler's run (no answer to make).
void BM_RecordingOverhead(benchmark::State& state) {
  const bool driven = state.range(0) != 0;
  const bool paced = state.range(1) != 0;
  // recorded:0, the control: neither session is recorded (what differs is the measure's).
  const bool recording = state.range(2) != 0;
  session::FakeClock clocks[2];
  session::Scheduler plain_scheduler(&clocks[0], 0), recorded_scheduler(&clocks[1], 0);
  auto plain = MakeSession(1000, driven, &plain_scheduler);
  auto recorded = MakeSession(1000, driven, &recorded_scheduler);
  if (paced) {
    for (const auto& session : {plain, recorded}) {
      (void)session->SetClock({.mode = session::ClockMode::kRealtime, .real_time_factor = 1.0});
    }
  }
  session::FakeClock clock;
  const std::string path = TempFile("overhead.mcap");
  std::unique_ptr<record::Recorder> recorder =
      recording ? StartRecorder(recorded, path, clock) : nullptr;
  constexpr std::uint32_t kTicks = 5;
  std::vector<double> without_us, with_us;
  std::uint64_t stepped = 0;
  bool recorded_first = false;
  for (auto _ : state) {
    double block_s = 0.0;
    for (const bool with : {recorded_first, !recorded_first}) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      const auto started = std::chrono::steady_clock::now();
      if (paced) {
        for (std::uint32_t k = 0; k < kTicks; ++k) {
          clocks[with ? 1 : 0].Advance(20'000'000);
          if ((with ? recorded_scheduler : plain_scheduler).RunDue() != 1) {
            state.SkipWithError("no tick ran");
          }
        }
      } else if (!(with ? recorded : plain)->Step(kTicks, std::nullopt).ok()) {
        state.SkipWithError("Step failed");
      }
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
      block_s += took.count();
      (with ? with_us : without_us).push_back(took.count() * 1e6 / kTicks);
      if (with) {
        stepped += kTicks;
        while (recorder != nullptr && recorder->progress().ticks < stepped) {
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      }
    }
    recorded_first = !recorded_first;
    state.SetIterationTime(block_s);
  }
  const record::RecordingProgress progress =
      recorder != nullptr ? recorder->Stop() : record::RecordingProgress{};
  std::filesystem::remove(path);
  const auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    return v[v.size() / 2];
  };
  // Each recorded block against the plain one beside it in time (the machine's slow drifts
  // cancel in the pair); the median of those ratios.
  std::vector<double> ratios(with_us.size());
  for (std::size_t i = 0; i < ratios.size(); ++i) ratios[i] = with_us[i] / without_us[i];
  state.counters["without_us"] = median(without_us);
  state.counters["with_us"] = median(with_us);
  state.counters["added_pct"] = 100.0 * (median(ratios) - 1.0);
  state.counters["frames_lost"] = static_cast<double>(progress.frames_lost);
}
BENCHMARK(BM_RecordingOverhead)->ArgNames({"driven", "paced", "recorded"})
    ->ArgsProduct({{0, 1}, {0, 1}, {1}})->Args({1, 0, 0})->Args({1, 1, 0})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)->Iterations(1000);

// A sink that keeps nothing but the count.
class CountingSink final : public record::ByteSink {
 public:
  absl::Status Write(absl::string_view bytes) override {
    bytes_ += bytes.size();
    return absl::OkStatus();
  }
  std::uint64_t bytes() const { return bytes_; }

 private:
  std::uint64_t bytes_ = 0;
};

// The writer's output onto an McapWriter, as the recorder's own.
class McapOutput final : public record::RecordingOutput {
 public:
  explicit McapOutput(record::McapWriter& writer) : writer_(writer) {}
  std::uint16_t Channel(const record::ChannelSpec& spec) override {
    if (const auto it = channels_.find(spec.topic); it != channels_.end()) return it->second;
    const std::uint16_t schema =
        *writer_.AddSchema(spec.schema_name, spec.schema_encoding, spec.schema);
    return channels_[spec.topic] =
               *writer_.AddChannel(schema, spec.topic, spec.message_encoding, {});
  }
  void Write(std::uint16_t channel, std::uint64_t time_ns, absl::string_view data) override {
    (void)writer_.Write(channel, time_ns, time_ns, data).ok();
  }

 private:
  record::McapWriter& writer_;
  std::map<std::string, std::uint16_t> channels_;
};

void BM_WriterFrame(benchmark::State& state) {
  const auto n = static_cast<std::uint32_t>(state.range(0));
  // Of the telemetry frames (10 Hz), those also on the Foxglove channels: none, every fifth
  // (2 Hz, the default), every one.
  const auto foxglove_every_n_frames = static_cast<std::uint32_t>(state.range(1));
  constexpr std::uint32_t kTelemetryEveryNTicks = 5;
  auto session = MakeSession(n, /*driven=*/state.range(2) != 0);
  CountingSink sink;
  record::McapWriter writer(sink, {});
  (void)writer.Start().ok();
  McapOutput out(writer);
  std::unique_ptr<record::RecordingEncoder> encoder = EncoderFor(session);
  encoder->Begin({.recording_id = "r-bench",
                  .session_id = session->id(),
                  .config = session->config(),
                  .telemetry_every_n_ticks = kTelemetryEveryNTicks,
                  .foxglove_every_n_ticks = foxglove_every_n_frames * kTelemetryEveryNTicks},
                 out);
  // Frames that differ (the cars move), 20 s of them at 10 Hz: more than a chunk holds, so
  // that the compression never sees a frame twice.
  std::vector<std::shared_ptr<const session::Frame>> frames;
  for (int i = 0; i < 200; ++i) {
    (void)session->Step(kTelemetryEveryNTicks, std::nullopt).ok();
    frames.push_back(session->CurrentFrame());
  }
  const std::uint64_t start_bytes = sink.bytes();
  std::uint64_t time_ns = 0, written = 0;
  for (auto _ : state) {
    const session::Delivery delivery{.frame = frames[written % frames.size()]};
    time_ns += 100'000'000;
    encoder->Frame(delivery, time_ns, out);
    ++written;
  }
  (void)writer.Finish().ok();
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * n);
  state.counters["vehicle_states"] = benchmark::Counter(
      static_cast<double>(state.iterations()) * n, benchmark::Counter::kIsRate);
  state.counters["bytes_per_vehicle_state"] =
      static_cast<double>(sink.bytes() - start_bytes) / (static_cast<double>(written) * n);
}
BENCHMARK(BM_WriterFrame)
    ->ArgNames({"vehicles", "foxglove_every", "driven"})
    ->ArgsProduct({{10, 1000}, {0, 5, 1}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

// The two parts of BM_SessionTick's difference made on the stepping thread: the state hash
// the recorder takes of every tick, and the frame its subscriber is offered at the telemetry
// rate (shared with any live subscriber of the same tick).
void BM_StateHash(benchmark::State& state) {
  auto session = MakeSession(static_cast<std::uint32_t>(state.range(0)), state.range(1) != 0);
  for (auto _ : state) benchmark::DoNotOptimize(session->StateHash());
}
BENCHMARK(BM_StateHash)->ArgNames({"vehicles", "driven"})->Args({1000, 0})->Args({1000, 1});

void BM_Frame(benchmark::State& state) {
  auto session = MakeSession(static_cast<std::uint32_t>(state.range(0)));
  for (auto _ : state) {
    // A command (no controls at all) makes the tick's frame another one: each is made anew.
    state.PauseTiming();
    (void)session->SetControls({}).ok();
    state.ResumeTiming();
    benchmark::DoNotOptimize(session->CurrentFrame());
  }
}
BENCHMARK(BM_Frame)->Arg(1000);

}  // namespace
}  // namespace pitlane

BENCHMARK_MAIN();
