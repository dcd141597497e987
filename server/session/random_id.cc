#include "server/session/random_id.h"

#include <array>

#include "absl/strings/str_cat.h"

namespace pitlane::session {

bool IsReplicaName(absl::string_view name) {
  if (name.empty() || name.size() > kMaxReplicaNameChars) return false;
  if (name.front() == '-' || name.back() == '-') return false;
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

absl::StatusOr<std::string> NewSessionId(absl::string_view replica) {
  // 128 bits: guessing one live id among 2^8 sessions at a billion tries a second would take
  // about 2^120 / 2^30 s, far beyond any attack; 96 bits would do, 128 costs nothing more.
  std::array<std::uint8_t, 16> bytes;
  if (absl::Status filled = FillRandom(absl::MakeSpan(bytes)); !filled.ok()) return filled;
  if (replica.empty()) return absl::StrCat("s-", Base32Lowercase(bytes));
  return absl::StrCat("s-", Base32Lowercase(bytes), ".", replica);
}

}  // namespace pitlane::session
