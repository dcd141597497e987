// A running Pitlane server: the wiring of every layer. The sessions (server/session) with
// their workers, the Simulator service (server/api), gRPC health checking and server
// reflection on one listening port, and the HTTP endpoint (server/web) beside it. main.cc, the service tests and the benchmarks all start
// the server through here, so they all run the same wiring. The clock the sessions pace by
// and the credentials the port is served with are injected: tests use fake time, and TLS
// plugs in as credentials.
#ifndef PITLANE_SERVER_APP_SERVER_H_
#define PITLANE_SERVER_APP_SERVER_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "server/api/simulator_service.h"
#include "server/record/recordings.h"
#include "server/session/clock.h"
#include "server/session/scheduler.h"
#include "server/session/session_manager.h"
#include "server/session/session_metrics.h"
#include "server/util/metrics.h"
#include "server/web/foxglove_hub.h"
#include "server/web/http_endpoint.h"
#include "server/web/recordings_api.h"
#include "server/web/viewer_api.h"

namespace pitlane::app {

struct ServerOptions {
  // The clock that paces sessions and times idleness; not owned, must outlive the server.
  // Null: the process's steady clock.
  const session::Clock* clock = nullptr;
  // How the gRPC port is served. Null: plaintext (grpc::InsecureServerCredentials()).
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // host:port to listen on; port 0 picks a free port (see Server::address()).
  std::string listen_address = "127.0.0.1:50051";
  session::ServerLimits limits;
  // Largest request the server accepts, bytes (gRPC's default is 4 MiB; spawning 100k
  // vehicles in one call takes about 6 MiB).
  int max_receive_message_bytes = 64 << 20;
  // The largest message sent: bigger responses are refused (api::CheckResponseSize).
  int max_send_message_bytes = 64 << 20;
  // Threads that step REALTIME sessions (one queue, earliest deadline first).
  int worker_threads = 2;
  // Where scenarios beside the shipped ones are read from ("" for none).
  std::string scenario_dir;
  // A scenario to create a session from at start ("" for none), e.g. "demo".
  std::string startup_scenario;
  // Who may do what (--auth, --max_sessions_per_client, --max_tokens_per_session).
  api::AccessOptions access;
  // With AuthMode::kToken: the admin token (auth::LooksLikeToken form). Never logged.
  std::string admin_token;
  // host:port of the HTTP endpoint (server/web: /healthz, /readyz, /metrics); "" for none.
  std::string http_listen_address;
  // host:port of an endpoint serving /metrics alone, open to whoever reaches it (the
  // operator's choice of address); "" for none.
  std::string metrics_listen_address;
  // Recording (--record_dir and its limits); unset: off.
  std::optional<record::RecordingLimits> recording;
};

class Server {
 public:
  // Builds and starts the server. `extra_services` (not owned; must outlive the server) are
  // registered beside the Simulator, e.g. a benchmark's baseline service. Unavailable naming
  // --listen if the address cannot be bound (the port is taken, even by another server with
  // SO_REUSEPORT, or the host is not this machine's).
  static absl::StatusOr<std::unique_ptr<Server>> Start(
      const ServerOptions& options, const std::vector<grpc::Service*>& extra_services = {});

  // Refuses new sessions and ends every session (their streams finish with UNAVAILABLE),
  // then stops the server, cancelling
  // calls still running after `grace`. Idempotent.
  void Shutdown(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  ~Server();

  // The address actually bound, host:port, with the port resolved.
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // The session made from options.startup_scenario ("" if none).
  const std::string& startup_session_id() const { return startup_session_id_; }
  grpc::Server& grpc_server() { return *server_; }
  session::SessionManager& sessions() { return sessions_; }
  // The HTTP endpoints' addresses, the ports resolved ("" when not served).
  std::string http_address() const { return http_ != nullptr ? http_->address() : ""; }
  std::string metrics_address() const {
    return metrics_http_ != nullptr ? metrics_http_->address() : "";
  }
  const metrics::Registry& metrics() const { return metrics_; }

 private:
  explicit Server(const ServerOptions& options);

  session::SteadyClock steady_clock_;
  metrics::Registry metrics_;                 // Before everything that counts into it.
  session::SessionMetrics session_metrics_;
  std::atomic<bool> ready_{false};            // Accepting calls (/readyz).
  session::Scheduler scheduler_;  // Before sessions_: sessions hold it.
  api::Access access_;            // Before sessions_: it is told of deleted sessions.
  session::SessionManager sessions_;
  std::unique_ptr<record::Recordings> recordings_;  // Outlives the service that starts them.
  api::SimulatorService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<web::FoxgloveHub> foxglove_;       // Outlive the endpoint serving them.
  std::unique_ptr<web::ViewerApi> viewer_api_;
  std::unique_ptr<web::RecordingsApi> recordings_api_;
  std::unique_ptr<web::HttpEndpoint> http_;          // After what it reads: stops first.
  std::unique_ptr<web::HttpEndpoint> metrics_http_;
  std::string address_;
  int port_ = 0;
  std::string startup_session_id_;
  bool shut_down_ = false;
};

}  // namespace pitlane::app

#endif  // PITLANE_SERVER_APP_SERVER_H_
