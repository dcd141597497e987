#include "server/util/json_text.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace pitlane::json {
namespace {

std::string Json(absl::string_view text) {
  std::string out;
  AppendString(text, &out);
  return out;
}

struct EscapeCase {
  std::string name;
  std::string text;
  std::string json;
};

class AppendStringTest : public ::testing::TestWithParam<EscapeCase> {};

TEST_P(AppendStringTest, IsValidJson) { EXPECT_EQ(Json(GetParam().text), GetParam().json); }

INSTANTIATE_TEST_SUITE_P(
    Strings, AppendStringTest,
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

TEST(AppendNumberTest, ShortestFormReadsBackExactly) {
  const double kCases[] = {0.0, -0.0, 1.0, -2.5, 0.1, 1.0 / 3.0, 1e-300, 4.9406564584124654e-324,
                           std::numeric_limits<double>::max(), 123456789.125, -7e22};
  for (const double value : kCases) {
    std::string out;
    AppendNumber(value, &out);
    EXPECT_EQ(std::strtod(out.c_str(), nullptr), value) << out;
    EXPECT_EQ(std::signbit(std::strtod(out.c_str(), nullptr)), std::signbit(value)) << out;
  }
  std::string out;
  AppendNumber(0.1, &out);
  EXPECT_EQ(out, "0.1");
}

TEST(AppendNumberTest, NonFiniteIsNull) {
  for (const double value : {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity()}) {
    std::string out;
    AppendNumber(value, &out);
    EXPECT_EQ(out, "null");
  }
}

TEST(AppendIntegerTest, WholeRange) {
  std::string out;
  AppendInteger(std::numeric_limits<std::uint64_t>::max(), &out);
  out.push_back(',');
  AppendInteger(std::numeric_limits<std::int64_t>::min(), &out);
  EXPECT_EQ(out, "18446744073709551615,-9223372036854775808");
}

}  // namespace
}  // namespace pitlane::json
