#include "server/record/mcap_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "server/record/crc32.h"
#include "server/record/mcap_format.h"
#include "server/util/status_macros.h"
#include "zstd.h"

namespace pitlane::record {
namespace {

using mcap::kMagic;
using mcap::Opcode;
using enum mcap::Opcode;

// Little-endian fields of a record's body, each read checked against what is left.
class Fields {
 public:
  explicit Fields(absl::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  bool Read(T& value) {
    if (bytes_.size() < sizeof(T)) return false;
    std::uint64_t out = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      out |= static_cast<std::uint64_t>(static_cast<unsigned char>(bytes_[i])) << (8 * i);
    }
    value = static_cast<T>(out);
    bytes_.remove_prefix(sizeof(T));
    return true;
  }
  // A u32-length-prefixed string (or byte array).
  bool ReadString(std::string& value) {
    absl::string_view view;
    if (!ReadView32(view)) return false;
    value.assign(view.data(), view.size());
    return true;
  }
  bool ReadView32(absl::string_view& view) {
    std::uint32_t size = 0;
    if (!Read(size) || bytes_.size() < size) return false;
    view = bytes_.substr(0, size);
    bytes_.remove_prefix(size);
    return true;
  }
  bool ReadView64(absl::string_view& view) {
    std::uint64_t size = 0;
    if (!Read(size) || bytes_.size() < size) return false;
    view = bytes_.substr(0, static_cast<std::size_t>(size));
    bytes_.remove_prefix(static_cast<std::size_t>(size));
    return true;
  }
  absl::string_view rest() const { return bytes_; }

 private:
  absl::string_view bytes_;
};

// The body of the record at `offset` of `file`, which must be a `what` record (`opcode`).
absl::StatusOr<absl::string_view> RecordAt(absl::string_view file, std::uint64_t offset,
                                           Opcode opcode, absl::string_view what) {
  if (offset < kMagic.size() || offset > file.size() || file.size() - offset < 9 ||
      static_cast<std::uint8_t>(file[offset]) != opcode) {
    return absl::InvalidArgumentError(
        absl::StrCat("byte ", offset, ": no ", what, " record begins there"));
  }
  std::uint64_t length = 0;
  Fields(file.substr(offset + 1, 8)).Read(length);
  if (length > file.size() - offset - 9) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " at byte ", offset, ": it runs past the file"));
  }
  return file.substr(offset + 9, static_cast<std::size_t>(length));
}

class Reader {
 public:
  Reader(const McapMessageCallback* on_message, const McapReadOptions& options)
      : on_message_(on_message), options_(options) {}

  void set_on_message(const McapMessageCallback* on_message) { on_message_ = on_message; }

  // A schema or channel record of the summary.
  absl::Status Define(std::uint8_t opcode, absl::string_view body, std::size_t offset) {
    return Record(opcode, body, offset, /*in_chunk=*/false);
  }

  // The chunk record at `offset` of `file` alone, with the schemas and channels read before.
  absl::Status ReadChunkAt(absl::string_view file, std::uint64_t offset) {
    ASSIGN_OR_RETURN(const absl::string_view body, RecordAt(file, offset, kChunk, "chunk"));
    Fields fields(body);
    return Chunk(fields, offset);
  }

  absl::StatusOr<McapReadSummary> Read(absl::string_view file) {
    if (file.size() < kMagic.size() || file.substr(0, kMagic.size()) != kMagic) {
      return absl::InvalidArgumentError("not an MCAP file: it does not begin with MCAP's magic");
    }
    McapReadSummary summary;
    std::size_t offset = kMagic.size();
    bool header_seen = false;
    while (true) {
      if (file.size() - offset < 9) {  // An opcode and a length.
        summary.truncated = true;
        break;
      }
      const auto opcode = static_cast<std::uint8_t>(file[offset]);
      std::uint64_t length = 0;
      Fields(file.substr(offset + 1, 8)).Read(length);
      if (length > file.size() - offset - 9) {
        summary.truncated = true;  // A record cut short: the file ends here.
        break;
      }
      const absl::string_view body = file.substr(offset + 9, static_cast<std::size_t>(length));
      if (!header_seen && opcode != kHeader) {
        return absl::InvalidArgumentError("the file's first record is not its header");
      }
      header_seen = true;
      if (opcode == kDataEnd || opcode == kFooter) break;  // The summary follows: not needed.
      if (absl::Status status = Record(opcode, body, offset, /*in_chunk=*/false); !status.ok()) {
        return status;
      }
      offset += 9 + static_cast<std::size_t>(length);
    }
    summary.messages = messages_;
    return summary;
  }

 private:
  absl::Status Corrupt(absl::string_view what, std::size_t offset, absl::string_view why) const {
    return absl::InvalidArgumentError(absl::StrCat(what, " at byte ", offset, ": ", why));
  }

  absl::Status Record(std::uint8_t opcode, absl::string_view body, std::size_t offset,
                      bool in_chunk) {
    if (options_.cancel != nullptr && options_.cancel->load(std::memory_order_relaxed)) {
      return absl::CancelledError("the read was cancelled");
    }
    Fields fields(body);
    switch (opcode) {
      case kSchema: {
        McapSchema schema;
        if (!fields.Read(schema.id) || !fields.ReadString(schema.name) ||
            !fields.ReadString(schema.encoding) || !fields.ReadString(schema.data)) {
          return Corrupt("schema", offset, "its fields run past its end");
        }
        if (schema.id == 0) return Corrupt("schema", offset, "id 0 is reserved");
        // Read again (a chunk read on its own, the summary's copy): kept once.
        if (schemas_.contains(schema.id)) return absl::OkStatus();
        RETURN_IF_ERROR(Keep(body.size(), "schema", offset));
        schemas_[schema.id] = std::move(schema);
        return absl::OkStatus();
      }
      case kChannel: {
        McapChannel channel;
        absl::string_view metadata;
        if (!fields.Read(channel.id) || !fields.Read(channel.schema_id) ||
            !fields.ReadString(channel.topic) || !fields.ReadString(channel.message_encoding) ||
            !fields.ReadView32(metadata)) {
          return Corrupt("channel", offset, "its fields run past its end");
        }
        Fields entries(metadata);
        while (!entries.rest().empty()) {
          std::string key, value;
          if (!entries.ReadString(key) || !entries.ReadString(value)) {
            return Corrupt("channel", offset, "its metadata runs past its end");
          }
          channel.metadata[std::move(key)] = std::move(value);
        }
        if (channel.schema_id != 0 && !schemas_.contains(channel.schema_id)) {
          return Corrupt("channel", offset,
                         absl::StrCat("schema ", channel.schema_id, " is not defined before it"));
        }
        if (channels_.contains(channel.id)) return absl::OkStatus();  // Read again: kept once.
        RETURN_IF_ERROR(Keep(body.size(), "channel", offset));
        channels_[channel.id] = std::move(channel);
        return absl::OkStatus();
      }
      case kMessage: {
        McapMessage message;
        if (!fields.Read(message.channel_id) || !fields.Read(message.sequence) ||
            !fields.Read(message.log_time) || !fields.Read(message.publish_time)) {
          return Corrupt("message", offset, "its fields run past its end");
        }
        message.data = fields.rest();
        if (message.data.size() > kMaxMessageBytes) {
          return Corrupt("message", offset, "larger than 1 GiB");
        }
        const auto channel = channels_.find(message.channel_id);
        if (channel == channels_.end()) {
          return Corrupt("message", offset,
                         absl::StrCat("channel ", message.channel_id, " is not defined before it"));
        }
        const auto schema = schemas_.find(channel->second.schema_id);
        ++messages_;
        message.chunk_offset = in_chunk ? chunk_offset_ : 0;
        return (*on_message_)(channel->second,
                              schema != schemas_.end() ? &schema->second : nullptr, message);
      }
      case kChunk: {
        if (in_chunk) return Corrupt("chunk", offset, "a chunk inside a chunk");
        return Chunk(fields, offset);
      }
      case kHeader:
      default:
        return absl::OkStatus();  // Indexes, statistics, attachments, metadata: not needed.
    }
  }

  absl::Status Chunk(Fields& fields, std::size_t offset) {
    std::uint64_t start_time = 0, end_time = 0, uncompressed_size = 0;
    std::uint32_t uncompressed_crc = 0;
    std::string compression;
    absl::string_view records;
    if (!fields.Read(start_time) || !fields.Read(end_time) || !fields.Read(uncompressed_size) ||
        !fields.Read(uncompressed_crc) || !fields.ReadString(compression) ||
        !fields.ReadView64(records)) {
      return Corrupt("chunk", offset, "its fields run past its end");
    }
    if (uncompressed_size > options_.max_chunk_bytes) {
      return Corrupt("chunk", offset,
                     absl::StrCat("it declares ", uncompressed_size,
                                  " uncompressed bytes, more than this reader takes (",
                                  options_.max_chunk_bytes, ")"));
    }
    absl::string_view plain;
    if (compression.empty()) {
      if (records.size() != uncompressed_size) {
        return Corrupt("chunk", offset, "its size is not the size it declares");
      }
      plain = records;
    } else if (compression == "zstd") {
      // The frame must say the size the chunk declares (before that much is allocated).
      const unsigned long long framed = ZSTD_getFrameContentSize(records.data(), records.size());
      if (framed != uncompressed_size) {
        return Corrupt("chunk", offset,
                       "its zstd frame does not declare the size the chunk declares");
      }
      buffer_.resize(static_cast<std::size_t>(uncompressed_size));
      const std::size_t size =
          ZSTD_decompress(buffer_.data(), buffer_.size(), records.data(), records.size());
      if (ZSTD_isError(size) != 0 || size != uncompressed_size) {
        return Corrupt("chunk", offset,
                       ZSTD_isError(size) != 0
                           ? absl::StrCat("zstd: ", ZSTD_getErrorName(size))
                           : absl::string_view("it does not decompress to the size it declares"));
      }
      plain = buffer_;
    } else {
      return Corrupt("chunk", offset,
                     absl::StrCat("compression \"", compression.substr(0, 16),
                                  "\" is not one this reader knows (zstd or none)"));
    }
    if (uncompressed_crc != 0 && Crc32(plain) != uncompressed_crc) {
      return Corrupt("chunk", offset, "its CRC does not match its records");
    }
    // The chunk's records, errors named by the chunk's offset. (buffer_ is reused only by
    // the next chunk, and chunks do not nest.)
    chunk_offset_ = offset;
    absl::string_view rest = plain;
    while (!rest.empty()) {
      if (rest.size() < 9) return Corrupt("chunk", offset, "a record inside it is cut short");
      const auto opcode = static_cast<std::uint8_t>(rest[0]);
      std::uint64_t length = 0;
      Fields(rest.substr(1, 8)).Read(length);
      if (length > rest.size() - 9) {
        return Corrupt("chunk", offset, "a record inside it runs past its end");
      }
      if (absl::Status status = Record(opcode, rest.substr(9, static_cast<std::size_t>(length)),
                                       offset, /*in_chunk=*/true);
          !status.ok()) {
        return status;
      }
      rest.remove_prefix(9 + static_cast<std::size_t>(length));
    }
    return absl::OkStatus();
  }

  // Counts a schema's or channel's bytes against options_.max_schema_bytes.
  absl::Status Keep(std::size_t bytes, absl::string_view what, std::size_t offset) {
    kept_ += bytes;
    if (kept_ > options_.max_schema_bytes) {
      return Corrupt(what, offset,
                     absl::StrCat("the file's schemas and channels pass ",
                                  options_.max_schema_bytes, " bytes"));
    }
    return absl::OkStatus();
  }

  static constexpr std::size_t kMaxMessageBytes = std::size_t{1} << 30;
  const McapMessageCallback* on_message_;
  const McapReadOptions options_;
  absl::flat_hash_map<std::uint16_t, McapSchema> schemas_;
  absl::flat_hash_map<std::uint16_t, McapChannel> channels_;
  std::string buffer_;
  std::uint64_t messages_ = 0;
  std::uint64_t kept_ = 0;
  std::uint64_t chunk_offset_ = 0;  // Of the chunk being read.
};

// Opens `path` for reading: not a FIFO that would block the open, not a link out of the
// directory, a regular file. Returns the descriptor and the size.
absl::StatusOr<std::pair<int, std::size_t>> OpenFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW);
  if (fd < 0) {
    const int error = errno;
    const std::string why = absl::StrCat(path, ": ", std::strerror(error));
    if (error == ENOENT) return absl::NotFoundError(why);
    if (error == EACCES) return absl::PermissionDeniedError(why);
    return absl::InternalError(why);
  }
  struct stat info {};
  if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a regular file"));
  }
  return std::make_pair(fd, static_cast<std::size_t>(info.st_size));
}

}  // namespace

absl::StatusOr<McapReadSummary> ReadMcap(absl::string_view bytes,
                                         const McapMessageCallback& on_message,
                                         const McapReadOptions& options) {
  return Reader(&on_message, options).Read(bytes);
}

absl::StatusOr<McapReadSummary> ReadMcapFile(const std::string& path,
                                             const McapMessageCallback& on_message,
                                             const McapReadOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<McapFileReader> file, McapFileReader::Open(path, options));
  return file->ReadAll(on_message);
}

absl::StatusOr<McapStatistics> ReadMcapStatistics(const std::string& path) {
  ASSIGN_OR_RETURN(const std::unique_ptr<McapFileReader> file, McapFileReader::Open(path));
  return file->Statistics();
}

class McapFileReader::State {
 public:
  explicit State(const McapReadOptions& options) : reader(nullptr, options) {}
  Reader reader;
  bool busy = false;      // A read runs (a callback may not start another).
  bool read_all = false;  // ReadAll ran.
};

McapFileReader::McapFileReader(const char* bytes, std::size_t size,
                               const McapReadOptions& options, bool mapped)
    : bytes_(bytes), size_(size), mapped_(mapped), state_(std::make_unique<State>(options)) {}

McapFileReader::~McapFileReader() {
  if (mapped_ && size_ > 0) munmap(const_cast<char*>(bytes_), size_);
}

std::unique_ptr<McapFileReader> McapFileReader::FromBytes(absl::string_view bytes,
                                                          const McapReadOptions& options) {
  return std::unique_ptr<McapFileReader>(
      new McapFileReader(bytes.data(), bytes.size(), options, /*mapped=*/false));
}

absl::StatusOr<std::unique_ptr<McapFileReader>> McapFileReader::Open(
    const std::string& path, const McapReadOptions& options) {
  ASSIGN_OR_RETURN(const auto opened, OpenFile(path));
  const auto [fd, size] = opened;
  if (size == 0) {
    close(fd);
    return std::unique_ptr<McapFileReader>(new McapFileReader(nullptr, 0, options, false));
  }
  // Mapped, not read: a recording may be gigabytes; the pages come and go as it is read.
  void* mapped = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (mapped == MAP_FAILED) return absl::InternalError(absl::StrCat(path, ": cannot map it"));
  return std::unique_ptr<McapFileReader>(
      new McapFileReader(static_cast<const char*>(mapped), size, options, /*mapped=*/true));
}

namespace {

// A Statistics record's body: the message count, then the counts of schemas (u16), channels,
// attachments, metadata and chunks (u32 each), then the first and last message times.
absl::StatusOr<McapStatistics> ParseStatistics(absl::string_view body) {
  Fields fields(body);
  McapStatistics out;
  std::uint16_t schemas = 0;
  std::uint32_t channels = 0, attachments = 0, metadata = 0, chunks = 0;
  if (!fields.Read(out.message_count) || !fields.Read(schemas) || !fields.Read(channels) ||
      !fields.Read(attachments) || !fields.Read(metadata) || !fields.Read(chunks) ||
      !fields.Read(out.message_start_time) || !fields.Read(out.message_end_time)) {
    return absl::InvalidArgumentError("the summary's statistics run past their end");
  }
  return out;
}

}  // namespace

absl::StatusOr<absl::string_view> McapFileReader::SummaryRecords() const {
  // The file ends with the footer record (opcode, length 20, summary start, summary offset
  // start, summary CRC) and the magic.
  constexpr std::size_t kFooterBytes = 1 + 8 + 8 + 8 + 4;
  const absl::string_view file(bytes_ != nullptr ? bytes_ : "", size_);
  if (file.size() < 2 * kMagic.size() + kFooterBytes ||
      file.substr(file.size() - kMagic.size()) != kMagic ||
      static_cast<std::uint8_t>(file[file.size() - kMagic.size() - kFooterBytes]) != mcap::kFooter) {
    return absl::FailedPreconditionError(
        "the file has no summary (it was cut short: its server stopped while recording)");
  }
  const std::size_t footer = file.size() - kMagic.size() - kFooterBytes;
  Fields fields(file.substr(footer + 1, kFooterBytes - 1));
  std::uint64_t length = 0, summary_start = 0, summary_offset_start = 0;
  std::uint32_t crc = 0;
  fields.Read(length);
  fields.Read(summary_start);
  fields.Read(summary_offset_start);
  fields.Read(crc);
  if (length != kFooterBytes - 9 || summary_start > footer ||
      (summary_start != 0 && summary_start < kMagic.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("footer at byte ", footer, ": its fields do not hold together"));
  }
  if (summary_start == 0) return absl::FailedPreconditionError("the file has no summary");
  return file.substr(summary_start, footer - summary_start);
}

absl::StatusOr<McapSummary> McapFileReader::ReadSummary() {
  if (state_->busy) return absl::FailedPreconditionError("a read is in progress");
  ASSIGN_OR_RETURN(absl::string_view rest, SummaryRecords());
  McapSummary summary;
  bool statistics_seen = false;
  const std::size_t base = static_cast<std::size_t>(rest.data() - bytes_);
  while (rest.size() >= 9) {
    const auto opcode = static_cast<std::uint8_t>(rest[0]);
    std::uint64_t record_length = 0;
    Fields(rest.substr(1, 8)).Read(record_length);
    if (record_length > rest.size() - 9) {
      return absl::InvalidArgumentError("the summary's records run past its end");
    }
    const absl::string_view body = rest.substr(9, static_cast<std::size_t>(record_length));
    const std::size_t offset = static_cast<std::size_t>(rest.data() - bytes_);
    Fields fields(body);
    if (opcode == kStatistics) {
      ASSIGN_OR_RETURN(summary.statistics, ParseStatistics(body));
      statistics_seen = true;
    } else if (opcode == kChunkIndex) {
      McapChunkIndex chunk;
      absl::string_view indexes;
      if (!fields.Read(chunk.message_start_time) || !fields.Read(chunk.message_end_time) ||
          !fields.Read(chunk.offset) || !fields.Read(chunk.length) ||
          !fields.ReadView32(indexes)) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk index at byte ", offset, ": its fields run past its end"));
      }
      if (chunk.offset >= base || chunk.length > base - chunk.offset) {
        return absl::InvalidArgumentError(
            absl::StrCat("chunk index at byte ", offset, ": its chunk is not before the summary"));
      }
      // The chunk record there, of the length the index says.
      const absl::StatusOr<absl::string_view> record =
          RecordAt(absl::string_view(bytes_, size_), chunk.offset, kChunk, "chunk");
      if (!record.ok() || 9 + record->size() != chunk.length) {
        return absl::InvalidArgumentError(absl::StrCat(
            "chunk index at byte ", offset, ": no chunk record of its length at byte ",
            chunk.offset));
      }
      if (indexes.size() % 10 != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "chunk index at byte ", offset, ": its message index offsets are not whole entries"));
      }
      Fields entries(indexes);
      chunk.message_indexes.resize(indexes.size() / 10);
      for (auto& [channel_id, index_offset] : chunk.message_indexes) {
        entries.Read(channel_id);
        entries.Read(index_offset);
        if (index_offset >= base) {
          return absl::InvalidArgumentError(absl::StrCat(
              "chunk index at byte ", offset, ": a message index is not before the summary"));
        }
      }
      summary.chunk_offsets.push_back(chunk.offset);
      summary.chunks.push_back(std::move(chunk));
    } else if (opcode == kSchema || opcode == kChannel) {
      // Known for ReadChunk (a chunk read alone may use ones defined in an earlier chunk).
      state_->busy = true;
      const absl::Status status = state_->reader.Define(opcode, body, offset);
      state_->busy = false;
      RETURN_IF_ERROR(status);
      if (opcode == kChannel) {  // Defined, so its fields are whole.
        McapChannel& channel = summary.channels.emplace_back();
        fields.Read(channel.id);
        fields.Read(channel.schema_id);
        fields.ReadString(channel.topic);
        fields.ReadString(channel.message_encoding);
      }
    }
    rest.remove_prefix(9 + static_cast<std::size_t>(record_length));
  }
  if (!statistics_seen) return absl::FailedPreconditionError("the file's summary has no statistics");
  return summary;
}

absl::StatusOr<McapMessageIndex> McapFileReader::ReadMessageIndex(std::uint64_t offset) const {
  ASSIGN_OR_RETURN(const absl::string_view body,
                   RecordAt(absl::string_view(bytes_ != nullptr ? bytes_ : "", size_), offset,
                            kMessageIndex, "message index"));
  Fields fields(body);
  McapMessageIndex index;
  index.end = offset + 9 + body.size();
  absl::string_view entries;
  if (!fields.Read(index.channel_id) || !fields.ReadView32(entries) || entries.size() % 16 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("message index at byte ", offset, ": its entries run past its end"));
  }
  Fields read(entries);
  index.entries.resize(entries.size() / 16);
  for (auto& [log_time, message_offset] : index.entries) {
    read.Read(log_time);
    read.Read(message_offset);
  }
  return index;
}

absl::StatusOr<McapStatistics> McapFileReader::Statistics() const {
  ASSIGN_OR_RETURN(absl::string_view rest, SummaryRecords());
  while (rest.size() >= 9) {
    const auto opcode = static_cast<std::uint8_t>(rest[0]);
    std::uint64_t record_length = 0;
    Fields(rest.substr(1, 8)).Read(record_length);
    if (record_length > rest.size() - 9) break;
    if (opcode == kStatistics) {
      return ParseStatistics(rest.substr(9, static_cast<std::size_t>(record_length)));
    }
    rest.remove_prefix(9 + static_cast<std::size_t>(record_length));
  }
  return absl::FailedPreconditionError("the file's summary has no statistics");
}

absl::StatusOr<McapReadSummary> McapFileReader::ReadAll(const McapMessageCallback& on_message) {
  if (state_->busy || state_->read_all) {
    return absl::FailedPreconditionError(state_->busy ? "a read is in progress"
                                                      : "the file was read whole already");
  }
  state_->busy = true;
  state_->read_all = true;
  state_->reader.set_on_message(&on_message);
  absl::StatusOr<McapReadSummary> read =
      state_->reader.Read(absl::string_view(bytes_ != nullptr ? bytes_ : "", size_));
  state_->reader.set_on_message(nullptr);
  state_->busy = false;
  return read;
}

absl::Status McapFileReader::ReadChunk(std::uint64_t chunk_offset,
                                       const McapMessageCallback& on_message) {
  if (state_->busy) return absl::FailedPreconditionError("a read is in progress");
  state_->busy = true;
  state_->reader.set_on_message(&on_message);
  absl::Status read = state_->reader.ReadChunkAt(
      absl::string_view(bytes_ != nullptr ? bytes_ : "", size_), chunk_offset);
  state_->reader.set_on_message(nullptr);
  state_->busy = false;
  return read;
}

}  // namespace pitlane::record
