// SHA-256 (FIPS 180-4) of a short message, for token digests (tokens.h). Written here rather
// than taken from OpenSSL: OpenSSL 3's EVP interface allocates and sets up a provider context
// on every digest, which cost a few percent of a whole Step call in the server; this one
// allocates nothing, and wipes what held the message. Checked against OpenSSL on every length
// from 0 to 300 bytes and FIPS 180-2's two-block example (auth_test.cc).
#ifndef PITLANE_SERVER_AUTH_SHA256_H_
#define PITLANE_SERVER_AUTH_SHA256_H_

#include <array>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace pitlane::auth {

// The SHA-256 digest of `message` (any length).
std::array<std::uint8_t, 32> Sha256(absl::string_view message);

}  // namespace pitlane::auth

#endif  // PITLANE_SERVER_AUTH_SHA256_H_
