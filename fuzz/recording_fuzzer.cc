// Fuzzes recording files: any bytes as an MCAP file through the reader (its chunks
// decompressed and CRC-checked) and the decoding a re-simulation does (the header, the
// commands through CommandFromProto, the hashes, the gaps). A file may be refused; nothing may
// crash, trip a sanitizer, or allocate beyond a chunk's bound. Seeds: small recordings
// (fuzz/corpus/recording_fuzzer/).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/stubs/logging.h"
#include "pitlane/v1/simulator.pb.h"
#include "server/api/recording_codec.h"
#include "server/record/mcap_reader.h"

namespace pitlane::fuzz {
namespace {

void Run(absl::string_view bytes) {
  std::vector<std::string> route_names;
  (void)record::ReadMcap(
      bytes,
      [&](const record::McapChannel& channel, const record::McapSchema*,
          const record::McapMessage& message) -> absl::Status {
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
        }
        return absl::OkStatus();
      },
      // A fuzzer's input is small; so is what one chunk may expand to here.
      {.max_chunk_bytes = 1 << 20});
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
