// `pitlane-server --healthcheck`: whether a server on this machine is ready, asked the way a
// container runtime's HEALTHCHECK asks, with no probe tool beside the server's own binary.
#ifndef PITLANE_SERVER_APP_HEALTHCHECK_H_
#define PITLANE_SERVER_APP_HEALTHCHECK_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace pitlane::app {

// GET /readyz from the HTTP endpoint at `http_listen` (--http_listen, host:port with an IPv4
// host; 0.0.0.0 means this machine, 127.0.0.1), within `timeout` in all. OK on 200;
// Unavailable with what went wrong otherwise (refused, timed out, the answer's status line);
// InvalidArgument when `http_listen` is empty or its port is 0 (nothing to ask).
absl::Status CheckReady(absl::string_view http_listen, absl::Duration timeout);

}  // namespace pitlane::app

#endif  // PITLANE_SERVER_APP_HEALTHCHECK_H_
