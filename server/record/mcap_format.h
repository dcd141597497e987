// What the MCAP writer and reader share of the format (https://mcap.dev/spec, major version 0):
// the magic and the record opcodes.
#ifndef PITLANE_SERVER_RECORD_MCAP_FORMAT_H_
#define PITLANE_SERVER_RECORD_MCAP_FORMAT_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace pitlane::record::mcap {

// Begins and ends every file.
inline constexpr absl::string_view kMagic("\x89MCAP0\r\n", 8);

// Record opcodes (spec, "Records"); each record is its opcode, a u64 length, its body.
enum Opcode : std::uint8_t {
  kHeader = 0x01,
  kFooter = 0x02,
  kSchema = 0x03,
  kChannel = 0x04,
  kMessage = 0x05,
  kChunk = 0x06,
  kMessageIndex = 0x07,
  kChunkIndex = 0x08,
  kStatistics = 0x0B,
  kSummaryOffset = 0x0E,
  kDataEnd = 0x0F,
};

}  // namespace pitlane::record::mcap

#endif  // PITLANE_SERVER_RECORD_MCAP_FORMAT_H_
