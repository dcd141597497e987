// The pitlane.v1.Simulator gRPC service: thin callback-API handlers over SessionManager.
//
// Each handler converts its request (convert.h), calls the session layer, converts the
// result back, and maps errors with ToGrpcStatus. No handler touches a world directly.
#ifndef PITLANE_SERVER_API_SIMULATOR_SERVICE_H_
#define PITLANE_SERVER_API_SIMULATOR_SERVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "pitlane/v1/simulator.grpc.pb.h"
#include "server/api/frame_encoder.h"
#include "server/session/session_manager.h"

namespace pitlane::api {

namespace v1 = ::pitlane::v1;

// Most vehicles one SpawnVehicle call may add, and most controls one SetControls may carry.
inline constexpr int kMaxSpawnsPerCall = 100000;
inline constexpr int kMaxControlsPerCall = 1000000;
inline constexpr int kMaxObstaclesPerCall = 100000;

// StreamStates is a raw method (ByteBuffer in and out): its streams share one encoding of
// each frame instead of serializing it once per subscriber.
class SimulatorService final
    : public ::pitlane::v1::Simulator::WithRawCallbackMethod_StreamStates<
          ::pitlane::v1::Simulator::CallbackService> {
 public:
  // `sessions` must outlive the service and the server it is registered with.
  // `scenario_dir`: where CreateSession looks for scenarios beside the shipped ones ("" for
  // none).
  SimulatorService(session::SessionManager& sessions, std::string scenario_dir)
      : sessions_(sessions), scenario_dir_(std::move(scenario_dir)) {}

  // A session from a config as CreateSession takes it (the scenario merged in first). Errors
  // name the field under "config".
  absl::StatusOr<std::shared_ptr<session::Session>> CreateFromConfig(
      const v1::SessionConfig& config);

  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* context,
                                          const v1::CreateSessionRequest* request,
                                          v1::CreateSessionResponse* response) override;
  grpc::ServerUnaryReactor* GetSession(grpc::CallbackServerContext* context,
                                       const v1::GetSessionRequest* request,
                                       v1::GetSessionResponse* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                         const v1::ListSessionsRequest* request,
                                         v1::ListSessionsResponse* response) override;
  grpc::ServerUnaryReactor* DeleteSession(grpc::CallbackServerContext* context,
                                          const v1::DeleteSessionRequest* request,
                                          v1::DeleteSessionResponse* response) override;
  grpc::ServerUnaryReactor* SpawnVehicle(grpc::CallbackServerContext* context,
                                         const v1::SpawnVehicleRequest* request,
                                         v1::SpawnVehicleResponse* response) override;
  grpc::ServerUnaryReactor* RemoveVehicle(grpc::CallbackServerContext* context,
                                          const v1::RemoveVehicleRequest* request,
                                          v1::RemoveVehicleResponse* response) override;
  grpc::ServerUnaryReactor* AddObstacle(grpc::CallbackServerContext* context,
                                        const v1::AddObstacleRequest* request,
                                        v1::AddObstacleResponse* response) override;
  grpc::ServerUnaryReactor* RemoveObstacle(grpc::CallbackServerContext* context,
                                           const v1::RemoveObstacleRequest* request,
                                           v1::RemoveObstacleResponse* response) override;
  grpc::ServerUnaryReactor* SetControls(grpc::CallbackServerContext* context,
                                        const v1::SetControlsRequest* request,
                                        v1::SetControlsResponse* response) override;
  grpc::ServerUnaryReactor* Step(grpc::CallbackServerContext* context,
                                 const v1::StepRequest* request,
                                 v1::StepResponse* response) override;
  grpc::ServerUnaryReactor* ResetSession(grpc::CallbackServerContext* context,
                                         const v1::ResetSessionRequest* request,
                                         v1::ResetSessionResponse* response) override;
  grpc::ServerUnaryReactor* SetClock(grpc::CallbackServerContext* context,
                                     const v1::SetClockRequest* request,
                                     v1::SetClockResponse* response) override;
  grpc::ServerUnaryReactor* GetState(grpc::CallbackServerContext* context,
                                     const v1::GetStateRequest* request,
                                     v1::GetStateResponse* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamStates(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerBidiReactor<v1::DriveRequest, v1::DriveResponse>* Drive(
      grpc::CallbackServerContext* context) override;

 private:
  // The encoder the streams of `session` share.
  std::shared_ptr<FrameEncoder> EncoderFor(const session::Session& session);

  session::SessionManager& sessions_;
  const std::string scenario_dir_;
  absl::Mutex encoders_mu_;
  // Per session streamed: an encoder alive while a stream of the session holds it.
  absl::flat_hash_map<const session::Session*, std::weak_ptr<FrameEncoder>> encoders_
      ABSL_GUARDED_BY(encoders_mu_);
};

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_SIMULATOR_SERVICE_H_
