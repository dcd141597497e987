#include "server/auth/tokens.h"

#include <openssl/crypto.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/auth/sha256.h"
#include "server/util/random_bytes.h"
#include "server/util/status_macros.h"

namespace pitlane::auth {

absl::string_view RoleName(Role role) {
  switch (role) {
    case Role::kAdmin:
      return "admin";
    case Role::kOwner:
      return "owner";
    case Role::kDriver:
      return "driver";
    case Role::kViewer:
      return "viewer";
  }
  return "viewer";
}

absl::StatusOr<absl::string_view> BearerToken(std::optional<absl::string_view> header) {
  const absl::Status missing =
      absl::UnauthenticatedError("authorization: send `authorization: Bearer <token>`");
  if (!header.has_value()) return missing;
  absl::string_view value = *header;
  constexpr absl::string_view kScheme = "bearer";
  if (value.size() <= kScheme.size() || !absl::EqualsIgnoreCase(value.substr(0, 6), kScheme) ||
      value[kScheme.size()] != ' ') {
    return missing;
  }
  value.remove_prefix(kScheme.size());
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (value.empty()) return missing;
  return value;
}

absl::StatusOr<std::string> NewToken() {
  std::array<std::uint8_t, kTokenRandomBytes> bytes;
  if (absl::Status filled = FillRandom(absl::MakeSpan(bytes)); !filled.ok()) return filled;
  return absl::StrCat(kTokenPrefix, Base32Lowercase(bytes));
}

bool LooksLikeToken(absl::string_view text) {
  if (text.size() != kTokenLength || !absl::StartsWith(text, kTokenPrefix)) return false;
  for (const char c : text.substr(kTokenPrefix.size())) {
    if (!((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7'))) return false;
  }
  return true;
}

Digest DigestOf(absl::string_view token) { return Sha256(token); }

bool SameDigest(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string TokenId(const Digest& digest) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string id = "tok_";
  for (std::size_t i = 0; i < 8; ++i) {
    id.push_back(kHex[digest[i] >> 4]);
    id.push_back(kHex[digest[i] & 0xF]);
  }
  return id;
}

std::size_t TokenStore::DigestHash::operator()(const Digest& digest) const {
  // The digest is uniformly distributed already: its first bytes make a fine hash.
  std::size_t hash;
  std::memcpy(&hash, digest.data(), sizeof(hash));
  return hash;
}

void TokenStore::OpenSession(absl::string_view session_id) {
  absl::MutexLock lock(&mu_);
  sessions_.try_emplace(session_id);
}

std::size_t TokenStore::CloseSession(absl::string_view session_id) {
  absl::MutexLock lock(&mu_);
  const auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return 0;
  const DigestSet digests = std::move(it->second);
  sessions_.erase(it);
  for (const Digest& digest : digests) {
    const auto token = tokens_.find(digest);
    if (token == tokens_.end()) continue;
    by_id_.erase(token->second.id);
    tokens_.erase(token);
  }
  return digests.size();
}

void TokenStore::InsertLocked(const Digest& digest, Entry entry) {
  if (entry.grant->role != Role::kAdmin) sessions_[entry.grant->session_id].insert(digest);
  by_id_[entry.id] = digest;
  tokens_.insert_or_assign(digest, std::move(entry));
}

void TokenStore::EraseLocked(const Digest& digest) {
  const auto it = tokens_.find(digest);
  if (it == tokens_.end()) return;
  if (it->second.grant->role != Role::kAdmin) {
    const auto session = sessions_.find(it->second.grant->session_id);
    if (session != sessions_.end()) session->second.erase(digest);
  }
  by_id_.erase(it->second.id);
  tokens_.erase(it);
}

template <typename Predicate>
std::vector<std::string> TokenStore::EraseInSessionLocked(absl::string_view session_id,
                                                          Predicate revoked) {
  std::vector<std::string> ids;
  const auto session = sessions_.find(session_id);
  if (session == sessions_.end()) return ids;
  std::vector<Digest> erase;
  for (const Digest& digest : session->second) {
    const auto it = tokens_.find(digest);
    if (it != tokens_.end() && revoked(*it->second.grant)) {
      erase.push_back(digest);
      ids.push_back(it->second.id);
    }
  }
  for (const Digest& digest : erase) EraseLocked(digest);
  return ids;
}

absl::StatusOr<std::string> TokenStore::Mint(const Grant& grant) {
  ASSIGN_OR_RETURN(std::vector<Minted> minted,
                   MintAll({grant}, std::numeric_limits<std::size_t>::max()));
  return std::move(minted.front().token);
}

absl::StatusOr<std::vector<Minted>> TokenStore::MintAll(const std::vector<Grant>& grants,
                                                        std::size_t max_per_session,
                                                        bool pending) {
  std::vector<Minted> minted;
  std::vector<Digest> digests;
  minted.reserve(grants.size());
  digests.reserve(grants.size());
  for (std::size_t i = 0; i < grants.size(); ++i) {
    ASSIGN_OR_RETURN(std::string token, NewToken());
    digests.push_back(DigestOf(token));
    minted.push_back({.token = std::move(token), .id = TokenId(digests.back())});
  }
  absl::MutexLock lock(&mu_);
  absl::flat_hash_map<absl::string_view, std::size_t> adding;
  for (const Grant& grant : grants) {
    if (grant.role == Role::kAdmin) continue;
    const auto session = sessions_.find(grant.session_id);
    if (session == sessions_.end()) {
      return absl::NotFoundError(
          absl::StrCat("session_id: session ", grant.session_id, " was deleted"));
    }
    if (++adding[grant.session_id] + session->second.size() > max_per_session) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "a session holds at most ", max_per_session,
          " live tokens (--max_tokens_per_session); revoke some with RevokeToken"));
    }
  }
  for (std::size_t i = 0; i < grants.size(); ++i) {
    InsertLocked(digests[i], {.grant = std::make_shared<const Grant>(grants[i]),
                              .id = minted[i].id,
                              .pending = pending});
  }
  return minted;
}

std::size_t TokenStore::Activate(const std::vector<Minted>& minted,
                                 const std::vector<std::uint64_t>& vehicle_ids) {
  absl::MutexLock lock(&mu_);
  std::size_t activated = 0;
  for (std::size_t i = 0; i < minted.size() && i < vehicle_ids.size(); ++i) {
    const auto id = by_id_.find(minted[i].id);
    if (id == by_id_.end()) continue;  // Revoked meanwhile (the session was reset or deleted).
    ++activated;
    Entry& entry = tokens_.at(id->second);
    auto grant = std::make_shared<Grant>(*entry.grant);
    grant->vehicle_id = vehicle_ids[i];
    entry.grant = std::move(grant);
    entry.pending = false;
  }
  return activated;
}

absl::Status TokenStore::Add(absl::string_view token, const Grant& grant) {
  if (!LooksLikeToken(token)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token: must be \"", kTokenPrefix, "\" and ", kTokenRandomChars,
        " characters of a-z and 2-7"));
  }
  const Digest digest = DigestOf(token);
  absl::MutexLock lock(&mu_);
  InsertLocked(digest, {.grant = std::make_shared<const Grant>(grant), .id = TokenId(digest)});
  return absl::OkStatus();
}

absl::StatusOr<Grant> TokenStore::Check(absl::string_view token) const {
  if (!LooksLikeToken(token)) {
    return absl::UnauthenticatedError("authorization: not a Pitlane token");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const Grant> grant, CheckDigest(DigestOf(token)));
  return *grant;
}

absl::StatusOr<std::shared_ptr<const Grant>> TokenStore::CheckDigest(const Digest& digest) const {
  absl::MutexLock lock(&mu_);
  const auto it = tokens_.find(digest);
  // The map compared the digests already; compare again in constant time, so that the
  // answer never depends on how much of a digest matched.
  if (it == tokens_.end() || !SameDigest(it->first, digest) || it->second.pending) {
    return absl::UnauthenticatedError("authorization: unknown or revoked token");
  }
  return it->second.grant;
}

bool TokenStore::Revoke(absl::string_view token) {
  if (!LooksLikeToken(token)) return false;
  const Digest digest = DigestOf(token);
  absl::MutexLock lock(&mu_);
  if (!tokens_.contains(digest)) return false;
  EraseLocked(digest);
  return true;
}

bool TokenStore::RevokeById(absl::string_view session_id, absl::string_view token_id) {
  absl::MutexLock lock(&mu_);
  const auto id = by_id_.find(token_id);
  if (id == by_id_.end()) return false;
  const Grant& grant = *tokens_.at(id->second).grant;
  if (grant.role == Role::kAdmin || grant.session_id != session_id) return false;
  EraseLocked(Digest(id->second));
  return true;
}

std::vector<std::string> TokenStore::RevokeVehicle(absl::string_view session_id, std::uint64_t vehicle_id) {
  absl::MutexLock lock(&mu_);
  return EraseInSessionLocked(session_id, [&](const Grant& grant) {
    return grant.role == Role::kDriver && grant.vehicle_id == vehicle_id;
  });
}

std::vector<std::string> TokenStore::RevokeDrivers(absl::string_view session_id) {
  absl::MutexLock lock(&mu_);
  return EraseInSessionLocked(session_id,
                              [](const Grant& grant) { return grant.role == Role::kDriver; });
}

std::size_t TokenStore::size() const {
  absl::MutexLock lock(&mu_);
  return tokens_.size();
}

std::size_t TokenStore::live(absl::string_view session_id) const {
  absl::MutexLock lock(&mu_);
  const auto it = sessions_.find(session_id);
  return it == sessions_.end() ? 0 : it->second.size();
}

}  // namespace pitlane::auth
