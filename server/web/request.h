// What the web endpoint reads of a request: its query parameters and the token it shows.
#ifndef PITLANE_SERVER_WEB_REQUEST_H_
#define PITLANE_SERVER_WEB_REQUEST_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

struct mg_connection;

namespace pitlane::web {

// A query string's parameters, percent-decoded ("a=1&b=x%20y"). At most kMaxParameters are
// read; a name given twice keeps its first value.
class RequestQuery {
 public:
  static constexpr std::size_t kMaxParameters = 32;
  explicit RequestQuery(const char* query_string);
  std::optional<absl::string_view> Get(absl::string_view name) const;

 private:
  std::vector<std::pair<std::string, std::string>> parameters_;
};

// The token a request shows: `Authorization: Bearer <token>`, else the `token` query parameter
// (a browser cannot set headers on a WebSocket), else, if `cookie_allowed` (a request from
// the server's own pages), the `pitlane_token` cookie. nullopt if none; a malformed value is
// returned as is, for the authenticator to refuse.
std::optional<std::string> TokenOf(mg_connection* connection, const RequestQuery& query,
                                   bool cookie_allowed = true);

// Whether a Host header names this machine by a loopback name or address: "localhost",
// 127.0.0.0/8 or [::1], with or without a port. False for null.
bool IsLoopbackHost(const char* host);

// Shuts down the socket of `connection` (both directions), so that civetweb's thread reading
// it stops and closes it: for a WebSocket client that stopped reading (civetweb offers no
// call for this). Found among the process's sockets by its two ends. False if not found.
bool ShutdownSocket(const mg_connection* connection);

// Writes a complete response with a body (none for HEAD), closing the connection after it;
// returns `status` (for civetweb's log). `extra_headers`: whole lines, each ending in "\r\n".
int Respond(mg_connection* connection, int status, absl::string_view reason,
            absl::string_view content_type, absl::string_view body,
            absl::string_view extra_headers = "");

// Respond with a text/plain body.
inline int RespondText(mg_connection* connection, int status, absl::string_view reason,
                       absl::string_view body, absl::string_view extra_headers = "") {
  return Respond(connection, status, reason, "text/plain; charset=utf-8", body, extra_headers);
}

// {"error": message} with the HTTP status of `error`'s code (400 for InvalidArgument and
// OutOfRange, 401 with a Bearer challenge, 403, 404, 409 for FailedPrecondition and Aborted,
// 503 for ResourceExhausted and Unavailable, 504 for DeadlineExceeded, else 500).
int RespondError(mg_connection* connection, const absl::Status& error);

// A browser says which page sent a request that changes something: only the server's own
// pages may (another site's page could otherwise use a server without tokens, or the
// visitor's cookie). PermissionDenied naming Origin for another page's; OK without an Origin
// (scripts send none).
absl::Status CheckSameOrigin(mg_connection* connection);

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_REQUEST_H_
