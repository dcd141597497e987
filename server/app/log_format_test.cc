#include "server/app/log_format.h"

#include <chrono>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pitlane::app {
namespace {

using ::testing::MatchesRegex;

std::string Json(absl::string_view text) {
  std::string out;
  AppendJsonString(text, &out);
  return out;
}

struct EscapeCase {
  std::string name;
  std::string text;
  std::string json;
};

class AppendJsonStringTest : public ::testing::TestWithParam<EscapeCase> {};

TEST_P(AppendJsonStringTest, IsValidJson) { EXPECT_EQ(Json(GetParam().text), GetParam().json); }

INSTANTIATE_TEST_SUITE_P(
    Strings, AppendJsonStringTest,
    ::testing::ValuesIn(std::vector<EscapeCase>{
        {"Empty", "", R"("")"},
        {"Plain", "session s-1 created", R"("session s-1 created")"},
        {"QuoteAndBackslash", R"(a "b" \c)", R"("a \"b\" \\c")"},
        {"Newlines", "a\nb\r\tc", R"("a\nb\r\tc")"},
        {"Controls", std::string("\x00\x01\x1f\x7f", 4), R"("\u0000\u0001\u001f\u007f")"},
        {"Utf8", "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x97",
         "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x9A\x97\""},
        {"StrayContinuation", "a\x80z", "\"a\xEF\xBF\xBDz\""},
        {"TruncatedAtEnd", "a\xE2\x82", "\"a\xEF\xBF\xBD\xEF\xBF\xBD\""},
        {"TruncatedMidway", "\xE2\x82z", "\"\xEF\xBF\xBD\xEF\xBF\xBDz\""},
        {"OverlongSlash", "\xC0\xAF", "\"\xEF\xBF\xBD\xEF\xBF\xBD\""},
        {"OverlongThreeBytes", "\xE0\x80\xAF", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""},
        {"Surrogate", "\xED\xA0\x80", "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""},
        {"AboveUnicode", "\xF4\x90\x80\x80",
         "\"\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\""},
        {"Highest", "\xF4\x8F\xBF\xBF", "\"\xF4\x8F\xBF\xBF\""},
        {"InvalidLead", "\xFF", "\"\xEF\xBF\xBD\""},
    }),
    [](const ::testing::TestParamInfo<EscapeCase>& info) { return info.param.name; });

TEST(JsonLogFormatterTest, WritesOneObjectPerLine) {
  spdlog::details::log_msg msg("pitlane", spdlog::level::warn, "say \"hi\"\nbye");
  msg.time = std::chrono::system_clock::time_point(std::chrono::microseconds(1764070159123456));
  spdlog::memory_buf_t buffer;
  JsonLogFormatter().format(msg, buffer);
  EXPECT_EQ(std::string(buffer.data(), buffer.size()),
            "{\"time\":\"2025-11-25T11:29:19.123456Z\",\"level\":\"warning\","
            "\"message\":\"say \\\"hi\\\"\\nbye\"}\n");
}

TEST(JsonLogFormatterTest, CloneFormatsAlike) {
  spdlog::details::log_msg msg("pitlane", spdlog::level::info, "x");
  spdlog::memory_buf_t buffer;
  JsonLogFormatter().clone()->format(msg, buffer);
  EXPECT_THAT(std::string(buffer.data(), buffer.size()),
              MatchesRegex(R"(\{"time":"[0-9T:.-]+Z","level":"info","message":"x"\}
)"));
}

}  // namespace
}  // namespace pitlane::app
