// CRC-32 (ISO-HDLC: the one of zlib, PNG and MCAP; polynomial 0x04C11DB7 reflected, initial
// value and final XOR 0xFFFFFFFF), computed in pieces.
//
//   std::uint32_t crc = Crc32Update(kCrc32Init, a);
//   crc = Crc32Update(crc, b);
//   const std::uint32_t value = Crc32Final(crc);   // CRC-32 of a then b.
#ifndef PITLANE_SERVER_RECORD_CRC32_H_
#define PITLANE_SERVER_RECORD_CRC32_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace pitlane::record {

inline constexpr std::uint32_t kCrc32Init = 0xFFFFFFFFu;

// The running state after `bytes` more.
std::uint32_t Crc32Update(std::uint32_t state, absl::string_view bytes);

inline std::uint32_t Crc32Final(std::uint32_t state) { return state ^ 0xFFFFFFFFu; }

inline std::uint32_t Crc32(absl::string_view bytes) {
  return Crc32Final(Crc32Update(kCrc32Init, bytes));
}

}  // namespace pitlane::record

#endif  // PITLANE_SERVER_RECORD_CRC32_H_
