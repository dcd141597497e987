// Who is calling, and what they may do: the server's access control (docs/security.md).
//
// With --auth=token every call shows a bearer token (server/auth/tokens.h) in its metadata;
// Authenticate turns it into the caller's Grant, and Check says whether that grant may do what
// the call does (server/auth/permissions.h). With --auth=none every caller may do everything.
// Either way the sessions a client creates count against its quota (--max_sessions_per_client):
// a token's principal, or with --auth=none the peer's host (loopback peers are not counted: they
// are the server machine's own users).
#ifndef PITLANE_SERVER_API_ACCESS_H_
#define PITLANE_SERVER_API_ACCESS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "server/auth/permissions.h"
#include "server/auth/tokens.h"

namespace pitlane::api {

enum class AuthMode {
  kNone,   // Every caller may do everything; no tokens.
  kToken,  // Every call needs a token.
};

struct AccessOptions {
  AuthMode mode = AuthMode::kNone;
  // Sessions one client may hold at once (admins and, with --auth=none, loopback peers are
  // not limited).
  std::uint32_t max_sessions_per_client = 8;
  // Live tokens one session may hold (owner, driver and viewer tokens together).
  std::uint32_t max_tokens_per_session = 1000;
};

// The caller of one call.
struct Caller {
  // The token's grant; null with --auth=none (may do everything).
  std::shared_ptr<const auth::Grant> grant;
  // The digest of the token it showed; nullopt with --auth=none.
  std::optional<auth::Digest> digest;
  // With --auth=none: the peer's host (PeerHost), its quota identity. Filled only where a
  // quota is counted (WithQuotaIdentity), since reading the peer costs every call.
  std::string peer_host;

  // Whose quota its sessions count against; empty if not limited (an admin, a loopback peer).
  const std::string& principal() const;
  // The id of the token it showed (auth::TokenId); empty with --auth=none.
  std::string token_id() const;
};

// Thread-safe.
class Access {
 public:
  explicit Access(const AccessOptions& options) : options_(options) {}

  AuthMode mode() const { return options_.mode; }
  const AccessOptions& options() const { return options_; }
  auth::TokenStore& tokens() { return tokens_; }
  const auth::TokenStore& tokens() const { return tokens_; }

  // The caller of a call, from its `authorization` metadata. Unauthenticated with
  // --auth=token for no token, a malformed, unknown or revoked one (never echoing it).
  absl::StatusOr<Caller> Authenticate(const grpc::ServerContextBase& context) const;
  // The caller showing `token` (nullopt: none) outside gRPC (the web endpoint); the same
  // errors.
  absl::StatusOr<Caller> AuthenticateToken(std::optional<absl::string_view> token) const;
  // `caller` with what its quota is counted by: with --auth=none, its peer's host.
  Caller WithQuotaIdentity(Caller caller, const grpc::ServerContextBase& context) const;

  // Whether `caller` may do what `need` says on `session_id` (and `vehicle_id`, for kDrive).
  // `not_found` is what the caller is told for a session it may not see: the same NotFound
  // as for a session that does not exist. An owner token owns its own session and every
  // session its team created (with owner tokens of its principal, the sessions its quota
  // holds), so a team whose program restarted can still list and delete them.
  absl::Status Check(const Caller& caller, auth::Need need, absl::string_view session_id,
                     std::optional<std::uint64_t> vehicle_id,
                     const absl::Status& not_found) const;
  // Whether `caller` may use a recording of `session_id` started by `owner` (a principal;
  // empty with --auth=none): the admin; an owner token of the team that started it (the
  // recording outlives its session); else as Check for the session. `not_found` otherwise.
  absl::Status CheckRecording(const Caller& caller, auth::Need need, absl::string_view owner,
                              absl::string_view session_id,
                              const absl::Status& not_found) const;
  // Whether ListSessions shows `session_id` to `caller`.
  bool MaySee(const Caller& caller, absl::string_view session_id) const;

  // Whether the token `caller` authenticated with is still live (streams check again when
  // they register; see SimulatorService::RegisterStream). Always true with --auth=none.
  bool StillValid(const Caller& caller) const;

  // Quota: a slot for one more session of `caller`, taken before the session is created
  // (ResourceExhausted naming --max_sessions_per_client when it holds that many), and given
  // back by Unreserve if the session is not created after all.
  absl::Status Reserve(const Caller& caller);
  void Unreserve(const Caller& caller);
  // The session was created: tokens may be minted for it, and the slot `caller` reserved (if
  // any) is its until SessionGone.
  void Admit(const Caller* caller, absl::string_view session_id);
  // The session is gone (deleted, reaped): its slot is free and its tokens are revoked.
  void SessionGone(absl::string_view session_id);

  // Mints the tokens of `grants` for `minter`: tokens minted by an owner carry its principal
  // on; each an admin mints starts its own (see Grant::principal). An owner token reaches its
  // team's other sessions (Grant::team) when an admin minted it, or when `for_new_session`
  // (CreateSession's owner token) and the minter's own token did; an owner token minted to
  // share one session never does. `pending` as TokenStore::MintAll.
  absl::StatusOr<std::vector<auth::Minted>> Mint(const Caller& minter,
                                                 std::vector<auth::Grant> grants,
                                                 bool pending = false,
                                                 bool for_new_session = false);

 private:
  const AccessOptions options_;
  // Whether `caller` holds an owner token of the team (principal) that created `session_id`.
  bool OwnsThroughTeam(const Caller& caller, absl::string_view session_id) const;

  auth::TokenStore tokens_;
  mutable absl::Mutex mu_;
  // Sessions held (and being created) per principal, and each session's principal.
  absl::flat_hash_map<std::string, std::uint32_t> held_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> principal_of_ ABSL_GUARDED_BY(mu_);
};

// A quota slot reserved by Access::Reserve, given back when this goes out of scope unless
// Take() says Access::Admit took it over.
class Reservation {
 public:
  Reservation(Access& access, const Caller& caller) : access_(access), caller_(caller) {}
  ~Reservation() {
    if (!taken_) access_.Unreserve(caller_);
  }
  Reservation(const Reservation&) = delete;
  Reservation& operator=(const Reservation&) = delete;
  void Take() { taken_ = true; }

 private:
  Access& access_;
  const Caller& caller_;
  bool taken_ = false;
};

// "ipv4:10.0.0.7" of "ipv4:10.0.0.7:51234": a peer without its port. Empty for loopback peers
// (127.0.0.0/8, ::1) and Unix sockets.
std::string PeerHost(absl::string_view peer);

// Whether a listen address ("127.0.0.1:50051", "[::1]:0", "localhost:50051") reaches this
// machine alone.
bool IsLoopbackAddress(absl::string_view listen_address);

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_ACCESS_H_
