#include "server/session/random_id.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace pitlane::session {

absl::StatusOr<std::string> NewSessionId() {
  // 128 bits: guessing one live id among 2^8 sessions at a billion tries a second would take
  // about 2^120 / 2^30 s, far beyond any attack; 96 bits would do, 128 costs nothing more.
  std::array<std::uint8_t, 16> bytes;
  if (absl::Status filled = FillRandom(absl::MakeSpan(bytes)); !filled.ok()) return filled;
  return absl::StrCat("s-", Base32Lowercase(bytes));
}

}  // namespace pitlane::session
