#include "server/session/random_id.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pitlane::session {
namespace {

TEST(Base32Lowercase, EncodesFiveBitsACharacterMostSignificantFirst) {
  // RFC 4648's test vectors, lowercase and without padding.
  const auto encode = [](const std::string& text) {
    return Base32Lowercase(std::vector<std::uint8_t>(text.begin(), text.end()));
  };
  EXPECT_EQ(encode(""), "");
  EXPECT_EQ(encode("f"), "my");
  EXPECT_EQ(encode("fo"), "mzxq");
  EXPECT_EQ(encode("foo"), "mzxw6");
  EXPECT_EQ(encode("foob"), "mzxw6yq");
  EXPECT_EQ(encode("fooba"), "mzxw6ytb");
  EXPECT_EQ(encode("foobar"), "mzxw6ytboi");
  // 128 one bits: 25 full characters, then 3 bits padded with two zeros (0b11100 = 28 = '4').
  EXPECT_EQ(Base32Lowercase(std::vector<std::uint8_t>(16, 0xff)), std::string(25, '7') + "4");
}

TEST(NewSessionId, IsSPrefixedBase32Of128Bits) {
  const absl::StatusOr<std::string> id = NewSessionId();
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_THAT(*id, testing::MatchesRegex("s-[a-z2-7]{25}[aeimquy4]"));
  EXPECT_EQ(id->size(), 2 + kSessionIdRandomChars);
}

TEST(NewSessionId, EndsWithTheReplicaNameAfterADot) {
  const absl::StatusOr<std::string> id = NewSessionId("pitlane-2");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_THAT(*id, testing::MatchesRegex("s-[a-z2-7]{25}[aeimquy4]\\.pitlane-2"));
}

TEST(IsReplicaName, TakesDnsLabelsOfLowercaseLettersDigitsAndDashes) {
  struct Case {
    std::string name;
    bool valid;
  };
  const std::vector<Case> cases = {
      {"r1", true},          {"pitlane-0", true},        {"a", true},
      {"7", true},           {std::string(32, 'x'), true}, {"", false},
      {std::string(33, 'x'), false}, {"-r1", false},     {"r1-", false},
      {"R1", false},         {"r.1", false},             {"r_1", false},
      {"r 1", false},        {"r\n", false},            {"r\xc3\xa9", false}};
  for (const Case& c : cases) EXPECT_EQ(IsReplicaName(c.name), c.valid) << "\"" << c.name << "\"";
}

TEST(NewSessionId, TenThousandAreDistinct) {
  absl::flat_hash_set<std::string> ids;
  for (int i = 0; i < 10'000; ++i) {
    const absl::StatusOr<std::string> id = NewSessionId();
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(ids.insert(*id).second) << *id;
  }
}

}  // namespace
}  // namespace pitlane::session
