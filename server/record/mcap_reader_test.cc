// The MCAP reader: what the writer wrote, read back in order, with both compressions; a file
// cut at every byte read up to its last whole record; corrupt files refused with the record
// named, never a crash.
#include "server/record/mcap_reader.h"

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/record/mcap_writer.h"

namespace pitlane::record {
namespace {

using ::testing::HasSubstr;

struct Seen {
  std::string topic;
  std::string schema;
  std::uint64_t log_time;
  std::string data;
  friend bool operator==(const Seen&, const Seen&) = default;
};

// A file of `count` messages over three channels (one schemaless), and what it holds.
std::string Written(McapCompression compression, int count, std::vector<Seen>* expected) {
  StringSink sink;
  McapWriter writer(sink, {.compression = compression, .chunk_bytes = 2048});
  EXPECT_TRUE(writer.Start().ok());
  const std::uint16_t schema = *writer.AddSchema("test.Tick", "jsonschema", "{}");
  const std::uint16_t ticks = *writer.AddChannel(schema, "/ticks", "json", {{"rate", "50"}});
  const std::uint16_t raw = *writer.AddChannel(0, "/raw", "text", {});
  std::mt19937_64 random(3);
  for (int i = 0; i < count; ++i) {
    const bool on_ticks = random() % 3 != 0;
    const std::string data = on_ticks ? absl::StrCat(R"({"i":)", i, "}")
                                      : absl::StrCat("raw ", i, std::string(random() % 200, 'x'));
    const std::uint64_t time = 1000 + 20 * static_cast<std::uint64_t>(i);
    EXPECT_TRUE(writer.Write(on_ticks ? ticks : raw, time, time, data).ok());
    if (expected != nullptr) {
      expected->push_back({on_ticks ? "/ticks" : "/raw", on_ticks ? "test.Tick" : "", time, data});
    }
  }
  EXPECT_TRUE(writer.Finish().ok());
  return sink.bytes();
}

absl::StatusOr<McapReadSummary> Read(absl::string_view bytes, std::vector<Seen>& seen,
                                     const McapReadOptions& options = {}) {
  return ReadMcap(
      bytes,
      [&](const McapChannel& channel, const McapSchema* schema, const McapMessage& message) {
        seen.push_back({channel.topic, schema != nullptr ? schema->name : "", message.log_time,
                        std::string(message.data)});
        return absl::OkStatus();
      },
      options);
}

TEST(McapReader, ReadsEveryMessageInOrderWithItsChannelAndSchema) {
  for (const McapCompression compression : {McapCompression::kZstd, McapCompression::kNone}) {
    std::vector<Seen> expected;
    const std::string file = Written(compression, 500, &expected);
    std::vector<Seen> seen;
    const absl::StatusOr<McapReadSummary> read = Read(file, seen);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_FALSE(read->truncated);
    EXPECT_EQ(read->messages, 500u);
    EXPECT_EQ(seen, expected);
  }
}

// Cut at every byte: never an error or a crash, a prefix of the messages, and "truncated"
// for every cut before the data's end.
TEST(McapReader, AFileCutAnywhereIsReadUpToItsLastWholeRecord) {
  std::vector<Seen> expected;
  const std::string file = Written(McapCompression::kZstd, 120, &expected);
  std::size_t last = 0;
  for (std::size_t cut = 8; cut < file.size(); cut += 7) {
    std::vector<Seen> seen;
    const absl::StatusOr<McapReadSummary> read = Read(absl::string_view(file).substr(0, cut), seen);
    ASSERT_TRUE(read.ok()) << cut << ": " << read.status();
    ASSERT_LE(seen.size(), expected.size());
    EXPECT_TRUE(std::equal(seen.begin(), seen.end(), expected.begin())) << cut;
    EXPECT_GE(seen.size(), last);  // Longer files, no fewer messages.
    last = seen.size();
    if (seen.size() < expected.size()) {
      EXPECT_TRUE(read->truncated) << cut;
    }
  }
  EXPECT_EQ(last, expected.size());
}

TEST(McapReader, CorruptFilesAreRefusedNamingTheRecord) {
  std::vector<Seen> seen;
  EXPECT_THAT(Read("not an mcap file at all", seen).status().message(),
              HasSubstr("not an MCAP file"));
  EXPECT_THAT(Read("", seen).status().message(), HasSubstr("not an MCAP file"));

  // One byte of a chunk's (uncompressed) records changed: its CRC does not match.
  std::string file = Written(McapCompression::kNone, 50, nullptr);
  const std::size_t at = file.find(R"({"i":)");
  ASSERT_NE(at, std::string::npos);
  file[at + 5] = static_cast<char>(file[at + 5] + 1);
  EXPECT_THAT(Read(file, seen).status().message(),
              testing::AllOf(HasSubstr("chunk at byte"), HasSubstr("CRC")));

  // A chunk declaring more than the reader takes (a decompression bomb) is refused.
  EXPECT_THAT(Read(Written(McapCompression::kZstd, 50, nullptr), seen, {.max_chunk_bytes = 100})
                  .status()
                  .message(),
              HasSubstr("uncompressed bytes, more than this reader takes"));

  // Schemas and channels are kept while the file is read: their bytes are bounded.
  EXPECT_THAT(Read(Written(McapCompression::kZstd, 10, nullptr), seen, {.max_schema_bytes = 40})
                  .status()
                  .message(),
              HasSubstr("schemas and channels pass 40 bytes"));
  // A cancelled read stops at the next record.
  const std::atomic<bool> cancelled{true};
  EXPECT_EQ(Read(Written(McapCompression::kZstd, 10, nullptr), seen, {.cancel = &cancelled})
                .status()
                .code(),
            absl::StatusCode::kCancelled);

  // Random bytes after the magic and header: refused or read, never a crash.
  std::mt19937_64 random(11);
  const std::string good = Written(McapCompression::kZstd, 30, nullptr);
  for (int trial = 0; trial < 2000; ++trial) {
    std::string bad = good;
    for (int flips = 0; flips < 4; ++flips) {
      bad[8 + random() % (bad.size() - 8)] = static_cast<char>(random());
    }
    std::vector<Seen> any;
    (void)Read(bad, any);
  }
}

TEST(McapReader, TheCallbacksErrorStopsTheRead) {
  const std::string file = Written(McapCompression::kZstd, 100, nullptr);
  int calls = 0;
  const absl::StatusOr<McapReadSummary> read =
      ReadMcap(file, [&](const McapChannel&, const McapSchema*, const McapMessage&) {
        return ++calls == 10 ? absl::CancelledError("enough") : absl::OkStatus();
      });
  EXPECT_EQ(read.status().message(), "enough");
  EXPECT_EQ(calls, 10);
  EXPECT_EQ(ReadMcapFile("/nonexistent/file.mcap", nullptr).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pitlane::record

namespace pitlane::record {
namespace {

TEST(McapFileReader, ReadsAnyChunkAgainOnItsOwn) {
  const std::string path = ::testing::TempDir() + "/chunks.mcap";
  {
    std::vector<Seen> unused;
    const std::string bytes = Written(McapCompression::kZstd, 400, &unused);
    FILE* file = std::fopen(path.c_str(), "wb");
    ASSERT_NE(file, nullptr);
    ASSERT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
    std::fclose(file);
  }
  absl::StatusOr<std::unique_ptr<McapFileReader>> reader = McapFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  // Every message, with the chunk it is in.
  std::vector<std::pair<std::uint64_t, std::string>> all;
  const absl::StatusOr<McapReadSummary> read = (*reader)->ReadAll(
      [&](const McapChannel& channel, const McapSchema*, const McapMessage& message) {
        all.emplace_back(message.chunk_offset, absl::StrCat(channel.topic, " ", message.data));
        return absl::OkStatus();
      });
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(all.size(), 400u);
  std::vector<std::uint64_t> chunks;
  for (const auto& [offset, text] : all) {
    ASSERT_GT(offset, 0u);
    if (chunks.empty() || chunks.back() != offset) chunks.push_back(offset);
  }
  ASSERT_GT(chunks.size(), 5u);
  // Each chunk again, in any order (the last first): the same messages.
  for (auto it = chunks.rbegin(); it != chunks.rend(); ++it) {
    std::vector<std::pair<std::uint64_t, std::string>> again;
    ASSERT_TRUE((*reader)
                    ->ReadChunk(*it,
                                [&](const McapChannel& channel, const McapSchema*,
                                    const McapMessage& message) {
                                  again.emplace_back(message.chunk_offset,
                                                     absl::StrCat(channel.topic, " ",
                                                                  message.data));
                                  return absl::OkStatus();
                                })
                    .ok());
    std::vector<std::pair<std::uint64_t, std::string>> expected;
    for (const auto& entry : all) {
      if (entry.first == *it) expected.push_back(entry);
    }
    EXPECT_EQ(again, expected);
  }
  // Offsets where no chunk begins.
  const auto ignore = [](const McapChannel&, const McapSchema*, const McapMessage&) {
    return absl::OkStatus();
  };
  for (const std::uint64_t offset :
       {std::uint64_t{0}, std::uint64_t{3}, chunks[0] + 1, (*reader)->size() - 1,
        (*reader)->size(), (*reader)->size() + 100, ~std::uint64_t{0}}) {
    const absl::Status status = (*reader)->ReadChunk(offset, ignore);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << offset;
  }
  EXPECT_EQ(McapFileReader::Open(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pitlane::record

namespace pitlane::record {
namespace {

std::string WriteTemp(const std::string& name, const std::string& bytes) {
  const std::string path = ::testing::TempDir() + "/" + name;
  FILE* file = std::fopen(path.c_str(), "wb");
  EXPECT_NE(file, nullptr);
  EXPECT_EQ(std::fwrite(bytes.data(), 1, bytes.size(), file), bytes.size());
  std::fclose(file);
  return path;
}

TEST(McapStatistics, ReadFromTheSummaryAloneOrRefusedForAFileCutShort) {
  std::vector<Seen> seen;
  const std::string bytes = Written(McapCompression::kZstd, 300, &seen);
  absl::StatusOr<McapStatistics> statistics = ReadMcapStatistics(WriteTemp("stats.mcap", bytes));
  ASSERT_TRUE(statistics.ok()) << statistics.status();
  EXPECT_EQ(statistics->message_count, 300u);
  std::uint64_t first = ~std::uint64_t{0}, last = 0;
  for (const Seen& message : seen) {
    first = std::min(first, message.log_time);
    last = std::max(last, message.log_time);
  }
  EXPECT_EQ(statistics->message_start_time, first);
  EXPECT_EQ(statistics->message_end_time, last);
  for (const std::size_t cut : {bytes.size() - 1, bytes.size() - 8, bytes.size() / 2,
                                std::size_t{8}, std::size_t{0}}) {
    EXPECT_EQ(ReadMcapStatistics(WriteTemp("cut.mcap", bytes.substr(0, cut))).status().code(),
              absl::StatusCode::kFailedPrecondition)
        << cut;
  }
  EXPECT_EQ(ReadMcapStatistics(::testing::TempDir() + "/none.mcap").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace pitlane::record

namespace pitlane::record {
namespace {

TEST(McapFileReader, ChunksFromTheSummaryAloneAndAgainWithoutCountingTwice) {
  std::vector<Seen> seen;
  const std::string bytes = Written(McapCompression::kZstd, 400, &seen);
  // Schemas and channels allowed: a little more than the file's own.
  const McapReadOptions tight{.max_schema_bytes = 200};
  std::unique_ptr<McapFileReader> reader = McapFileReader::FromBytes(bytes, tight);
  absl::StatusOr<McapSummary> summary = reader->ReadSummary();
  ASSERT_TRUE(summary.ok()) << summary.status();
  EXPECT_EQ(summary->statistics.message_count, 400u);
  ASSERT_GT(summary->chunk_offsets.size(), 5u);
  // Without the whole file read first: the summary's channels serve. Every chunk, 50 times
  // over: schemas and channels read again are not counted again.
  std::size_t messages = 0;
  const McapMessageCallback count = [&](const McapChannel&, const McapSchema*,
                                        const McapMessage&) {
    ++messages;
    return absl::OkStatus();
  };
  for (int round = 0; round < 50; ++round) {
    for (const std::uint64_t offset : summary->chunk_offsets) {
      ASSERT_TRUE(reader->ReadChunk(offset, count).ok());
    }
  }
  EXPECT_EQ(messages, 50u * 400u);
  // Once whole; not from within its own callback.
  ASSERT_TRUE(reader
                  ->ReadAll([&](const McapChannel&, const McapSchema*, const McapMessage&) {
                    EXPECT_EQ(reader->ReadChunk(summary->chunk_offsets[0], count).code(),
                              absl::StatusCode::kFailedPrecondition);
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(reader->ReadAll(count).status().code(), absl::StatusCode::kFailedPrecondition);
  // A file cut short has no summary.
  EXPECT_EQ(McapFileReader::FromBytes(absl::string_view(bytes).substr(0, bytes.size() / 2))
                ->ReadSummary()
                .status()
                .code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace pitlane::record
