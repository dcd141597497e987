#include "server/record/recorder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "server/record/file_sink.h"

namespace pitlane::record {

bool DiskQuota::Take(std::uint64_t bytes) {
  const auto wanted = static_cast<std::int64_t>(bytes);
  std::int64_t left = left_.load();
  while (left >= wanted) {
    if (left_.compare_exchange_weak(left, left - wanted)) return true;
  }
  return false;
}

namespace {

// What a queued command holds beyond its own size, roughly.
std::size_t PayloadBytes(const session::Command& command) {
  return std::visit(
      [](const auto& c) -> std::size_t {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, session::SpawnVehiclesCommand>) {
          return c.specs.size() * sizeof(sim::VehicleSpec);
        } else if constexpr (std::is_same_v<T, session::AddObstaclesCommand>) {
          return c.specs.size() * sizeof(sim::ObstacleSpec);
        } else if constexpr (std::is_same_v<T, session::SetControlsCommand>) {
          return c.inputs.size() * sizeof(sim::VehicleInput);
        } else if constexpr (std::is_same_v<T, session::StartRaceCommand>) {
          return c.vehicles.size() * sizeof(sim::VehicleId) + c.grid.size() * sizeof(sim::Pose2);
        } else {
          return 0;
        }
      },
      command);
}

}  // namespace

// What the session's threads leave for the writer. A std::mutex and condition variable (not
// absl::Mutex's conditions): ThreadSanitizer follows them into Debian's uninstrumented Abseil.
// How often the writer looks for what the session queued.
constexpr std::chrono::milliseconds kWriterPeriod{10};

struct Recorder::Inbox {
  struct Item {
    std::uint64_t run = 0;
    std::uint64_t tick = 0;
    std::uint64_t hash = 0;                  // A tick's state hash, if no command...
    std::optional<session::Command> command;  // ...else the command.
    std::optional<RecordingGap> gap;          // Or a gap before the items after it.
  };

  explicit Inbox(std::size_t max_bytes) : max_bytes(max_bytes) {}

  // Queues `item` unless the queue is full (then counts it lost; a reset is always queued:
  // the times of everything after it follow from it). Wakes the writer only if the queue is
  // half full: it looks for work every kWriterPeriod on its own, so that a tick never pays
  // for waking it (a system call, and a thread made to run beside the session). Under mu.
  void Push(Item item, std::size_t bytes, bool always) {
    if (ended) return;
    if (queued_bytes + bytes > max_bytes && !always) {
      if (lost.count == 0) {
        lost.first_run = item.run;
        lost.first_tick = item.tick;
      }
      ++lost.count;
      lost.last_run = item.run;
      lost.last_tick = item.tick;
      return;
    }
    FlushLost();
    queued_bytes += bytes;
    items.push_back(std::move(item));
    if (queued_bytes > max_bytes / 2) Wake();
  }
  // Queues the gap of what was lost, if anything was. Under mu.
  void FlushLost() {
    if (lost.count == 0) return;
    items.push_back(
        {.run = lost.last_run, .tick = lost.last_tick, .gap = std::exchange(lost, RecordingGap{})});
    items.back().gap->kind = RecordingGap::Kind::kCommands;
  }
  // Under mu.
  void Wake() { wake.notify_one(); }
  bool Urgent() const { return stop || closed.has_value() || queued_bytes > max_bytes / 2; }

  const std::size_t max_bytes;
  std::mutex mu;
  std::condition_variable wake;
  // Guarded by mu:
  std::vector<Item> items;
  std::size_t queued_bytes = 0;
  RecordingGap lost;
  std::optional<session::ObservedStart> start;
  std::uint64_t run = 0;  // The session's, as the observer saw it.
  bool frames_ready = false;
  std::optional<absl::Status> closed;  // The session closed.
  bool stop = false;
  bool ended = false;  // The writer is done: nothing more is queued.
  RecordingProgress progress;
};

class Recorder::Observer final : public session::CommandObserver {
 public:
  explicit Observer(std::shared_ptr<Inbox> inbox) : inbox_(std::move(inbox)) {}

  void OnAttach(const session::ObservedStart& start) override {
    std::lock_guard lock(inbox_->mu);
    inbox_->start = start;
    inbox_->run = start.run;
  }
  void OnCommand(std::uint64_t tick, const session::Command& command) override {
    std::lock_guard lock(inbox_->mu);
    const std::uint64_t run = inbox_->run;
    const bool reset = std::holds_alternative<session::ResetCommand>(command);
    if (reset) ++inbox_->run;
    inbox_->Push({.run = run, .tick = tick, .command = command},
                 sizeof(Inbox::Item) + PayloadBytes(command), /*always=*/reset);
  }
  void OnTick(const sim::World& world) override {
    const std::uint64_t hash = world.StateHash();
    std::lock_guard lock(inbox_->mu);
    inbox_->Push({.run = inbox_->run, .tick = world.tick(), .hash = hash}, sizeof(Inbox::Item),
                 /*always=*/false);
  }

 private:
  const std::shared_ptr<Inbox> inbox_;
};

class Recorder::Transport final : public session::SubscriberTransport {
 public:
  explicit Transport(std::shared_ptr<Inbox> inbox) : inbox_(std::move(inbox)) {}
  void OnReady() override {
    std::lock_guard lock(inbox_->mu);
    inbox_->frames_ready = true;  // Taken at the writer's next look (kWriterPeriod).
  }
  void OnClosed(const absl::Status& reason) override {
    std::lock_guard lock(inbox_->mu);
    if (!inbox_->closed.has_value()) inbox_->closed = reason;
    inbox_->Wake();
  }

 private:
  const std::shared_ptr<Inbox> inbox_;
};

// The MCAP writer behind the encoder: channels by topic, the first error kept.
class Recorder::Output final : public RecordingOutput {
 public:
  Output(std::unique_ptr<FileSink> sink, const McapOptions& options)
      : sink_(std::move(sink)), writer_(*sink_, options) {}

  absl::Status Start() { return Keep(writer_.Start()); }

  std::uint16_t Channel(const ChannelSpec& spec) override {
    if (const auto it = channels_.find(spec.topic); it != channels_.end()) return it->second;
    std::uint16_t schema = 0;
    if (!spec.schema_name.empty()) {
      if (const auto it = schemas_.find(spec.schema_name); it != schemas_.end()) {
        schema = it->second;
      } else {
        const absl::StatusOr<std::uint16_t> added =
            writer_.AddSchema(spec.schema_name, spec.schema_encoding, spec.schema);
        if (!Keep(added.status()).ok()) return 0;
        schema = schemas_[spec.schema_name] = *added;
      }
    }
    const absl::StatusOr<std::uint16_t> channel =
        writer_.AddChannel(schema, spec.topic, spec.message_encoding, {});
    if (!Keep(channel.status()).ok()) return 0;
    return channels_[spec.topic] = *channel;
  }

  void Write(std::uint16_t channel, std::uint64_t time_ns, absl::string_view data) override {
    if (!error_.ok()) return;
    Keep(writer_.Write(channel, time_ns, time_ns, data)).IgnoreError();
  }

  absl::Status Finish() {
    if (error_.ok()) Keep(writer_.Finish()).IgnoreError();
    const absl::Status closed = sink_->Close();
    if (error_.ok()) error_ = closed;
    return error_;
  }

  const absl::Status& error() const { return error_; }
  std::uint64_t bytes() const { return writer_.bytes_written(); }
  std::uint64_t bytes_to_finish() const { return writer_.bytes_to_finish(); }
  std::uint64_t messages() const { return writer_.message_count(); }

 private:
  absl::Status Keep(absl::Status status) {
    if (error_.ok() && !status.ok()) error_ = status;
    return status;
  }

  std::unique_ptr<FileSink> sink_;
  McapWriter writer_;
  absl::Status error_;
  absl::flat_hash_map<std::string, std::uint16_t> channels_;
  absl::flat_hash_map<std::string, std::uint16_t> schemas_;
};

Recorder::Recorder(std::shared_ptr<session::Session> session, RecordingStart start,
                   RecorderOptions options, std::unique_ptr<RecordingEncoder> encoder)
    : session_(std::move(session)),
      start_(std::move(start)),
      options_(std::move(options)),
      encoder_(std::move(encoder)),
      inbox_(std::make_shared<Inbox>(options_.max_queued_bytes)),
      observer_(std::make_shared<Observer>(inbox_)) {}

absl::StatusOr<std::unique_ptr<Recorder>> Recorder::Start(
    std::shared_ptr<session::Session> session, RecordingStart start, RecorderOptions options,
    std::unique_ptr<RecordingEncoder> encoder, const session::Clock* clock) {
  if (start.telemetry_every_n_ticks < 1) {
    return absl::InvalidArgumentError("telemetry_every_n_ticks: must be >= 1");
  }
  absl::StatusOr<std::unique_ptr<FileSink>> sink = FileSink::Create(options.path);
  if (!sink.ok()) return sink.status();
  std::unique_ptr<Recorder> recorder(
      new Recorder(std::move(session), std::move(start), std::move(options), std::move(encoder)));
  recorder->output_ = std::make_unique<Output>(*std::move(sink), recorder->options_.mcap);
  const auto fail = [&](absl::Status status) {
    {
      absl::MutexLock stop_lock(&recorder->stop_mu_);
      recorder->detached_ = true;  // Not watching the session: nothing to let go of.
    }
    recorder->output_.reset();
    std::remove(recorder->options_.path.c_str());
    return status;
  };
  if (absl::Status status = recorder->output_->Start(); !status.ok()) return fail(status);

  session::SubscriberOptions subscriber{
      .kind = session::SubscriberOptions::Kind::kLossless,
      .every_n_ticks = recorder->start_.telemetry_every_n_ticks,
      // The encoder needs the whole frame only for the Foxglove channels.
      .full_every_n_ticks = recorder->start_.foxglove_every_n_ticks,
      .queue_capacity = recorder->options_.max_queued_frames,
      .queue_bytes = recorder->options_.max_queued_frame_bytes};
  recorder->subscriber_ = std::make_shared<session::Subscriber>(
      std::move(subscriber), std::make_shared<Transport>(recorder->inbox_), clock);
  recorder->session_->AddObserver(recorder->observer_);
  if (absl::Status status = recorder->session_->Subscribe(recorder->subscriber_); !status.ok()) {
    recorder->session_->RemoveObserver(recorder->observer_.get());
    return fail(status);
  }
  {
    std::lock_guard lock(recorder->inbox_->mu);
    recorder->start_.start = *recorder->inbox_->start;
  }

  recorder->writer_ = std::thread([r = recorder.get()] { r->Run(); });
  return recorder;
}

Recorder::~Recorder() { Stop(); }

void Recorder::Detach() {
  if (session_ == nullptr) return;
  session_->RemoveObserver(observer_.get());
  session_->Unsubscribe(subscriber_.get());
}

RecordingProgress Recorder::Stop() {
  LetGo();  // Nothing more comes in: the writer then writes all that was queued.
  {
    std::lock_guard lock(inbox_->mu);
    inbox_->stop = true;
    inbox_->Wake();
  }
  {
    absl::MutexLock join_lock(&join_mu_);
    if (writer_.joinable()) writer_.join();
  }
  return progress();
}

RecordingProgress Recorder::progress() const {
  std::lock_guard lock(inbox_->mu);
  return inbox_->progress;
}

void Recorder::Run() {
  const double tick_rate_hz = start_.config.world.tick_rate_hz;
  const auto time_of_ticks = [&](std::int64_t ticks) {
    return start_.time_origin_ns +
           static_cast<std::uint64_t>(std::llround(
               static_cast<double>(std::max<std::int64_t>(ticks, 0)) * 1e9 / tick_rate_hz));
  };
  // Ticks recorded before tick 0 of each run (a run's tick t was recorded offsets[run] + t
  // ticks after the start). Every run's entry is made from its reset, which is never lost and
  // is queued before anything of the run it starts.
  std::map<std::uint64_t, std::int64_t> offsets;
  offsets[start_.start.run] = -static_cast<std::int64_t>(start_.start.tick);
  const auto elapsed = [&](std::uint64_t run, std::uint64_t tick) -> std::int64_t {
    auto it = offsets.upper_bound(run);
    if (it == offsets.begin()) return 0;
    return std::prev(it)->second + static_cast<std::int64_t>(tick);
  };
  std::uint64_t ticks = 0;  // Recorded.
  std::uint64_t last_time_ns = start_.time_origin_ns;
  std::uint64_t frames_lost = 0, commands_lost = 0;
  std::uint64_t quota_taken = 0;
  std::optional<absl::Status> end_status;
  std::string end_reason;
  bool by_duration = false;
  std::uint64_t limit_run = 0;  // The run whose tick reached the duration limit.

  // Whether the recording must end now: a write error, the quota, the size limit (checked
  // after every message, since a batch may hold a long Step's worth).
  const auto Full = [&]() -> bool {
    if (!output_->error().ok()) {
      if (!end_status.has_value() || end_status->ok()) {
        end_status = output_->error();
        end_reason = absl::StrCat("write error: ", output_->error().message());
      }
      return true;
    }
    if (end_status.has_value()) return true;
    const std::uint64_t bytes = output_->bytes();
    if (options_.quota != nullptr && bytes > quota_taken) {
      const std::uint64_t more = bytes - std::exchange(quota_taken, bytes);
      if (!options_.quota->Take(more)) {
        options_.quota->Charge(more);  // Written: it counts, even past the quota.
        end_status = absl::ResourceExhaustedError(
            absl::StrCat(options_.quota_name, ": the server's recordings have used it up"));
        end_reason = std::string(end_status->message());
        return true;
      }
    }
    // The file as it would be if finished now (the summary grows with the chunks, and the
    // channels: a thousand vehicles' telemetry adds ten kilobytes to each chunk's index).
    if (options_.max_bytes > 0 && bytes + output_->bytes_to_finish() >= options_.max_bytes) {
      end_status = absl::OkStatus();
      end_reason = "max_bytes: the recording reached its size limit";
      return true;
    }
    return false;
  };
  // Writes the frames (and the gaps before them) that fall within the recording: all of them,
  // or at the duration limit those up to it.
  std::uint64_t frame_run = start_.start.run;
  const auto write_frames = [&](const std::vector<session::Delivery>& frames) {
    for (const session::Delivery& delivery : frames) {
      if (delivery.frame != nullptr) frame_run = delivery.frame->run;
      const std::uint64_t tick =
          delivery.frame != nullptr ? delivery.frame->time.tick : delivery.lost_first_tick;
      const std::int64_t at = elapsed(frame_run, tick);
      // At the duration limit, the frames up to it are still written (none of a later run).
      if (Full() && !(by_duration && frame_run == limit_run &&
                      at <= static_cast<std::int64_t>(options_.max_ticks))) {
        return;
      }
      const std::uint64_t time_ns = time_of_ticks(at);
      if (delivery.lost_frames > 0) {
        frames_lost += delivery.lost_frames;
        encoder_->Gap({.kind = RecordingGap::Kind::kFrames,
                       .count = delivery.lost_frames,
                       .first_run = frame_run,
                       .first_tick = delivery.lost_first_tick,
                       .last_run = frame_run,
                       .last_tick = delivery.lost_last_tick},
                      time_ns, *output_);
      }
      if (delivery.frame != nullptr) encoder_->Frame(delivery, time_ns, *output_);
    }
  };
  const auto take_frames = [&](std::vector<session::Delivery>& frames, bool with_lost) {
    frames.clear();
    while (std::optional<session::Delivery> delivery = subscriber_->Take()) {
      frames.push_back(*std::move(delivery));
    }
    if (with_lost) {
      if (std::optional<session::Delivery> lost = subscriber_->TakeLost()) {
        frames.push_back(*std::move(lost));
      }
    }
  };

  encoder_->Begin(start_, *output_);
  std::vector<Inbox::Item> items;
  std::vector<session::Delivery> frames;
  for (bool last = false; !last && !end_status.has_value();) {
    {
      std::unique_lock lock(inbox_->mu);
      // A batch every kWriterPeriod, however fast the session ticks, sooner if the queue fills
      // or the recording ends; nothing to write, nothing done.
      inbox_->wake.wait_for(lock, kWriterPeriod, [&] { return inbox_->Urgent(); });
      if (inbox_->items.empty() && !inbox_->frames_ready && !inbox_->Urgent()) continue;
      inbox_->frames_ready = false;
      if (inbox_->closed.has_value()) {
        last = true;
        end_reason = inbox_->closed->ok()
                         ? "the session was deleted"
                         : absl::StrCat("the session closed: ", inbox_->closed->message());
      } else if (inbox_->stop) {
        last = true;
        end_reason = "stopped";
      }
    }
    // Frames first, then the commands and hashes: every frame taken has its tick's hash
    // queued before it (the session queues both under its lock, the hash first).
    take_frames(frames, /*with_lost=*/last);
    items.clear();
    {
      std::lock_guard lock(inbox_->mu);
      if (last) inbox_->FlushLost();  // Lost after the last item queued.
      std::swap(items, inbox_->items);
      inbox_->queued_bytes = 0;
    }
    for (const Inbox::Item& item : items) {
      if (Full()) break;
      const std::uint64_t time_ns = time_of_ticks(elapsed(item.run, item.tick));
      last_time_ns = std::max(last_time_ns, time_ns);
      if (item.gap.has_value()) {
        commands_lost += item.gap->count;
        encoder_->Gap(*item.gap, time_ns, *output_);
      } else if (item.command.has_value()) {
        encoder_->Command(item.run, item.tick, *item.command, time_ns, *output_);
        if (std::holds_alternative<session::ResetCommand>(*item.command)) {
          offsets[item.run + 1] = elapsed(item.run, item.tick);
        }
      } else {
        encoder_->Hash(item.run, item.tick, item.hash, time_ns, *output_);
        ticks = std::max<std::uint64_t>(
            ticks,
            static_cast<std::uint64_t>(std::max<std::int64_t>(elapsed(item.run, item.tick), 0)));
        if (options_.max_ticks > 0 && ticks >= options_.max_ticks && !end_status.has_value()) {
          by_duration = true;
          limit_run = item.run;
          end_status = absl::OkStatus();
          end_reason = "max_duration_s: the recording reached its duration limit";
        }
      }
    }
    if (end_status.has_value() && !last) {
      // Ended by a limit: let go of the session first, then write the frames still to come
      // that are within the recording (offered before the detach).
      write_frames(frames);
      LetGo();
      take_frames(frames, /*with_lost=*/true);
    }
    write_frames(frames);
    // Runs before the newest frame's are needed no more (later frames are of it or later).
    offsets.erase(offsets.begin(), offsets.lower_bound(frame_run));
    Full();
    std::lock_guard lock(inbox_->mu);
    RecordingProgress& progress = inbox_->progress;
    progress.bytes = output_->bytes();
    progress.messages = output_->messages();
    progress.ticks = ticks;
    progress.frames_lost = frames_lost;
    progress.commands_lost = commands_lost;
  }
  if (!end_status.has_value()) end_status = absl::OkStatus();
  {
    std::lock_guard lock(inbox_->mu);
    inbox_->ended = true;  // The observer queues nothing more.
    inbox_->items.clear();
  }
  RecordingProgress progress;
  progress.ticks = ticks;
  progress.frames_lost = frames_lost;
  progress.commands_lost = commands_lost;
  progress.ended = true;
  progress.end_status = *end_status;
  progress.end_reason = end_reason;
  if (output_->error().ok()) encoder_->End(progress, last_time_ns, *output_);
  const absl::Status finished = output_->Finish();
  if (end_status->ok() && !finished.ok()) {
    progress.end_status = finished;
    progress.end_reason = absl::StrCat("write error: ", finished.message());
  }
  progress.bytes = output_->bytes();
  progress.messages = output_->messages();
  if (options_.quota != nullptr && progress.bytes > quota_taken) {
    // The summary is written even past the quota: a file without it is worse.
    options_.quota->Charge(progress.bytes - quota_taken);
  }
  LetGo();  // A recording that ended by itself lets go of the session now, not at Stop.
  encoder_.reset();  // Nor does its encoder hold the session (the web channels look at it).
  {
    std::lock_guard lock(inbox_->mu);
    inbox_->progress = progress;
  }
  if (options_.on_end) options_.on_end(progress);
}

void Recorder::LetGo() {
  absl::MutexLock stop_lock(&stop_mu_);
  if (detached_) return;
  Detach();
  detached_ = true;
  session_.reset();  // An ended recording does not keep a deleted session's world alive.
}

}  // namespace pitlane::record
