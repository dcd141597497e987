// Fuzzes recording files: any bytes as an MCAP file through the reader (its chunks
// decompressed and CRC-checked), the decoding a re-simulation does (the header, the commands
// through CommandFromProto, the hashes, the gaps) and a playback does (the vehicles' specs, the
// states as frames through RecordedStatesToFrame, the file opened through its indexes as
// PlayRecording opens it), each chunk read again on its own, and the summary (its statistics,
// chunk indexes, schemas and channels). A file may be refused;
// nothing may crash, trip a sanitizer, or allocate beyond a chunk's bound (and, decoded, a
// bounded number of vehicle states). Seeds: small recordings (fuzz/corpus/recording_fuzzer/).
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "pitlane/v1/simulator.pb.h"
#include "absl/container/flat_hash_map.h"
#include "server/api/convert.h"
#include "server/api/recording_codec.h"
#include "server/api/recording_frames.h"
#include "server/record/mcap_reader.h"

namespace pitlane::fuzz {
namespace {

void Run(absl::string_view bytes) {
  std::vector<std::string> route_names;
  absl::flat_hash_map<sim::VehicleId, sim::VehicleSpec> vehicles;
  std::vector<std::uint64_t> chunks;  // Offsets of the first few chunks seen.
  std::size_t decoded_vehicles = 0;
  // A fuzzer's input is small; so is what one chunk may expand to here.
  const std::unique_ptr<record::McapFileReader> reader =
      record::McapFileReader::FromBytes(bytes, {.max_chunk_bytes = 1 << 20});
  const record::McapMessageCallback decode =
      [&](const record::McapChannel& channel, const record::McapSchema*,
          const record::McapMessage& message) -> absl::Status {
        if (message.chunk_offset != 0 && chunks.size() < 8 &&
            (chunks.empty() || chunks.back() != message.chunk_offset)) {
          chunks.push_back(message.chunk_offset);
        }
        const auto size = static_cast<int>(message.data.size());
        if (channel.topic == api::kRecordingSessionTopic) {
          v1::RecordingHeader header;
          if (header.ParseFromArray(message.data.data(), size)) {
            route_names.clear();
            for (const v1::Track& track : header.config().tracks()) {
              route_names.push_back(track.name());
            }
          }
        } else if (channel.topic == api::kRecordingCommandsTopic) {
          v1::RecordedCommand command;
          if (command.ParseFromArray(message.data.data(), size)) {
            (void)api::CommandFromProto(command, route_names);
          }
        } else if (channel.topic == api::kRecordingStateHashTopic) {
          v1::TickHash hash;
          (void)hash.ParseFromArray(message.data.data(), size);
        } else if (channel.topic == api::kRecordingGapsTopic) {
          v1::RecordingGap gap;
          (void)gap.ParseFromArray(message.data.data(), size);
        } else if (channel.topic == api::kRecordingVehiclesTopic) {
          v1::RecordedVehicles described;
          if (described.ParseFromArray(message.data.data(), size)) {
            for (const v1::RecordedVehicle& vehicle : described.vehicles()) {
              absl::StatusOr<sim::VehicleSpec> spec =
                  api::VehicleSpecFromProto(vehicle.spec(), route_names);
              if (spec.ok() && vehicles.size() < 64) vehicles[vehicle.vehicle_id()] = *spec;
            }
          }
        } else if (channel.topic == api::kRecordingStatesTopic) {
          v1::RecordedStates states;
          // A few decoded per input: a compressed chunk may hold many big ones, and each
          // vehicle's snapshot takes 40 times its bytes in the file.
          if (decoded_vehicles < (1 << 16) && states.ParseFromArray(message.data.data(), size)) {
            decoded_vehicles += static_cast<std::size_t>(states.vehicle_id_steps_size());
            (void)api::RecordedStatesToFrame(states, vehicles);
          }
        }
        return absl::OkStatus();
      };
  // A playback's opening (through the summary's chunk and message indexes when the file has
  // a summary, else read whole) and frames from its start, middle and end.
  absl::StatusOr<std::unique_ptr<api::RecordingFrames>> frames = api::RecordingFrames::FromReader(
      record::McapFileReader::FromBytes(bytes, {.max_chunk_bytes = 1 << 20}));
  if (frames.ok()) {
    const std::vector<api::RecordingFrames::Entry>& entries = (*frames)->frames();
    for (const std::size_t index : {std::size_t{0}, entries.size() / 2, entries.size() - 1}) {
      (void)(*frames)->Frame(index);
      (void)(*frames)->IndexAt(entries[index].time_ns + 1);
    }
  }
  if (!reader->ReadAll(decode).ok()) return;
  (void)reader->Statistics();
  (void)reader->ReadSummary();
  const auto ignore = [](const record::McapChannel&, const record::McapSchema*,
                         const record::McapMessage&) { return absl::OkStatus(); };
  for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) {
    (void)reader->ReadChunk(*it, ignore);
    (void)reader->ReadChunk(*it + 1, ignore);  // Not a chunk: refused.
  }
}

}  // namespace
}  // namespace pitlane::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);  // Parse failures are expected, not news.
    return true;
  }();
  (void)quiet;
  pitlane::fuzz::Run(absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
