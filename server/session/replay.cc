#include "server/session/replay.h"

#include <algorithm>
#include <variant>

#include "absl/strings/str_cat.h"

namespace pitlane::session {
namespace {

// Steps `session` up to `tick`, in Steps of at most `max_ticks` ticks.
absl::Status StepTo(Session& session, std::uint64_t tick, std::uint32_t max_ticks) {
  for (std::uint64_t now = session.Now().tick; now < tick; now = session.Now().tick) {
    const auto ticks = static_cast<std::uint32_t>(std::min<std::uint64_t>(tick - now, max_ticks));
    if (absl::Status status = session.Step(ticks, now).status(); !status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace

void CommandLog::OnCommand(std::uint64_t tick, const Command& command) {
  absl::MutexLock lock(&mu_);
  commands_.push_back({tick, command});
}

void CommandLog::OnTick(const sim::World& world) {
  const std::uint64_t hash = world.StateHash();
  absl::MutexLock lock(&mu_);
  hashes_.push_back({world.tick(), hash});
}

std::vector<RecordedCommand> CommandLog::commands() const {
  absl::MutexLock lock(&mu_);
  return commands_;
}

std::vector<TickHash> CommandLog::hashes() const {
  absl::MutexLock lock(&mu_);
  return hashes_;
}

absl::Status Replay(Session& session, absl::Span<const RecordedCommand> commands,
                    std::uint64_t final_tick) {
  const std::uint32_t max_ticks = session.max_ticks_per_step();
  for (std::size_t i = 0; i < commands.size(); ++i) {
    const RecordedCommand& recorded = commands[i];
    if (std::holds_alternative<SetClockCommand>(recorded.command) ||
        std::holds_alternative<StepCommand>(recorded.command)) {
      continue;
    }
    if (session.Now().tick > recorded.tick) {
      return absl::FailedPreconditionError(
          absl::StrCat("commands[", i, "]: recorded at tick ", recorded.tick,
                       " but the replay is already at tick ", session.Now().tick));
    }
    if (absl::Status status = StepTo(session, recorded.tick, max_ticks); !status.ok()) {
      return status;
    }
    if (absl::Status status = session.Apply(recorded.command); !status.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "commands[", i, "]: failed in the replay at tick ", recorded.tick, ": ",
          status.message()));
    }
  }
  return StepTo(session, final_tick, max_ticks);
}

}  // namespace pitlane::session
