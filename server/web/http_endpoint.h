// The server's HTTP endpoint (--http_listen), beside the gRPC port: for operators and their
// tools. Built on civetweb (Debian's libcivetweb-dev: a small C library with HTTP and WebSocket
// in one, threads of its own, no dependencies).
//
//   GET /healthz   200 "ok": the process serves HTTP.
//   GET /readyz    200 "ready" while the server accepts calls, 503 once it is shutting down.
//   GET /metrics   Prometheus text format (server/util/metrics.h). With tokens on, it needs
//                  the admin token (`Authorization: Bearer <token>`), unless served on its own
//                  address (--metrics_listen), whose reach the operator chooses.
//   /foxglove      WebSocket, subprotocol foxglove.websocket.v1 (foxglove_hub.h).
//   GET /          the browser viewer (assets.h), its files, and its API at /api/
//                  (viewer_api.h).
//   /recordings    the recordings: listed, downloaded, deleted (recordings_api.h).
//
// Every other path is 404, every other method 405; nothing a client sends is logged.
#ifndef PITLANE_SERVER_WEB_HTTP_ENDPOINT_H_
#define PITLANE_SERVER_WEB_HTTP_ENDPOINT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/util/metrics.h"

struct mg_context;
struct mg_connection;

namespace pitlane::web {

class FoxgloveHub;
class ViewerApi;
class RecordingsApi;

struct HttpOptions {
  // host:port to listen on ("127.0.0.1:8080"; port 0 picks a free one).
  std::string listen_address;
  // Which routes this address serves.
  bool serve_health = true;
  bool serve_metrics = true;
  // Whether `Authorization: Bearer <token>` names an admin; null: /metrics is open.
  std::function<bool(absl::string_view token)> is_admin_token;
  // Serves Foxglove's WebSocket protocol on /foxglove (not owned; must outlive the endpoint).
  FoxgloveHub* foxglove = nullptr;
  // Serves the browser viewer: its page at /, its files, and its API at /api/ (not owned).
  ViewerApi* viewer_api = nullptr;
  // Serves /recordings (not owned).
  RecordingsApi* recordings_api = nullptr;
  // Connections served at once (civetweb holds a thread for each, WebSockets included).
  int max_connections = 256;
  // Answer only requests whose Host is a loopback name or address (421 otherwise): for an
  // endpoint on loopback without tokens, which a web page could otherwise reach by pointing
  // a name of its own at 127.0.0.1 (DNS rebinding).
  bool loopback_hosts_only = false;
};

class HttpEndpoint {
 public:
  // Listens and serves until destroyed. `metrics` and `ready` must outlive the endpoint.
  // Unavailable naming the address if it cannot be bound (in use, not this machine's).
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(HttpOptions options,
                                                             const metrics::Registry* metrics,
                                                             const std::atomic<bool>* ready);
  ~HttpEndpoint();  // Stops serving; waits for requests in progress.
  HttpEndpoint(const HttpEndpoint&) = delete;
  HttpEndpoint& operator=(const HttpEndpoint&) = delete;

  // The address it listens on, the port resolved ("127.0.0.1:8080").
  const std::string& address() const { return address_; }

 private:
  HttpEndpoint(HttpOptions options, const metrics::Registry* metrics,
               const std::atomic<bool>* ready)
      : options_(std::move(options)), metrics_(metrics), ready_(ready) {}

  static int HandleHealth(mg_connection* connection, void* endpoint);
  static int HandleReady(mg_connection* connection, void* endpoint);
  static int HandleMetrics(mg_connection* connection, void* endpoint);
  static int HandleAsset(mg_connection* connection, void* asset);
  static int BeginRequest(mg_connection* connection);

  const HttpOptions options_;
  const metrics::Registry* const metrics_;
  const std::atomic<bool>* const ready_;
  mg_context* context_ = nullptr;
  std::string address_;
};

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_HTTP_ENDPOINT_H_
