#include "server/web/request.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace pitlane::web {
namespace {

TEST(RequestQueryTest, DecodesParameters) {
  const RequestQuery query("token=plt_abc&rate_hz=30&name=a%20b+c&flag&bad=%zz%4&empty=");
  EXPECT_EQ(query.Get("token"), "plt_abc");
  EXPECT_EQ(query.Get("rate_hz"), "30");
  EXPECT_EQ(query.Get("name"), "a b c");
  EXPECT_EQ(query.Get("flag"), "");
  EXPECT_EQ(query.Get("bad"), "%zz%4");
  EXPECT_EQ(query.Get("empty"), "");
  EXPECT_EQ(query.Get("missing"), std::nullopt);
}

TEST(RequestQueryTest, FirstValueWinsAndAtMostSoMany) {
  EXPECT_EQ(RequestQuery("a=1&a=2").Get("a"), "1");
  std::string many;
  for (int i = 0; i < 100; ++i) absl::StrAppend(&many, "p", i, "=1&");
  const RequestQuery query(many.c_str());
  EXPECT_EQ(query.Get("p31"), "1");
  EXPECT_EQ(query.Get("p32"), std::nullopt);
  EXPECT_EQ(RequestQuery(nullptr).Get("a"), std::nullopt);
}

TEST(IsLoopbackHostTest, LoopbackNamesAndAddressesOnly) {
  for (const char* host : {"localhost", "LOCALHOST:8080", "127.0.0.1", "127.0.0.1:8080",
                           "127.1.2.3:1", "[::1]", "[::1]:8080"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"attacker.example:8080", "localhost.attacker.example", "10.0.0.5:8080",
                           "128.0.0.1", "[::2]:80", "[::1", "", "127.0.0.1.example"}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
  EXPECT_FALSE(IsLoopbackHost(nullptr));
}

}  // namespace
}  // namespace pitlane::web
