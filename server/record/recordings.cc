#include "server/record/recordings.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "server/util/random_bytes.h"

namespace pitlane::record {
namespace {

// Characters after "r-": 128 random bits at 5 bits a character.
constexpr std::size_t kIdRandomBytes = 16;

// "r-", then kIdRandomBytes of base32 (lowercase), then ".mcap".
bool IsRecordingFileName(absl::string_view name) {
  if (!absl::ConsumePrefix(&name, "r-") || !absl::ConsumeSuffix(&name, ".mcap") ||
      name.size() != (kIdRandomBytes * 8 + 4) / 5) {
    return false;
  }
  for (const char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7'))) return false;
  }
  return true;
}

absl::StatusOr<std::string> NewRecordingId() {
  std::array<std::uint8_t, kIdRandomBytes> bytes{};
  if (absl::Status status = FillRandom(absl::MakeSpan(bytes)); !status.ok()) return status;
  return absl::StrCat("r-", Base32Lowercase(bytes));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Recordings>> Recordings::Create(
    RecordingLimits limits, EncoderFactory encoders, const session::Clock* clock,
    std::function<std::uint64_t()> unix_now_ns, FileDescriber describe_file) {
  std::error_code error;
  const std::filesystem::path dir(limits.dir);
  if (!std::filesystem::is_directory(dir, error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--record_dir: ", limits.dir, " is not a directory"));
  }
  if (access(limits.dir.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("--record_dir: this process may not write in ", limits.dir));
  }
  auto recordings = std::unique_ptr<Recordings>(
      new Recordings(std::move(limits), std::move(encoders), clock, std::move(unix_now_ns), 0));
  recordings->quota_.Charge(recordings->BytesOnDisk());
  if (describe_file != nullptr) recordings->ListFilesOnDisk(describe_file);
  return recordings;
}

void Recordings::ListFilesOnDisk(const FileDescriber& describe_file) {
  struct Found {
    std::filesystem::file_time_type modified;
    std::string id, path;
    std::uint64_t bytes = 0;
  };
  std::vector<Found> found;
  std::error_code error;
  // increment(error), not ++: a directory that fails to read ends the loop, never throws.
  for (std::filesystem::directory_iterator it(limits_.dir, error), end; !error && it != end;
       it.increment(error)) {
    const std::filesystem::directory_entry& file = *it;
    const std::string name = file.path().filename().string();
    std::error_code file_error;
    // Not links: the readers refuse to follow them.
    if (!IsRecordingFileName(name) || file.is_symlink(file_error) ||
        !file.is_regular_file(file_error)) {
      continue;
    }
    const std::uintmax_t bytes = file.file_size(file_error);
    const auto modified = file.last_write_time(file_error);
    if (file_error) continue;
    found.push_back({modified, name.substr(0, name.size() - 5), file.path().string(), bytes});
  }
  // The newest kMaxListedRecordings, listed oldest first (the list shows the newest first).
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.modified > b.modified; });
  if (found.size() > kMaxListedRecordings) found.resize(kMaxListedRecordings);
  std::reverse(found.begin(), found.end());
  absl::MutexLock lock(&mu_);
  for (Found& file : found) {
    absl::StatusOr<RecordingInfo> described = describe_file(file.path);
    RecordingInfo info;
    if (described.ok()) {
      info = *std::move(described);
    } else {
      info.progress.end_status = described.status();
      info.progress.end_reason = absl::StrCat("cannot be read: ", described.status().message());
    }
    info.recording_id = file.id;
    info.path = std::move(file.path);
    info.owner.clear();
    info.progress.bytes = file.bytes;
    info.progress.ended = true;
    const std::string id = info.recording_id;
    entries_[id] = Entry{.info = std::move(info), .order = next_order_++};
  }
}

std::uint64_t Recordings::BytesOnDisk() const {
  std::uint64_t used = 0;
  std::error_code error;
  // increment(error), not ++: a directory that fails to read ends the loop, never throws.
  for (std::filesystem::directory_iterator it(limits_.dir, error), end; !error && it != end;
       it.increment(error)) {
    const std::filesystem::directory_entry& file = *it;
    std::error_code size_error;
    if (file.path().extension() == ".mcap" && !file.is_symlink(size_error) &&
        file.is_regular_file(size_error)) {
      const std::uintmax_t size = file.file_size(size_error);
      if (!size_error) used += size;
    }
  }
  return used;
}

Recordings::Recordings(RecordingLimits limits, EncoderFactory encoders,
                       const session::Clock* clock, std::function<std::uint64_t()> unix_now_ns,
                       std::uint64_t used_bytes)
    : limits_(std::move(limits)),
      encoders_(std::move(encoders)),
      clock_(clock),
      unix_now_ns_(std::move(unix_now_ns)),
      quota_(limits_.quota_bytes) {
  quota_.Charge(used_bytes);
}

Recordings::~Recordings() { StopAll(); }

RecordingInfo Recordings::InfoOf(const Entry& entry) {
  RecordingInfo info = entry.info;
  if (entry.recorder != nullptr) info.progress = entry.recorder->progress();
  return info;
}

void Recordings::ReapLocked() {
  for (auto& [id, entry] : entries_) {
    if (entry.recorder != nullptr && entry.recorder->progress().ended) {
      entry.info.progress = entry.recorder->Stop();  // Joins a writer that is done.
      entry.recorder.reset();
    }
  }
  if (entries_.size() <= kMaxListedRecordings) return;
  std::vector<std::pair<std::uint64_t, std::string>> ended;
  for (const auto& [id, entry] : entries_) {
    if (entry.recorder == nullptr) ended.emplace_back(entry.order, id);
  }
  std::sort(ended.begin(), ended.end());
  for (std::size_t i = 0; i < ended.size() && entries_.size() > kMaxListedRecordings; ++i) {
    entries_.erase(ended[i].second);
  }
}

absl::StatusOr<RecordingInfo> Recordings::Start(std::shared_ptr<session::Session> session,
                                                const RecordingRequest& request,
                                                std::string owner) {
  const double tick_rate_hz = session->config().world.tick_rate_hz;
  const double rate_hz = request.telemetry_rate_hz.value_or(
      std::min(limits_.default_telemetry_rate_hz, tick_rate_hz));
  // At least a frame every 2^31 ticks (what the decimation counts in).
  const double min_rate_hz = tick_rate_hz / 2147483648.0;
  if (!(rate_hz >= min_rate_hz) || !(rate_hz <= tick_rate_hz)) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.telemetry_rate_hz: must be in [", min_rate_hz, ", ", tick_rate_hz,
                     "] (the session's tick rate), got ", rate_hz));
  }
  const std::uint64_t max_bytes = request.max_bytes.value_or(limits_.max_bytes);
  if (max_bytes < kMinRecordingBytes || max_bytes > limits_.max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.max_bytes: must be in [", kMinRecordingBytes, ", ", limits_.max_bytes,
        "] (this server's --max_recording_mib), got ", max_bytes));
  }
  const double max_duration_s = request.max_duration_s.value_or(limits_.max_duration_s);
  if (!(max_duration_s > 0.0) || !(max_duration_s <= limits_.max_duration_s)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.max_duration_s: must be in (0, ", limits_.max_duration_s,
        "] seconds (this server's --max_recording_s), got ", max_duration_s));
  }
  const auto every_n_ticks = static_cast<std::uint32_t>(
      std::clamp(std::llround(tick_rate_hz / rate_hz), 1LL, 1LL << 31));
  // The telemetry's rate as its decimation makes it; the Foxglove channels take every n-th of
  // its frames, n as large as keeps at least the rate asked.
  const double telemetry_hz = tick_rate_hz / every_n_ticks;
  const double foxglove_rate_hz = request.foxglove_rate_hz.value_or(
      std::min(limits_.default_foxglove_rate_hz, telemetry_hz));
  if (!(foxglove_rate_hz == 0.0 || (foxglove_rate_hz >= min_rate_hz &&
                                     foxglove_rate_hz <= telemetry_hz * (1 + 1e-9)))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "options.foxglove_rate_hz: must be 0 (none) or in [", min_rate_hz, ", ", telemetry_hz,
        "] (the telemetry's rate), got ", foxglove_rate_hz));
  }
  const std::uint32_t foxglove_every_n_ticks =
      foxglove_rate_hz == 0.0
          ? 0
          : every_n_ticks *
                static_cast<std::uint32_t>(std::clamp(
                    std::floor(telemetry_hz / foxglove_rate_hz + 1e-9), 1.0,
                    static_cast<double>((std::uint32_t{1} << 31) / every_n_ticks)));
  const auto max_ticks =
      static_cast<std::uint64_t>(std::max(1.0, std::ceil(max_duration_s * tick_rate_hz - 1e-9)));

  absl::MutexLock lock(&mu_);
  ReapLocked();
  std::int64_t active = 0;
  for (const auto& [id, entry] : entries_) {
    if (entry.recorder == nullptr) continue;
    ++active;
    if (entry.info.session_id == session->id()) {
      return absl::FailedPreconditionError(
          absl::StrCat("session_id: the session is being recorded already (recording ", id,
                       "): stop that recording first"));
    }
  }
  if (active >= static_cast<std::int64_t>(limits_.max_active)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this server records at most ", limits_.max_active,
                     " sessions at once (--max_recordings): stop one first"));
  }
  if (quota_.left() < static_cast<std::int64_t>(kMinRecordingBytes)) {
    // Files may have been deleted since: count them again (what the recordings running now
    // wrote is on disk, and what they write next is taken from the quota as they write it).
    // (What recordings take while the directory is read is counted twice: on the safe side.)
    const std::int64_t before = quota_.left();
    const std::int64_t target = static_cast<std::int64_t>(limits_.quota_bytes) -
                                static_cast<std::int64_t>(BytesOnDisk());
    if (target > before) quota_.Give(static_cast<std::uint64_t>(target - before));
  }
  if (quota_.left() < static_cast<std::int64_t>(kMinRecordingBytes)) {
    return absl::ResourceExhaustedError(
        "--record_quota_mib: this server's recordings have used it up: delete some of the "
        "files in --record_dir first");
  }
  absl::StatusOr<std::string> id = NewRecordingId();
  if (!id.ok()) return id.status();
  RecordingInfo info{.recording_id = *id,
                     .session_id = session->id(),
                     .path = (std::filesystem::path(limits_.dir) / (*id + ".mcap")).string(),
                     .owner = std::move(owner),
                     .tick_rate_hz = tick_rate_hz,
                     .telemetry_rate_hz = rate_hz,
                     .telemetry_every_n_ticks = every_n_ticks,
                     .foxglove_rate_hz = foxglove_rate_hz,
                     .foxglove_every_n_ticks = foxglove_every_n_ticks,
                     .max_bytes = max_bytes,
                     .max_duration_s = max_duration_s};
  absl::StatusOr<std::unique_ptr<Recorder>> recorder = Recorder::Start(
      session,
      {.recording_id = info.recording_id,
       .session_id = info.session_id,
       .config = session->config(),
       .telemetry_every_n_ticks = every_n_ticks,
       .foxglove_every_n_ticks = foxglove_every_n_ticks,
       .time_origin_ns = unix_now_ns_()},
      {.path = info.path,
       .max_bytes = max_bytes,
       .max_ticks = max_ticks,
       .quota = &quota_,
       .quota_name = "--record_quota_mib",
       .mcap = {.chunk_bytes = std::clamp<std::size_t>(max_bytes / 16, 64 << 10, 1 << 20)}},
      encoders_(session), clock_);
  if (!recorder.ok()) return recorder.status();
  const session::ObservedStart& start = (*recorder)->start().start;
  info.start_time = {.tick = start.tick,
                     .sim_time_s = static_cast<double>(start.tick) / tick_rate_hz};
  info.replayable_from_start = start.pristine;
  Entry& entry = entries_[info.recording_id];
  entry.info = info;
  entry.recorder = std::shared_ptr<Recorder>(*std::move(recorder));
  entry.order = next_order_++;
  return InfoOf(entry);
}

absl::StatusOr<RecordingInfo> Recordings::Stop(absl::string_view recording_id) {
  std::shared_ptr<Recorder> recorder;
  {
    absl::MutexLock lock(&mu_);
    ReapLocked();
    const auto it = entries_.find(recording_id);
    if (it == entries_.end()) {
      return absl::NotFoundError("recording_id: no such recording on this server");
    }
    recorder = it->second.recorder;
    if (recorder == nullptr) return InfoOf(it->second);
  }
  // Outside the lock: the writer may have a queue to write first.
  const RecordingProgress progress = recorder->Stop();
  absl::MutexLock lock(&mu_);
  const auto it = entries_.find(recording_id);
  if (it == entries_.end()) {
    return absl::NotFoundError("recording_id: no such recording on this server");
  }
  it->second.info.progress = progress;
  if (it->second.recorder == recorder) it->second.recorder.reset();
  return InfoOf(it->second);
}

absl::StatusOr<RecordingInfo> Recordings::Get(absl::string_view recording_id) {
  absl::MutexLock lock(&mu_);
  ReapLocked();
  const auto it = entries_.find(recording_id);
  if (it == entries_.end()) {
    return absl::NotFoundError("recording_id: no such recording on this server");
  }
  return InfoOf(it->second);
}

std::vector<RecordingInfo> Recordings::List() {
  absl::MutexLock lock(&mu_);
  ReapLocked();
  std::vector<std::pair<std::uint64_t, RecordingInfo>> ordered;
  ordered.reserve(entries_.size());
  for (const auto& [id, entry] : entries_) ordered.emplace_back(entry.order, InfoOf(entry));
  std::sort(ordered.begin(), ordered.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<RecordingInfo> out;
  out.reserve(ordered.size());
  for (auto& [order, info] : ordered) out.push_back(std::move(info));
  return out;
}

absl::StatusOr<std::uint64_t> Recordings::Delete(absl::string_view recording_id) {
  absl::MutexLock lock(&mu_);
  ReapLocked();
  const auto it = entries_.find(recording_id);
  if (it == entries_.end()) {
    return absl::NotFoundError("recording_id: no such recording on this server");
  }
  if (it->second.recorder != nullptr) {
    return absl::FailedPreconditionError(
        "recording_id: the recording is running: stop it first");
  }
  std::error_code error;
  const std::uintmax_t size = std::filesystem::file_size(it->second.info.path, error);
  const std::uint64_t freed = error ? 0 : static_cast<std::uint64_t>(size);
  if (!std::filesystem::remove(it->second.info.path, error) && error) {
    return absl::InternalError(
        absl::StrCat("recording_id: its file cannot be deleted: ", error.message()));
  }
  quota_.Give(freed);
  entries_.erase(it);
  return freed;
}

void Recordings::StopAll() {
  absl::MutexLock lock(&mu_);
  for (auto& [id, entry] : entries_) {
    if (entry.recorder == nullptr) continue;
    entry.info.progress = entry.recorder->Stop();
    entry.recorder.reset();
  }
}

}  // namespace pitlane::record
