// Bearer tokens: what a client shows (gRPC metadata `authorization: Bearer <token>`) to act as
// an admin, a session's owner or viewer, or a vehicle's driver.
//
// A token is "plt_" and 32 base32 characters of 160 bits from the OS's CSPRNG: guessing a
// live one among a million at a billion tries a second takes about 2^140 / 2^30 s. The server
// keeps only each token's SHA-256 digest, so a memory dump or a log of the store yields no
// usable token; a presented token is digested and looked up by digest, and the digests are
// compared in constant time (CRYPTO_memcmp). Tokens are never logged or echoed: errors say
// what is wrong with a token, never what it was.
#ifndef PITLANE_SERVER_AUTH_TOKENS_H_
#define PITLANE_SERVER_AUTH_TOKENS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace pitlane::auth {

inline constexpr absl::string_view kTokenPrefix = "plt_";
inline constexpr std::size_t kTokenRandomBytes = 20;  // 160 bits.
inline constexpr std::size_t kTokenRandomChars = 32;  // Base32 of 160 bits.
inline constexpr std::size_t kTokenLength = 4 + kTokenRandomChars;

// What a token lets its holder do (see permissions.h for each RPC).
enum class Role {
  kAdmin,   // Everything on every session.
  kOwner,   // Everything in one session, tokens for it included.
  kDriver,  // Drive and set the controls of one vehicle; read its session.
  kViewer,  // Read one session.
};

// The role's name in messages: "admin", "owner", "driver", "viewer".
absl::string_view RoleName(Role role);

// A role and what it applies to.
struct Grant {
  Role role = Role::kViewer;
  std::string session_id;       // Empty for kAdmin.
  std::uint64_t vehicle_id = 0;  // kDriver only.
  friend bool operator==(const Grant&, const Grant&) = default;
};

// The token of an `authorization` header value, "Bearer <token>" (RFC 6750: the scheme in any
// case, one or more spaces). Unauthenticated, never echoing the value: "authorization: send
// `authorization: Bearer <token>`" when `header` is absent (nullopt) or has another form.
absl::StatusOr<absl::string_view> BearerToken(std::optional<absl::string_view> header);

// A new token (Internal if the OS has no randomness to give).
absl::StatusOr<std::string> NewToken();

// Whether `text` has a token's form (prefix, length, alphabet). Says nothing of its validity.
bool LooksLikeToken(absl::string_view text);

using Digest = std::array<std::uint8_t, 32>;
// SHA-256 of `token`.
Digest DigestOf(absl::string_view token);
// Equality in time that does not depend on where the digests differ.
bool SameDigest(const Digest& a, const Digest& b);

// The tokens the server has handed out, by digest. Thread-safe.
class TokenStore {
 public:
  // Mints a token for `grant` and returns it: the only time it exists in the clear.
  absl::StatusOr<std::string> Mint(const Grant& grant);
  // Adds a token chosen by the operator (the admin token from a file or the environment).
  // InvalidArgument if it does not have a token's form.
  absl::Status Add(absl::string_view token, const Grant& grant);

  // The grant of `token`. Unauthenticated, never echoing the token: "authorization: not a
  // Pitlane token" for a malformed one, "authorization: unknown or revoked token" otherwise.
  absl::StatusOr<Grant> Check(absl::string_view token) const;

  // Revokes one token; false if it was not live.
  bool Revoke(absl::string_view token);
  // Revokes every token of a session (it was deleted), or of one of its vehicles (it was
  // removed); returns how many.
  std::size_t RevokeSession(absl::string_view session_id);
  std::size_t RevokeVehicle(absl::string_view session_id, std::uint64_t vehicle_id);
  std::size_t size() const;

 private:
  struct DigestHash {
    std::size_t operator()(const Digest& digest) const;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Digest, Grant, DigestHash> grants_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pitlane::auth

#endif  // PITLANE_SERVER_AUTH_TOKENS_H_
