// What the server prints on stdout once it listens: the address, how to connect from Python
// and grpcurl, and the startup session if there is one. A wildcard listen address (0.0.0.0 or
// [::]) is not one a client can connect to, so the banner names connectable ones instead.
#ifndef PITLANE_SERVER_APP_BANNER_H_
#define PITLANE_SERVER_APP_BANNER_H_

#include <string>

#include "absl/strings/string_view.h"

namespace pitlane::app {

// Where clients connect to a server bound to `bound_address` (host:port, port resolved).
struct ConnectAddresses {
  // From this machine: the bound address, or loopback (127.0.0.1 / [::1]) for a wildcard.
  std::string local;
  // From other machines, for a wildcard only ("" otherwise): `host_name`:port, or
  // <this host's address>:port when `host_name` is empty.
  std::string remote;
};
ConnectAddresses ConnectAddressesFor(absl::string_view bound_address, absl::string_view host_name);

// The banner. `host_name` is this machine's name (gethostname; "" if unknown);
// `startup_scenario` and `startup_session_id` are "" when no --scenario was given. Its first
// line is "Pitlane listening on <bound_address>", which scripts wait for.
// `http_address` and `metrics_address` are the bound addresses of the HTTP endpoint and of
// the metrics-only one ("" when off). `python_wheel_path` is where the HTTP endpoint serves the
// Python client's wheel (web::PythonWheelPath(); "" for none).
std::string Banner(absl::string_view bound_address, absl::string_view host_name,
                   absl::string_view startup_scenario, absl::string_view startup_session_id,
                   absl::string_view http_address = "", absl::string_view metrics_address = "",
                   absl::string_view python_wheel_path = "");

}  // namespace pitlane::app

#endif  // PITLANE_SERVER_APP_BANNER_H_
