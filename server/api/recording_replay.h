// Re-simulating a recording (docs/recording.md): its header read back, then its commands
// applied to a session built from its config, at their ticks, while every tick's state hash
// is compared with the recorded one.
#ifndef PITLANE_SERVER_API_RECORDING_REPLAY_H_
#define PITLANE_SERVER_API_RECORDING_REPLAY_H_

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "pitlane/v1/simulator.pb.h"
#include "server/record/recordings.h"
#include "server/session/session.h"

namespace pitlane::api {

namespace v1 = ::pitlane::v1;

// The /pitlane/session message of the recording at `path`. InvalidArgument for a file that is
// not a recording (not MCAP, no header message first); the file's errors.
absl::StatusOr<v1::RecordingHeader> ReadRecordingHeader(const std::string& path);

// What the recording at `path` holds, for the list of a server started after it was made
// (record::Recordings::FileDescriber): its header and, from its summary, how much simulated
// time it holds. A file cut short (no summary) is FAILED, saying so.
absl::StatusOr<record::RecordingInfo> DescribeRecordingFile(const std::string& path);

// How a re-simulation went.
struct ReplayOutcome {
  std::uint64_t ticks_compared = 0;
  std::uint64_t commands_applied = 0;
  // The first tick whose hash differs from the recorded one, or whose command failed.
  std::optional<v1::ReplayDivergence> divergence;
  // Why it stopped before the end (a gap in the commands, a file cut short); empty if it
  // reached the end or diverged.
  std::string stopped_reason;
  bool matched() const { return !divergence.has_value() && stopped_reason.empty(); }
};

// Ticks stepped at once between two comparisons' checks: a divergence is found within them.
inline constexpr std::uint32_t kReplayBatchTicks = 1024;

// Re-simulates the recording at `path` (whose header is `header`) in `session`: a LOCKSTEP
// session at tick 0 built from header.config with its first ids, never stepped. Stops early
// (Cancelled) when `cancel` becomes true or the session is closed. InvalidArgument naming
// the message for a corrupt file (out of order, a command that does not parse).
absl::StatusOr<ReplayOutcome> ReplayRecordingFile(const std::string& path,
                                                  const v1::RecordingHeader& header,
                                                  session::Session& session,
                                                  const std::atomic<bool>& cancel);

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_RECORDING_REPLAY_H_
