#include "pitlane/client.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace pitlane {
namespace {

// A replica name (the server's --replica): 1 to 32 of a-z, 0-9 and '-', not beginning or
// ending with '-'.
bool IsReplicaName(absl::string_view name) {
  if (name.empty() || name.size() > 32 || name.front() == '-' || name.back() == '-') {
    return false;
  }
  for (const char c : name) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return true;
}

// Session ids as servers make them ("s-", 26 of base32, maybe "." and a replica name); only
// these go into the routing header.
bool IsSessionId(absl::string_view id) {
  if (!absl::ConsumePrefix(&id, "s-") || id.size() < 26) return false;
  for (const char c : id.substr(0, 26)) {
    if (!(absl::ascii_islower(c) || (c >= '2' && c <= '7'))) return false;
  }
  id.remove_prefix(26);
  return id.empty() || (absl::ConsumePrefix(&id, ".") && IsReplicaName(id));
}

}  // namespace

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

bool Driver::Send(std::uint64_t tick, const v1::VehicleControl& control) {
  v1::DriveRequest request;
  request.mutable_control()->set_tick(tick);
  *request.mutable_control()->mutable_control() = control;
  return stream_->Write(request);
}

absl::Status Driver::Close() {
  if (closed_) return absl::OkStatus();
  closed_ = true;
  // Cancelled first: WritesDone could wait on a peer that reads no more.
  context_.TryCancel();
  const grpc::Status status = stream_->Finish();
  // Ended here: CANCELLED is the expected ending, not an error.
  if (status.error_code() == grpc::StatusCode::CANCELLED) return absl::OkStatus();
  return FromGrpc(status);
}

Driver::~Driver() { (void)Close(); }

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  if (options.address.empty()) return absl::InvalidArgumentError("address: empty");
  for (const char c : options.token) {
    // A header value gRPC cannot send would be echoed in its error; refused here, unseen.
    if (c < '!' || c > '~') {
      return absl::InvalidArgumentError(
          "token: holds characters a token never has (Pitlane tokens are plt_ and 32 "
          "characters of a-z and 2-7)");
    }
  }
  if (!options.replica.empty() && !IsReplicaName(options.replica)) {
    return absl::InvalidArgumentError(
        absl::StrCat("replica: must be 1 to 32 characters of a-z, 0-9 and '-', beginning and "
                     "ending with a letter or digit, got \"", options.replica, "\""));
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  // TLS when asked, or when any certificate or key is given (never a token in clear then).
  if (options.tls || !options.root_certificates.empty() || !options.private_key.empty() ||
      !options.certificate_chain.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.root_certificates;
    ssl.pem_private_key = options.private_key;
    ssl.pem_cert_chain = options.certificate_chain;
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(256 << 20);  // A 100,000-car state is about 5 MB.
  arguments.SetMaxSendMessageSize(256 << 20);
  return std::unique_ptr<Client>(new Client(
      options, grpc::CreateCustomChannel(options.address, credentials, arguments)));
}

Client::Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::Simulator::NewStub(channel_)) {}

bool Client::Prepare(grpc::ClientContext* context, absl::string_view session_id,
                     bool stream) const {
  if (!stream) context->set_deadline(std::chrono::system_clock::now() +
                                     absl::ToChronoNanoseconds(options_.timeout));
  std::string token = options_.token;
  bool as_owner = false;
  {
    absl::MutexLock lock(&mu_);
    if (auto owned = owner_tokens_.find(session_id); owned != owner_tokens_.end()) {
      token = owned->second;
      as_owner = true;
    }
  }
  if (!token.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token));
  if (!session_id.empty() && IsSessionId(session_id)) {
    context->AddMetadata("pitlane-session", std::string(session_id));
  } else if (session_id.empty() && !options_.replica.empty()) {
    context->AddMetadata("pitlane-replica", options_.replica);
  }
  return as_owner;
}

absl::StatusOr<v1::SessionInfo> Client::CreateSession(const v1::SessionConfig& config) {
  v1::CreateSessionRequest request;
  *request.mutable_config() = config;
  return KeepOwnerToken(Call(&v1::Simulator::Stub::CreateSession, request));
}

absl::StatusOr<v1::SessionInfo> Client::PlayRecording(const v1::PlayRecordingRequest& request) {
  return KeepOwnerToken(Call(&v1::Simulator::Stub::PlayRecording, request));
}

absl::StatusOr<v1::SeekPlaybackResponse> Client::SeekPlayback(absl::string_view session_id,
                                                              double time_s) {
  v1::SeekPlaybackRequest request;
  request.set_session_id(std::string(session_id));
  request.set_time_s(time_s);
  return Call(&v1::Simulator::Stub::SeekPlayback, request);
}

std::string Client::OwnerToken(absl::string_view session_id) const {
  absl::MutexLock lock(&mu_);
  const auto owned = owner_tokens_.find(session_id);
  return owned == owner_tokens_.end() ? "" : owned->second;
}

absl::StatusOr<v1::SessionInfo> Client::GetSession(absl::string_view session_id) {
  v1::GetSessionRequest request;
  request.set_session_id(std::string(session_id));
  absl::StatusOr<v1::GetSessionResponse> response =
      Call(&v1::Simulator::Stub::GetSession, request);
  if (!response.ok()) return response.status();
  return response->session();
}

absl::StatusOr<std::vector<v1::SessionInfo>> Client::ListSessions() {
  absl::StatusOr<v1::ListSessionsResponse> response =
      Call(&v1::Simulator::Stub::ListSessions, v1::ListSessionsRequest());
  if (!response.ok()) return response.status();
  return std::vector<v1::SessionInfo>(response->sessions().begin(),
                                      response->sessions().end());
}

absl::StatusOr<v1::WorldState> Client::ResetSession(absl::string_view session_id) {
  v1::ResetSessionRequest request;
  request.set_session_id(std::string(session_id));
  absl::StatusOr<v1::ResetSessionResponse> response =
      Call(&v1::Simulator::Stub::ResetSession, request);
  if (!response.ok()) return response.status();
  return response->state();
}

absl::Status Client::DeleteSession(absl::string_view session_id) {
  v1::DeleteSessionRequest request;
  request.set_session_id(std::string(session_id));
  const absl::Status status = Call(&v1::Simulator::Stub::DeleteSession, request).status();
  if (status.ok()) ForgetOwnerToken(session_id);
  return status;
}

void Client::ForgetOwnerToken(absl::string_view session_id) {
  absl::MutexLock lock(&mu_);
  owner_tokens_.erase(session_id);
}

absl::StatusOr<std::vector<std::uint64_t>> Client::SpawnVehicles(
    absl::string_view session_id, const std::vector<v1::VehicleSpec>& specs) {
  v1::SpawnVehicleRequest request;
  request.set_session_id(std::string(session_id));
  request.mutable_vehicles()->Add(specs.begin(), specs.end());
  absl::StatusOr<v1::SpawnVehicleResponse> response =
      Call(&v1::Simulator::Stub::SpawnVehicle, request);
  if (!response.ok()) return response.status();
  return std::vector<std::uint64_t>(response->vehicle_ids().begin(),
                                    response->vehicle_ids().end());
}

absl::Status Client::RemoveVehicle(absl::string_view session_id, std::uint64_t vehicle_id) {
  v1::RemoveVehicleRequest request;
  request.set_session_id(std::string(session_id));
  request.set_vehicle_id(vehicle_id);
  return Call(&v1::Simulator::Stub::RemoveVehicle, request).status();
}

absl::Status Client::SetControls(absl::string_view session_id,
                                 const std::vector<v1::VehicleControl>& controls) {
  v1::SetControlsRequest request;
  request.set_session_id(std::string(session_id));
  request.mutable_controls()->Add(controls.begin(), controls.end());
  return Call(&v1::Simulator::Stub::SetControls, request).status();
}

absl::StatusOr<v1::WorldState> Client::Step(absl::string_view session_id, std::uint32_t ticks) {
  v1::StepRequest request;
  request.set_session_id(std::string(session_id));
  request.set_ticks(ticks);
  absl::StatusOr<v1::StepResponse> response = Call(&v1::Simulator::Stub::Step, request);
  if (!response.ok()) return response.status();
  return response->state();
}

absl::StatusOr<v1::WorldState> Client::GetState(absl::string_view session_id) {
  v1::GetStateRequest request;
  request.set_session_id(std::string(session_id));
  absl::StatusOr<v1::GetStateResponse> response = Call(&v1::Simulator::Stub::GetState, request);
  if (!response.ok()) return response.status();
  return response->state();
}

absl::StatusOr<v1::MintTokenResponse> Client::MintToken(absl::string_view session_id,
                                                        v1::TokenRole role,
                                                        std::uint64_t vehicle_id) {
  v1::MintTokenRequest request;
  request.set_session_id(std::string(session_id));
  request.set_role(role);
  request.set_vehicle_id(vehicle_id);
  return Call(&v1::Simulator::Stub::MintToken, request);
}

std::unique_ptr<StateStream> Client::StreamStates(const v1::StreamStatesRequest& request) {
  auto stream = std::unique_ptr<StateStream>(new StateStream());
  (void)Prepare(&stream->context_, request.session_id(), /*stream=*/true);
  stream->reader_ = stub_->StreamStates(&stream->context_, request);
  return stream;
}

absl::StatusOr<std::unique_ptr<Driver>> Client::Drive(absl::string_view session_id,
                                                      std::uint64_t vehicle_id,
                                                      v1::DisconnectAction on_disconnect) {
  auto driver = std::unique_ptr<Driver>(new Driver());
  (void)Prepare(&driver->context_, session_id, /*stream=*/true);
  driver->stream_ = stub_->Drive(&driver->context_);
  v1::DriveRequest attach;
  attach.mutable_attach()->set_session_id(std::string(session_id));
  attach.mutable_attach()->set_vehicle_id(vehicle_id);
  attach.mutable_attach()->set_on_disconnect(on_disconnect);
  if (!driver->stream_->Write(attach)) {
    driver->closed_ = true;
    const absl::Status status = FromGrpc(driver->stream_->Finish());
    return status.ok() ? absl::UnavailableError("the Drive stream ended at once") : status;
  }
  return driver;
}

absl::StatusOr<v1::RecordingInfo> Client::StartRecording(absl::string_view session_id,
                                                         const v1::RecordingOptions& options) {
  v1::StartRecordingRequest request;
  request.set_session_id(std::string(session_id));
  *request.mutable_options() = options;
  absl::StatusOr<v1::StartRecordingResponse> response =
      Call(&v1::Simulator::Stub::StartRecording, request);
  if (!response.ok()) return response.status();
  return response->recording();
}

absl::StatusOr<v1::RecordingInfo> Client::StopRecording(absl::string_view recording_id) {
  v1::StopRecordingRequest request;
  request.set_recording_id(std::string(recording_id));
  absl::StatusOr<v1::StopRecordingResponse> response =
      Call(&v1::Simulator::Stub::StopRecording, request);
  if (!response.ok()) return response.status();
  return response->recording();
}

absl::StatusOr<v1::RaceStatus> Client::StartRace(const v1::StartRaceRequest& request) {
  absl::StatusOr<v1::StartRaceResponse> response = Call(&v1::Simulator::Stub::StartRace, request);
  if (!response.ok()) return response.status();
  return response->race();
}

absl::StatusOr<v1::GetRaceResultsResponse> Client::GetRaceResults(absl::string_view session_id,
                                                                  v1::ResultsFormat format) {
  v1::GetRaceResultsRequest request;
  request.set_session_id(std::string(session_id));
  request.set_format(format);
  return Call(&v1::Simulator::Stub::GetRaceResults, request);
}

absl::StatusOr<std::vector<v1::RecordingInfo>> Client::ListRecordings() {
  absl::StatusOr<v1::ListRecordingsResponse> response =
      Call(&v1::Simulator::Stub::ListRecordings, v1::ListRecordingsRequest());
  if (!response.ok()) return response.status();
  return std::vector<v1::RecordingInfo>(response->recordings().begin(),
                                        response->recordings().end());
}

absl::StatusOr<std::uint64_t> Client::DeleteRecording(absl::string_view recording_id) {
  v1::DeleteRecordingRequest request;
  request.set_recording_id(std::string(recording_id));
  absl::StatusOr<v1::DeleteRecordingResponse> response =
      Call(&v1::Simulator::Stub::DeleteRecording, request);
  if (!response.ok()) return response.status();
  return response->bytes_freed();
}

absl::StatusOr<std::uint64_t> Client::DownloadRecording(absl::string_view recording_id,
                                                        const std::string& path) {
  const std::string part = path + ".part";
  std::ofstream out(part, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InvalidArgumentError(absl::StrCat("path: cannot write ", part));
  // Whatever goes wrong, no partial file is left.
  const auto failed = [&](absl::Status status) {
    out.close();
    std::error_code ignored;
    std::filesystem::remove(part, ignored);
    return status;
  };
  v1::DownloadRecordingRequest request;
  request.set_recording_id(std::string(recording_id));
  grpc::ClientContext context;
  (void)Prepare(&context, "", /*stream=*/true);
  // A big file on a slow link takes long, but not forever.
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::hours(24));
  std::unique_ptr<grpc::ClientReader<v1::DownloadRecordingResponse>> reader =
      stub_->DownloadRecording(&context, request);
  v1::DownloadRecordingResponse piece;
  std::uint64_t have = 0, size = 0;
  bool sized = false;
  while (reader->Read(&piece)) {
    if (piece.offset() != have || (sized && piece.size() != size)) {
      context.TryCancel();
      (void)reader->Finish();
      return failed(absl::DataLossError(absl::StrCat(
          "the server sent bytes from ", piece.offset(), " of ", piece.size(), ", expected ",
          have, sized ? absl::StrCat(" of ", size) : std::string())));
    }
    size = piece.size();
    sized = true;
    out.write(piece.data().data(), static_cast<std::streamsize>(piece.data().size()));
    if (!out) {
      context.TryCancel();
      (void)reader->Finish();
      return failed(absl::InternalError(absl::StrCat("path: cannot write ", part)));
    }
    have += piece.data().size();
  }
  const absl::Status status = FromGrpc(reader->Finish());
  if (!status.ok()) return failed(status);
  out.close();
  if (!out) return failed(absl::InternalError(absl::StrCat("path: cannot write ", part)));
  if (sized && have != size) {
    return failed(absl::DataLossError(absl::StrCat("got ", have, " of ", size, " bytes")));
  }
  std::error_code error;
  std::filesystem::rename(part, path, error);
  if (error) {
    return failed(absl::InternalError(absl::StrCat("path: cannot rename ", part, " to ", path,
                                                   ": ", error.message())));
  }
  return have;
}

absl::Status Client::Health() {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  (void)Prepare(&context, "", /*stream=*/false);
  grpc::health::v1::HealthCheckRequest request;
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = health->Check(&context, request, &response);
  if (!status.ok()) return FromGrpc(status);
  if (response.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError(absl::StrCat(
        "the server answers ", grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                                   response.status())));
  }
  return absl::OkStatus();
}

}  // namespace pitlane
