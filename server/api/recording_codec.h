// A recording's own channels in protobuf (pitlane.v1.RecordingHeader, RecordedCommand,
// TickHash, RecordingGap, RecordingEnd; docs/recording.md), the session's world_state channel
// as the live endpoint sends it, and the commands read back for a replay.
#ifndef PITLANE_SERVER_API_RECORDING_CODEC_H_
#define PITLANE_SERVER_API_RECORDING_CODEC_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pitlane/v1/simulator.pb.h"
#include "server/record/recorder.h"
#include "server/session/command.h"
#include "server/session/replay.h"

namespace pitlane::api {

namespace v1 = ::pitlane::v1;

inline constexpr char kRecordingSessionTopic[] = "/pitlane/session";
inline constexpr char kRecordingCommandsTopic[] = "/pitlane/commands";
inline constexpr char kRecordingStateHashTopic[] = "/pitlane/state_hash";
inline constexpr char kRecordingGapsTopic[] = "/pitlane/gaps";
inline constexpr char kRecordingEndTopic[] = "/pitlane/end";
inline constexpr char kRecordingStatesTopic[] = "/pitlane/states";
inline constexpr char kRecordingVehiclesTopic[] = "/pitlane/vehicles";

// A frame's vehicles as /pitlane/states records them (RecordedStates: quantized columns).
void FrameToRecordedStates(const session::Frame& frame, v1::RecordedStates* out);

// `route_names`: the session's tracks, by index (a spawned vehicle's driver names its track).
void CommandToProto(std::uint64_t run, std::uint64_t tick, const session::Command& command,
                    absl::Span<const std::string> route_names, v1::RecordedCommand* out);
// InvalidArgument naming the field ("spawn.vehicles[0].length_m", "command: none set").
absl::StatusOr<session::RecordedCommand> CommandFromProto(
    const v1::RecordedCommand& recorded, absl::Span<const std::string> route_names);

// Writes pitlane.v1 messages on a recording's own channels (each telemetry frame on
// /pitlane/states) and, for the frames of RecordingStart::foxglove_every_n_ticks, the frame's
// WorldState on /<session id>/world_state and what `telemetry` (may be null) adds (the web
// endpoint's Foxglove channels), with the contact events of the frames between.
class ProtoRecordingEncoder final : public record::RecordingEncoder {
 public:
  using FrameWriter = std::function<void(const session::Delivery& delivery, std::uint64_t time_ns,
                                         record::RecordingOutput& out)>;
  // The session's vehicles now, with their specs (for /pitlane/vehicles).
  using VehicleDescriber = std::function<std::vector<sim::VehicleDescription>()>;
  // Null `describe`: no /pitlane/vehicles.
  explicit ProtoRecordingEncoder(FrameWriter telemetry = nullptr,
                                 VehicleDescriber describe = nullptr);

  void Begin(const record::RecordingStart& start, record::RecordingOutput& out) override;
  void Command(std::uint64_t run, std::uint64_t tick, const session::Command& command,
               std::uint64_t time_ns, record::RecordingOutput& out) override;
  void Hash(std::uint64_t run, std::uint64_t tick, std::uint64_t state_hash,
            std::uint64_t time_ns, record::RecordingOutput& out) override;
  void Frame(const session::Delivery& delivery, std::uint64_t time_ns,
             record::RecordingOutput& out) override;
  void Gap(const record::RecordingGap& gap, std::uint64_t time_ns,
           record::RecordingOutput& out) override;
  void End(const record::RecordingProgress& progress, std::uint64_t time_ns,
           record::RecordingOutput& out) override;

 private:
  std::uint16_t Channel(record::RecordingOutput& out, const std::string& topic,
                        const google::protobuf::Descriptor* message);
  void Write(record::RecordingOutput& out, std::uint16_t channel, std::uint64_t time_ns,
             const google::protobuf::Message& message);

  // Writes /pitlane/vehicles for the vehicles of `frame` with ids above described_below_.
  void DescribeNew(const session::Frame& frame, std::uint64_t time_ns,
                   record::RecordingOutput& out);

  const FrameWriter telemetry_;
  const VehicleDescriber describe_;
  sim::VehicleId described_up_to_ = 0;  // Ids only grow: those up to this one are described.
  // Each message's schema (DescriptorSetFor), by its full name.
  absl::flat_hash_map<std::string, std::string> schemas_;
  std::vector<std::string> route_names_;
  std::uint16_t commands_ = 0, hashes_ = 0, states_ = 0, vehicles_ = 0, world_state_ = 0;
  std::uint32_t foxglove_every_n_ticks_ = 0;
  // What the frames since the last one on the Foxglove channels carried for them.
  session::FrameEvents foxglove_events_;
  bool foxglove_first_frame_ = false;
  std::string scratch_;
  v1::RecordedCommand command_;
  v1::RecordedStates states_message_;
  v1::WorldState world_state_message_;
};

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_RECORDING_CODEC_H_
