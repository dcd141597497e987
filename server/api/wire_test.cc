#include "server/api/wire.h"

#include <optional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pitlane::api {
namespace {

using ::testing::HasSubstr;

TEST(HeavyReads, AtMostSoManyLargeReadsAtOnceAndSmallOnesAlways) {
  HeavyReads reads;
  std::vector<HeavyReads::Slot> held;
  for (int i = 0; i < kMaxHeavyReads; ++i) {
    absl::StatusOr<HeavyReads::Slot> slot = reads.Admit(kHeavyReadBytes);
    ASSERT_TRUE(slot.ok()) << i;
    held.push_back(*std::move(slot));
  }
  const absl::StatusOr<HeavyReads::Slot> refused = reads.Admit(100 << 20);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("about 100 MiB"));
  EXPECT_THAT(refused.status().message(), HasSubstr("retry"));
  // Small reads never wait for the large ones.
  EXPECT_TRUE(reads.Admit(kHeavyReadBytes - 1).ok());
  // A slot given back makes room for one more.
  held.pop_back();
  EXPECT_TRUE(reads.Admit(kHeavyReadBytes).ok());
  std::optional<HeavyReads::Slot> again;
  {
    absl::StatusOr<HeavyReads::Slot> slot = reads.Admit(kHeavyReadBytes);
    ASSERT_TRUE(slot.ok());
    again.emplace(*std::move(slot));
  }
  EXPECT_FALSE(reads.Admit(kHeavyReadBytes).ok());
  again.reset();
  EXPECT_TRUE(reads.Admit(kHeavyReadBytes).ok());
}

TEST(CheckResponseSize, NamesTheBudgetAndHowToAskForLess) {
  SetMaxResponseBytes(1000);
  EXPECT_TRUE(CheckResponseSize(1000, "ask for less").ok());
  const absl::Status status = CheckResponseSize(1001, "ask for fewer vehicles");
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(),
            "response: 1001 bytes, more than the server sends in one message (1000 bytes, "
            "--max_send_message_mib); ask for fewer vehicles");
  SetMaxResponseBytes(std::size_t{64} << 20);
}

}  // namespace
}  // namespace pitlane::api
