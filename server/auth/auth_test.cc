#include <openssl/evp.h>

#include <array>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/auth/permissions.h"
#include "server/auth/sha256.h"
#include "server/auth/tokens.h"

namespace pitlane::auth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(Tokens, HaveTheirFormAndDoNotRepeat) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    const absl::StatusOr<std::string> token = NewToken();
    ASSERT_TRUE(token.ok());
    EXPECT_TRUE(LooksLikeToken(*token)) << *token;
    EXPECT_EQ(token->size(), kTokenLength);
    EXPECT_TRUE(seen.insert(*token).second);
  }
  for (const char* bad : {"", "plt_", "plt_abc", "xyz_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                          "plt_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1", "plt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
                          "plt_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    EXPECT_FALSE(LooksLikeToken(bad)) << bad;
  }
}

TEST(Tokens, BearerHeaders) {
  EXPECT_EQ(*BearerToken("Bearer plt_x"), "plt_x");
  EXPECT_EQ(*BearerToken("bearer   plt_x"), "plt_x");
  EXPECT_EQ(*BearerToken("BEARER plt_x"), "plt_x");
  for (const std::optional<absl::string_view> bad :
       {std::optional<absl::string_view>(), std::optional<absl::string_view>(""),
        std::optional<absl::string_view>("Bearer"), std::optional<absl::string_view>("Bearer "),
        std::optional<absl::string_view>("Basic plt_x"),
        std::optional<absl::string_view>("Bearerplt_x"),
        std::optional<absl::string_view>("plt_x")}) {
    const absl::Status status = BearerToken(bad).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(status.message(), "authorization: send `authorization: Bearer <token>`");
  }
}

TEST(Tokens, DigestIsSha256) {
  // FIPS 180-2's example: SHA-256("abc").
  const Digest digest = DigestOf("abc");
  const Digest expected = {0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40,
                           0xde, 0x5d, 0xae, 0x22, 0x23, 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17,
                           0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad};
  EXPECT_EQ(digest, expected);
  EXPECT_TRUE(SameDigest(digest, expected));
  Digest other = expected;
  other[31] ^= 1;
  EXPECT_FALSE(SameDigest(digest, other));
}

// Our SHA-256 against OpenSSL's, on every length from 0 to 300 bytes (one and two padding
// blocks, block boundaries) with seeded pseudo-random content, and FIPS 180-2's two-block
// example.
TEST(Sha256, MatchesOpenSslAndTheFipsExamples) {
  std::mt19937_64 random(180);
  std::string message;
  for (std::size_t length = 0; length <= 300; ++length) {
    std::array<std::uint8_t, 32> expected;
    unsigned int size = 0;
    ASSERT_EQ(EVP_Digest(message.data(), message.size(), expected.data(), &size, EVP_sha256(),
                         nullptr),
              1);
    EXPECT_EQ(Sha256(message), expected) << "length " << length;
    message.push_back(static_cast<char>(random()));
  }
  const std::array<std::uint8_t, 32> two_blocks = {
      0x24, 0x8d, 0x6a, 0x61, 0xd2, 0x06, 0x38, 0xb8, 0xe5, 0xc0, 0x26,
      0x93, 0x0c, 0x3e, 0x60, 0x39, 0xa3, 0x3c, 0xe4, 0x59, 0x64, 0xff,
      0x21, 0x67, 0xf6, 0xec, 0xed, 0xd4, 0x19, 0xdb, 0x06, 0xc1};
  EXPECT_EQ(Sha256("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"), two_blocks);
}

TEST(TokenStore, ChecksRevokesAndNeverEchoesATokenInItsErrors) {
  TokenStore store;
  store.OpenSession("s-a");
  store.OpenSession("s-b");
  const absl::StatusOr<std::string> owner = store.Mint({.role = Role::kOwner, .session_id = "s-a"});
  const absl::StatusOr<std::string> driver =
      store.Mint({.role = Role::kDriver, .session_id = "s-a", .vehicle_id = 3});
  const absl::StatusOr<std::string> other =
      store.Mint({.role = Role::kViewer, .session_id = "s-b"});
  ASSERT_TRUE(owner.ok() && driver.ok() && other.ok());
  EXPECT_EQ(*store.Check(*owner), (Grant{.role = Role::kOwner, .session_id = "s-a"}));
  EXPECT_EQ(store.Check(*driver)->vehicle_id, 3u);

  const absl::Status malformed = store.Check("Bearer nonsense").status();
  EXPECT_EQ(malformed.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(malformed.message(), "authorization: not a Pitlane token");
  const absl::StatusOr<std::string> unknown = NewToken();
  const absl::Status unknown_status = store.Check(*unknown).status();
  EXPECT_EQ(unknown_status.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(unknown_status.message(), Not(HasSubstr(*unknown)));

  EXPECT_THAT(store.RevokeVehicle("s-a", 3), testing::ElementsAre(TokenId(DigestOf(*driver))));
  EXPECT_EQ(store.Check(*driver).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(store.Revoke(*other));
  EXPECT_FALSE(store.Revoke(*other));
  EXPECT_EQ(store.CloseSession("s-a"), 1u);
  EXPECT_EQ(store.size(), 0u);
  // A closed session gets no more tokens.
  EXPECT_EQ(store.Mint({.role = Role::kViewer, .session_id = "s-a"}).status().code(),
            absl::StatusCode::kNotFound);

  EXPECT_EQ(store.Add("not a token", {.role = Role::kAdmin}).code(),
            absl::StatusCode::kInvalidArgument);
  const absl::StatusOr<std::string> admin = NewToken();
  ASSERT_TRUE(store.Add(*admin, {.role = Role::kAdmin}).ok());
  EXPECT_EQ(store.CloseSession(""), 0u);  // An admin belongs to no session.
  EXPECT_EQ(store.Check(*admin)->role, Role::kAdmin);
  EXPECT_FALSE(store.RevokeById("s-b", TokenId(DigestOf(*admin))));  // Not a session's.
}

TEST(TokenStore, RevokesByIdWithinItsSessionOnly) {
  TokenStore store;
  store.OpenSession("s-a");
  store.OpenSession("s-b");
  absl::StatusOr<std::vector<Minted>> minted = store.MintAll(
      {{.role = Role::kViewer, .session_id = "s-a"}, {.role = Role::kOwner, .session_id = "s-b"}},
      10);
  ASSERT_TRUE(minted.ok());
  EXPECT_EQ((*minted)[0].id, TokenId(DigestOf((*minted)[0].token)));
  EXPECT_FALSE(store.RevokeById("s-b", (*minted)[0].id));  // s-a's token.
  EXPECT_TRUE(store.Check((*minted)[0].token).ok());
  EXPECT_TRUE(store.RevokeById("s-a", (*minted)[0].id));
  EXPECT_FALSE(store.RevokeById("s-a", (*minted)[0].id));
  EXPECT_EQ(store.live("s-a"), 0u);
  EXPECT_EQ(store.live("s-b"), 1u);
}

TEST(TokenStore, CountsEachSessionsTokensAgainstItsLimitAllOrNone) {
  TokenStore store;
  store.OpenSession("s-a");
  const std::vector<Grant> three(3, Grant{.role = Role::kViewer, .session_id = "s-a"});
  ASSERT_TRUE(store.MintAll(three, 4).ok());
  const absl::Status over = store.MintAll({three[0], three[0]}, 4).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(over.message(), HasSubstr("--max_tokens_per_session"));
  EXPECT_EQ(store.live("s-a"), 3u);  // Nothing of the refused pair.
  EXPECT_TRUE(store.MintAll({three[0]}, 4).ok());
}

TEST(TokenStore, PendingTokensAuthenticateOnlyOnceActivated) {
  TokenStore store;
  store.OpenSession("s-a");
  absl::StatusOr<std::vector<Minted>> minted =
      store.MintAll({{.role = Role::kDriver, .session_id = "s-a"},
                     {.role = Role::kDriver, .session_id = "s-a"}},
                    10, /*pending=*/true);
  ASSERT_TRUE(minted.ok());
  EXPECT_EQ(store.Check((*minted)[0].token).status().code(), absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(store.live("s-a"), 2u);  // They count against the limit already.
  EXPECT_EQ(store.Activate(*minted, {7, 9}), 2u);
  EXPECT_EQ(store.Check((*minted)[0].token)->vehicle_id, 7u);
  EXPECT_EQ(store.Check((*minted)[1].token)->vehicle_id, 9u);
}

// Every role against every kind of action, on its own session, another session and another
// vehicle.
TEST(Authorize, EveryRoleAgainstEveryNeed) {
  const absl::Status not_found = absl::NotFoundError("session_id: no session \"s-a\"");
  const Grant admin{.role = Role::kAdmin};
  const Grant owner{.role = Role::kOwner, .session_id = "s-a"};
  const Grant driver{.role = Role::kDriver, .session_id = "s-a", .vehicle_id = 3};
  const Grant viewer{.role = Role::kViewer, .session_id = "s-a"};
  const Grant other_owner{.role = Role::kOwner, .session_id = "s-b"};
  using Code = absl::StatusCode;
  struct Case {
    const Grant* grant;
    Need need;
    std::optional<std::uint64_t> vehicle;
    Code code;
  };
  const std::vector<Case> cases = {
      {&admin, Need::kAdmin, {}, Code::kOk},
      {&admin, Need::kOwn, {}, Code::kOk},
      {&admin, Need::kDrive, 3, Code::kOk},
      {&owner, Need::kRead, {}, Code::kOk},
      {&owner, Need::kDrive, 7, Code::kOk},
      {&owner, Need::kOwn, {}, Code::kOk},
      {&owner, Need::kAdmin, {}, Code::kPermissionDenied},
      {&driver, Need::kRead, {}, Code::kOk},
      {&driver, Need::kDrive, 3, Code::kOk},
      {&driver, Need::kDrive, 4, Code::kPermissionDenied},
      {&driver, Need::kOwn, {}, Code::kPermissionDenied},
      {&viewer, Need::kRead, {}, Code::kOk},
      {&viewer, Need::kDrive, 3, Code::kPermissionDenied},
      {&viewer, Need::kOwn, {}, Code::kPermissionDenied},
      {&other_owner, Need::kRead, {}, Code::kNotFound},
      {&other_owner, Need::kDrive, 3, Code::kNotFound},
      {&other_owner, Need::kOwn, {}, Code::kNotFound},
      {&other_owner, Need::kAdmin, {}, Code::kPermissionDenied},
  };
  for (const Case& c : cases) {
    const absl::Status status = Authorize(*c.grant, c.need, "s-a", c.vehicle, not_found);
    EXPECT_EQ(status.code(), c.code)
        << RoleName(c.grant->role) << " of " << c.grant->session_id << " need "
        << static_cast<int>(c.need) << ": " << status;
    if (status.code() == Code::kNotFound) {
      EXPECT_EQ(status, not_found);
    }
  }
  EXPECT_EQ(Authorize(driver, Need::kDrive, "s-a", 4, not_found).message(),
            "vehicle_id: needs the token of vehicle 4's driver or the session's owner; this is "
            "a driver token");
  EXPECT_EQ(Authorize(viewer, Need::kOwn, "s-a", {}, not_found).message(),
            "session_id: needs the session owner's token; this is a viewer token");
  EXPECT_EQ(Authorize(owner, Need::kAdmin, "s-a", {}, not_found).message(),
            "authorization: needs an admin token; this is an owner token");
}

}  // namespace
}  // namespace pitlane::auth
