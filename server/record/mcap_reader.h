// A streaming MCAP reader (https://mcap.dev/spec, major version 0), written from the public
// specification: reads a file's records in order, through its chunks (zstd or uncompressed,
// their CRCs checked), and hands each message to the caller with its channel. It needs no
// summary, so it reads a file cut short (a killed server's) up to its last whole record.
//
// The file is untrusted input: every length is checked against what is left, a chunk may
// not declare more than max_chunk_bytes uncompressed, and errors name the record and its
// offset ("chunk at byte 4096: its CRC does not match"), never crash.
#ifndef PITLANE_SERVER_RECORD_MCAP_READER_H_
#define PITLANE_SERVER_RECORD_MCAP_READER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pitlane::record {

struct McapSchema {
  std::uint16_t id = 0;
  std::string name, encoding, data;
};

struct McapChannel {
  std::uint16_t id = 0;
  std::uint16_t schema_id = 0;
  std::string topic, message_encoding;
  std::map<std::string, std::string> metadata;
};

struct McapMessage {
  std::uint16_t channel_id = 0;
  std::uint32_t sequence = 0;
  std::uint64_t log_time = 0;
  std::uint64_t publish_time = 0;
  absl::string_view data;  // Valid during the callback only.
  // The byte offset of the chunk record that holds it (0: outside any chunk): for
  // McapFileReader::ReadChunk.
  std::uint64_t chunk_offset = 0;
};

struct McapReadOptions {
  // A chunk that declares more uncompressed bytes is refused.
  std::uint64_t max_chunk_bytes = std::uint64_t{256} << 20;
  // Schemas and channels kept (their bytes, all of them); a file with more is refused.
  std::uint64_t max_schema_bytes = std::uint64_t{64} << 20;
  // When set and true, the read stops (Cancelled) at the next record.
  const std::atomic<bool>* cancel = nullptr;
};

// How a read ended.
struct McapReadSummary {
  std::uint64_t messages = 0;
  // The file ended before its footer (cut short): everything up to the last whole record was
  // read.
  bool truncated = false;
};

// Called for each message in file order, with its channel (and the channel's schema, null for
// a schemaless one). A non-OK status stops the read and is returned.
using McapMessageCallback = std::function<absl::Status(
    const McapChannel& channel, const McapSchema* schema, const McapMessage& message)>;

// Reads `bytes`, a whole MCAP file. InvalidArgument naming the record and its byte offset for
// a file that is not MCAP or is corrupt (a bad CRC, a length beyond the file, a message on an
// unknown channel).
absl::StatusOr<McapReadSummary> ReadMcap(absl::string_view bytes,
                                         const McapMessageCallback& on_message,
                                         const McapReadOptions& options = {});

// The file at `path` (read whole), as ReadMcap. NotFound, PermissionDenied, ... naming it.
absl::StatusOr<McapReadSummary> ReadMcapFile(const std::string& path,
                                             const McapMessageCallback& on_message,
                                             const McapReadOptions& options = {});

// What a file's summary says of it, read from its end without reading its data.
struct McapStatistics {
  std::uint64_t message_count = 0;
  std::uint64_t message_start_time = 0;  // Of its first and last messages (0 if none).
  std::uint64_t message_end_time = 0;
};
// A chunk as the summary's Chunk Index record describes it (ReadSummary checks that a chunk
// record of that length begins at `offset`).
struct McapChunkIndex {
  std::uint64_t offset = 0;  // Of its chunk record.
  std::uint64_t length = 0;  // Of its chunk record, bytes (its opcode and length included).
  std::uint64_t message_start_time = 0;
  std::uint64_t message_end_time = 0;
  // Where the Message Index record of each channel with messages in the chunk begins:
  // (channel id, byte offset), as the record lists them.
  std::vector<std::pair<std::uint16_t, std::uint64_t>> message_indexes;
};
// What a reader seeking by chunk needs of a file's summary.
struct McapSummary {
  McapStatistics statistics;
  std::vector<std::uint64_t> chunk_offsets;  // Of every chunk, in the summary's order.
  std::vector<McapChunkIndex> chunks;        // The same chunks, with their indexes.
  // The channels the summary defines (their topics, for finding a channel's id).
  std::vector<McapChannel> channels;
};
// A Message Index record: where a channel's messages lie in a chunk.
struct McapMessageIndex {
  std::uint64_t end = 0;  // The byte after the record.
  std::uint16_t channel_id = 0;
  // (log time, byte offset in the chunk's uncompressed records), as the record lists them.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> entries;
};

// The Statistics record of the file at `path`. NotFound naming the path; FailedPrecondition
// for a file with no summary (cut short) or none with statistics; InvalidArgument for a
// footer or summary that does not hold together.
absl::StatusOr<McapStatistics> ReadMcapStatistics(const std::string& path);

// A file at a path, mapped: read whole once, then any of its chunks again on its own (a
// reader that seeks keeps the chunk offsets of what it wants from the first read).
// Not thread-safe.
class McapFileReader {
 public:
  // NotFound, PermissionDenied, ... naming the path; InvalidArgument for what is not a file.
  static absl::StatusOr<std::unique_ptr<McapFileReader>> Open(const std::string& path,
                                                              const McapReadOptions& options = {});
  // The same over bytes in memory, which must outlive the reader (fuzzers, tests).
  static std::unique_ptr<McapFileReader> FromBytes(absl::string_view bytes,
                                                   const McapReadOptions& options = {});
  ~McapFileReader();
  McapFileReader(const McapFileReader&) = delete;
  McapFileReader& operator=(const McapFileReader&) = delete;

  // As ReadMcapFile (once); the schemas and channels read are kept for ReadChunk.
  absl::StatusOr<McapReadSummary> ReadAll(const McapMessageCallback& on_message);
  // The messages of the chunk record at `chunk_offset` (from a message ReadAll gave, or the
  // summary), with the schemas and channels read so far. InvalidArgument for an offset that is
  // not a chunk's. Not from within a callback of this reader (FailedPrecondition).
  absl::Status ReadChunk(std::uint64_t chunk_offset, const McapMessageCallback& on_message);

  std::uint64_t size() const { return size_; }
  // What the file's summary says (ReadMcapStatistics).
  absl::StatusOr<McapStatistics> Statistics() const;
  // The summary's statistics and chunks, its schemas and channels kept for ReadChunk (so a
  // chunk can be read without reading the file whole). FailedPrecondition for a file without
  // a summary.
  absl::StatusOr<McapSummary> ReadSummary();
  // The Message Index record at `offset` (from McapChunkIndex::message_indexes): read from
  // the file without opening its chunk. InvalidArgument for an offset where none begins, or
  // a record that runs past its end.
  absl::StatusOr<McapMessageIndex> ReadMessageIndex(std::uint64_t offset) const;

 private:
  McapFileReader(const char* bytes, std::size_t size, const McapReadOptions& options,
                 bool mapped);
  // The summary section's records (up to the footer).
  absl::StatusOr<absl::string_view> SummaryRecords() const;
  class State;
  const char* const bytes_;
  const std::size_t size_;
  const bool mapped_;  // Unmapped when destroyed.
  std::unique_ptr<State> state_;
};

}  // namespace pitlane::record

#endif  // PITLANE_SERVER_RECORD_MCAP_READER_H_
