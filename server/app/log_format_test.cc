#include "server/app/log_format.h"

#include <chrono>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pitlane::app {
namespace {

using ::testing::MatchesRegex;

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
