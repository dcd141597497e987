// The pitlane.v1.Simulator gRPC service: thin callback-API handlers over SessionManager.
//
// Each handler converts its request (convert.h), calls the session layer, converts the
// result back, and maps errors with ToGrpcStatus. No handler touches a world directly.
#ifndef PITLANE_SERVER_API_SIMULATOR_SERVICE_H_
#define PITLANE_SERVER_API_SIMULATOR_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "pitlane/v1/simulator.grpc.pb.h"
#include "server/api/access.h"
#include "server/api/rpc_counts.h"
#include "server/api/frame_encoder.h"
#include "server/api/wire.h"
#include "server/record/recordings.h"
#include "server/session/session_manager.h"

namespace pitlane::api {

namespace v1 = ::pitlane::v1;

// Most vehicles one SpawnVehicle call may add, and most controls one SetControls may carry.
inline constexpr int kMaxSpawnsPerCall = 100000;
inline constexpr int kMaxControlsPerCall = 1000000;
inline constexpr int kMaxObstaclesPerCall = 100000;
// Sessions one StepSessions call may step.
inline constexpr int kMaxSessionsPerStepSessions = 1024;
// From this many sessions on, a StepSessions call hands half of its cheap Steps to the workers
// instead of running them all on the thread that received it.
inline constexpr int kStepSessionsSplit = 16;

// Every method is raw (grpc::ByteBuffer in and out, see wire.h): requests are parsed here, so
// that a request that does not parse is a clear INVALID_ARGUMENT, and StreamStates' streams
// share one encoding of each frame instead of serializing it once per subscriber.
namespace raw_methods {
using S = ::pitlane::v1::Simulator;
using RawSimulatorService =
    S::WithRawCallbackMethod_CreateSession<
    S::WithRawCallbackMethod_GetSession<
    S::WithRawCallbackMethod_ListSessions<
    S::WithRawCallbackMethod_DeleteSession<
    S::WithRawCallbackMethod_ResetSession<
    S::WithRawCallbackMethod_SpawnVehicle<
    S::WithRawCallbackMethod_RemoveVehicle<
    S::WithRawCallbackMethod_AddObstacle<
    S::WithRawCallbackMethod_RemoveObstacle<
    S::WithRawCallbackMethod_SetControls<
    S::WithRawCallbackMethod_Step<
    S::WithRawCallbackMethod_StepSessions<
    S::WithRawCallbackMethod_Drive<
    S::WithRawCallbackMethod_SetClock<
    S::WithRawCallbackMethod_GetState<
    S::WithRawCallbackMethod_StreamStates<
    S::WithRawCallbackMethod_MintToken<
    S::WithRawCallbackMethod_RevokeToken<
    S::WithRawCallbackMethod_DetachController<
    S::WithRawCallbackMethod_StartRecording<
    S::WithRawCallbackMethod_StopRecording<
    S::WithRawCallbackMethod_ListRecordings<
    S::WithRawCallbackMethod_ReplayRecording<
    S::WithRawCallbackMethod_DownloadRecording<
    S::WithRawCallbackMethod_DeleteRecording<
    S::WithRawCallbackMethod_PlayRecording<
    S::WithRawCallbackMethod_SeekPlayback<
    S::WithRawCallbackMethod_StartRace<
    S::WithRawCallbackMethod_GetRaceResults<
    S::Service>>>>>>>>>>>>>>>>>>>>>>>>>>>>>;
}  // namespace raw_methods

class SimulatorService final : public raw_methods::RawSimulatorService {
 public:
  // `sessions` must outlive the service and the server it is registered with.
  // `scenario_dir`: where CreateSession looks for scenarios beside the shipped ones ("" for
  // none).
  // `access` (not owned; null: --auth=none) decides who may do what.
  // `metrics` (may be null; must outlive the service) counts the calls answered.
  SimulatorService(session::SessionManager& sessions, std::string scenario_dir,
                   Access* access = nullptr, metrics::Registry* metrics = nullptr)
      : owned_access_(access == nullptr ? std::make_unique<Access>(AccessOptions{}) : nullptr),
        access_(access != nullptr ? *access : *owned_access_),
        sessions_(sessions),
        scenario_dir_(std::move(scenario_dir)),
        rpcs_(metrics) {}

  // Calls answered, by method and code.
  RpcCounts& rpcs() { return rpcs_; }

  // What a reset of `session_id` made outside a call (the web viewer) must be followed by, as
  // ResetSession does: its drivers' tokens revoked and their streams ended.
  void AfterReset(absl::string_view session_id) {
    EndStreams(access_.tokens().RevokeDrivers(session_id));
  }

  // `frame` of `session` as a serialized WorldState, encoded once for every stream (and the
  // web endpoint's channels) that sends it.
  std::shared_ptr<const std::string> EncodeFrame(const session::Session& session,
                                                 const std::shared_ptr<const session::Frame>& frame) {
    return EncoderFor(session)->Encode(frame);
  }

  // A session from a config as CreateSession takes it (the scenario merged in first), admitted
  // (Access::Admit) for `caller` (null: the server's own, counted against no quota), taking
  // over its `reservation` if any. Errors name the field under "config".
  // `adjust` (may be null) changes the request made of the config (a re-simulation's ids).
  absl::StatusOr<std::shared_ptr<session::Session>> CreateFromConfig(
      const v1::SessionConfig& config, const Caller* caller = nullptr,
      Reservation* reservation = nullptr,
      const std::function<void(session::SessionRequest&)>& adjust = nullptr);

  grpc::ServerUnaryReactor* CreateSession(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetSession(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* request,
                                      grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListSessions(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DeleteSession(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SpawnVehicle(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RemoveVehicle(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* AddObstacle(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RemoveObstacle(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SetControls(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Step(grpc::CallbackServerContext* context,
                                const grpc::ByteBuffer* request,
                                grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* StepSessions(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ResetSession(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SetClock(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetState(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* StartRace(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetRaceResults(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* StreamStates(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Drive(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* MintToken(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* RevokeToken(grpc::CallbackServerContext* context,
                                       const grpc::ByteBuffer* request,
                                       grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* DetachController(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* StartRecording(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* StopRecording(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* ListRecordings(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  // Re-simulations run on threads of their own (at most kMaxReplays at once), which finish
  // their calls.
  grpc::ServerUnaryReactor* ReplayRecording(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* DownloadRecording(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* DeleteRecording(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* request,
                                           grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* PlayRecording(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* SeekPlayback(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* request,
                                        grpc::ByteBuffer* response) override;
  // Cancels the re-simulations running and waits for their threads (the server stops; call
  // after closing the sessions, before shutting the gRPC server down).
  void StopReplays();
  ~SimulatorService() override { StopReplays(); }

  // The server's recordings (--record_dir); null (the default): recording is off. Must
  // outlive the service. Set before the server starts.
  void SetRecordings(record::Recordings* recordings) { recordings_ = recordings; }

  // The session `id` for `caller` to do what `need` says (on `vehicle_id`, for kDrive):
  // InvalidArgument for an empty id; NotFound for a session the caller may not see, exactly
  // as for one that does not exist; PermissionDenied naming the role needed.
  absl::StatusOr<std::shared_ptr<session::Session>> Authorized(
      const Caller& caller, auth::Need need, absl::string_view id,
      std::optional<std::uint64_t> vehicle_id = std::nullopt);

  // A Drive or StreamStates stream, which ends (Revoked) when the token it was opened with is
  // revoked.
  class RevocableStream {
   public:
    virtual ~RevocableStream() = default;
    virtual void Revoked(const absl::Status& status) = 0;
  };
  // Registers a stream opened by `caller` (nothing with --auth=none), then checks its token
  // again: Unauthenticated if it was revoked since the call was authenticated (the stream is
  // then not registered). Unregister when the stream is done.
  absl::Status RegisterStream(const Caller& caller, std::weak_ptr<RevocableStream> stream);
  void UnregisterStream(const Caller& caller, const RevocableStream* stream);

 private:
  // Whether `caller` may do what `need` says with a recording: an admin; the owner (kOwn)
  // or a reader (kRead) of its session; an owner token of the team that started it. The
  // same NotFound as for a missing recording otherwise.
  absl::Status MayAccessRecording(const Caller& caller, const record::RecordingInfo& info,
                                  auth::Need need) const;
  absl::StatusOr<record::Recordings*> RecordingsOn() const;
  // The recording `recording_id` for `caller` to do what `need` says: FailedPrecondition
  // without --record_dir, InvalidArgument for an empty id, the same NotFound for a recording
  // that does not exist as for one the caller may not see.
  absl::StatusOr<record::RecordingInfo> RecordingFor(const Caller& caller,
                                                    absl::string_view recording_id,
                                                    auth::Need need);

  // PermissionDenied for a viewer or driver token ("authorization: <what> needs an owner or
  // admin token").
  static absl::Status MayCreateSessions(const Caller& caller, absl::string_view what);
  // With --auth=token: mints the owner token of `session_id`, which `creator` just made, into
  // `response`'s owner_token and owner_token_id; if it cannot, deletes the session and says
  // why. Nothing with --auth=none.
  template <typename Response>
  absl::Status GiveOwnerToken(const Caller& creator, const std::string& session_id,
                              Response& response);

  // Ends the streams opened with the tokens of `token_ids` (they were revoked).
  void EndStreams(const std::vector<std::string>& token_ids);

  // Rough encoded sizes, for HeavyReads: a vehicle's state, a vehicle's description (spec
  // and state), an obstacle, a contact.
  static constexpr std::size_t kVehicleStateBytes = 120;
  static constexpr std::size_t kVehicleDescriptionBytes = 400;
  static constexpr std::size_t kObstacleBytes = 80;
  static constexpr std::size_t kContactBytes = 60;

  HeavyReads heavy_reads_;
  // The encoder the streams of `session` share.
  std::shared_ptr<FrameEncoder> EncoderFor(const session::Session& session);

  const std::unique_ptr<Access> owned_access_;
  Access& access_;
  session::SessionManager& sessions_;
  const std::string scenario_dir_;
  record::Recordings* recordings_ = nullptr;
  static constexpr int kMaxReplays = 2;
  absl::Mutex replays_mu_;
  struct Replay {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;  // Set last by the thread.
  };
  std::vector<Replay> replays_ ABSL_GUARDED_BY(replays_mu_);
  int replays_running_ ABSL_GUARDED_BY(replays_mu_) = 0;
  std::atomic<bool> replays_cancelled_{false};
  // DownloadRecording streams open at once (each holds a file and a piece in flight).
  static constexpr int kMaxDownloads = 8;
  std::atomic<int> downloads_open_{0};
  RpcCounts rpcs_;
  absl::Mutex streams_mu_;
  // The open streams by the id of the token they were opened with.
  absl::flat_hash_map<std::string, std::vector<std::weak_ptr<RevocableStream>>> streams_
      ABSL_GUARDED_BY(streams_mu_);
  absl::Mutex encoders_mu_;
  // Per session streamed: an encoder alive while a stream of the session holds it.
  absl::flat_hash_map<const session::Session*, std::weak_ptr<FrameEncoder>> encoders_
      ABSL_GUARDED_BY(encoders_mu_);
};

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_SIMULATOR_SERVICE_H_
