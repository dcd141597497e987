#include "server/api/audit.h"

#include <memory>
#include <sstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"

namespace pitlane::api {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr std::int64_t kSecond_ns = 1'000'000'000;

TEST(FormatAuditLineTest, NamesPeerActionAndFields) {
  EXPECT_EQ(FormatAuditLine("ipv4:127.0.0.1:5000", "vehicles.spawn",
                            {{"session", "s-abc"}, {"count", 12}}),
            "audit: peer=ipv4:127.0.0.1:5000 action=vehicles.spawn session=\"s-abc\" "
            "count=\"12\"");
}

TEST(FormatAuditLineTest, EscapesWhatClientsSent) {
  const std::string line =
      FormatAuditLine("ipv4:1.2.3.4:5", "session.create", {{"name", "a\"b\\c\nd\x01\xff"}});
  EXPECT_THAT(line, HasSubstr(R"(name="a\"b\\c\nd\x01\xff")"));
  EXPECT_THAT(line, Not(HasSubstr("\n")));
}

TEST(FormatAuditLineTest, CutsLongValues) {
  const std::string name(10'000, 'x');
  const std::string line = FormatAuditLine(name, "session.create", {{"name", name}});
  EXPECT_THAT(line, HasSubstr(absl::StrCat("peer=", std::string(64, 'x'), "... ")));
  EXPECT_THAT(line, EndsWith(absl::StrCat("name=\"", std::string(64, 'x'), "...\"")));
  EXPECT_LT(line.size(), 200u);
}

TEST(FormatAuditLineTest, CutsOnlyPastTheLimit) {
  const std::string at_limit(kAuditValueMaxBytes, 'y');
  EXPECT_THAT(FormatAuditLine("p", "a", {{"name", at_limit}}),
              EndsWith(absl::StrCat("name=\"", at_limit, "\"")));
  EXPECT_THAT(FormatAuditLine("p", "a", {{"name", at_limit + "z"}}),
              EndsWith(absl::StrCat("name=\"", at_limit, "...\"")));
}

TEST(FormatAuditLineTest, NeverWritesTokens) {
  const std::string line =
      FormatAuditLine("peer", "session.create", {{"token", "hunter2"}, {"session_secret", "x9"}});
  EXPECT_THAT(line, Not(HasSubstr("hunter2")));
  EXPECT_THAT(line, Not(HasSubstr("x9")));
  EXPECT_THAT(line, HasSubstr("token=\"[redacted]\""));
}

TEST(LogRateLimiterTest, LetsABurstThroughThenTheRate) {
  session::FakeClock clock;
  LogRateLimiter limiter(&clock, /*rate_per_s=*/10.0, /*burst=*/3.0);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(limiter.Acquire().allowed) << i;
  EXPECT_FALSE(limiter.Acquire().allowed);
  EXPECT_FALSE(limiter.Acquire().allowed);
  // A token every 100 ms.
  clock.Advance(kSecond_ns / 10 - 1);
  EXPECT_FALSE(limiter.Acquire().allowed);
  clock.Advance(1);
  const LogRateLimiter::Decision decision = limiter.Acquire();
  EXPECT_TRUE(decision.allowed);
  EXPECT_EQ(decision.suppressed, 3);  // Reported once, with the next line let through.
  clock.Advance(kSecond_ns / 10);
  EXPECT_EQ(limiter.Acquire().suppressed, 0);
}

TEST(LogRateLimiterTest, AFloodPassesAtTheRate) {
  session::FakeClock clock;
  LogRateLimiter limiter(&clock, /*rate_per_s=*/100.0, /*burst=*/200.0);
  // 10 s of a client asking for 100,000 lines a second.
  int allowed = 0;
  std::int64_t suppressed = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    const LogRateLimiter::Decision decision = limiter.Acquire();
    if (decision.allowed) {
      ++allowed;
      suppressed += decision.suppressed;
    }
    clock.Advance(10'000);
  }
  EXPECT_NEAR(allowed, 200 + 100 * 10, 2);
  EXPECT_NEAR(suppressed, 1'000'000 - allowed, 1'000);  // All but the last gap's are reported.
}

TEST(LogRateLimiterTest, TheBucketHoldsNoMoreThanABurst) {
  session::FakeClock clock;
  LogRateLimiter limiter(&clock, /*rate_per_s=*/1.0, /*burst=*/2.0);
  clock.Advance(3600 * kSecond_ns);  // An hour of quiet.
  EXPECT_TRUE(limiter.Acquire().allowed);
  EXPECT_TRUE(limiter.Acquire().allowed);
  EXPECT_FALSE(limiter.Acquire().allowed);
}

TEST(AuditTest, LogsAtInfo) {
  std::ostringstream log;
  const std::shared_ptr<spdlog::logger> previous = spdlog::default_logger();
  auto logger = std::make_shared<spdlog::logger>(
      "audit_test", std::make_shared<spdlog::sinks::ostream_sink_st>(log));
  logger->set_pattern("%l %v");
  spdlog::set_default_logger(logger);
  Audit("ipv4:127.0.0.1:1", "session.delete", {{"session", "s-1"}});
  spdlog::set_default_logger(previous);
  EXPECT_EQ(log.str(), "info audit: peer=ipv4:127.0.0.1:1 action=session.delete session=\"s-1\"\n");
}

}  // namespace
}  // namespace pitlane::api
