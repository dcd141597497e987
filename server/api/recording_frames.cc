#include "server/api/recording_frames.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "server/api/convert.h"
#include "server/api/recording_codec.h"
#include "server/util/status_macros.h"

namespace pitlane::api {

absl::StatusOr<session::Frame> RecordedStatesToFrame(
    const v1::RecordedStates& states,
    const absl::flat_hash_map<sim::VehicleId, sim::VehicleSpec>& vehicles) {
  const int count = states.vehicle_id_steps_size();
  if (count > kMaxFrameVehicles) {
    return absl::InvalidArgumentError(absl::StrCat("/pitlane/states at tick ", states.tick(),
                                                   ": more than ", kMaxFrameVehicles,
                                                   " vehicles"));
  }
  if (states.x_mm_size() != count || states.y_mm_size() != count ||
      states.yaw_100urad_size() != count || states.speed_mmps_size() != count) {
    return absl::InvalidArgumentError(absl::StrCat(
        "/pitlane/states at tick ", states.tick(), ": its columns are not all ", count, " long"));
  }
  session::Frame frame;
  frame.run = states.run();
  frame.time = {.tick = states.tick(), .sim_time_s = states.sim_time_s()};
  frame.vehicles.reserve(static_cast<std::size_t>(count));
  sim::VehicleId id = 0;
  int crashed = 0;
  for (int i = 0; i < count; ++i) {
    const std::uint64_t step = states.vehicle_id_steps(i);
    if (step == 0 || id + step < id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "/pitlane/states at tick ", states.tick(), ": vehicle_id_steps[", i, "] is not > 0"));
    }
    id += step;
    sim::VehicleSnapshot vehicle;
    vehicle.id = id;
    if (const auto spec = vehicles.find(id); spec != vehicles.end()) {
      vehicle.kind = sim::ModelKindOf(spec->second.model);
    }
    vehicle.pose = {.x_m = static_cast<double>(states.x_mm(i)) * 1e-3,
                    .y_m = static_cast<double>(states.y_mm(i)) * 1e-3,
                    .yaw_rad = static_cast<double>(states.yaw_100urad(i)) * 1e-4};
    vehicle.speed_mps = static_cast<double>(states.speed_mmps(i)) * 1e-3;
    // Both in id order.
    while (crashed < states.crashed_vehicle_ids_size() && states.crashed_vehicle_ids(crashed) < id) {
      ++crashed;
    }
    vehicle.crashed =
        crashed < states.crashed_vehicle_ids_size() && states.crashed_vehicle_ids(crashed) == id;
    frame.vehicles.push_back(std::move(vehicle));
  }
  return frame;
}

absl::StatusOr<std::unique_ptr<RecordingFrames>> RecordingFrames::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<record::McapFileReader> file, record::McapFileReader::Open(path));
  return FromReader(std::move(file));
}

absl::StatusOr<std::unique_ptr<RecordingFrames>> RecordingFrames::FromReader(
    std::unique_ptr<record::McapFileReader> file) {
  auto frames = std::unique_ptr<RecordingFrames>(new RecordingFrames());
  frames->file_ = std::move(file);
  absl::StatusOr<record::McapSummary> summary = frames->file_->ReadSummary();
  if (summary.ok()) {
    RETURN_IF_ERROR(frames->ReadIndexed(*summary));
  } else if (absl::IsFailedPrecondition(summary.status())) {
    RETURN_IF_ERROR(frames->ReadWhole());  // No summary: cut short.
  } else {
    return summary.status();
  }
  if (frames->frames_.empty()) {
    return absl::InvalidArgumentError("the recording holds no frames (/pitlane/states)");
  }
  return frames;
}

absl::Status RecordingFrames::TakeHeader(const record::McapChannel& channel,
                                         const record::McapMessage& message) {
  if (channel.topic != kRecordingSessionTopic ||
      !header_.ParseFromArray(message.data.data(), static_cast<int>(message.data.size()))) {
    return absl::InvalidArgumentError(
        "not a Pitlane recording: its first message is not a /pitlane/session header");
  }
  for (const v1::Track& track : header_.config().tracks()) route_names_.push_back(track.name());
  return absl::OkStatus();
}

absl::Status RecordingFrames::TakeVehicles(const record::McapMessage& message) {
  v1::RecordedVehicles described;
  if (!described.ParseFromArray(message.data.data(), static_cast<int>(message.data.size()))) {
    return absl::InvalidArgumentError("/pitlane/vehicles: a message does not parse");
  }
  for (const v1::RecordedVehicle& vehicle : described.vehicles()) {
    if (!vehicle.has_spec()) continue;
    absl::StatusOr<sim::VehicleSpec> spec = VehicleSpecFromProto(vehicle.spec(), route_names_);
    if (spec.ok()) vehicles_[vehicle.vehicle_id()] = *std::move(spec);
  }
  return absl::OkStatus();
}

std::uint64_t RecordingFrames::SinceOrigin(std::uint64_t log_time) const {
  const std::uint64_t origin = header_.time_origin_unix_ns();
  return log_time > origin ? log_time - origin : 0;
}

absl::Status RecordingFrames::ReadWhole() {
  bool header_read = false;
  const absl::StatusOr<record::McapReadSummary> read = file_->ReadAll(
      [&](const record::McapChannel& channel, const record::McapSchema*,
          const record::McapMessage& message) -> absl::Status {
        if (!header_read) {
          header_read = true;
          return TakeHeader(channel, message);
        }
        if (channel.topic == kRecordingStatesTopic) {
          if (message.chunk_offset == 0) {
            return absl::InvalidArgumentError("/pitlane/states: a message outside any chunk");
          }
          const std::uint64_t time_ns = SinceOrigin(message.log_time);
          if (!frames_.empty() && time_ns < frames_.back().time_ns) {
            return absl::InvalidArgumentError(absl::StrCat(
                "/pitlane/states: message ", message.sequence, " is older than the one before"));
          }
          frames_.push_back({.time_ns = time_ns, .chunk_offset = message.chunk_offset});
        } else if (channel.topic == kRecordingVehiclesTopic) {
          return TakeVehicles(message);
        }
        return absl::OkStatus();
      });
  if (!read.ok()) return read.status();
  if (!header_read) {
    return absl::InvalidArgumentError("not a Pitlane recording: it has no /pitlane/session header");
  }
  return absl::OkStatus();
}

absl::Status RecordingFrames::ReadIndexed(const record::McapSummary& summary) {
  absl::flat_hash_set<std::uint16_t> states, vehicles;
  for (const record::McapChannel& channel : summary.channels) {
    if (channel.topic == kRecordingStatesTopic) states.insert(channel.id);
    if (channel.topic == kRecordingVehiclesTopic) vehicles.insert(channel.id);
  }
  std::vector<record::McapChunkIndex> chunks = summary.chunks;
  std::sort(chunks.begin(), chunks.end(),
            [](const auto& a, const auto& b) { return a.offset < b.offset; });
  if (chunks.empty()) {
    return absl::InvalidArgumentError("not a Pitlane recording: it has no chunks");
  }
  // Each chunk once, each after the one before with its message indexes.
  for (std::size_t i = 1; i < chunks.size(); ++i) {
    if (chunks[i].offset < chunks[i - 1].offset + chunks[i - 1].length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the summary's chunk indexes: the chunk at byte ", chunks[i].offset,
          " overlaps the one before it"));
    }
  }
  // The header: the first message of the first chunk.
  bool header_read = false;
  RETURN_IF_ERROR(file_->ReadChunk(
      chunks.front().offset,
      [&](const record::McapChannel& channel, const record::McapSchema*,
          const record::McapMessage& message) -> absl::Status {
        if (header_read) return absl::OkStatus();
        header_read = true;
        return TakeHeader(channel, message);
      }));
  if (!header_read) {
    return absl::InvalidArgumentError("not a Pitlane recording: it has no /pitlane/session header");
  }
  // Where the frames lie, from each chunk's message indexes (no chunk opened); the vehicles'
  // specs from the chunks that hold some, each read once. At most as many frames as the
  // summary counts messages.
  std::uint64_t last_time = 0;
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const record::McapChunkIndex& chunk = chunks[i];
    // Its message indexes follow it, before the next chunk.
    const std::uint64_t indexes_begin = chunk.offset + chunk.length;
    const std::uint64_t indexes_end = i + 1 < chunks.size() ? chunks[i + 1].offset : file_->size();
    std::vector<std::pair<std::uint64_t, std::uint64_t>> entries;  // (offset, log time)
    bool with_vehicles = false;
    // Each index once: by offset, one after the other, all between this chunk and the next.
    std::vector<std::pair<std::uint64_t, std::uint16_t>> listed;
    for (const auto& [channel_id, index_offset] : chunk.message_indexes) {
      listed.emplace_back(index_offset, channel_id);
    }
    std::sort(listed.begin(), listed.end());
    std::uint64_t free_from = indexes_begin;
    for (const auto& [index_offset, channel_id] : listed) {
      const auto misplaced = [&, index_offset = index_offset] {
        return absl::InvalidArgumentError(absl::StrCat(
            "the chunk index of the chunk at byte ", chunk.offset, ": the message index at byte ",
            index_offset, " is not in its own place after the chunk"));
      };
      if (index_offset < free_from || index_offset >= indexes_end) return misplaced();
      if (vehicles.contains(channel_id)) with_vehicles = true;
      if (!states.contains(channel_id)) {
        free_from = index_offset + 1;
        continue;
      }
      ASSIGN_OR_RETURN(const record::McapMessageIndex index, file_->ReadMessageIndex(index_offset));
      if (index.end > indexes_end) return misplaced();
      free_from = index.end;
      if (index.channel_id != channel_id) {
        return absl::InvalidArgumentError(absl::StrCat(
            "message index at byte ", index_offset, ": of channel ", index.channel_id, ", not ",
            channel_id, " as its chunk index says"));
      }
      if (frames_.size() + entries.size() + index.entries.size() >
          summary.statistics.message_count) {
        return absl::InvalidArgumentError(
            "the message indexes list more messages than the summary's statistics count");
      }
      for (const auto& [log_time, offset] : index.entries) entries.emplace_back(offset, log_time);
    }
    // By offset: the order ReadChunk gives the chunk's frames in.
    std::sort(entries.begin(), entries.end());
    for (const auto& [unused, log_time] : entries) {
      const std::uint64_t time_ns = SinceOrigin(log_time);
      if (time_ns < last_time) {
        return absl::InvalidArgumentError(absl::StrCat(
            "/pitlane/states: a frame of the chunk at byte ", chunk.offset,
            " is older than the frame before it"));
      }
      last_time = time_ns;
      frames_.push_back({.time_ns = time_ns, .chunk_offset = chunk.offset});
    }
    if (with_vehicles) {
      RETURN_IF_ERROR(file_->ReadChunk(
          chunk.offset,
          [&](const record::McapChannel& channel, const record::McapSchema*,
              const record::McapMessage& message) -> absl::Status {
            if (channel.topic != kRecordingVehiclesTopic) return absl::OkStatus();
            return TakeVehicles(message);
          }));
    }
  }
  return absl::OkStatus();
}

std::size_t RecordingFrames::IndexAt(std::uint64_t time_ns) const {
  // The first frame after `time_ns`, then the one before it.
  const auto after = std::upper_bound(
      frames_.begin(), frames_.end(), time_ns,
      [](std::uint64_t time, const Entry& entry) { return time < entry.time_ns; });
  return after == frames_.begin() ? 0 : static_cast<std::size_t>(after - frames_.begin()) - 1;
}

absl::StatusOr<std::shared_ptr<const session::Frame>> RecordingFrames::Frame(std::size_t index) {
  if (index >= frames_.size()) {
    return absl::OutOfRangeError(absl::StrCat("frame ", index, ": the recording has ",
                                              frames_.size()));
  }
  const std::uint64_t chunk = frames_[index].chunk_offset;
  if (cached_.empty() || cached_chunk_ != chunk) {
    cached_.clear();
    // The chunk's frames are those of consecutive entries.
    std::size_t first = index;
    while (first > 0 && frames_[first - 1].chunk_offset == chunk) --first;
    std::vector<std::shared_ptr<const session::Frame>> decoded;
    std::size_t vehicles_decoded = 0;
    absl::Status status = file_->ReadChunk(
        chunk, [&](const record::McapChannel& channel, const record::McapSchema*,
                   const record::McapMessage& message) -> absl::Status {
          if (channel.topic != kRecordingStatesTopic) return absl::OkStatus();
          v1::RecordedStates states;
          if (!states.ParseFromArray(message.data.data(), static_cast<int>(message.data.size()))) {
            return absl::InvalidArgumentError("/pitlane/states: a message does not parse");
          }
          ASSIGN_OR_RETURN(session::Frame frame, RecordedStatesToFrame(states, vehicles_));
          vehicles_decoded += frame.vehicles.size();
          if (vehicles_decoded > kMaxChunkVehicles) {
            return absl::InvalidArgumentError(absl::StrCat(
                "a chunk of the recording holds more than ", kMaxChunkVehicles,
                " vehicle states"));
          }
          decoded.push_back(std::make_shared<const session::Frame>(std::move(frame)));
          return absl::OkStatus();
        });
    if (!status.ok()) return status;
    cached_ = std::move(decoded);
    cached_chunk_ = chunk;
    cached_first_ = first;
  }
  const std::size_t at = index - cached_first_;
  if (at >= cached_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "/pitlane/states: the chunk at byte ", chunk, " holds fewer frames than its index says"));
  }
  return cached_[at];
}

std::vector<sim::VehicleDescription> RecordingPlayback::Describe(
    const session::Frame& frame) const {
  std::vector<sim::VehicleDescription> described;
  described.reserve(frame.vehicles.size());
  for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
    sim::VehicleDescription& description = described.emplace_back();
    description.id = vehicle.id;
    if (const auto spec = frames_->vehicles().find(vehicle.id); spec != frames_->vehicles().end()) {
      description.spec = spec->second;
    }
  }
  return described;
}

}  // namespace pitlane::api
