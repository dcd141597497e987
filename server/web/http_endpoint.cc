#include "server/web/http_endpoint.h"

#include <civetweb.h>

#include <cstring>
#include <mutex>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/auth/tokens.h"

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

// A complete response with a body (none for HEAD); returns the status for civetweb's log.
int Respond(mg_connection* connection, int status, absl::string_view reason,
            absl::string_view content_type, absl::string_view body,
            absl::string_view extra_headers = "") {
  const mg_request_info* request = mg_get_request_info(connection);
  const bool head = request != nullptr && std::strcmp(request->request_method, "HEAD") == 0;
  const std::string header = absl::StrCat(
      "HTTP/1.1 ", status, " ", reason, "\r\nContent-Type: ", content_type,
      "\r\nContent-Length: ", body.size(),
      "\r\nCache-Control: no-store\r\nConnection: close\r\n", extra_headers, "\r\n");
  mg_write(connection, header.data(), header.size());
  if (!head) mg_write(connection, body.data(), body.size());
  return status;
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
  const char* configuration[] = {"listening_ports", listen.c_str(), "num_threads", "64",
                                 "request_timeout_ms", "3000", nullptr};
  mg_callbacks callbacks;
  std::memset(&callbacks, 0, sizeof(callbacks));
  callbacks.log_message = &LogMessage;
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
