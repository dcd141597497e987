// Recording a session's commands, and applying them again: the same run, tick for tick.
//
// A session's state at every tick follows from its config and the commands applied to it,
// with their ticks (command.h), because the simulation is deterministic. CommandLog keeps
// what a session applied (and the state hash of every tick); Replay applies it to a fresh
// session of the same config.
#ifndef PITLANE_SERVER_SESSION_REPLAY_H_
#define PITLANE_SERVER_SESSION_REPLAY_H_

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/session/command.h"
#include "server/session/session.h"

namespace pitlane::session {

// A command as a session applied it, when the world was at `tick`.
struct RecordedCommand {
  std::uint64_t tick = 0;
  Command command;
};

// The state hash after a tick.
struct TickHash {
  std::uint64_t tick = 0;
  std::uint64_t state_hash = 0;
  friend bool operator==(const TickHash&, const TickHash&) = default;
};

// An observer that keeps everything in memory (tests, tools). Thread-safe.
class CommandLog final : public CommandObserver {
 public:
  void OnCommand(std::uint64_t tick, const Command& command) override;
  void OnTick(const sim::World& world) override;

  std::vector<RecordedCommand> commands() const;
  // One per tick stepped, in order (a reset starts again at tick 1).
  std::vector<TickHash> hashes() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<RecordedCommand> commands_ ABSL_GUARDED_BY(mu_);
  std::vector<TickHash> hashes_ ABSL_GUARDED_BY(mu_);
};

// Applies `commands` to `session`, a fresh session built from the recorded session's config
// (LOCKSTEP): steps it to each command's tick, then applies the command; clock changes and
// step requests only said when ticks happened, so they are skipped. Then steps on to
// `final_tick`. FailedPrecondition ("commands[i]") if a command's tick is behind the session
// (the record is out of order) or a command fails where the original succeeded (the run
// diverged).
absl::Status Replay(Session& session, absl::Span<const RecordedCommand> commands,
                    std::uint64_t final_tick);

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_REPLAY_H_
