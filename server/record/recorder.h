// Recording a session into an MCAP file, off its tick thread.
//
// A Recorder watches a session two ways: as a CommandObserver (every command applied, with
// its tick, and the state hash of every tick: what re-simulation needs) and through a
// kLossless Subscriber (the telemetry frames, at the recording's rate). Both only queue
// what they see; the recording's writer thread encodes it (with a RecordingEncoder, which the
// layers above supply: protobuf and Foxglove's JSON) and writes it. A disk that cannot keep
// up loses frames or commands, never silently: the file records each gap (the encoder's Gap),
// and the session's clock is never held back.
//
// Message times in the file are the recording's own: the wall-clock time it started plus the
// simulated time recorded before the message (across resets), so that a viewer plays a
// lockstep run at the speed it was simulated, not at the speed it was stepped.
//
// A recording ends when it is stopped, when its session closes, at its size or duration
// limit, when the server's disk quota is used up, or on a write error; the file is then
// completed (summary and footer) if it can be. An error leaves every chunk written before it.
#ifndef PITLANE_SERVER_RECORD_RECORDER_H_
#define PITLANE_SERVER_RECORD_RECORDER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/record/mcap_writer.h"
#include "server/session/command.h"
#include "server/session/session.h"
#include "server/session/subscriber.h"

namespace pitlane::record {

// A channel of a recording and its schema.
struct ChannelSpec {
  std::string topic;
  std::string message_encoding;  // "protobuf", "json".
  std::string schema_name;       // "pitlane.v1.RecordedCommand", "foxglove.SceneUpdate".
  std::string schema_encoding;   // "protobuf", "jsonschema".
  std::string schema;            // A FileDescriptorSet, a JSON Schema.
};

// Where an encoder writes. Errors are kept by the recorder (the first one ends the recording).
class RecordingOutput {
 public:
  virtual ~RecordingOutput() = default;
  // The id of the channel of `spec.topic`, added (with its schema) the first time.
  virtual std::uint16_t Channel(const ChannelSpec& spec) = 0;
  virtual void Write(std::uint16_t channel, std::uint64_t time_ns, absl::string_view data) = 0;
};

// What a recording knows when it starts.
struct RecordingStart {
  std::string recording_id;
  std::string session_id;
  session::SessionConfig config;  // As the session was created.
  session::ObservedStart start;   // Where the recording starts.
  std::uint32_t telemetry_every_n_ticks = 1;
  // Of the telemetry frames, those the encoder also writes on the Foxglove channels: ticks
  // that are a multiple of this (a multiple of telemetry_every_n_ticks); 0: none.
  std::uint32_t foxglove_every_n_ticks = 0;
  std::uint64_t time_origin_ns = 0;  // Wall-clock, since the Unix epoch.
};

// A run of lost messages.
struct RecordingGap {
  enum class Kind { kFrames, kCommands };
  Kind kind = Kind::kFrames;
  std::uint64_t count = 0;
  std::uint64_t first_run = 0, first_tick = 0;
  std::uint64_t last_run = 0, last_tick = 0;
};

// How a recording went, so far or in the end.
struct RecordingProgress {
  std::uint64_t bytes = 0;
  std::uint64_t messages = 0;
  std::uint64_t ticks = 0;  // Ticks recorded (across resets).
  std::uint64_t frames_lost = 0;
  std::uint64_t commands_lost = 0;  // Commands and state hashes.
  bool ended = false;
  // Why it ended: OK when stopped, by a limit or by its session's end (`end_reason` says
  // which); an error for a write error.
  absl::Status end_status;
  std::string end_reason;
};

// The encodings of a recording (the layers above choose them). Called on the recording's
// writer thread only, in the order of the session's run.
class RecordingEncoder {
 public:
  virtual ~RecordingEncoder() = default;
  // First, once.
  virtual void Begin(const RecordingStart& start, RecordingOutput& out) = 0;
  // A command applied when the world was at (run, tick).
  virtual void Command(std::uint64_t run, std::uint64_t tick, const session::Command& command,
                       std::uint64_t time_ns, RecordingOutput& out) = 0;
  // The state hash after the step to (run, tick).
  virtual void Hash(std::uint64_t run, std::uint64_t tick, std::uint64_t state_hash,
                    std::uint64_t time_ns, RecordingOutput& out) = 0;
  // A telemetry frame (delivery.lost_* are also given to Gap first).
  virtual void Frame(const session::Delivery& delivery, std::uint64_t time_ns,
                     RecordingOutput& out) = 0;
  virtual void Gap(const RecordingGap& gap, std::uint64_t time_ns, RecordingOutput& out) = 0;
  // Last, once, unless a write error ended the recording.
  virtual void End(const RecordingProgress& progress, std::uint64_t time_ns,
                   RecordingOutput& out) = 0;
};

// Bytes the recordings of a server may still write (--record_quota_mib). Thread-safe.
class DiskQuota {
 public:
  explicit DiskQuota(std::uint64_t bytes) : left_(static_cast<std::int64_t>(bytes)) {}
  // Takes `bytes`; false (and takes nothing) if fewer are left.
  bool Take(std::uint64_t bytes);
  // Takes `bytes` even if fewer are left (bytes already written).
  void Charge(std::uint64_t bytes) { left_.fetch_sub(static_cast<std::int64_t>(bytes)); }
  void Give(std::uint64_t bytes) { left_.fetch_add(static_cast<std::int64_t>(bytes)); }
  std::int64_t left() const { return left_.load(); }

 private:
  std::atomic<std::int64_t> left_;
};

struct RecorderOptions {
  // The new file (never an existing one).
  std::string path;
  // The recording ends when its file reaches this many bytes (its summary, written then,
  // adds its few kilobytes); 0: no limit.
  std::uint64_t max_bytes = 0;
  // The recording ends once it recorded this many ticks; 0: no limit.
  std::uint64_t max_ticks = 0;
  // Null: no quota. Must outlive the recorder. What it writes is taken from it.
  DiskQuota* quota = nullptr;
  // What a full quota's end says ("--record_quota_mib=...").
  std::string quota_name = "the recording quota";
  // Commands and hashes queued for the writer, bytes (estimated); beyond, they are lost
  // (recorded as a gap).
  std::size_t max_queued_bytes = 64 << 20;
  // Telemetry frames queued for the writer, and their bytes (session::FrameBytes); beyond
  // either, they are lost (recorded as a gap).
  std::size_t max_queued_frames = 4096;
  std::size_t max_queued_frame_bytes = 64 << 20;
  McapOptions mcap;
  // Called once on the writer thread when the recording has ended and its file is closed.
  // Must not destroy the recorder.
  std::function<void(const RecordingProgress&)> on_end;
};

class Recorder {
 public:
  // Creates the file, starts watching `session` and starts the writer. `start`'s
  // start field is filled from the session; the others must be set. AlreadyExists, NotFound
  // (no such directory), ... for the file (FileSink); the session's error if it is closed.
  static absl::StatusOr<std::unique_ptr<Recorder>> Start(
      std::shared_ptr<session::Session> session, RecordingStart start, RecorderOptions options,
      std::unique_ptr<RecordingEncoder> encoder, const session::Clock* clock);
  // Stops (if running) and waits for the writer.
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Stops watching the session, writes what was queued, completes the file and waits for
  // it. Idempotent; returns the progress at the end.
  RecordingProgress Stop();
  RecordingProgress progress() const;
  const RecordingStart& start() const { return start_; }

 private:
  struct Inbox;
  class Observer;
  class Transport;
  class Output;

  Recorder(std::shared_ptr<session::Session> session, RecordingStart start,
           RecorderOptions options, std::unique_ptr<RecordingEncoder> encoder);
  void Run();
  void Detach();
  // Detach, once (from Stop, or from the writer when the recording ended by itself).
  void LetGo();

  std::shared_ptr<session::Session> session_;  // Until detached (stop_mu_ then).
  RecordingStart start_;
  RecorderOptions options_;
  std::unique_ptr<RecordingEncoder> encoder_;
  std::shared_ptr<Inbox> inbox_;
  std::shared_ptr<Observer> observer_;
  std::shared_ptr<session::Subscriber> subscriber_;
  std::unique_ptr<Output> output_;
  std::thread writer_;
  absl::Mutex stop_mu_;
  bool detached_ ABSL_GUARDED_BY(stop_mu_) = false;  // From the session.
  absl::Mutex join_mu_;  // One Stop joins the writer.
};

}  // namespace pitlane::record

#endif  // PITLANE_SERVER_RECORD_RECORDER_H_
