// Pitlane's C++ client (CMake target pitlane::client): sessions, vehicles, controls, Step,
// StreamStates, a Drive helper, health; tokens and TLS; the routing header of a deployment
// behind a proxy. Every call returns absl::Status / absl::StatusOr with the server's code and
// message.
//
//   absl::StatusOr<std::unique_ptr<pitlane::Client>> client =
//       pitlane::Client::Connect({.address = "127.0.0.1:50051"});
//   pitlane::v1::SessionConfig config;
//   config.set_name("cpp");
//   absl::StatusOr<pitlane::v1::SessionInfo> session = (*client)->CreateSession(config);
//   absl::StatusOr<pitlane::v1::WorldState> state = (*client)->Step(session->session_id(), 50);
#ifndef PITLANE_CLIENT_CPP_PITLANE_CLIENT_H_
#define PITLANE_CLIENT_CPP_PITLANE_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pitlane/v1/simulator.grpc.pb.h"

namespace pitlane {

struct ClientOptions {
  std::string address = "127.0.0.1:50051";  // host:port
  // A Pitlane token (admin, owner, driver or viewer), sent as authorization: Bearer; "" none.
  std::string token;
  // TLS (also on when any of the PEMs is given): the server's CA (PEM; "" trusts the system's
  // CAs) and, for mutual TLS, this client's key and certificate chain (PEM).
  bool tls = false;
  std::string root_certificates;
  std::string private_key;
  std::string certificate_chain;
  // Behind a proxy in front of several servers: the server (its --replica) that calls about
  // no session go to; "" lets the proxy choose (docs/deployment.md).
  std::string replica;
  absl::Duration timeout = absl::Seconds(30);  // Every unary call's deadline.
};

// gRPC's status as Abseil's: the same code and message.
absl::Status FromGrpc(const grpc::Status& status);

// A StreamStates subscription: Read until it returns false, then Finish for the reason.
class StateStream {
 public:
  bool Read(v1::StreamStatesResponse* message) { return reader_->Read(message); }
  absl::Status Finish() { return FromGrpc(reader_->Finish()); }
  void Cancel() { context_.TryCancel(); }

 private:
  friend class Client;
  StateStream() = default;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<v1::StreamStatesResponse>> reader_;
};

// A controller attached to one vehicle (a Drive stream). Observe returns each tick's
// observation (false when the stream ended: Close says why); Send answers one with a control.
// Close (or the destructor) ends the stream: the vehicle brakes or holds, as attached.
class Driver {
 public:
  ~Driver();
  bool Observe(v1::DriveResponse* observation) { return stream_->Read(observation); }
  bool Send(std::uint64_t tick, const v1::VehicleControl& control);
  absl::Status Close();

 private:
  friend class Client;
  Driver() = default;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::DriveRequest, v1::DriveResponse>> stream_;
  bool closed_ = false;
};

// Thread-safe.
class Client {
 public:
  // InvalidArgument for an address, token or replica that cannot be used.
  static absl::StatusOr<std::unique_ptr<Client>> Connect(const ClientOptions& options);

  // Sessions. CreateSession keeps the owner token the server shows once (with tokens on); the
  // calls on that session then use it.
  absl::StatusOr<v1::SessionInfo> CreateSession(const v1::SessionConfig& config);
  absl::StatusOr<v1::SessionInfo> GetSession(absl::string_view session_id);
  absl::StatusOr<std::vector<v1::SessionInfo>> ListSessions();
  absl::StatusOr<v1::WorldState> ResetSession(absl::string_view session_id);
  absl::Status DeleteSession(absl::string_view session_id);

  // Vehicles, controls, time.
  absl::StatusOr<std::vector<std::uint64_t>> SpawnVehicles(
      absl::string_view session_id, const std::vector<v1::VehicleSpec>& specs);
  absl::Status RemoveVehicle(absl::string_view session_id, std::uint64_t vehicle_id);
  absl::Status SetControls(absl::string_view session_id,
                           const std::vector<v1::VehicleControl>& controls);
  absl::StatusOr<v1::WorldState> Step(absl::string_view session_id, std::uint32_t ticks);
  absl::StatusOr<v1::WorldState> GetState(absl::string_view session_id);
  absl::StatusOr<v1::MintTokenResponse> MintToken(absl::string_view session_id,
                                                  v1::TokenRole role,
                                                  std::uint64_t vehicle_id = 0);

  // Streams.
  std::unique_ptr<StateStream> StreamStates(const v1::StreamStatesRequest& request);
  absl::StatusOr<std::unique_ptr<Driver>> Drive(
      absl::string_view session_id, std::uint64_t vehicle_id,
      v1::DisconnectAction on_disconnect = v1::DISCONNECT_ACTION_BRAKE_TO_STOP);

  // Recordings (docs/recording.md). DownloadRecording writes the file to `path` through
  // `path`.part (renamed when whole and its size checked) and returns its size.
  absl::StatusOr<v1::RecordingInfo> StartRecording(absl::string_view session_id,
                                                   const v1::RecordingOptions& options = {});
  absl::StatusOr<v1::RecordingInfo> StopRecording(absl::string_view recording_id);
  absl::StatusOr<std::vector<v1::RecordingInfo>> ListRecordings();
  absl::StatusOr<std::uint64_t> DownloadRecording(absl::string_view recording_id,
                                                  const std::string& path);
  absl::StatusOr<std::uint64_t> DeleteRecording(absl::string_view recording_id);
  // A recording played back into a new read-only session (its owner token kept, as
  // CreateSession's); SeekPlayback moves it to `time_s` since the recording's start.
  absl::StatusOr<v1::SessionInfo> PlayRecording(const v1::PlayRecordingRequest& request);
  absl::StatusOr<v1::SeekPlaybackResponse> SeekPlayback(absl::string_view session_id,
                                                        double time_s);

  // Races (docs/racing.md): calls one (the request's unset rules are the session's), and
  // its results (with `format`, also as CSV or JSON in the response's content).
  absl::StatusOr<v1::RaceStatus> StartRace(const v1::StartRaceRequest& request);
  absl::StatusOr<v1::GetRaceResultsResponse> GetRaceResults(
      absl::string_view session_id, v1::ResultsFormat format = v1::RESULTS_FORMAT_UNSPECIFIED);

  // grpc.health.v1.Health/Check of the whole server: OK when SERVING.
  absl::Status Health();

  // Any other call, with this client's token, deadline and routing header:
  //   client.Call(&v1::Simulator::Stub::SetClock, request)
  // On a session this client created, the call goes with its owner token; if the server
  // no longer knows that token (revoked), it is forgotten and the call made again with the
  // client's own.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (v1::Simulator::Stub::*method)(
                                    grpc::ClientContext*, const Request&, Response*),
                                const Request& request) {
    const std::string session_id = SessionOf(request);
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext context;
      const bool as_owner = Prepare(&context, session_id, /*stream=*/false);
      Response response;
      const grpc::Status status = (stub_.get()->*method)(&context, request, &response);
      if (status.ok()) return response;
      if (as_owner && attempt == 0 &&
          status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
        ForgetOwnerToken(session_id);
        continue;
      }
      return FromGrpc(status);
    }
  }

  // The owner token CreateSession (or PlayRecording) received for `session_id` ("" if none):
  // shown only then.
  std::string OwnerToken(absl::string_view session_id) const;

  v1::Simulator::Stub& stub() { return *stub_; }

 private:
  Client(ClientOptions options, std::shared_ptr<grpc::Channel> channel);

  template <typename Request>
  static std::string SessionOf(const Request& request) {
    if constexpr (requires { request.session_id(); }) {
      return std::string(request.session_id());
    } else {
      return "";
    }
  }
  // The deadline (unary calls), the token (the session's owner token if this client created
  // it: then true) and the routing header.
  bool Prepare(grpc::ClientContext* context, absl::string_view session_id, bool stream) const;
  void ForgetOwnerToken(absl::string_view session_id);
  // The session of a response that made one (CreateSession, PlayRecording), its owner token
  // kept.
  template <typename Response>
  absl::StatusOr<v1::SessionInfo> KeepOwnerToken(absl::StatusOr<Response> response) {
    if (!response.ok()) return response.status();
    if (!response->owner_token().empty()) {
      absl::MutexLock lock(&mu_);
      owner_tokens_[response->session().session_id()] = response->owner_token();
    }
    return response->session();
  }

  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Simulator::Stub> stub_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> owner_tokens_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pitlane

#endif  // PITLANE_CLIENT_CPP_PITLANE_CLIENT_H_
