#include "server/record/mcap_writer.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/record/crc32.h"
#include "server/record/mcap_format.h"
#include "server/util/status_macros.h"

namespace pitlane::record {
namespace {

using mcap::kMagic;
using mcap::Opcode;
using enum mcap::Opcode;

// Little-endian integers, length-prefixed strings and records, appended to `out`.
template <typename T>
void Put(std::string& out, T value) {
  for (std::size_t i = 0; i < sizeof(T); ++i) {
    out.push_back(static_cast<char>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFFu));
  }
}

void PutString(std::string& out, absl::string_view text) {
  Put<std::uint32_t>(out, static_cast<std::uint32_t>(text.size()));
  out.append(text.data(), text.size());
}

void PutRecord(std::string& out, Opcode opcode, absl::string_view body) {
  Put<std::uint8_t>(out, opcode);
  Put<std::uint64_t>(out, body.size());
  out.append(body.data(), body.size());
}

std::string SchemaRecord(std::uint16_t id, absl::string_view name, absl::string_view encoding,
                         absl::string_view data) {
  std::string body;
  Put<std::uint16_t>(body, id);
  PutString(body, name);
  PutString(body, encoding);
  PutString(body, data);  // A uint32 length, then the bytes: the same layout as a string.
  std::string record;
  PutRecord(record, kSchema, body);
  return record;
}

std::string ChannelRecord(std::uint16_t id, std::uint16_t schema_id, absl::string_view topic,
                          absl::string_view message_encoding,
                          const std::map<std::string, std::string>& metadata) {
  std::string body;
  Put<std::uint16_t>(body, id);
  Put<std::uint16_t>(body, schema_id);
  PutString(body, topic);
  PutString(body, message_encoding);
  std::string pairs;  // A map: its byte length, then key and value strings.
  for (const auto& [key, value] : metadata) {
    PutString(pairs, key);
    PutString(pairs, value);
  }
  PutString(body, pairs);
  std::string record;
  PutRecord(record, kChannel, body);
  return record;
}

}  // namespace

McapWriter::McapWriter(ByteSink& sink, McapOptions options)
    : sink_(sink), options_(std::move(options)), data_crc_(kCrc32Init) {}

namespace {

// Strings, byte arrays and maps carry a uint32 length.
absl::Status CheckLength(absl::string_view field, std::size_t size) {
  if (size > std::numeric_limits<std::uint32_t>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": ", size, " bytes, more than an MCAP length (2^32 - 1) holds"));
  }
  return absl::OkStatus();
}

std::size_t MapBytes(const std::map<std::string, std::string>& map) {
  std::size_t bytes = 0;
  for (const auto& [key, value] : map) bytes += 8 + key.size() + value.size();
  return bytes;
}

}  // namespace

absl::Status McapWriter::Check(bool started_needed) const {
  RETURN_IF_ERROR(error_);
  if (finished_) return absl::FailedPreconditionError("the MCAP file is finished");
  if (started_needed && !started_) {
    return absl::FailedPreconditionError("the MCAP file is not started (Start first)");
  }
  return absl::OkStatus();
}

absl::Status McapWriter::Emit(absl::string_view bytes) {
  if (const absl::Status written = sink_.Write(bytes); !written.ok()) {
    error_ = written;
    return written;
  }
  data_crc_ = Crc32Update(data_crc_, bytes);
  offset_ += bytes.size();
  return absl::OkStatus();
}

absl::Status McapWriter::Start() {
  RETURN_IF_ERROR(Check(false));
  if (started_) return absl::FailedPreconditionError("the MCAP file is started already");
  RETURN_IF_ERROR(CheckLength("profile", options_.profile.size()));
  RETURN_IF_ERROR(CheckLength("library", options_.library.size()));
  started_ = true;
  std::string body;
  PutString(body, options_.profile);
  PutString(body, options_.library);
  std::string bytes(kMagic);
  PutRecord(bytes, kHeader, body);
  return Emit(bytes);
}

absl::StatusOr<std::uint16_t> McapWriter::AddSchema(absl::string_view name,
                                                    absl::string_view encoding,
                                                    absl::string_view data) {
  RETURN_IF_ERROR(Check(true));
  if (schemas_.size() >= std::numeric_limits<std::uint16_t>::max()) {
    return absl::ResourceExhaustedError("an MCAP file holds at most 65535 schemas");
  }
  RETURN_IF_ERROR(CheckLength("name", name.size()));
  RETURN_IF_ERROR(CheckLength("encoding", encoding.size()));
  RETURN_IF_ERROR(CheckLength("data", data.size()));
  const auto id = static_cast<std::uint16_t>(schemas_.size() + 1);  // 0 means "none".
  schemas_.push_back({id, std::string(name), std::string(encoding), std::string(data)});
  // In the open chunk: a reader streaming the file meets it before the messages using it.
  const std::string record = SchemaRecord(id, name, encoding, data);
  chunk_ += record;
  summary_records_bytes_ += record.size();
  return id;
}

absl::StatusOr<std::uint16_t> McapWriter::AddChannel(
    std::uint16_t schema_id, absl::string_view topic, absl::string_view message_encoding,
    const std::map<std::string, std::string>& metadata) {
  RETURN_IF_ERROR(Check(true));
  if (schema_id > schemas_.size()) {
    return absl::NotFoundError(absl::StrCat("schema_id: no schema ", schema_id));
  }
  if (channels_.size() > std::numeric_limits<std::uint16_t>::max()) {
    return absl::ResourceExhaustedError("an MCAP file holds at most 65536 channels");
  }
  RETURN_IF_ERROR(CheckLength("topic", topic.size()));
  RETURN_IF_ERROR(CheckLength("message_encoding", message_encoding.size()));
  RETURN_IF_ERROR(CheckLength("metadata", MapBytes(metadata)));
  const auto id = static_cast<std::uint16_t>(channels_.size());
  channels_.push_back({.id = id,
                       .schema_id = schema_id,
                       .topic = std::string(topic),
                       .message_encoding = std::string(message_encoding),
                       .metadata = metadata});
  const std::string record = ChannelRecord(id, schema_id, topic, message_encoding, metadata);
  chunk_ += record;
  summary_records_bytes_ += record.size() + 10;  // And its count in the statistics.
  return id;
}

absl::Status McapWriter::Write(std::uint16_t channel_id, std::uint64_t log_time_ns,
                               std::uint64_t publish_time_ns, absl::string_view data) {
  RETURN_IF_ERROR(Check(true));
  if (channel_id >= channels_.size()) {
    return absl::NotFoundError(absl::StrCat("channel_id: no channel ", channel_id));
  }
  Channel& channel = channels_[channel_id];
  // A message index lists 16 bytes per message behind a uint32 length.
  if (chunk_index_[channel_id].size() >= std::numeric_limits<std::uint32_t>::max() / 16) {
    RETURN_IF_ERROR(FlushChunk());
  }
  chunk_index_[channel_id].emplace_back(log_time_ns, chunk_.size());
  ++chunk_messages_;
  std::string body;
  body.reserve(22 + data.size());
  Put<std::uint16_t>(body, channel_id);
  Put<std::uint32_t>(body, channel.next_sequence++);
  Put<std::uint64_t>(body, log_time_ns);
  Put<std::uint64_t>(body, publish_time_ns);
  body.append(data.data(), data.size());
  PutRecord(chunk_, kMessage, body);
  ++channel.message_count;
  if (message_count_ == 0) message_start_time_ = message_end_time_ = log_time_ns;
  message_start_time_ = std::min(message_start_time_, log_time_ns);
  message_end_time_ = std::max(message_end_time_, log_time_ns);
  ++message_count_;
  if (!chunk_has_messages_) chunk_start_time_ = chunk_end_time_ = log_time_ns;
  chunk_has_messages_ = true;
  chunk_start_time_ = std::min(chunk_start_time_, log_time_ns);
  chunk_end_time_ = std::max(chunk_end_time_, log_time_ns);
  if (chunk_.size() >= options_.chunk_bytes) return FlushChunk();
  return absl::OkStatus();
}

absl::Status McapWriter::FlushChunk() {
  if (chunk_.empty()) return absl::OkStatus();
  if (!chunk_has_messages_) {
    // Only schemas and channels: as they are, in the data section (a chunk needs a message
    // for its time range; one of 0..0 would start the file's time at 0).
    const std::string records = std::move(chunk_);
    chunk_.clear();
    return Emit(records);
  }
  std::string compressed;
  std::string compression;
  absl::string_view records = chunk_;
  if (options_.compression == McapCompression::kZstd) {
    compression = "zstd";
    compressed.resize(ZSTD_compressBound(chunk_.size()));
    const std::size_t size = ZSTD_compress(compressed.data(), compressed.size(), chunk_.data(),
                                           chunk_.size(), options_.zstd_level);
    if (ZSTD_isError(size) != 0) {
      error_ = absl::InternalError(absl::StrCat("zstd: ", ZSTD_getErrorName(size)));
      return error_;
    }
    compressed.resize(size);
    records = compressed;
  }
  ChunkIndex index{.message_start_time = chunk_start_time_,
                   .message_end_time = chunk_end_time_,
                   .chunk_start_offset = offset_,
                   .chunk_length = 0,
                   .message_index_offsets = {},
                   .message_index_length = 0,
                   .compression = compression,
                   .compressed_size = records.size(),
                   .uncompressed_size = chunk_.size()};
  std::string body;
  Put<std::uint64_t>(body, index.message_start_time);
  Put<std::uint64_t>(body, index.message_end_time);
  Put<std::uint64_t>(body, chunk_.size());
  Put<std::uint32_t>(body, Crc32(chunk_));
  PutString(body, compression);
  Put<std::uint64_t>(body, records.size());
  body.append(records.data(), records.size());
  std::string bytes;
  PutRecord(bytes, kChunk, body);
  index.chunk_length = bytes.size();
  // The message indexes, one per channel with messages in the chunk, by channel id.
  for (const auto& [channel_id, entries] : chunk_index_) {
    index.message_index_offsets[channel_id] = offset_ + bytes.size();
    std::string index_body;
    Put<std::uint16_t>(index_body, channel_id);
    Put<std::uint32_t>(index_body, static_cast<std::uint32_t>(entries.size() * 16));
    for (const auto& [log_time, offset] : entries) {
      Put<std::uint64_t>(index_body, log_time);
      Put<std::uint64_t>(index_body, offset);
    }
    PutRecord(bytes, kMessageIndex, index_body);
  }
  index.message_index_length = bytes.size() - index.chunk_length;
  chunk_.clear();
  chunk_index_.clear();
  chunk_messages_ = 0;
  chunk_has_messages_ = false;
  RETURN_IF_ERROR(Emit(bytes));
  // Its chunk index in the summary: opcode, length, four times, its offsets, sizes.
  chunk_index_bytes_ += 9 + 4 * 8 + 4 + 10 * index.message_index_offsets.size() + 8 + 4 +
                        index.compression.size() + 2 * 8;
  chunk_indexes_.push_back(std::move(index));
  return absl::OkStatus();
}

std::uint64_t McapWriter::bytes_to_finish() const {
  // The open chunk at most uncompressed, with its record and message indexes (each channel's
  // entry: a time and an offset).
  std::uint64_t bytes = chunk_.size() + 64 + 16 * chunk_messages_ + 15 * chunk_index_.size();
  bytes += 9 + 4 * 8 + 4 + 10 * chunk_index_.size() + 8 + 8 + 2 * 8;  // And its chunk index.
  bytes += 9 + 4;                           // Data end.
  bytes += summary_records_bytes_ + 9 + 46;  // Schemas, channels, statistics.
  bytes += chunk_index_bytes_;
  bytes += 4 * (9 + 17) + 9 + 20 + 8;  // Summary offsets, footer, magic.
  return bytes;
}

absl::Status McapWriter::Finish() {
  RETURN_IF_ERROR(Check(true));
  RETURN_IF_ERROR(FlushChunk());
  finished_ = true;
  // Until the last byte is out: whatever ends Finish early (an exception) leaves this error.
  error_ = absl::InternalError("the MCAP file's Finish did not complete");
  // The data end, with the CRC of every byte before it (magic and header included).
  std::string data_end;
  Put<std::uint32_t>(data_end, Crc32Final(data_crc_));
  std::string bytes;
  PutRecord(bytes, kDataEnd, data_end);
  RETURN_IF_ERROR(Emit(bytes));

  // The summary: groups of records of one kind, each located by a summary offset.
  const std::uint64_t summary_start = offset_;
  std::string summary;
  std::vector<std::tuple<Opcode, std::uint64_t, std::uint64_t>> groups;
  const auto group = [&](Opcode opcode, const std::string& records) {
    if (records.empty()) return;
    groups.emplace_back(opcode, summary_start + summary.size(), records.size());
    summary += records;
  };
  std::string records;
  for (const Schema& schema : schemas_) {
    records += SchemaRecord(schema.id, schema.name, schema.encoding, schema.data);
  }
  group(kSchema, records);
  records.clear();
  for (const Channel& channel : channels_) {
    records += ChannelRecord(channel.id, channel.schema_id, channel.topic,
                             channel.message_encoding, channel.metadata);
  }
  group(kChannel, records);
  records.clear();
  std::string statistics;
  Put<std::uint64_t>(statistics, message_count_);
  Put<std::uint16_t>(statistics, static_cast<std::uint16_t>(schemas_.size()));
  Put<std::uint32_t>(statistics, static_cast<std::uint32_t>(channels_.size()));
  Put<std::uint32_t>(statistics, 0);  // Attachments.
  Put<std::uint32_t>(statistics, 0);  // Metadata records.
  Put<std::uint32_t>(statistics, static_cast<std::uint32_t>(chunk_indexes_.size()));
  Put<std::uint64_t>(statistics, message_start_time_);
  Put<std::uint64_t>(statistics, message_end_time_);
  std::string counts;
  for (const Channel& channel : channels_) {
    if (channel.message_count == 0) continue;
    Put<std::uint16_t>(counts, channel.id);
    Put<std::uint64_t>(counts, channel.message_count);
  }
  PutString(statistics, counts);
  PutRecord(records, kStatistics, statistics);
  group(kStatistics, records);
  records.clear();
  for (const ChunkIndex& index : chunk_indexes_) {
    std::string body;
    Put<std::uint64_t>(body, index.message_start_time);
    Put<std::uint64_t>(body, index.message_end_time);
    Put<std::uint64_t>(body, index.chunk_start_offset);
    Put<std::uint64_t>(body, index.chunk_length);
    std::string offsets;
    for (const auto& [channel_id, offset] : index.message_index_offsets) {
      Put<std::uint16_t>(offsets, channel_id);
      Put<std::uint64_t>(offsets, offset);
    }
    PutString(body, offsets);
    Put<std::uint64_t>(body, index.message_index_length);
    PutString(body, index.compression);
    Put<std::uint64_t>(body, index.compressed_size);
    Put<std::uint64_t>(body, index.uncompressed_size);
    PutRecord(records, kChunkIndex, body);
  }
  group(kChunkIndex, records);

  const std::uint64_t summary_offset_start = summary_start + summary.size();
  for (const auto& [opcode, start, length] : groups) {
    std::string body;
    Put<std::uint8_t>(body, opcode);
    Put<std::uint64_t>(body, start);
    Put<std::uint64_t>(body, length);
    PutRecord(summary, kSummaryOffset, body);
  }
  // The footer; its CRC covers the summary, the summary offsets and the footer up to it.
  std::string footer = summary;
  Put<std::uint8_t>(footer, kFooter);
  Put<std::uint64_t>(footer, 20);
  Put<std::uint64_t>(footer, summary_start);
  Put<std::uint64_t>(footer, summary_offset_start);
  Put<std::uint32_t>(footer, Crc32(footer));
  footer.append(kMagic.data(), kMagic.size());
  error_ = absl::OkStatus();
  return Emit(footer);
}

}  // namespace pitlane::record
