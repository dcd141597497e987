// Playing a recording back: a read-only session that shows a recording's frames on its own
// clock instead of stepping a world (docs/recording.md, "Play back").
//
// The session keeps its clock (REALTIME plays at tick_rate_hz x real_time_factor, paused
// holds, a Step moves on by ticks) and its world (the recorded config's walls, routes and
// obstacles, without vehicles), and shows, after each tick, the last recorded frame at or
// before its playback position: the recording's time since its start. Nothing that would
// change the world is accepted.
#ifndef PITLANE_SERVER_SESSION_PLAYBACK_H_
#define PITLANE_SERVER_SESSION_PLAYBACK_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/session/frame.h"
#include "server/sim/world/world.h"

namespace pitlane::session {

// A recording's frames, by time. Called under the session's lock, one call at a time.
class PlaybackSource {
 public:
  virtual ~PlaybackSource() = default;
  // What the recording is called (its recording id).
  virtual const std::string& name() const = 0;
  // At least one frame.
  virtual std::size_t frame_count() const = 0;
  // Frame `index`'s time since the recording's start, ns; ascending with the index.
  virtual std::uint64_t TimeOf(std::size_t index) const = 0;
  // Frame `index` (< frame_count()), as the recorded session published it. An error for a
  // frame the file cannot give (damaged since it was opened).
  virtual absl::StatusOr<std::shared_ptr<const Frame>> FrameAt(std::size_t index) = 0;
  // The specs of `frame`'s vehicles, where the recording has them.
  virtual std::vector<sim::VehicleDescription> Describe(const Frame& frame) const = 0;
};

// Where a playback is. The frame shown is the last recorded at or before its position, to
// within half a tick (the recorder's times and the playback's clock round apart).
struct PlaybackPosition {
  std::string recording;        // PlaybackSource::name().
  std::uint64_t position_ns = 0;  // Time since the recording's start, ns.
  std::uint64_t duration_ns = 0;  // The last frame's time, ns.
  std::size_t frame = 0;        // The frame shown: [0, frame_count).
  std::size_t frame_count = 0;
  SimTime time;                 // The frame's, as the recorded session had it.
  bool at_end() const { return frame + 1 == frame_count; }
};

// Thrown from a tick (and turned into the session's close reason) when the recording cannot
// give the frame it is to show.
class PlaybackFailure : public std::exception {
 public:
  explicit PlaybackFailure(absl::Status status) : status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }
  const char* what() const noexcept override { return "the recording could not be read"; }

 private:
  absl::Status status_;
};

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_PLAYBACK_H_
