#include "server/web/recordings_api.h"

#include <cstdint>
#include <optional>

#include "gtest/gtest.h"

namespace pitlane::web {
namespace {

struct RangeCase {
  const char* header;
  std::uint64_t size;
  std::optional<ByteRange> expected;  // nullopt: ignored, the whole file is sent.
};

constexpr ByteRange Bytes(std::uint64_t first, std::uint64_t last) {
  return {.first = first, .last = last};
}
constexpr ByteRange Unsatisfiable(std::uint64_t size) {
  return {.first = size, .last = size, .satisfiable = false};
}

TEST(ParseRangeTest, OneByteRangeOrIgnored) {
  const RangeCase cases[] = {
      {"bytes=0-", 100, Bytes(0, 99)},
      {"bytes=10-", 100, Bytes(10, 99)},
      {"bytes=10-19", 100, Bytes(10, 19)},
      {"bytes=10-10", 100, Bytes(10, 10)},
      {"bytes=90-1000", 100, Bytes(90, 99)},  // A last byte past the end is the end.
      {"bytes=99-", 100, Bytes(99, 99)},
      {"bytes=-1", 100, Bytes(99, 99)},
      {"bytes=-30", 100, Bytes(70, 99)},
      {"bytes=-1000", 100, Bytes(0, 99)},
      {" bytes=5-6 ", 100, Bytes(5, 6)},
      {"bytes=100-", 100, Unsatisfiable(100)},
      {"bytes=1000-2000", 100, Unsatisfiable(100)},
      {"bytes=-0", 100, Unsatisfiable(100)},
      {"bytes=0-", 0, Unsatisfiable(0)},
      {"bytes=-5", 0, Unsatisfiable(0)},
      // Ignored: not bytes, several ranges, malformed, signs, overflow, last before first.
      {"items=0-5", 100, std::nullopt},
      {"bytes=0-5,10-20", 100, std::nullopt},
      {"bytes=", 100, std::nullopt},
      {"bytes=-", 100, std::nullopt},
      {"bytes=abc-", 100, std::nullopt},
      {"bytes=+5-", 100, std::nullopt},
      {"bytes=5--6", 100, std::nullopt},
      {"bytes=5- 6", 100, std::nullopt},
      {"bytes=99999999999999999999-", 100, std::nullopt},
      {"bytes=20-10", 100, std::nullopt},
      {"", 100, std::nullopt},
  };
  for (const RangeCase& c : cases) {
    SCOPED_TRACE(testing::Message() << "Range: \"" << c.header << "\", size " << c.size);
    const std::optional<ByteRange> got = ParseRange(c.header, c.size);
    ASSERT_EQ(got.has_value(), c.expected.has_value());
    if (!got.has_value()) continue;
    EXPECT_EQ(got->first, c.expected->first);
    EXPECT_EQ(got->last, c.expected->last);
    EXPECT_EQ(got->satisfiable, c.expected->satisfiable);
  }
}

}  // namespace
}  // namespace pitlane::web
