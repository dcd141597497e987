#include "server/auth/tokens.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/util/random_bytes.h"

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

Digest DigestOf(absl::string_view token) {
  Digest digest;
  SHA256(reinterpret_cast<const unsigned char*>(token.data()), token.size(), digest.data());
  return digest;
}

bool SameDigest(const Digest& a, const Digest& b) {
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::size_t TokenStore::DigestHash::operator()(const Digest& digest) const {
  // The digest is uniformly distributed already: its first bytes make a fine hash.
  std::size_t hash;
  std::memcpy(&hash, digest.data(), sizeof(hash));
  return hash;
}

absl::StatusOr<std::string> TokenStore::Mint(const Grant& grant) {
  absl::StatusOr<std::string> token = NewToken();
  if (!token.ok()) return token.status();
  absl::MutexLock lock(&mu_);
  grants_[DigestOf(*token)] = grant;
  return token;
}

absl::Status TokenStore::Add(absl::string_view token, const Grant& grant) {
  if (!LooksLikeToken(token)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "token: must be \"", kTokenPrefix, "\" and ", kTokenRandomChars,
        " characters of a-z and 2-7"));
  }
  absl::MutexLock lock(&mu_);
  grants_[DigestOf(token)] = grant;
  return absl::OkStatus();
}

absl::StatusOr<Grant> TokenStore::Check(absl::string_view token) const {
  if (!LooksLikeToken(token)) {
    return absl::UnauthenticatedError("authorization: not a Pitlane token");
  }
  const Digest digest = DigestOf(token);
  absl::MutexLock lock(&mu_);
  const auto it = grants_.find(digest);
  // The map compared the digests already; compare again in constant time, so that the
  // answer never depends on how much of a digest matched.
  if (it == grants_.end() || !SameDigest(it->first, digest)) {
    return absl::UnauthenticatedError("authorization: unknown or revoked token");
  }
  return it->second;
}

bool TokenStore::Revoke(absl::string_view token) {
  if (!LooksLikeToken(token)) return false;
  absl::MutexLock lock(&mu_);
  return grants_.erase(DigestOf(token)) > 0;
}

std::size_t TokenStore::RevokeSession(absl::string_view session_id) {
  absl::MutexLock lock(&mu_);
  return absl::erase_if(grants_, [&](const auto& entry) {
    return entry.second.role != Role::kAdmin && entry.second.session_id == session_id;
  });
}

std::size_t TokenStore::RevokeVehicle(absl::string_view session_id, std::uint64_t vehicle_id) {
  absl::MutexLock lock(&mu_);
  return absl::erase_if(grants_, [&](const auto& entry) {
    return entry.second.role == Role::kDriver && entry.second.session_id == session_id &&
           entry.second.vehicle_id == vehicle_id;
  });
}

std::size_t TokenStore::size() const {
  absl::MutexLock lock(&mu_);
  return grants_.size();
}

}  // namespace pitlane::auth
