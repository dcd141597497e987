// The MCAP writer, read back by Foxglove's own reader (@mcap/core, through
// tests/web/mcap_read.mjs): its indexed reader with CRC checks on, and its streaming reader,
// also on a file cut short.
#include "server/record/mcap_writer.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/record/crc32.h"
#include "server/record/testing/mcap_core.h"
#include "server/util/status_matchers.h"

// An OK status, or the test stops with it; an OK StatusOr's value assigned to `lhs`.
#define ASSERT_OK(expr)                               \
  do {                                                \
    const absl::Status assert_ok_status = (expr);     \
    ASSERT_TRUE(assert_ok_status.ok()) << assert_ok_status; \
  } while (false)
#define PITLANE_CONCAT_INNER(a, b) a##b
#define PITLANE_CONCAT(a, b) PITLANE_CONCAT_INNER(a, b)
#define ASSERT_OK_AND_ASSIGN(lhs, expr) \
  ASSERT_OK_AND_ASSIGN_IMPL(PITLANE_CONCAT(assert_ok_result_, __LINE__), lhs, expr)
#define ASSERT_OK_AND_ASSIGN_IMPL(result, lhs, expr) \
  auto result = (expr);                               \
  ASSERT_TRUE(result.ok()) << result.status();        \
  lhs = *std::move(result)

namespace pitlane::record {
namespace {

using ::testing::HasSubstr;
using Json = nlohmann::json;

TEST(Crc32Test, KnownValuesAndPieces) {
  EXPECT_EQ(Crc32(""), 0u);
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);  // The standard check value of CRC-32.
  EXPECT_EQ(Crc32("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
  // In pieces of every split, and over lengths that use both loops.
  const std::string text = "The quick brown fox jumps over the lazy dog, twice: the quick...";
  for (std::size_t split = 0; split <= text.size(); ++split) {
    const std::uint32_t state = Crc32Update(kCrc32Init, absl::string_view(text).substr(0, split));
    EXPECT_EQ(Crc32Final(Crc32Update(state, absl::string_view(text).substr(split))),
              Crc32(text));
  }
}

// A message as written (and as the reader prints it).
struct Written {
  int channel;
  std::uint32_t sequence;
  std::uint64_t log_time;
  std::string data;
};

using testutil::ReadWithMcapCore;

class McapWriterTest : public ::testing::TestWithParam<McapCompression> {
 protected:
  std::string TempPath(absl::string_view name) {
    const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "mcap_test";
    std::filesystem::create_directories(dir);
    return (dir / std::string(name)).string();
  }
  static void Save(const std::string& path, absl::string_view bytes) {
    std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
  }
};

TEST_P(McapWriterTest, FoxglovesReaderReadsEveryMessageThroughTheIndexAndTheStream) {
  StringSink sink;
  McapWriter writer(sink, {.profile = "pitlane-test",
                           .library = "pitlane 0.1",
                           .compression = GetParam(),
                           .chunk_bytes = 4096});
  ASSERT_OK(writer.Start());
  ASSERT_OK_AND_ASSIGN(const std::uint16_t ticks_schema,
                       writer.AddSchema("pitlane.Tick", "jsonschema", R"({"type":"object"})"));
  ASSERT_OK_AND_ASSIGN(const std::uint16_t pose_schema,
                       writer.AddSchema("pitlane.Pose", "jsonschema", R"({"type":"array"})"));
  ASSERT_OK_AND_ASSIGN(const std::uint16_t ticks,
                       writer.AddChannel(ticks_schema, "/ticks", "json", {{"rate_hz", "50"}}));
  ASSERT_OK_AND_ASSIGN(const std::uint16_t poses, writer.AddChannel(pose_schema, "/poses",
                                                                    "json", {}));
  ASSERT_OK_AND_ASSIGN(const std::uint16_t raw, writer.AddChannel(0, "/raw", "text", {}));
  EXPECT_EQ(ticks_schema, 1);
  EXPECT_EQ(std::vector<int>({ticks, poses, raw}), std::vector<int>({0, 1, 2}));

  // 3,000 messages over the three channels; log times mostly rising, some back in time (a
  // reader orders by them through the index), some equal.
  std::mt19937_64 random(7);
  std::vector<Written> written;
  std::vector<std::uint32_t> sequences(3, 0);
  std::uint64_t time = 1'000'000'000;
  for (int i = 0; i < 3000; ++i) {
    const int channel = static_cast<int>(random() % 3);
    time += random() % 20'000'000;
    const std::uint64_t log_time = random() % 10 == 0 ? time - 50'000'000 : time;
    const std::string data =
        channel == raw ? absl::StrCat("raw ", i, std::string(random() % 300, 'x'))
                       : absl::StrCat(R"({"i":)", i, R"(,"t":)", log_time, "}");
    written.push_back({channel, sequences[channel]++, log_time, data});
    ASSERT_OK(writer.Write(static_cast<std::uint16_t>(channel), log_time, log_time + 1, data));
  }
  ASSERT_OK(writer.Finish());
  EXPECT_EQ(writer.message_count(), 3000u);
  EXPECT_EQ(writer.bytes_written(), sink.bytes().size());
  const std::string path = TempPath(GetParam() == McapCompression::kZstd ? "z.mcap" : "n.mcap");
  Save(path, sink.bytes());

  const Json read = ReadWithMcapCore(path);
  ASSERT_TRUE(read.is_object()) << read;
  EXPECT_EQ(read["header"]["profile"], "pitlane-test");
  EXPECT_EQ(read["header"]["library"], "pitlane 0.1");
  ASSERT_EQ(read["schemas"].size(), 2u);
  EXPECT_EQ(read["schemas"][1]["name"], "pitlane.Pose");
  EXPECT_EQ(read["schemas"][0]["data"], R"({"type":"object"})");
  ASSERT_EQ(read["channels"].size(), 3u);
  EXPECT_EQ(read["channels"][0]["topic"], "/ticks");
  EXPECT_EQ(read["channels"][0]["metadata"]["rate_hz"], "50");
  EXPECT_EQ(read["channels"][2]["schema_id"], 0);
  EXPECT_EQ(read["channels"][2]["message_encoding"], "text");
  const Json& statistics = read["statistics"];
  EXPECT_EQ(statistics["message_count"], "3000");
  EXPECT_EQ(statistics["channel_count"], 3);
  EXPECT_EQ(statistics["schema_count"], 2);
  EXPECT_GT(statistics["chunk_count"].get<int>(), 20);  // 4 KiB chunks.
  EXPECT_EQ(statistics["chunk_count"], read["chunk_indexes"]);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(statistics["channel_message_counts"][std::to_string(c)],
              std::to_string(sequences[c]));
  }
  std::uint64_t first = written[0].log_time, last = written[0].log_time;
  for (const Written& w : written) {
    first = std::min(first, w.log_time);
    last = std::max(last, w.log_time);
  }
  EXPECT_EQ(statistics["message_start_time"], std::to_string(first));
  EXPECT_EQ(statistics["message_end_time"], std::to_string(last));
  EXPECT_EQ(read["compressions"],
            Json::array({GetParam() == McapCompression::kZstd ? "zstd" : ""}));
  EXPECT_EQ(read["data_section_crc_ok"], true);

  // The indexed reader: every message, in log-time order (ties in file order).
  std::vector<Written> by_time = written;
  std::stable_sort(by_time.begin(), by_time.end(),
                   [](const Written& a, const Written& b) { return a.log_time < b.log_time; });
  ASSERT_EQ(read["messages"].size(), written.size());
  std::multiset<std::tuple<std::uint64_t, int, std::uint32_t, std::string>> expected, got;
  for (std::size_t i = 0; i < written.size(); ++i) {
    const Json& m = read["messages"][i];
    EXPECT_EQ(m["log_time"], std::to_string(by_time[i].log_time)) << i;
    EXPECT_EQ(m["publish_time"], std::to_string(std::stoull(m["log_time"].get<std::string>()) + 1));
    expected.emplace(written[i].log_time, written[i].channel, written[i].sequence,
                     written[i].data);
    got.emplace(std::stoull(m["log_time"].get<std::string>()), m["channel"].get<int>(),
                m["sequence"].get<std::uint32_t>(), m["data"].get<std::string>());
  }
  EXPECT_TRUE(expected == got);

  // The streaming reader: every message in the order written, to the end.
  const Json& stream = read["stream"];
  EXPECT_EQ(stream["error"], nullptr);
  EXPECT_EQ(stream["done"], true);
  ASSERT_EQ(stream["messages"].size(), written.size());
  for (std::size_t i = 0; i < written.size(); ++i) {
    const Json& m = stream["messages"][i];
    EXPECT_EQ(m["channel"], written[i].channel);
    EXPECT_EQ(m["sequence"], written[i].sequence);
    EXPECT_EQ(m["data"], written[i].data);
  }
  EXPECT_EQ(stream["records"]["Chunk"], statistics["chunk_count"]);
  EXPECT_EQ(stream["records"]["DataEnd"], 1);
  EXPECT_EQ(stream["records"]["Footer"], 1);

  // One byte changed: in the last message's data (uncompressed chunks: the chunk's CRC
  // check refuses it), or in the middle of the compressed chunks (refused, by the CRC or
  // before it by what the damaged records say).
  std::string changed = sink.bytes();
  const std::size_t at = GetParam() == McapCompression::kNone
                             ? changed.rfind(written.back().data) + 1
                             : changed.size() / 2;
  ASSERT_LT(at, changed.size());
  changed[at] = static_cast<char>(changed[at] ^ 0x20);
  const std::string changed_path = TempPath("changed.mcap");
  Save(changed_path, changed);
  const Json refused = ReadWithMcapCore(changed_path);
  if (GetParam() == McapCompression::kNone) {
    EXPECT_THAT(refused.value("error", ""), HasSubstr("CRC")) << refused.dump().substr(0, 500);
  } else {
    EXPECT_NE(refused.value("error", ""), "") << refused.dump().substr(0, 500);
  }
}

TEST_P(McapWriterTest, AFileCutShortIsReadUpToItsLastWholeChunk) {
  StringSink sink;
  McapWriter writer(sink, {.compression = GetParam(), .chunk_bytes = 2048});
  ASSERT_OK(writer.Start());
  ASSERT_OK_AND_ASSIGN(const std::uint16_t channel, writer.AddChannel(0, "/n", "text", {}));
  // Where each chunk ended, and how many messages were in the file then.
  std::vector<std::pair<std::uint64_t, int>> ends;
  for (int i = 0; i < 400; ++i) {
    const std::uint64_t before = writer.bytes_written();
    ASSERT_OK(writer.Write(channel, 1000 + i, 1000 + i, absl::StrCat("message ", i)));
    if (writer.bytes_written() != before) ends.emplace_back(writer.bytes_written(), i + 1);
  }
  ASSERT_GE(ends.size(), 3u);
  // A server killed while writing the third chunk: the file ends partway into it.
  const std::string path = TempPath("cut.mcap");
  Save(path, absl::string_view(sink.bytes()).substr(0, ends[1].first + 100));
  const Json stream = ReadWithMcapCore(path, /*stream_only=*/true);
  ASSERT_EQ(stream["messages"].size(), static_cast<std::size_t>(ends[1].second)) << stream;
  for (int i = 0; i < ends[1].second; ++i) {
    EXPECT_EQ(stream["messages"][i]["data"], absl::StrCat("message ", i));
  }
  EXPECT_EQ(stream["done"], false);  // Not the end of a file: more was expected.
}

TEST_P(McapWriterTest, SchemasAndChannelsAfterTheLastMessageMakeNoChunkOfTheirOwn) {
  StringSink sink;
  McapWriter writer(sink, {.compression = GetParam(), .chunk_bytes = 16});
  ASSERT_OK(writer.Start());
  ASSERT_OK_AND_ASSIGN(const std::uint16_t channel, writer.AddChannel(0, "/first", "text", {}));
  ASSERT_OK(writer.Write(channel, 5'000'000'000, 5'000'000'000, "the only message"));
  // The chunk was written (16 bytes): what comes now has no message to give it a time.
  ASSERT_OK_AND_ASSIGN(const std::uint16_t schema, writer.AddSchema("late", "jsonschema", "{}"));
  ASSERT_OK(writer.AddChannel(schema, "/late", "json", {}).status());
  ASSERT_OK(writer.Finish());
  const std::string path = TempPath("late.mcap");
  Save(path, sink.bytes());
  const Json read = ReadWithMcapCore(path);
  EXPECT_EQ(read["chunk_indexes"], 1) << read;
  EXPECT_EQ(read["statistics"]["message_start_time"], "5000000000");
  ASSERT_EQ(read["channels"].size(), 2u);
  EXPECT_EQ(read["channels"][1]["topic"], "/late");
  EXPECT_EQ(read["stream"]["error"], nullptr);
  EXPECT_EQ(read["stream"]["records"]["Channel"], 2 + 2);  // In the data, and the summary.
  EXPECT_EQ(read["messages"].size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Compressions, McapWriterTest,
                         ::testing::Values(McapCompression::kZstd, McapCompression::kNone),
                         [](const auto& info) {
                           return info.param == McapCompression::kZstd ? "zstd" : "none";
                         });

// A sink that fails after some bytes, as a full disk does.
class FailingSink final : public ByteSink {
 public:
  explicit FailingSink(std::size_t room) : room_(room) {}
  absl::Status Write(absl::string_view bytes) override {
    if (bytes.size() > room_) return absl::ResourceExhaustedError("No space left on device");
    room_ -= bytes.size();
    return absl::OkStatus();
  }

 private:
  std::size_t room_;
};

TEST(McapWriterErrorsTest, CallsOutOfOrderAndUnknownIdsAreRefusedAndASinkErrorSticks) {
  StringSink sink;
  McapWriter writer(sink, {});
  EXPECT_THAT(writer.Write(0, 1, 1, "x"), StatusIs(absl::StatusCode::kFailedPrecondition,
                                                   HasSubstr("not started")));
  ASSERT_OK(writer.Start());
  EXPECT_THAT(writer.Start(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(writer.AddChannel(3, "/t", "json", {}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("schema_id: no schema 3")));
  EXPECT_THAT(writer.Write(0, 1, 1, "x"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("channel_id: no channel 0")));
  ASSERT_OK(writer.Finish());
  EXPECT_THAT(writer.Finish(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                        HasSubstr("finished")));

  FailingSink full(200);
  McapWriter on_full(full, {.chunk_bytes = 64});
  ASSERT_OK(on_full.Start());
  ASSERT_OK_AND_ASSIGN(const std::uint16_t channel, on_full.AddChannel(0, "/t", "text", {}));
  absl::Status status;
  for (int i = 0; i < 100 && status.ok(); ++i) {
    status = on_full.Write(channel, i, i, std::string(40, 'x'));
  }
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("No space")));
  EXPECT_THAT(on_full.Write(channel, 0, 0, "y"),
              StatusIs(absl::StatusCode::kResourceExhausted));  // The first error, kept.
  EXPECT_THAT(on_full.Finish(), StatusIs(absl::StatusCode::kResourceExhausted));
}

// What Finish will still write is bounded ahead: a recorder stops before its file passes its
// size limit, summary included, however many chunks and channels it has.
TEST(McapWriterLimits, BytesToFinishBoundsTheFinishedFile) {
  for (const McapCompression compression : {McapCompression::kZstd, McapCompression::kNone}) {
    StringSink sink;
    McapWriter writer(sink, {.compression = compression, .chunk_bytes = 4096});
    ASSERT_OK(writer.Start());
    ASSERT_OK_AND_ASSIGN(const std::uint16_t schema,
                         writer.AddSchema("s", "jsonschema", std::string(5000, 'x')));
    std::vector<std::uint16_t> channels;
    for (int i = 0; i < 300; ++i) {
      ASSERT_OK_AND_ASSIGN(const std::uint16_t channel,
                           writer.AddChannel(schema, absl::StrCat("/vehicle/", i), "json", {}));
      channels.push_back(channel);
    }
    std::uint64_t bound = 0;
    for (int i = 0; i < 20000; ++i) {
      ASSERT_OK(writer.Write(channels[i % channels.size()], i, i, absl::StrCat(R"({"i":)", i, "}")));
      bound = writer.bytes_written() + writer.bytes_to_finish();
    }
    ASSERT_OK(writer.Finish());
    EXPECT_LE(sink.bytes().size(), bound);
    EXPECT_GT(sink.bytes().size(), bound / 2);  // A bound, not a guess off by orders.
  }
}

}  // namespace
}  // namespace pitlane::record
