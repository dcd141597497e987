// Who a web client is (the token it shows, as the gRPC layer's access control sees it), and
// what the endpoint's HTTP APIs share about their visitors.
#ifndef PITLANE_SERVER_WEB_VISITOR_H_
#define PITLANE_SERVER_WEB_VISITOR_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct mg_connection;
struct mg_request_info;

namespace pitlane::web {

// Who a web client is: which sessions it may see.
class Visitor {
 public:
  virtual ~Visitor() = default;
  virtual bool MaySee(absl::string_view session_id) const = 0;
  // OK if it may pause, resume, step and reset the session (its owner, the admin); NotFound
  // as for a missing session if it may not see it, PermissionDenied naming the role needed
  // otherwise.
  virtual absl::Status MayControl(absl::string_view session_id) const = 0;
  // OK if it may read (`change` false: list, download) or delete (`change` true) a recording
  // of `session_id` started by `owner`, by the rules of the gRPC recording calls; NotFound
  // naming recording_id if it may not even see it, PermissionDenied naming the role needed.
  virtual absl::Status MayUseRecording(absl::string_view owner, absl::string_view session_id,
                                       bool change) const = 0;
  // False once its token is revoked (its connections then end).
  virtual bool StillValid() const = 0;
  // For audit lines: "<role> <token id>", never the token.
  virtual std::string Who() const = 0;
};

// The visitor of a request's token (nullopt: none shown). Unauthenticated when tokens are on
// and it is missing, malformed, unknown or revoked. Never logs or echoes the token.
using Authenticator =
    std::function<absl::StatusOr<std::unique_ptr<Visitor>>(std::optional<absl::string_view>)>;

// The visitor of an API request (its token as TokenOf finds it); null when `authenticate` is
// (--auth=none: every visitor may do everything).
absl::StatusOr<std::unique_ptr<Visitor>> VisitorOf(const Authenticator& authenticate,
                                                   mg_connection* connection);

// A request's client address as audit lines name gRPC peers ("ipv4:127.0.0.1:51234").
std::string PeerOf(const mg_request_info& request);

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_VISITOR_H_
