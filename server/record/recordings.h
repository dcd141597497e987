// A server's recordings: started into --record_dir (one file each, <recording id>.mcap),
// within the server's limits (--max_recordings at once, --max_recording_mib and
// --max_recording_s each, --record_quota_mib for all the files in the directory), listed
// and stopped by id.
#ifndef PITLANE_SERVER_RECORD_RECORDINGS_H_
#define PITLANE_SERVER_RECORD_RECORDINGS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/record/recorder.h"
#include "server/session/clock.h"
#include "server/session/session.h"

namespace pitlane::record {

struct RecordingLimits {
  std::string dir;  // Must exist.
  std::uint64_t quota_bytes = std::uint64_t{10} << 30;
  std::uint64_t max_bytes = std::uint64_t{1} << 30;  // Per recording: its default and bound.
  double max_duration_s = 3600.0;                     // Simulated, per recording.
  std::uint32_t max_active = 16;
  double default_telemetry_rate_hz = 10.0;
  double default_foxglove_rate_hz = 2.0;
};

// Below this, a recording's max_bytes would hold little more than its schemas and summary
// (the largest schema, the header's (a session config's messages), is about 7 KB).
inline constexpr std::uint64_t kMinRecordingBytes = 1 << 20;
// Ended recordings listed; beyond, the oldest are forgotten (their files stay).
inline constexpr std::size_t kMaxListedRecordings = 10000;

// What a client asks of a recording; unset fields take the server's defaults.
struct RecordingRequest {
  std::optional<double> telemetry_rate_hz;
  std::optional<double> foxglove_rate_hz;  // 0: no Foxglove channels.
  std::optional<std::uint64_t> max_bytes;
  std::optional<double> max_duration_s;
};

struct RecordingInfo {
  std::string recording_id;
  std::string session_id;
  std::string path;
  std::string owner;  // Who started it (a token id; empty with --auth=none).
  session::SimTime start_time;
  bool replayable_from_start = false;
  double tick_rate_hz = 0.0;
  double telemetry_rate_hz = 0.0;  // As asked (or the default).
  std::uint32_t telemetry_every_n_ticks = 1;
  double foxglove_rate_hz = 0.0;  // As asked (or the default).
  std::uint32_t foxglove_every_n_ticks = 0;  // 0: none.
  std::uint64_t max_bytes = 0;
  double max_duration_s = 0.0;
  RecordingProgress progress;
};

// Thread-safe.
class Recordings {
 public:
  using EncoderFactory =
      std::function<std::unique_ptr<RecordingEncoder>(const std::shared_ptr<session::Session>&)>;
  // What a recording file left by an earlier run of the server holds (its session, start,
  // rates, ticks); `path` and the progress's bytes are filled in by the caller. An error
  // lists the file as FAILED with it.
  using FileDescriber = std::function<absl::StatusOr<RecordingInfo>(const std::string& path)>;

  // `limits.dir` must be a directory this process may write; the .mcap files already in it
  // count against the quota, and those named as recordings (r-<id>.mcap) are listed, ended,
  // as `describe_file` (may be null: not listed) says, with no owner (only admins see them).
  // `clock` (for the subscribers) must outlive this; `unix_now_ns` gives the wall-clock time
  // that recordings' message times start from.
  static absl::StatusOr<std::unique_ptr<Recordings>> Create(
      RecordingLimits limits, EncoderFactory encoders, const session::Clock* clock,
      std::function<std::uint64_t()> unix_now_ns, FileDescriber describe_file = nullptr);
  ~Recordings();  // Stops every recording.

  const RecordingLimits& limits() const { return limits_; }

  // Starts recording `session`. InvalidArgument naming the field of `request`
  // ("options.telemetry_rate_hz: ..."); FailedPrecondition if the session is being recorded
  // already; ResourceExhausted at max_active recordings or when the quota is used up (the
  // files in the directory are counted again first); the file's or the session's errors.
  absl::StatusOr<RecordingInfo> Start(std::shared_ptr<session::Session> session,
                                      const RecordingRequest& request, std::string owner);
  // Stops a recording (a no-op for one that has ended) and returns it. NotFound
  // ("recording_id").
  absl::StatusOr<RecordingInfo> Stop(absl::string_view recording_id);
  absl::StatusOr<RecordingInfo> Get(absl::string_view recording_id);
  // Newest first.
  std::vector<RecordingInfo> List();
  // Deletes a stopped recording's file and forgets it; returns the bytes freed (given back to
  // the quota). NotFound ("recording_id"); FailedPrecondition while it runs.
  absl::StatusOr<std::uint64_t> Delete(absl::string_view recording_id);
  // Stops them all (the server shuts down).
  void StopAll();
  // Bytes of the quota left (negative: used up by the summaries written past it).
  std::int64_t quota_left() const { return quota_.left(); }

 private:
  struct Entry {
    RecordingInfo info;                   // progress: as of the last look.
    std::shared_ptr<Recorder> recorder;  // Null once stopped and joined.
    std::uint64_t order = 0;
  };
  Recordings(RecordingLimits limits, EncoderFactory encoders, const session::Clock* clock,
             std::function<std::uint64_t()> unix_now_ns, std::uint64_t used_bytes);
  static RecordingInfo InfoOf(const Entry& entry);
  // Joins the recorders that ended by themselves (their files are complete), and forgets the
  // oldest ended recordings beyond kMaxListedRecordings.
  void ReapLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The bytes of the .mcap files in the directory.
  std::uint64_t BytesOnDisk() const;
  // Lists the recordings' files already in the directory, oldest first.
  void ListFilesOnDisk(const FileDescriber& describe_file);

  const RecordingLimits limits_;
  const EncoderFactory encoders_;
  const session::Clock* const clock_;
  const std::function<std::uint64_t()> unix_now_ns_;
  DiskQuota quota_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  std::uint64_t next_order_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace pitlane::record

#endif  // PITLANE_SERVER_RECORD_RECORDINGS_H_
