#include "server/util/random_bytes.h"

#include <sys/random.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace pitlane {

// getrandom without flags blocks only until the kernel's pool is first seeded (early boot),
// may be interrupted by a signal (EINTR), and may return fewer bytes than asked: so it is
// called until every byte is filled.
absl::Status FillRandom(absl::Span<std::uint8_t> bytes) {
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("getrandom failed, so no id or token can be made: ", std::strerror(errno)));
    }
    filled += static_cast<std::size_t>(got);
  }
  return absl::OkStatus();
}

std::string Base32Lowercase(absl::Span<const std::uint8_t> bytes) {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  std::string out;
  out.reserve((bytes.size() * 8 + 4) / 5);
  std::uint32_t buffer = 0;  // The bits not yet written, in its low `bits` bits.
  int bits = 0;
  for (const std::uint8_t byte : bytes) {
    buffer = (buffer << 8) | byte;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out.push_back(kAlphabet[(buffer >> bits) & 31]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(buffer << (5 - bits)) & 31]);
  return out;
}

}  // namespace pitlane
