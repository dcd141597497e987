#include "server/app/server.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "grpc/grpc.h"
#include "grpc/health/v1/health.pb.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "server/api/audit.h"
#include "server/api/frame_encoder.h"
#include "server/api/recording_codec.h"
#include "server/api/recording_replay.h"
#include "server/api/wire.h"
#include "server/web/recorded_channels.h"

namespace pitlane::app {
namespace {

// The server pings a connection that has been quiet this long, and closes it if the ping is
// not answered within the timeout.
constexpr int kKeepaliveTime_ms = 20'000;
constexpr int kKeepaliveTimeout_ms = 10'000;

}  // namespace

namespace {

// A web client, as the gRPC layer's access control sees it.
class AccessVisitor final : public web::Visitor {
 public:
  AccessVisitor(const api::Access* access, api::Caller caller)
      : access_(access), caller_(std::move(caller)) {}
  bool MaySee(absl::string_view session_id) const override {
    return access_->MaySee(caller_, session_id);
  }
  absl::Status MayControl(absl::string_view session_id) const override {
    return access_->Check(caller_, auth::Need::kOwn, session_id, std::nullopt,
                          session::NoSuchSession(session_id));
  }
  absl::Status MayUseRecording(absl::string_view owner, absl::string_view session_id,
                               bool change) const override {
    return access_->CheckRecording(
        caller_, change ? auth::Need::kOwn : auth::Need::kRead, owner, session_id,
        absl::NotFoundError("recording_id: no such recording on this server"));
  }
  bool StillValid() const override { return access_->StillValid(caller_); }
  std::string Who() const override {
    return caller_.grant == nullptr
               ? "anyone"
               : absl::StrCat(auth::RoleName(caller_.grant->role), " ", caller_.token_id());
  }

 private:
  const api::Access* const access_;
  const api::Caller caller_;
};

}  // namespace

Server::Server(const ServerOptions& options)
    : session_metrics_(session::SessionMetrics::Register(metrics_)),
      scheduler_(options.clock != nullptr ? options.clock : &steady_clock_,
                 options.worker_threads),
      access_(options.access),
      sessions_(options.limits, &scheduler_,
                [this](absl::string_view id) { access_.SessionGone(id); }, &session_metrics_),
      service_(sessions_, options.scenario_dir, &access_, &metrics_) {
  sessions_.AddGauges(metrics_);
}

absl::StatusOr<std::unique_ptr<Server>> Server::Start(
    const ServerOptions& options, const std::vector<grpc::Service*>& extra_services) {
  // Both are process-wide switches that must precede the builder. The health service's
  // descriptor is referenced so that its generated code is linked in and reflection can
  // describe grpc.health.v1.Health.
  grpc::EnableDefaultHealthCheckService(true);
  api::InstallProtobufLogHandler();
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  (void)grpc::health::v1::HealthCheckRequest::descriptor();

  std::unique_ptr<Server> server(new Server(options));
  if (options.access.mode == api::AuthMode::kToken) {
    if (options.admin_token.empty()) {
      return absl::InvalidArgumentError("an admin token is needed with --auth=token");
    }
    // The error names the rule, never the token.
    if (absl::Status added = server->access_.tokens().Add(options.admin_token,
                                                          {.role = auth::Role::kAdmin});
        !added.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the admin token is not a Pitlane token: ", added.message()));
    }
  }
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options.listen_address,
                           options.credentials != nullptr ? options.credentials
                                                          : grpc::InsecureServerCredentials(),
                           &port);
  // gRPC sets SO_REUSEPORT by default, so a second server on a busy port would start and the
  // kernel would split new connections between the two. Off, a busy port fails the bind.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // A client whose machine went away without closing its connection (a laptop's lid shut, a
  // network cable pulled) is found within about 30 s instead of gRPC's default 2 h: its
  // streams end and its car's controller is released.
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveTime_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeout_ms);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder.SetMaxReceiveMessageSize(options.max_receive_message_bytes);
  builder.SetMaxSendMessageSize(options.max_send_message_bytes);
  api::SetMaxResponseBytes(static_cast<std::size_t>(options.max_send_message_bytes));
  if (options.recording.has_value()) {
    const session::Clock* clock = options.clock != nullptr ? options.clock : &server->steady_clock_;
    absl::StatusOr<std::unique_ptr<record::Recordings>> recordings = record::Recordings::Create(
        *options.recording,
        [](const std::shared_ptr<session::Session>& session) {
          auto channels = std::make_shared<web::RecordedChannels>(session);
          return std::make_unique<api::ProtoRecordingEncoder>(
              [channels](const session::Delivery& delivery, std::uint64_t time_ns,
                         record::RecordingOutput& out) { channels->Write(delivery, time_ns, out); },
              [session] { return session->Describe(/*with_vehicles=*/true).vehicles; });
        },
        clock,
        [] {
          return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::system_clock::now().time_since_epoch())
                                                .count());
        },
        &api::DescribeRecordingFile);
    if (!recordings.ok()) return recordings.status();
    server->recordings_ = *std::move(recordings);
    server->service_.SetRecordings(server->recordings_.get());
  }
  builder.RegisterService(&server->service_);
  for (grpc::Service* service : extra_services) builder.RegisterService(service);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("--listen: cannot listen on \"", options.listen_address,
                     "\": the port is in use or the host is not an address of this machine",
                     options.credentials != nullptr
                         ? ", or the TLS certificate and key cannot be used (--tls_cert_file "
                           "and --tls_key_file must be a matching PEM pair)"
                         : ""));
  }
  server->port_ = port;
  const std::string& listen = options.listen_address;
  server->address_ = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
  if (!options.http_listen_address.empty()) {
    web::FoxgloveOptions foxglove{
        .encode_world_state =
            [service = &server->service_](const session::Session& session,
                                          const std::shared_ptr<const session::Frame>& frame) {
              return service->EncodeFrame(session, frame);
            },
        .world_state_descriptor_set = api::WorldStateDescriptorSet()};
    // Message timestamps: the pacing clock, read as time since the Unix epoch.
    const session::Clock* clock = options.clock != nullptr ? options.clock : &server->steady_clock_;
    foxglove.epoch_offset_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count() -
                               clock->NowNanos();
    if (options.access.mode == api::AuthMode::kToken) {
      foxglove.authenticate = [access = &server->access_](std::optional<absl::string_view> token)
          -> absl::StatusOr<std::unique_ptr<web::Visitor>> {
        absl::StatusOr<api::Caller> caller = access->AuthenticateToken(token);
        if (!caller.ok()) return caller.status();
        return std::make_unique<AccessVisitor>(access, *std::move(caller));
      };
    }
    const auto audit = [](absl::string_view peer, absl::string_view action,
                          const std::vector<std::pair<std::string, std::string>>& fields) {
      std::vector<api::AuditField> audit_fields;
      audit_fields.reserve(fields.size());
      for (const auto& [key, value] : fields) audit_fields.emplace_back(key, value);
      api::Audit(peer, action, audit_fields);
    };
    server->viewer_api_ = std::make_unique<web::ViewerApi>(web::ViewerApiOptions{
        .sessions = &server->sessions_,
        .authenticate = foxglove.authenticate,
        .audit = audit,
        .after_reset = [service = &server->service_](absl::string_view id) {
          service->AfterReset(id);
        }});
    server->recordings_api_ = std::make_unique<web::RecordingsApi>(
        web::RecordingsApiOptions{.recordings = server->recordings_.get(),
                                  .authenticate = foxglove.authenticate,
                                  .audit = audit});
    server->foxglove_ = std::make_unique<web::FoxgloveHub>(std::move(foxglove), &server->sessions_,
                                                           clock, &server->metrics_);
    web::HttpOptions http{
        .listen_address = options.http_listen_address,
        .foxglove = server->foxglove_.get(),
        .viewer_api = server->viewer_api_.get(),
        .recordings_api = server->recordings_api_.get(),
        .loopback_hosts_only = options.access.mode == api::AuthMode::kNone &&
                               api::IsLoopbackAddress(options.http_listen_address)};
    if (options.access.mode == api::AuthMode::kToken) {
      const api::Access* access = &server->access_;
      http.is_admin_token = [access](absl::string_view token) {
        const absl::StatusOr<auth::Grant> grant = access->tokens().Check(token);
        return grant.ok() && grant->role == auth::Role::kAdmin;
      };
    }
    absl::StatusOr<std::unique_ptr<web::HttpEndpoint>> http_endpoint =
        web::HttpEndpoint::Start(std::move(http), &server->metrics_, &server->ready_);
    if (!http_endpoint.ok()) {
      return absl::UnavailableError(
          absl::StrCat("--http_listen: ", http_endpoint.status().message()));
    }
    server->http_ = *std::move(http_endpoint);
  }
  if (!options.metrics_listen_address.empty()) {
    absl::StatusOr<std::unique_ptr<web::HttpEndpoint>> metrics_endpoint = web::HttpEndpoint::Start(
        {.listen_address = options.metrics_listen_address, .serve_health = false},
        &server->metrics_, &server->ready_);
    if (!metrics_endpoint.ok()) {
      return absl::UnavailableError(
          absl::StrCat("--metrics_listen: ", metrics_endpoint.status().message()));
    }
    server->metrics_http_ = *std::move(metrics_endpoint);
  }
  server->server_->GetHealthCheckService()->SetServingStatus(
      ::pitlane::v1::Simulator::service_full_name(), true);
  if (!options.startup_scenario.empty()) {
    ::pitlane::v1::SessionConfig config;
    config.set_scenario(options.startup_scenario);
    absl::StatusOr<std::shared_ptr<session::Session>> session =
        server->service_.CreateFromConfig(config);
    if (!session.ok()) return session.status();
    (*session)->Keep();  // The demo a newcomer came back to must still be there.
    server->startup_session_id_ = (*session)->id();
  }
  server->ready_ = true;  // Everything is up: /readyz says so.
  return server;
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  if (shut_down_ || server_ == nullptr) return;  // Never started (e.g. the bind failed).
  shut_down_ = true;
  ready_ = false;  // /readyz answers 503 while the calls drain.
  // Refuse new sessions and end every stream with UNAVAILABLE first, so that gRPC's drain
  // below has only short unary calls left to wait for.
  sessions_.Shutdown(absl::UnavailableError("the server is shutting down"));
  service_.StopReplays();  // Their sessions are closed: they end at once.
  server_->Shutdown(std::chrono::system_clock::now() + grace);
  server_->Wait();
  // The sessions closed: their recordings ended; their files are completed here.
  if (recordings_ != nullptr) recordings_->StopAll();
  scheduler_.Stop();  // No session or reaper runs while the members are destroyed.
  // Last, the HTTP endpoints (civetweb takes about a second to stop its threads).
  http_.reset();
  metrics_http_.reset();
}

Server::~Server() {
  Shutdown();
  scheduler_.Stop();  // Also when the server never started (Shutdown returned early).
}

}  // namespace pitlane::app
