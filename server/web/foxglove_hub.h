// Foxglove's WebSocket protocol on the HTTP endpoint: Foxglove and Lichtblick open
// ws://host:8080/foxglove and see every session the visitor may see, as channels:
//
//   /<session id>/scene             foxglove.SceneUpdate (json): the vehicles, each frame
//   /<session id>/map               foxglove.SceneUpdate (json): routes, walls, obstacles,
//                                   spawn points; sent when subscribed and when it changes
//   /<session id>/world_state       pitlane.v1.WorldState (protobuf, as GetState returns it)
//   /<session id>/contacts          pitlane.Contacts (json)
//   /<session id>/log               foxglove.Log (json): vehicles added and removed, resets
//   /<session id>/vehicle/<id>      pitlane.VehicleTelemetry (json), for the Plot panel
//   /<session id>/race              pitlane.Race (json): the standings of its race and the
//                                   race's events, each frame once a race was called
//
// Channels are advertised as sessions and vehicles come and go. Each connection receives a
// session's frames through its own session::Subscriber (newest frame wins, at most one frame
// held, at --foxglove rate: 20 Hz unless the URL asks `?rate_hz=` in [1, 60]); each frame is
// encoded once for all connections. Each connection has a writer thread: a client that stops
// reading blocks only that thread, and is dropped when a write has waited the endpoint's
// request timeout.
#ifndef PITLANE_SERVER_WEB_FOXGLOVE_HUB_H_
#define PITLANE_SERVER_WEB_FOXGLOVE_HUB_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/session/clock.h"
#include "server/session/session_manager.h"
#include "server/util/metrics.h"
#include "server/web/frame_json.h"
#include "server/web/visitor.h"

struct mg_connection;

namespace pitlane::web {

// The pitlane.v1.WorldState of a frame, serialized (shared with the gRPC streams).
using WorldStateEncoder = std::function<std::shared_ptr<const std::string>(
    const session::Session&, const std::shared_ptr<const session::Frame>&)>;

struct FoxgloveOptions {
  std::string server_name = "Pitlane";
  double default_rate_hz = 20.0;
  // Null: no world_state channels.
  WorldStateEncoder encode_world_state;
  // The serialized FileDescriptorSet of pitlane.v1.WorldState and its imports.
  std::string world_state_descriptor_set;
  // Null: every session is visible (--auth=none).
  Authenticator authenticate;
  // Added to the clock's readings to give time since the Unix epoch (message timestamps).
  std::int64_t epoch_offset_ns = 0;
  // WebSocket connections at once (each holds a thread of the endpoint: keep some for the
  // rest), and per token.
  int max_connections = 192;
  int max_connections_per_token = 32;
};

inline constexpr double kMinRateHz = 1.0;
inline constexpr double kMaxRateHz = 60.0;
// Per-vehicle telemetry channels are advertised for at most this many vehicles of a session
// (the lowest ids); the world_state channel has them all.
inline constexpr std::size_t kMaxVehicleChannels = 1000;

// The encodings of one session's frames, made once per frame for every connection.
class SessionEncodings {
 public:
  // `epoch_offset_ns` turns `clock`'s readings into time since the Unix epoch.
  SessionEncodings(std::shared_ptr<session::Session> session, const WorldStateEncoder* world_state,
                   const session::Clock* clock, std::int64_t epoch_offset_ns)
      : session_(std::move(session)),
        world_state_(world_state),
        clock_(clock),
        epoch_offset_ns_(epoch_offset_ns) {}

  const std::shared_ptr<session::Session>& session() const { return session_; }
  // When `frame` was published, for its messages' timestamps (frame_json.h).
  std::uint64_t StampOf(const std::shared_ptr<const session::Frame>& frame);
  // The session's look, described again when `frame` has a vehicle it does not know or it
  // is older than a second.
  std::shared_ptr<const SessionLook> Look(const session::Frame& frame);
  std::shared_ptr<const std::string> Scene(const std::shared_ptr<const session::Frame>& frame);
  std::shared_ptr<const std::string> WorldState(const std::shared_ptr<const session::Frame>& frame);
  // Telemetry of the frame's vehicles, by index in frame.vehicles.
  std::shared_ptr<const std::vector<std::string>> Telemetry(
      const std::shared_ptr<const session::Frame>& frame);
  // The browser viewer's frame and the roster it follows (frame_json.h).
  struct Viewer {
    std::uint32_t roster_version = 0;
    std::shared_ptr<const std::string> frame;
    std::shared_ptr<const std::string> roster;
  };
  Viewer ViewerOf(const std::shared_ptr<const session::Frame>& frame);

 private:
  struct Encoded {
    // The frame (compared by identity while it is alive) and when it was first asked for.
    std::weak_ptr<const session::Frame> frame;
    const session::Frame* address = nullptr;
    std::uint64_t stamp_ns = 0;
    std::shared_ptr<const std::string> scene;
    std::shared_ptr<const std::string> world_state;
    std::shared_ptr<const std::vector<std::string>> telemetry;
    std::optional<Viewer> viewer;
  };
  // The encodings of `frame`. The last kCachedFrames frames asked for are kept: connections
  // whose rate limits take different frames still share each one's encodings.
  static constexpr std::size_t kCachedFrames = 4;
  Encoded& EncodedLocked(const std::shared_ptr<const session::Frame>& frame)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<const SessionLook> LookLocked(const session::Frame& frame)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<session::Session> session_;
  const WorldStateEncoder* const world_state_;
  const session::Clock* const clock_;
  const std::int64_t epoch_offset_ns_;
  absl::Mutex mu_;
  std::shared_ptr<const SessionLook> look_ ABSL_GUARDED_BY(mu_);
  std::int64_t look_ns_ ABSL_GUARDED_BY(mu_) = 0;
  std::array<Encoded, kCachedFrames> cache_ ABSL_GUARDED_BY(mu_);
  std::size_t next_slot_ ABSL_GUARDED_BY(mu_) = 0;  // The oldest entry, replaced next.
  std::uint64_t last_stamp_ns_ ABSL_GUARDED_BY(mu_) = 0;
  // The viewer's roster, made again only when the vehicles change.
  std::shared_ptr<const std::string> roster_ ABSL_GUARDED_BY(mu_);
  std::uint32_t roster_version_ ABSL_GUARDED_BY(mu_) = 0;
};

class FoxgloveConnection;

// Thread-safe. Registered with civetweb by HttpEndpoint; outlives every connection (the
// endpoint stops civetweb, which closes them, before destroying the hub).
class FoxgloveHub {
 public:
  // `sessions`, `clock` and `metrics` must outlive the hub.
  FoxgloveHub(FoxgloveOptions options, session::SessionManager* sessions,
              const session::Clock* clock, metrics::Registry* metrics);
  ~FoxgloveHub();

  // civetweb's WebSocket callbacks (the hub is their user data).
  static int OnConnect(const mg_connection* connection, void* hub);
  static void OnReady(mg_connection* connection, void* hub);
  static int OnData(mg_connection* connection, int bits, char* data, std::size_t size, void* hub);
  static void OnClose(const mg_connection* connection, void* hub);

  const FoxgloveOptions& options() const { return options_; }
  session::SessionManager& sessions() const { return *sessions_; }
  const session::Clock& clock() const { return *clock_; }
  // serverInfo's sessionId: new at each start of the server.
  const std::string& instance_id() const { return instance_id_; }
  // The world_state channels' schema: the descriptor set in base64, made once.
  const std::string& world_state_schema() const { return world_state_schema_; }
  // The shared encodings of `session`.
  std::shared_ptr<SessionEncodings> EncodingsFor(const std::shared_ptr<session::Session>& session);

  // Counted for /metrics.
  metrics::Counter* bytes_sent() const { return bytes_sent_; }
  metrics::Counter* frames_sent() const { return frames_sent_; }
  metrics::Counter* frames_skipped() const { return frames_skipped_; }

 private:
  const FoxgloveOptions options_;
  session::SessionManager* const sessions_;
  const session::Clock* const clock_;
  metrics::Counter* bytes_sent_;
  metrics::Counter* frames_sent_;
  metrics::Counter* frames_skipped_;
  // Open connections: [0] Foxglove clients, [1] the viewer's pages.
  std::shared_ptr<std::array<std::atomic<std::int64_t>, 2>> connections_;
  std::string instance_id_;
  std::string world_state_schema_;
  // Counts of OnConnect's admissions, released by OnClose (or a later OnConnect of the same
  // civetweb connection, if the handshake failed).
  void ForgetLocked(const FoxgloveConnection& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::weak_ptr<SessionEncodings>> encodings_ ABSL_GUARDED_BY(mu_);
  // Admitted, handshake not yet done.
  absl::flat_hash_map<const mg_connection*, std::unique_ptr<FoxgloveConnection>> pending_
      ABSL_GUARDED_BY(mu_);
  int open_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, int> per_visitor_ ABSL_GUARDED_BY(mu_);
};

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_FOXGLOVE_HUB_H_
