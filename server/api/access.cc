#include "server/api/access.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <array>
#include <cstdint>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "server/util/random_bytes.h"
#include "server/util/status_macros.h"

namespace pitlane::api {
namespace {

// Whether `host` (no port, no brackets) is this machine alone: "localhost", an IPv4 address
// in 127.0.0.0/8, ::1, or an IPv4-mapped loopback (::ffff:127.0.0.1). Names other than
// localhost are not resolved: they count as remote.
bool IsLoopbackHost(absl::string_view host) {
  if (host == "localhost") return true;
  const std::string text(host);
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

// A principal of its own, for the tokens an admin mints.
absl::StatusOr<std::string> NewPrincipal() {
  std::array<std::uint8_t, 10> bytes;
  RETURN_IF_ERROR(FillRandom(absl::MakeSpan(bytes)));
  return absl::StrCat("p-", Base32Lowercase(bytes));
}

}  // namespace

std::string PeerHost(absl::string_view peer) {
  absl::string_view address;
  if (absl::ConsumePrefix(&peer, "ipv4:")) {
    address = peer.substr(0, peer.rfind(':'));
    return IsLoopbackHost(address) ? "" : absl::StrCat("ipv4:", address);
  }
  if (absl::ConsumePrefix(&peer, "ipv6:")) {
    // gRPC writes the brackets percent-encoded: "ipv6:%5B::1%5D:51234".
    const std::string decoded =
        absl::StrReplaceAll(peer, {{"%5B", "["}, {"%5D", "]"}, {"%5b", "["}, {"%5d", "]"}});
    address = absl::string_view(decoded).substr(0, decoded.rfind(':'));  // "[::1]"
    absl::ConsumePrefix(&address, "[");
    absl::ConsumeSuffix(&address, "]");
    address = address.substr(0, address.find('%'));  // A zone, "fe80::1%25eth0".
    return IsLoopbackHost(address) ? "" : absl::StrCat("ipv6:", address);
  }
  return "";  // A Unix socket: this machine.
}

bool IsLoopbackAddress(absl::string_view listen_address) {
  absl::string_view host = listen_address.substr(0, listen_address.rfind(':'));
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  return IsLoopbackHost(host);
}

namespace {

// The token of a call's `authorization` metadata (Unauthenticated as BearerToken says).
absl::StatusOr<absl::string_view> TokenOf(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  const auto header = metadata.find("authorization");
  std::optional<absl::string_view> value;
  if (header != metadata.end()) {
    value = absl::string_view(header->second.data(), header->second.size());
  }
  return auth::BearerToken(value);
}

}  // namespace

const std::string& Caller::principal() const {
  static const std::string* const kNobody = new std::string();
  if (grant == nullptr) return peer_host;
  return grant->role == auth::Role::kAdmin ? *kNobody : grant->principal;
}

std::string Caller::token_id() const {
  return digest.has_value() ? auth::TokenId(*digest) : std::string();
}

absl::StatusOr<Caller> Access::Authenticate(const grpc::ServerContextBase& context) const {
  if (options_.mode == AuthMode::kNone) return Caller{};
  ASSIGN_OR_RETURN(const absl::string_view token, TokenOf(context));
  return AuthenticateToken(token);
}

absl::StatusOr<Caller> Access::AuthenticateToken(std::optional<absl::string_view> shown) const {
  if (options_.mode == AuthMode::kNone) return Caller{};
  if (!shown.has_value()) {
    return absl::UnauthenticatedError(
        "token: this server needs a token (Authorization: Bearer <token>, or ?token=)");
  }
  const absl::string_view token = *shown;
  if (!auth::LooksLikeToken(token)) {
    return absl::UnauthenticatedError("authorization: not a Pitlane token");
  }
  const auth::Digest digest = auth::DigestOf(token);
  ASSIGN_OR_RETURN(std::shared_ptr<const auth::Grant> grant, tokens_.CheckDigest(digest));
  return Caller{.grant = std::move(grant), .digest = digest};
}

bool Access::OwnsThroughTeam(const Caller& caller, absl::string_view session_id) const {
  if (caller.grant == nullptr || caller.grant->role != auth::Role::kOwner ||
      !caller.grant->team || caller.grant->session_id == session_id ||
      caller.grant->principal.empty()) {
    return false;
  }
  absl::MutexLock lock(&mu_);
  const auto it = principal_of_.find(session_id);
  return it != principal_of_.end() && it->second == caller.grant->principal;
}

Caller Access::WithQuotaIdentity(Caller caller, const grpc::ServerContextBase& context) const {
  if (options_.mode == AuthMode::kNone) caller.peer_host = PeerHost(context.peer());
  return caller;
}

absl::Status Access::Check(const Caller& caller, auth::Need need, absl::string_view session_id,
                           std::optional<std::uint64_t> vehicle_id,
                           const absl::Status& not_found) const {
  if (caller.grant == nullptr) return absl::OkStatus();
  if (OwnsThroughTeam(caller, session_id)) {
    auth::Grant as_owner = *caller.grant;
    as_owner.session_id = std::string(session_id);
    return auth::Authorize(as_owner, need, session_id, vehicle_id, not_found);
  }
  return auth::Authorize(*caller.grant, need, session_id, vehicle_id, not_found);
}

absl::Status Access::CheckRecording(const Caller& caller, auth::Need need,
                                    absl::string_view owner, absl::string_view session_id,
                                    const absl::Status& not_found) const {
  if (caller.grant == nullptr || caller.grant->role == auth::Role::kAdmin) {
    return absl::OkStatus();
  }
  const auth::Grant& grant = *caller.grant;
  if (grant.role == auth::Role::kOwner && grant.team && !owner.empty() &&
      grant.principal == owner) {
    return absl::OkStatus();
  }
  return Check(caller, need, session_id, std::nullopt, not_found);
}

bool Access::MaySee(const Caller& caller, absl::string_view session_id) const {
  return caller.grant == nullptr || caller.grant->role == auth::Role::kAdmin ||
         caller.grant->session_id == session_id || OwnsThroughTeam(caller, session_id);
}

bool Access::StillValid(const Caller& caller) const {
  return !caller.digest.has_value() || tokens_.CheckDigest(*caller.digest).ok();
}

absl::Status Access::Reserve(const Caller& caller) {
  if (caller.principal().empty()) return absl::OkStatus();
  absl::MutexLock lock(&mu_);
  std::uint32_t& held = held_[caller.principal()];
  if (held >= options_.max_sessions_per_client) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "this client holds ", held, " sessions, the most it may (--max_sessions_per_client); "
        "delete one first"));
  }
  ++held;
  return absl::OkStatus();
}

void Access::Unreserve(const Caller& caller) {
  if (caller.principal().empty()) return;
  absl::MutexLock lock(&mu_);
  const auto it = held_.find(caller.principal());
  if (it != held_.end() && --it->second == 0) held_.erase(it);
}

void Access::Admit(const Caller* caller, absl::string_view session_id) {
  tokens_.OpenSession(session_id);
  if (caller == nullptr || caller->principal().empty()) return;
  absl::MutexLock lock(&mu_);
  principal_of_[session_id] = caller->principal();
}

void Access::SessionGone(absl::string_view session_id) {
  tokens_.CloseSession(session_id);
  absl::MutexLock lock(&mu_);
  const auto bound = principal_of_.find(session_id);
  if (bound == principal_of_.end()) return;
  const auto it = held_.find(bound->second);
  if (it != held_.end() && --it->second == 0) held_.erase(it);
  principal_of_.erase(bound);
}

absl::StatusOr<std::vector<auth::Minted>> Access::Mint(const Caller& minter,
                                                       std::vector<auth::Grant> grants,
                                                       bool pending, bool for_new_session) {
  const bool admin = minter.grant != nullptr && minter.grant->role == auth::Role::kAdmin;
  const bool minter_team = minter.grant != nullptr && minter.grant->team;
  for (auth::Grant& grant : grants) {
    if (admin) {
      ASSIGN_OR_RETURN(grant.principal, NewPrincipal());
    } else {
      grant.principal = minter.principal();
    }
    grant.team = grant.role == auth::Role::kOwner && (admin || (for_new_session && minter_team));
  }
  return tokens_.MintAll(grants, options_.max_tokens_per_session, pending);
}

}  // namespace pitlane::api
