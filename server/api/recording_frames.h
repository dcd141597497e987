// A recording's telemetry as frames again, for playing it back (docs/recording.md): opened
// once (its header, its vehicles' specs and where each /pitlane/states frame lies), then any
// frame by time, read a chunk at a time from the mapped file, so a big recording is never
// held in memory whole.
#ifndef PITLANE_SERVER_API_RECORDING_FRAMES_H_
#define PITLANE_SERVER_API_RECORDING_FRAMES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "pitlane/v1/simulator.pb.h"
#include "server/record/mcap_reader.h"
#include "server/session/frame.h"
#include "server/session/playback.h"
#include "server/sim/vehicles/vehicle.h"

namespace pitlane::api {

namespace v1 = ::pitlane::v1;

// Most vehicles one recorded frame may hold, and one chunk's frames together (what a chunk is
// decoded to is held while its frames are shown): a file that holds more is refused.
inline constexpr int kMaxFrameVehicles = 1 << 20;
inline constexpr std::size_t kMaxChunkVehicles = std::size_t{8} << 20;

// Not thread-safe.
class RecordingFrames {
 public:
  // A frame's place: its time since the recording's start (the simulated time recorded before
  // it, across resets), ns, and the chunk that holds it.
  struct Entry {
    std::uint64_t time_ns = 0;
    std::uint64_t chunk_offset = 0;
  };

  // InvalidArgument for a file that is not a recording or holds no frames; the file's errors.
  // A file cut short is read up to its last whole chunk.
  // A file with a summary is opened through its indexes: its header's chunk, its message
  // indexes and the chunks that hold vehicles' specs are read, no other chunk; one without
  // (cut short) is read whole.
  static absl::StatusOr<std::unique_ptr<RecordingFrames>> Open(const std::string& path);
  // The same, from a reader that has read nothing yet (fuzzers, tests).
  static absl::StatusOr<std::unique_ptr<RecordingFrames>> FromReader(
      std::unique_ptr<record::McapFileReader> file);

  const v1::RecordingHeader& header() const { return header_; }
  // The recorded vehicles' specs, by id (from /pitlane/vehicles; a vehicle it could not look
  // up has none).
  const absl::flat_hash_map<sim::VehicleId, sim::VehicleSpec>& vehicles() const {
    return vehicles_;
  }
  const std::vector<Entry>& frames() const { return frames_; }
  // The last frame at or before `time_ns` since the start (the first, before it).
  std::size_t IndexAt(std::uint64_t time_ns) const;
  // Frame `index` as the session published it: its run, tick, time, and each vehicle's id,
  // model, pose, speed and whether it crashed (to the recording's precision: RecordedStates).
  absl::StatusOr<std::shared_ptr<const session::Frame>> Frame(std::size_t index);

 private:
  RecordingFrames() = default;
  absl::Status ReadIndexed(const record::McapSummary& summary);
  absl::Status ReadWhole();
  // The /pitlane/session header (the file's first message), and the route names it gives.
  absl::Status TakeHeader(const record::McapChannel& channel, const record::McapMessage& message);
  // A /pitlane/vehicles message's specs.
  absl::Status TakeVehicles(const record::McapMessage& message);
  // A message's log time as time since the recording's start, ns.
  std::uint64_t SinceOrigin(std::uint64_t log_time) const;

  std::unique_ptr<record::McapFileReader> file_;
  v1::RecordingHeader header_;
  std::vector<std::string> route_names_;  // The header's tracks'.
  absl::flat_hash_map<sim::VehicleId, sim::VehicleSpec> vehicles_;
  std::vector<Entry> frames_;
  // The frames of the chunk read last, in file order, and which chunk that was.
  std::uint64_t cached_chunk_ = 0;
  std::size_t cached_first_ = 0;  // The index of its first frame.
  std::vector<std::shared_ptr<const session::Frame>> cached_;
};

// A recording's frames for a session that plays it back (session::Session::Play).
class RecordingPlayback final : public session::PlaybackSource {
 public:
  RecordingPlayback(std::string recording_id, std::unique_ptr<RecordingFrames> frames)
      : recording_id_(std::move(recording_id)), frames_(std::move(frames)) {}

  const std::string& name() const override { return recording_id_; }
  std::size_t frame_count() const override { return frames_->frames().size(); }
  std::uint64_t TimeOf(std::size_t index) const override {
    return frames_->frames()[index].time_ns;
  }
  absl::StatusOr<std::shared_ptr<const session::Frame>> FrameAt(std::size_t index) override {
    return frames_->Frame(index);
  }
  // Each of `frame`'s vehicles with its recorded spec (a default spec for a vehicle the
  // recording has none of).
  std::vector<sim::VehicleDescription> Describe(const session::Frame& frame) const override;

 private:
  const std::string recording_id_;
  const std::unique_ptr<RecordingFrames> frames_;
};

// A RecordedStates message as a session frame (vehicles' models from `vehicles`, kinematic
// bicycles when unknown). InvalidArgument for columns of different lengths, ids that do not
// ascend, or more than kMaxFrameVehicles vehicles.
absl::StatusOr<session::Frame> RecordedStatesToFrame(
    const v1::RecordedStates& states,
    const absl::flat_hash_map<sim::VehicleId, sim::VehicleSpec>& vehicles);

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_RECORDING_FRAMES_H_
