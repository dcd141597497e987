#include "server/app/banner.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace pitlane::app {

ConnectAddresses ConnectAddressesFor(absl::string_view bound_address, absl::string_view host_name) {
  const size_t colon = bound_address.rfind(':');
  const absl::string_view host = bound_address.substr(0, colon);
  const absl::string_view port =
      colon == absl::string_view::npos ? "" : bound_address.substr(colon + 1);
  const absl::string_view remote_host = host_name.empty() ? "<this host's address>" : host_name;
  if (host == "0.0.0.0") {
    return {absl::StrCat("127.0.0.1:", port), absl::StrCat(remote_host, ":", port)};
  }
  if (host == "[::]" || host == "[::0]" || host == "[0:0:0:0:0:0:0:0]") {
    return {absl::StrCat("[::1]:", port), absl::StrCat(remote_host, ":", port)};
  }
  return {std::string(bound_address), ""};
}

std::string Banner(absl::string_view bound_address, absl::string_view host_name,
                   absl::string_view startup_scenario, absl::string_view startup_session_id,
                   absl::string_view http_address, absl::string_view metrics_address,
                   absl::string_view python_wheel_path) {
  const ConnectAddresses connect = ConnectAddressesFor(bound_address, host_name);
  std::string banner = absl::StrCat("Pitlane listening on ", bound_address, "\n");
  if (!connect.remote.empty()) {
    absl::StrAppend(&banner, "  Connect: ", connect.local, " from this machine, ", connect.remote,
                    " from others\n");
  }
  absl::StrAppendFormat(
      &banner,
      "  Python:  from pitlane import Client; client = Client(\"%s\")\n"
      "  Health:  grpc.health.v1.Health/Check; reflection is on (grpcurl -plaintext %s list)\n"
      "  Stop:    Ctrl-C\n",
      connect.local, connect.local);
  const std::string http =
      http_address.empty() ? "" : ConnectAddressesFor(http_address, host_name).local;
  if (!http.empty()) {
    absl::StrAppend(&banner, "  Viewer:  http://", http, "/ in a browser; Foxglove and Lichtblick: ws://",
                    http, "/foxglove\n");
    absl::StrAppend(&banner, "  HTTP:    http://", http, "/metrics (Prometheus), /healthz, /readyz\n");
    if (!python_wheel_path.empty()) {
      absl::StrAppend(&banner, "  Client:  pip install http://", http, python_wheel_path, "\n");
    }
  }
  if (!metrics_address.empty()) {
    absl::StrAppend(&banner, "  Metrics: http://",
                    ConnectAddressesFor(metrics_address, host_name).local, "/metrics\n");
  }
  if (!startup_session_id.empty()) {
    absl::StrAppendFormat(&banner, "  Scenario \"%s\" is running as session %s; watch it:\n",
                          startup_scenario, startup_session_id);
    if (!http.empty()) {
      absl::StrAppendFormat(&banner, "    in a browser: http://%s/?session=%s\n", http,
                            startup_session_id);
    }
    absl::StrAppendFormat(&banner,
                          "    in a terminal: PYTHONPATH=client/python /usr/bin/python3 "
                          "client/python/examples/watch.py --address %s --session %s\n",
                          connect.local, startup_session_id);
  }
  return banner;
}

}  // namespace pitlane::app
