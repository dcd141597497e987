#include "server/util/echo.h"

#include <string>

#include "gtest/gtest.h"

namespace pitlane {
namespace {

TEST(Echo, KeepsShortPrintableTextAsItIs) {
  EXPECT_EQ(Echo(""), "");
  EXPECT_EQ(Echo("s-7kq2xmfz4rwh3tpn6yjcbv5da4"), "s-7kq2xmfz4rwh3tpn6yjcbv5da4");
}

TEST(Echo, EscapesWhatCouldBreakALineOrAQuote) {
  EXPECT_EQ(Echo("a\"b\\c\nd\x01"), "a\\\"b\\\\c\\nd\\x01");
  EXPECT_EQ(Echo("caf\xc3\xa9"), "caf\\xc3\\xa9");
}

TEST(Echo, CutsLongTextAndSaysSo) {
  const std::string exact(kEchoMaxBytes, 'x');
  EXPECT_EQ(Echo(exact), exact);
  EXPECT_EQ(Echo(exact + "y"), exact + "...");
  EXPECT_EQ(Echo(std::string(1 << 20, 'z')), std::string(kEchoMaxBytes, 'z') + "...");
  // Escaping can grow each byte kept to four, never more.
  const std::string worst = Echo(std::string(1 << 20, '\xff'));
  EXPECT_EQ(worst.size(), 4 * kEchoMaxBytes + 3);
}

}  // namespace
}  // namespace pitlane
