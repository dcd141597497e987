// The live endpoint's Foxglove channels of a session, written into its recording with the
// same topics, encodings and schemas (foxglove_hub.h), so that one Foxglove layout serves a
// live session and its recordings: /<session id>/scene, /map (when it changes), /contacts,
// /log, and /vehicle/<id> for the kMaxVehicleChannels lowest ids. (/world_state is written by
// the gRPC layer, which owns its protobuf encoding.)
#ifndef PITLANE_SERVER_WEB_RECORDED_CHANNELS_H_
#define PITLANE_SERVER_WEB_RECORDED_CHANNELS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "server/record/recorder.h"
#include "server/session/session.h"
#include "server/session/subscriber.h"
#include "server/web/frame_json.h"

namespace pitlane::web {

// Called on one recording's writer thread.
class RecordedChannels {
 public:
  explicit RecordedChannels(std::shared_ptr<session::Session> session)
      : session_(std::move(session)) {}

  void Write(const session::Delivery& delivery, std::uint64_t time_ns,
             record::RecordingOutput& out);

 private:
  const std::shared_ptr<session::Session> session_;
  // Recording time between two looks at the session (its obstacles may change), ns.
  static constexpr std::uint64_t kLookRefresh_ns = 5'000'000'000;
  std::shared_ptr<const SessionLook> look_;
  std::uint64_t look_ns_ = 0;
  // Vehicles of frames not in the look taken since (removed before it): not looked for again.
  absl::flat_hash_set<sim::VehicleId> looked_for_;
  std::optional<std::uint64_t> map_written_;  // Its fingerprint.
  std::optional<std::vector<sim::VehicleId>> log_ids_;
  bool race_written_ = false;  // The last race message had standings.
  std::vector<sim::VehicleId> ids_;
};

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_RECORDED_CHANNELS_H_
