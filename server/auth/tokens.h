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
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
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
  // For an owner token: it also owns every session its principal created (see
  // Access::Check). True for the owner tokens an admin mints or CreateSession returns to a
  // team's own token; false for an owner token a team mints to share one session.
  bool team = false;
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

// The tokens the server has handed out, by digest, indexed by id and by session so that no
// revocation scans every token. Tokens are minted only for sessions that are open (OpenSession
// until CloseSession), so none outlives its session. Thread-safe.
class TokenStore {
 public:
  // Sessions tokens may be minted for: from their creation until they are gone. CloseSession
  // revokes every token of the session; returns how many.
  void OpenSession(absl::string_view session_id);
  std::size_t CloseSession(absl::string_view session_id);

  // Mints a token for `grant` and returns it: the only time it exists in the clear.
  absl::StatusOr<std::string> Mint(const Grant& grant);
  // Mints a token for each of `grants`, all or none. ResourceExhausted if a session would
  // hold more than `max_per_session` live tokens (naming --max_tokens_per_session); NotFound
  // ("session_id") for a session not open. With `pending`, the tokens do not authenticate
  // until Activate (SpawnVehicle mints them before its vehicles exist).
  absl::StatusOr<std::vector<Minted>> MintAll(const std::vector<Grant>& grants,
                                              std::size_t max_per_session, bool pending = false);
  // Pending tokens (by id) become live, the i-th driving vehicle_ids[i]. Returns how many did:
  // fewer if some were revoked meanwhile (their session was reset or deleted).
  std::size_t Activate(const std::vector<Minted>& minted,
                       const std::vector<std::uint64_t>& vehicle_ids);
  // Adds a token chosen by the operator (the admin token from a file or the environment).
  // InvalidArgument if it does not have a token's form.
  absl::Status Add(absl::string_view token, const Grant& grant);

  // The grant of `token`. Unauthenticated, never echoing the token: "authorization: not a
  // Pitlane token" for a malformed one, "authorization: unknown or revoked token" otherwise.
  absl::StatusOr<Grant> Check(absl::string_view token) const;
  // The grant of the token with this digest (Unauthenticated as Check says), shared: a check
  // copies no strings.
  absl::StatusOr<std::shared_ptr<const Grant>> CheckDigest(const Digest& digest) const;

  // Revokes one token; false if it was not live.
  bool Revoke(absl::string_view token);
  // Revokes the token of `session_id` with this id (TokenId), pending or live; false if none.
  bool RevokeById(absl::string_view session_id, absl::string_view token_id);
  // Revokes the driver tokens of a session (it was reset: its vehicles are gone), or those of
  // one vehicle (it was removed); returns their ids.
  std::vector<std::string> RevokeDrivers(absl::string_view session_id);
  std::vector<std::string> RevokeVehicle(absl::string_view session_id, std::uint64_t vehicle_id);
  std::size_t size() const;
  // Tokens of a session, pending ones included.
  std::size_t live(absl::string_view session_id) const;

 private:
  struct DigestHash {
    std::size_t operator()(const Digest& digest) const;
  };
  struct Entry {
    std::shared_ptr<const Grant> grant;
    std::string id;
    bool pending = false;
  };
  using DigestSet = absl::flat_hash_set<Digest, DigestHash>;
  void InsertLocked(const Digest& digest, Entry entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(const Digest& digest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Erases the tokens of `session_id` that `revoked` picks; returns their ids.
  template <typename Predicate>
  std::vector<std::string> EraseInSessionLocked(absl::string_view session_id, Predicate revoked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<Digest, Entry, DigestHash> tokens_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Digest> by_id_ ABSL_GUARDED_BY(mu_);
  // The open sessions and the digests of their tokens.
  absl::flat_hash_map<std::string, DigestSet> sessions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pitlane::auth

#endif  // PITLANE_SERVER_AUTH_TOKENS_H_
