#include "server/api/recording_replay.h"

#include <algorithm>
#include <deque>
#include <memory>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "server/api/recording_codec.h"
#include "server/record/mcap_reader.h"
#include "server/util/status_macros.h"

namespace pitlane::api {
namespace {

// What ends a read early on purpose (not an error of the file).
constexpr absl::string_view kStopMarker = "pitlane: stop reading";

absl::Status StopReading() { return absl::CancelledError(kStopMarker); }
bool IsStopReading(const absl::Status& status) {
  return absl::IsCancelled(status) && status.message() == kStopMarker;
}

// Compares the hash of every tick the session steps with the recorded one, in order.
class HashChecker final : public session::CommandObserver {
 public:
  void Expect(std::uint64_t run, std::uint64_t tick, std::uint64_t hash) {
    absl::MutexLock lock(&mu_);
    expected_.push_back({run, tick, hash});
  }
  void OnCommand(std::uint64_t, const session::Command&) override {}
  void OnTick(const sim::World& world) override {
    const std::uint64_t hash = world.StateHash();
    absl::MutexLock lock(&mu_);
    if (expected_.empty()) return;  // Stepped past the recorded hashes (a gap, or the end).
    const Expected expected = expected_.front();
    expected_.pop_front();
    ++compared_;
    if (divergence_.has_value()) return;
    if (expected.tick != world.tick()) {
      divergence_ = Divergence(expected, absl::StrCat("the recording's hash is of tick ",
                                                      expected.tick, ", the re-simulation's of ",
                                                      world.tick()));
    } else if (expected.hash != hash) {
      divergence_ = Divergence(
          expected, absl::StrFormat("state hash: recorded 0x%016x, re-simulated 0x%016x",
                                    expected.hash, hash));
    }
  }
  std::optional<v1::ReplayDivergence> divergence() const {
    absl::MutexLock lock(&mu_);
    return divergence_;
  }
  std::uint64_t compared() const {
    absl::MutexLock lock(&mu_);
    return compared_;
  }
  std::size_t pending() const {
    absl::MutexLock lock(&mu_);
    return expected_.size();
  }
  // The tick the last expected hash is of (the session's tick once they are all stepped).
  std::optional<std::uint64_t> last_tick() const {
    absl::MutexLock lock(&mu_);
    if (expected_.empty()) return std::nullopt;
    return expected_.back().tick;
  }

 private:
  struct Expected {
    std::uint64_t run, tick, hash;
  };
  static v1::ReplayDivergence Divergence(const Expected& at, std::string reason) {
    v1::ReplayDivergence divergence;
    divergence.set_run(at.run);
    divergence.set_tick(at.tick);
    divergence.set_reason(std::move(reason));
    return divergence;
  }

  mutable absl::Mutex mu_;
  std::deque<Expected> expected_ ABSL_GUARDED_BY(mu_);
  std::optional<v1::ReplayDivergence> divergence_ ABSL_GUARDED_BY(mu_);
  std::uint64_t compared_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

absl::StatusOr<v1::RecordingHeader> ReadRecordingHeader(const std::string& path) {
  std::optional<v1::RecordingHeader> header;
  absl::StatusOr<record::McapReadSummary> read = record::ReadMcapFile(
      path, [&](const record::McapChannel& channel, const record::McapSchema*,
                const record::McapMessage& message) -> absl::Status {
        if (channel.topic != kRecordingSessionTopic) {
          return absl::InvalidArgumentError(
              "not a Pitlane recording: its first message is not on /pitlane/session");
        }
        v1::RecordingHeader parsed;
        if (!parsed.ParseFromArray(message.data.data(), static_cast<int>(message.data.size()))) {
          return absl::InvalidArgumentError("/pitlane/session: its message does not parse");
        }
        header = std::move(parsed);
        return StopReading();
      });
  if (!read.ok() && !IsStopReading(read.status())) return read.status();
  if (!header.has_value()) {
    return absl::InvalidArgumentError("not a Pitlane recording: it has no /pitlane/session message");
  }
  return *std::move(header);
}

absl::StatusOr<record::RecordingInfo> DescribeRecordingFile(const std::string& path) {
  ASSIGN_OR_RETURN(const v1::RecordingHeader header, ReadRecordingHeader(path));
  const double tick_rate_hz = header.config().tick_rate_hz();
  if (!(tick_rate_hz > 0.0) || header.telemetry_every_n_ticks() == 0) {
    return absl::InvalidArgumentError("/pitlane/session: no tick rate or telemetry decimation");
  }
  record::RecordingInfo info;
  info.session_id = header.session_id();
  info.start_time = {.tick = header.start_tick(),
                     .sim_time_s = static_cast<double>(header.start_tick()) / tick_rate_hz};
  info.replayable_from_start = header.replayable_from_start();
  info.tick_rate_hz = tick_rate_hz;
  info.telemetry_every_n_ticks = header.telemetry_every_n_ticks();
  info.telemetry_rate_hz = tick_rate_hz / header.telemetry_every_n_ticks();
  info.foxglove_every_n_ticks = header.foxglove_every_n_ticks();
  info.foxglove_rate_hz =
      header.foxglove_every_n_ticks() == 0 ? 0.0 : tick_rate_hz / header.foxglove_every_n_ticks();
  absl::StatusOr<std::unique_ptr<record::McapFileReader>> file =
      record::McapFileReader::Open(path);
  absl::StatusOr<record::McapSummary> summary =
      file.ok() ? (*file)->ReadSummary() : absl::StatusOr<record::McapSummary>(file.status());
  if (!summary.ok() || summary->chunk_offsets.empty()) {
    info.progress.end_status =
        summary.ok() ? absl::FailedPreconditionError("the file has no chunks") : summary.status();
    info.progress.end_reason = std::string(info.progress.end_status.message());
    return info;
  }
  info.progress.messages = summary->statistics.message_count;
  // Message times are the start's wall-clock time plus the simulated time recorded: the last
  // one (the end's) says how much that was.
  const std::uint64_t origin = header.time_origin_unix_ns();
  const std::uint64_t end_time = summary->statistics.message_end_time;
  const double recorded_s =
      end_time > origin ? static_cast<double>(end_time - origin) * 1e-9 : 0.0;
  info.progress.ticks = static_cast<std::uint64_t>(recorded_s * tick_rate_hz + 0.5);
  // How it ended: the /pitlane/end message, in the last chunk.
  std::optional<v1::RecordingEnd> end;
  (void)(*file)->ReadChunk(
      summary->chunk_offsets.back(),
      [&](const record::McapChannel& channel, const record::McapSchema*,
          const record::McapMessage& message) -> absl::Status {
        v1::RecordingEnd parsed;
        if (channel.topic == kRecordingEndTopic &&
            parsed.ParseFromArray(message.data.data(), static_cast<int>(message.data.size()))) {
          end = std::move(parsed);
        }
        return absl::OkStatus();
      });
  if (!end.has_value()) {
    info.progress.end_status = absl::FailedPreconditionError("the file has no end message");
    info.progress.end_reason = "ended without its end message (a write error)";
    return info;
  }
  info.progress.ticks = end->ticks();
  info.progress.frames_lost = end->frames_lost();
  info.progress.commands_lost = end->commands_lost();
  info.progress.end_reason = end->reason();
  // The one end written with a failure: the quota used up (recordings.cc).
  if (absl::StartsWith(end->reason(), "--record_quota_mib")) {
    info.progress.end_status = absl::ResourceExhaustedError(end->reason());
  }
  return info;
}

absl::StatusOr<ReplayOutcome> ReplayRecordingFile(const std::string& path,
                                                  const v1::RecordingHeader& header,
                                                  session::Session& session,
                                                  const std::atomic<bool>& cancel) {
  std::vector<std::string> route_names;
  for (const v1::Track& track : header.config().tracks()) route_names.push_back(track.name());
  auto checker = std::make_shared<HashChecker>();
  session.AddObserver(checker);
  struct Detach {
    session::Session& session;
    const session::CommandObserver* observer;
    ~Detach() { session.RemoveObserver(observer); }
  } detach{session, checker.get()};

  ReplayOutcome outcome;
  std::uint64_t run = header.start_run();
  // The tick the next recorded hash must be of: one after another, from the start (a reset
  // starts again at 1). A file whose hashes skip ticks (edited: a gap is recorded as such)
  // is re-simulated up to the skip, no further.
  std::uint64_t next_hash_tick = header.start_tick() + 1;
  absl::Status failure;  // A session error (closed), not a divergence.
  // Steps the session through the recorded hashes queued so far, in Steps it allows.
  const auto flush = [&]() -> bool {
    const std::optional<std::uint64_t> target = checker->last_tick();
    if (!target.has_value()) return true;
    while (session.Now().tick < *target) {
      if (cancel.load(std::memory_order_relaxed)) {
        failure = absl::CancelledError("the re-simulation was cancelled (the server stops)");
        return false;
      }
      const std::uint64_t now = session.Now().tick;
      const auto ticks = static_cast<std::uint32_t>(
          std::min<std::uint64_t>(*target - now, session.max_ticks_per_step()));
      if (absl::Status status = session.Step(ticks, now).status(); !status.ok()) {
        failure = status;
        return false;
      }
    }
    outcome.divergence = checker->divergence();
    return !outcome.divergence.has_value();
  };
  const absl::StatusOr<record::McapReadSummary> read = record::ReadMcapFile(
      path, [&](const record::McapChannel& channel, const record::McapSchema*,
                const record::McapMessage& message) -> absl::Status {
        if (cancel.load(std::memory_order_relaxed)) {
          failure = absl::CancelledError("the re-simulation was cancelled (the server stops)");
          return StopReading();
        }
        const auto parse = [&](google::protobuf::Message& parsed) -> absl::Status {
          if (!parsed.ParseFromArray(message.data.data(), static_cast<int>(message.data.size()))) {
            return absl::InvalidArgumentError(absl::StrCat(
                channel.topic, ": message ", message.sequence, " does not parse"));
          }
          return absl::OkStatus();
        };
        if (channel.topic == kRecordingStateHashTopic) {
          v1::TickHash hash;
          RETURN_IF_ERROR(parse(hash));
          if (hash.run() != run) {
            return absl::InvalidArgumentError(absl::StrCat(
                "/pitlane/state_hash: message ", message.sequence, " is of run ", hash.run(),
                " after commands of run ", run, " (a reset is missing)"));
          }
          if (hash.tick() != next_hash_tick) {
            if (!flush()) return StopReading();
            outcome.stopped_reason = absl::StrCat(
                "the recording's state hashes go from tick ", next_hash_tick - 1, " to tick ",
                hash.tick(), " (an edited file?): re-simulated up to tick ", next_hash_tick - 1);
            return StopReading();
          }
          ++next_hash_tick;
          checker->Expect(hash.run(), hash.tick(), hash.state_hash());
          if (checker->pending() >= kReplayBatchTicks && !flush()) return StopReading();
          return absl::OkStatus();
        }
        if (channel.topic == kRecordingCommandsTopic) {
          v1::RecordedCommand recorded;
          RETURN_IF_ERROR(parse(recorded));
          absl::StatusOr<session::RecordedCommand> command =
              CommandFromProto(recorded, route_names);
          if (!command.ok()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "/pitlane/commands: message ", message.sequence, ": ", command.status().message()));
          }
          if (std::holds_alternative<session::SetClockCommand>(command->command) ||
              std::holds_alternative<session::StepCommand>(command->command)) {
            return absl::OkStatus();  // When ticks happened, not what they computed.
          }
          if (!flush()) return StopReading();
          if (recorded.run() != run || session.Now().tick != recorded.tick()) {
            v1::ReplayDivergence divergence;
            divergence.set_run(recorded.run());
            divergence.set_tick(recorded.tick());
            divergence.set_reason(absl::StrCat(
                "a command of run ", recorded.run(), " tick ", recorded.tick(),
                " where the re-simulation is at run ", run, " tick ", session.Now().tick));
            outcome.divergence = std::move(divergence);
            return StopReading();
          }
          if (absl::Status status = session.Apply(command->command); !status.ok()) {
            if (absl::IsNotFound(status) && status.message().find("session_id") == 0) {
              failure = status;  // The session was deleted under the re-simulation.
              return StopReading();
            }
            v1::ReplayDivergence divergence;
            divergence.set_run(run);
            divergence.set_tick(recorded.tick());
            divergence.set_reason(absl::StrCat("the recorded command failed: ", status.message()));
            outcome.divergence = std::move(divergence);
            return StopReading();
          }
          ++outcome.commands_applied;
          if (std::holds_alternative<session::ResetCommand>(command->command)) {
            ++run;
            next_hash_tick = 1;
          }
          return absl::OkStatus();
        }
        if (channel.topic == kRecordingGapsTopic) {
          v1::RecordingGap gap;
          RETURN_IF_ERROR(parse(gap));
          if (gap.kind() != v1::RecordingGap::KIND_COMMANDS) return absl::OkStatus();
          if (!flush()) return StopReading();
          outcome.stopped_reason = absl::StrCat(
              "the recording lost ", gap.count(), " commands and state hashes from tick ",
              gap.first_tick(), ": re-simulated up to it");
          return StopReading();
        }
        return absl::OkStatus();
      },
      {.cancel = &cancel});
  if (!read.ok() && !IsStopReading(read.status())) {
    if (cancel.load() && absl::IsCancelled(read.status())) {
      return absl::CancelledError("the re-simulation was cancelled (the server stops)");
    }
    return read.status();
  }
  if (read.ok()) {
    flush();
    if (read->truncated && outcome.stopped_reason.empty() && !outcome.divergence.has_value()) {
      outcome.stopped_reason = "the file ends before its summary (cut short): re-simulated up to "
                               "its last whole chunk";
    }
  }
  if (!failure.ok()) return failure;
  outcome.ticks_compared = checker->compared();
  return outcome;
}

}  // namespace pitlane::api
