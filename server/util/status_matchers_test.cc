#include "server/util/status_matchers.h"

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pitlane {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(StatusIs, MatchesTheCodeAndTheMessage) {
  const absl::Status status = absl::NotFoundError("vehicle_id: no vehicle 7");
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kNotFound, HasSubstr("vehicle_id")));
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kNotFound, "vehicle_id: no vehicle 7"));
  EXPECT_THAT(status, Not(StatusIs(absl::StatusCode::kInvalidArgument)));
  EXPECT_THAT(status, Not(StatusIs(absl::StatusCode::kNotFound, HasSubstr("obstacle_id"))));
  EXPECT_THAT(absl::OkStatus(), StatusIs(absl::StatusCode::kOk));
}

TEST(StatusIs, TakesAStatusOr) {
  const absl::StatusOr<int> failed = absl::InvalidArgumentError("ticks: must be >= 1");
  EXPECT_THAT(failed, StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("ticks")));
  EXPECT_THAT(absl::StatusOr<int>(3), StatusIs(absl::StatusCode::kOk));
}

TEST(StatusIs, ExplainsAMismatchWithTheCodeAndMessage) {
  const ::testing::Matcher<absl::Status> matcher =
      StatusIs(absl::StatusCode::kNotFound, HasSubstr("vehicle"));
  EXPECT_EQ(::testing::DescribeMatcher<absl::Status>(matcher),
            "has code NOT_FOUND and a message that has substring \"vehicle\"");
  ::testing::StringMatchResultListener listener;
  EXPECT_FALSE(matcher.MatchAndExplain(absl::AbortedError("stale"), &listener));
  EXPECT_EQ(listener.str(), "whose code is ABORTED and message is \"stale\"");
}

}  // namespace
}  // namespace pitlane
