#include "server/web/http_endpoint.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/auth/tokens.h"
#include "server/web/foxglove.h"
#include "server/web/assets.h"
#include "server/web/foxglove_hub.h"
#include "server/web/recordings_api.h"
#include "server/web/viewer_api.h"
#include "server/web/request.h"

namespace pitlane::web {
namespace {

// civetweb's own messages (a bind that failed, a malformed request) go here while mg_start
// runs on this thread, so that Start can say why; later ones are dropped, since clients can
// trigger them.
thread_local std::string* start_messages = nullptr;

int LogMessage(const mg_connection* /*connection*/, const char* message) {
  if (start_messages != nullptr && message != nullptr) {
    if (!start_messages->empty()) start_messages->append("; ");
    start_messages->append(message);
  }
  return 1;  // Handled: civetweb writes nothing to stderr.
}

bool IsGetOrHead(const mg_request_info& request) {
  return std::strcmp(request.request_method, "GET") == 0 ||
         std::strcmp(request.request_method, "HEAD") == 0;
}

// 405 for any method but GET and HEAD; nullopt when the request may go on.
std::optional<int> RefuseOtherMethods(mg_connection* connection) {
  const mg_request_info* request = mg_get_request_info(connection);
  if (request != nullptr && IsGetOrHead(*request)) return std::nullopt;
  return Respond(connection, 405, "Method Not Allowed", "text/plain; charset=utf-8",
                 "method: only GET and HEAD\n", "Allow: GET, HEAD\r\n");
}

HttpEndpoint* EndpointOf(void* endpoint) { return static_cast<HttpEndpoint*>(endpoint); }

}  // namespace

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    HttpOptions options, const metrics::Registry* metrics, const std::atomic<bool>* ready) {
  static std::once_flag library;
  std::call_once(library, [] { mg_init_library(0); });
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint(std::move(options), metrics, ready));
  const std::string& listen = endpoint->options_.listen_address;
  // civetweb gives each connection a thread while it lasts. Requests are short (a scrape, a
  // probe) and the connection is closed after each; one that sends nothing is dropped after
  // the request timeout. Still, a client holding more idle connections than there are threads
  // delays the probes by up to that timeout (docs/operations.md).
  // A WebSocket holds its thread while it lasts; a write to a client that stopped reading
  // gives up after the request timeout, and the connection is then shut down. Pings every
  // 30 s of silence find clients that vanished.
  const std::string threads = absl::StrCat(endpoint->options_.max_connections);
  const char* configuration[] = {"listening_ports", listen.c_str(),
                                 "num_threads", threads.c_str(),
                                 "request_timeout_ms", "3000",
                                 "websocket_timeout_ms", "30000",
                                 "enable_websocket_ping_pong", "yes",
                                 nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = &LogMessage;
  callbacks.begin_request = &BeginRequest;
  std::string messages;
  start_messages = &messages;
  endpoint->context_ = mg_start(&callbacks, endpoint.get(), configuration);
  start_messages = nullptr;
  if (endpoint->context_ == nullptr) {
    return absl::UnavailableError(absl::StrCat(
        "cannot serve HTTP on \"", absl::CHexEscape(listen),
        "\": the port is in use or the host is not an address of this machine",
        messages.empty() ? "" : absl::StrCat(" (", messages, ")")));
  }
  mg_server_port ports[4];
  const int count = mg_get_server_ports(endpoint->context_, 4, ports);
  const int port = count > 0 ? ports[0].port : 0;
  endpoint->address_ = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
  if (endpoint->options_.serve_health) {
    mg_set_request_handler(endpoint->context_, "/healthz$", &HandleHealth, endpoint.get());
    mg_set_request_handler(endpoint->context_, "/readyz$", &HandleReady, endpoint.get());
  }
  if (endpoint->options_.serve_metrics) {
    mg_set_request_handler(endpoint->context_, "/metrics$", &HandleMetrics, endpoint.get());
  }
  if (endpoint->options_.viewer_api != nullptr) {
    for (const WebAsset& asset : WebAssets()) {
      // A folder's index.html is its own address: "/" and "/python/".
      absl::string_view path = asset.path;
      const bool index = absl::ConsumeSuffix(&path, "index.html");
      const std::string pattern = absl::StrCat(index ? path : asset.path, "$");
      mg_set_request_handler(endpoint->context_, pattern.c_str(), &HandleAsset,
                             const_cast<WebAsset*>(&asset));
    }
    mg_set_request_handler(endpoint->context_, "/api/", &ViewerApi::Handle,
                           endpoint->options_.viewer_api);
  }
  if (endpoint->options_.recordings_api != nullptr) {
    mg_set_request_handler(endpoint->context_, "/recordings", &RecordingsApi::Handle,
                           endpoint->options_.recordings_api);
  }
  if (endpoint->options_.foxglove != nullptr) {
    static const char* protocols[] = {foxglove::kSubprotocol};
    static mg_websocket_subprotocols subprotocols = {1, protocols};
    mg_set_websocket_handler_with_subprotocols(
        endpoint->context_, "/foxglove$", &subprotocols, &FoxgloveHub::OnConnect,
        &FoxgloveHub::OnReady, &FoxgloveHub::OnData, &FoxgloveHub::OnClose,
        endpoint->options_.foxglove);
  }
  return endpoint;
}

HttpEndpoint::~HttpEndpoint() {
  if (context_ != nullptr) mg_stop(context_);
}

int HttpEndpoint::HandleHealth(mg_connection* connection, void* /*endpoint*/) {
  if (const std::optional<int> refused = RefuseOtherMethods(connection)) return *refused;
  return Respond(connection, 200, "OK", "text/plain; charset=utf-8", "ok\n");
}

int HttpEndpoint::HandleReady(mg_connection* connection, void* endpoint) {
  if (const std::optional<int> refused = RefuseOtherMethods(connection)) return *refused;
  if (EndpointOf(endpoint)->ready_->load()) {
    return Respond(connection, 200, "OK", "text/plain; charset=utf-8", "ready\n");
  }
  return Respond(connection, 503, "Service Unavailable", "text/plain; charset=utf-8",
                 "not ready: the server is starting or shutting down\n");
}

int HttpEndpoint::BeginRequest(mg_connection* connection) {
  const auto* endpoint =
      static_cast<const HttpEndpoint*>(mg_get_user_data(mg_get_context(connection)));
  if (endpoint == nullptr || !endpoint->options_.loopback_hosts_only) return 0;
  if (IsLoopbackHost(mg_get_header(connection, "Host"))) return 0;
  return RespondText(connection, 421, "Misdirected Request",
                     "Host: this server, without tokens, answers only to 127.0.0.1, localhost "
                     "or [::1] (docs/security.md)\n");
}

int HttpEndpoint::HandleAsset(mg_connection* connection, void* asset_data) {
  if (const std::optional<int> refused = RefuseOtherMethods(connection)) return *refused;
  const auto* asset = static_cast<const WebAsset*>(asset_data);
  // Only the server's own files and connections; the page's address may hold a token, so no
  // Referer leaves it.
  return Respond(connection, 200, "OK", asset->content_type, asset->body,
                 "Content-Security-Policy: default-src 'self'; connect-src 'self'; "
                 "img-src 'self' data:; frame-ancestors 'none'\r\n"
                 "X-Content-Type-Options: nosniff\r\n"
                 "Referrer-Policy: no-referrer\r\n");
}

int HttpEndpoint::HandleMetrics(mg_connection* connection, void* endpoint) {
  if (const std::optional<int> refused = RefuseOtherMethods(connection)) return *refused;
  const HttpEndpoint& self = *EndpointOf(endpoint);
  if (self.options_.is_admin_token) {
    const char* header = mg_get_header(connection, "Authorization");
    const absl::StatusOr<absl::string_view> token =
        auth::BearerToken(header == nullptr ? std::nullopt
                                            : std::optional<absl::string_view>(header));
    if (!token.ok() || !self.options_.is_admin_token(*token)) {
      // The same answer for no token, a malformed one and one that is not an admin's.
      return Respond(connection, 401, "Unauthorized", "text/plain; charset=utf-8",
                     "authorization: /metrics needs the admin token "
                     "(Authorization: Bearer <token>)\n",
                     "WWW-Authenticate: Bearer realm=\"pitlane\"\r\n");
    }
  }
  return Respond(connection, 200, "OK", "text/plain; version=0.0.4; charset=utf-8",
                 self.metrics_->Render());
}

}  // namespace pitlane::web
