// Randomness that cannot be predicted, for ids and tokens, and its text form.
#ifndef PITLANE_SERVER_UTIL_RANDOM_BYTES_H_
#define PITLANE_SERVER_UTIL_RANDOM_BYTES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace pitlane {

// Fills `bytes` from the OS's CSPRNG (getrandom(2)). Internal if the OS has no randomness to
// give (getrandom missing or failing): callers never fall back to a weaker source.
absl::Status FillRandom(absl::Span<std::uint8_t> bytes);

// RFC 4648 base32 in lowercase ("a"-"z", "2"-"7"), without padding: 5 bits a character, most
// significant first; a last partial group is filled with zero bits.
std::string Base32Lowercase(absl::Span<const std::uint8_t> bytes);

}  // namespace pitlane

#endif  // PITLANE_SERVER_UTIL_RANDOM_BYTES_H_
