// An MCAP writer (https://mcap.dev/spec, major version 0), written from the public
// specification: schemas, channels and messages in chunks (compressed with zstd, or not),
// each chunk followed by its message indexes; then a summary section (schemas, channels,
// statistics, chunk indexes), its summary offsets, and the footer with the summary's CRC, so
// that an indexed reader finds any message without scanning the file.
//
//   record::StringSink sink;  // or a FileSink
//   record::McapWriter writer(sink, {.profile = "", .library = "pitlane"});
//   RETURN_IF_ERROR(writer.Start());
//   ASSIGN_OR_RETURN(const std::uint16_t schema,
//                    writer.AddSchema("pitlane.Tick", "jsonschema", schema_json));
//   ASSIGN_OR_RETURN(const std::uint16_t channel,
//                    writer.AddChannel(schema, "/ticks", "json", {}));
//   RETURN_IF_ERROR(writer.Write(channel, log_time_ns, log_time_ns, R"({"tick":1})"));
//   RETURN_IF_ERROR(writer.Finish());
//
// Every record is written as soon as it is complete (a chunk once it holds chunk_bytes, or at
// Finish): a file cut short (a killed server) keeps its magic, header and every chunk written
// whole, which a streaming reader reads up to the cut. The first error of the sink ends the
// writer: every later call returns it.
#ifndef PITLANE_SERVER_RECORD_MCAP_WRITER_H_
#define PITLANE_SERVER_RECORD_MCAP_WRITER_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pitlane::record {

// Where a writer's bytes go, in order.
class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual absl::Status Write(absl::string_view bytes) = 0;
};

// Bytes kept in memory (tests, small files).
class StringSink final : public ByteSink {
 public:
  absl::Status Write(absl::string_view bytes) override {
    bytes_.append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

enum class McapCompression { kNone, kZstd };

struct McapOptions {
  std::string profile;             // Header.profile: "" (none), "ros2", ...
  std::string library = "pitlane";  // Header.library.
  McapCompression compression = McapCompression::kZstd;
  // A chunk is written when its records reach this many (uncompressed) bytes.
  std::size_t chunk_bytes = 1 << 20;
  int zstd_level = 3;
};

class McapWriter {
 public:
  McapWriter(ByteSink& sink, McapOptions options);
  McapWriter(const McapWriter&) = delete;
  McapWriter& operator=(const McapWriter&) = delete;

  // The magic and the header. First, once.
  absl::Status Start();
  // A schema (its id, from 1). `encoding`: "protobuf", "jsonschema", ...; `data` the schema
  // itself (a FileDescriptorSet, a JSON Schema).
  absl::StatusOr<std::uint16_t> AddSchema(absl::string_view name, absl::string_view encoding,
                                          absl::string_view data);
  // A channel (its id, from 0) of messages of `schema_id` (0: schemaless). NotFound for an
  // unknown schema.
  absl::StatusOr<std::uint16_t> AddChannel(std::uint16_t schema_id, absl::string_view topic,
                                           absl::string_view message_encoding,
                                           const std::map<std::string, std::string>& metadata);
  // A message on `channel_id` (NotFound if unknown); its sequence number is the channel's
  // count of messages so far. Times in nanoseconds.
  absl::Status Write(std::uint16_t channel_id, std::uint64_t log_time_ns,
                     std::uint64_t publish_time_ns, absl::string_view data);
  // The last chunk, the data end, the summary and the footer. Last, once.
  absl::Status Finish();

  std::uint64_t bytes_written() const { return offset_; }
  // At most how many bytes Finish would still write (the open chunk, the data end, the
  // summary): bytes_written() + this bounds the finished file's size.
  std::uint64_t bytes_to_finish() const;
  std::uint64_t message_count() const { return message_count_; }

 private:
  struct Schema {
    std::uint16_t id;
    std::string name, encoding, data;
  };
  struct Channel {
    std::uint16_t id, schema_id;
    std::string topic, message_encoding;
    std::map<std::string, std::string> metadata;
    std::uint32_t next_sequence = 0;
    std::uint64_t message_count = 0;
  };
  struct ChunkIndex {
    std::uint64_t message_start_time, message_end_time, chunk_start_offset, chunk_length;
    std::map<std::uint16_t, std::uint64_t> message_index_offsets;
    std::uint64_t message_index_length;
    std::string compression;
    std::uint64_t compressed_size, uncompressed_size;
  };

  absl::Status Emit(absl::string_view bytes);  // To the sink, counted and in the data CRC.
  absl::Status FlushChunk();
  absl::Status Check(bool started_needed) const;

  ByteSink& sink_;
  const McapOptions options_;
  absl::Status error_;
  bool started_ = false;
  bool finished_ = false;
  std::uint64_t offset_ = 0;       // Bytes written to the sink.
  std::uint32_t data_crc_ = 0;     // Running CRC state of the data section so far.
  std::vector<Schema> schemas_;
  std::vector<Channel> channels_;
  std::vector<ChunkIndex> chunk_indexes_;
  std::uint64_t chunk_index_bytes_ = 0;  // Their records' size in the summary.
  std::uint64_t chunk_messages_ = 0;     // In the open chunk.
  // The schemas' and channels' records, and the channels' counts in the statistics.
  std::uint64_t summary_records_bytes_ = 0;
  std::uint64_t message_count_ = 0;
  std::uint64_t message_start_time_ = 0, message_end_time_ = 0;
  // The open chunk: its records (uncompressed), its time span, and per channel the
  // (log_time, offset in the records) of its messages.
  std::string chunk_;
  std::uint64_t chunk_start_time_ = 0, chunk_end_time_ = 0;
  bool chunk_has_messages_ = false;
  std::map<std::uint16_t, std::vector<std::pair<std::uint64_t, std::uint64_t>>> chunk_index_;
};

}  // namespace pitlane::record

#endif  // PITLANE_SERVER_RECORD_MCAP_WRITER_H_
