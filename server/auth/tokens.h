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
#include <vector>

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
  // Whose quota the sessions created with this token count against: the tokens an admin
  // mints start a principal of their own, and every token minted from them (an owner token
  // from CreateSession, a driver token from that owner) carries it on.
  std::string principal;
  friend bool operator==(const Grant&, const Grant&) = default;
};

// A token as it is handed out, the one time it exists in the clear, and its id.
struct Minted {
  std::string token;
  std::string id;
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

// A token's public name: "tok_" and the first 8 bytes of its digest in hexadecimal. Names it
// in RevokeToken and in logs; the token cannot be recovered from it.
std::string TokenId(const Digest& digest);

// The tokens the server has handed out, by digest. Thread-safe.
class TokenStore {
 public:
  // Mints a token for `grant` and returns it: the only time it exists in the clear.
  absl::StatusOr<std::string> Mint(const Grant& grant);
  // Mints a token for each of `grants`, all or none. ResourceExhausted if a session would
  // hold more than `max_per_session` live tokens (naming --max_tokens_per_session).
  absl::StatusOr<std::vector<Minted>> MintAll(const std::vector<Grant>& grants,
                                              std::size_t max_per_session);
  // Adds a token chosen by the operator (the admin token from a file or the environment).
  // InvalidArgument if it does not have a token's form.
  absl::Status Add(absl::string_view token, const Grant& grant);

  // The grant of `token`. Unauthenticated, never echoing the token: "authorization: not a
  // Pitlane token" for a malformed one, "authorization: unknown or revoked token" otherwise.
  absl::StatusOr<Grant> Check(absl::string_view token) const;
  // The grant of the token with this digest (Unauthenticated as Check says).
  absl::StatusOr<Grant> CheckDigest(const Digest& digest) const;

  // Revokes one token; false if it was not live.
  bool Revoke(absl::string_view token);
  // Revokes the token of `session_id` with this id (TokenId); false if none is live.
  bool RevokeById(absl::string_view session_id, absl::string_view token_id);
  // Revokes the driver tokens of a session (it was reset: its vehicle ids start again).
  std::size_t RevokeDrivers(absl::string_view session_id);
  // Revokes every token of a session (it was deleted), or of one of its vehicles (it was
  // removed); returns how many.
  std::size_t RevokeSession(absl::string_view session_id);
  std::size_t RevokeVehicle(absl::string_view session_id, std::uint64_t vehicle_id);
  std::size_t size() const;
  // Live tokens of a session.
  std::size_t live(absl::string_view session_id) const;

 private:
  struct DigestHash {
    std::size_t operator()(const Digest& digest) const;
  };
  // Erases the grants `revoked` picks, keeping the per-session counts; returns how many.
  template <typename Predicate>
  std::size_t EraseIfLocked(Predicate revoked) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertLocked(const Digest& digest, const Grant& grant) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<Digest, Grant, DigestHash> grants_ ABSL_GUARDED_BY(mu_);
  // Live tokens per session.
  absl::flat_hash_map<std::string, std::size_t> per_session_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pitlane::auth

#endif  // PITLANE_SERVER_AUTH_TOKENS_H_
