// gMock matchers for statuses, for tests only (tensorstore's status_testutil.h is the model):
//
//   EXPECT_THAT(world.Remove(7), StatusIs(absl::StatusCode::kNotFound));
//   EXPECT_THAT(world.Spawn(specs), StatusIs(absl::StatusCode::kInvalidArgument,
//                                            HasSubstr("[1].width_m")));
//
// They take an absl::Status or an absl::StatusOr<T>; server/api/testing/grpc_status_matchers.h
// adds grpc::Status. A mismatch prints the code and the message.
#ifndef PITLANE_SERVER_UTIL_STATUS_MATCHERS_H_
#define PITLANE_SERVER_UTIL_STATUS_MATCHERS_H_

#include <ostream>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gmock/gmock.h"

namespace pitlane {

// The code and message of a status-like type; specialised for each one StatusIs accepts.
template <typename T>
struct StatusAccess;

template <>
struct StatusAccess<absl::Status> {
  static absl::StatusCode Code(const absl::Status& status) { return status.code(); }
  static std::string Message(const absl::Status& status) { return std::string(status.message()); }
};

template <typename T>
struct StatusAccess<absl::StatusOr<T>> {
  static absl::StatusCode Code(const absl::StatusOr<T>& value) { return value.status().code(); }
  static std::string Message(const absl::StatusOr<T>& value) {
    return std::string(value.status().message());
  }
};

// The matcher behind StatusIs: a code to equal and a matcher of the message. `Code` is
// absl::StatusCode or grpc::StatusCode; both number the canonical codes alike, so both print
// with absl's names.
template <typename Code>
class StatusIsMatcher {
 public:
  StatusIsMatcher(Code code, ::testing::Matcher<const std::string&> message)
      : code_(code), message_(std::move(message)) {}

  template <typename T>
  bool MatchAndExplain(const T& value, ::testing::MatchResultListener* listener) const {
    const Code code = StatusAccess<T>::Code(value);
    const std::string message = StatusAccess<T>::Message(value);
    *listener << "whose code is " << Name(code) << " and message is \"" << message << "\"";
    return code == code_ && message_.Matches(message);
  }
  void DescribeTo(std::ostream* os) const {
    *os << "has code " << Name(code_) << " and a message that ";
    message_.DescribeTo(os);
  }
  void DescribeNegationTo(std::ostream* os) const {
    *os << "has a code other than " << Name(code_) << " or a message that ";
    message_.DescribeNegationTo(os);
  }

 private:
  static std::string Name(Code code) {
    return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  }

  Code code_;
  ::testing::Matcher<const std::string&> message_;
};

// Matches a status (see StatusAccess) whose code is `code` (an absl::StatusCode, or a
// grpc::StatusCode for a grpc::Status) and whose message matches `message`: a string to
// equal, or a matcher (HasSubstr("field")).
template <typename Code, typename MessageMatcher>
auto StatusIs(Code code, MessageMatcher&& message) {
  static_assert(std::is_enum_v<Code>, "StatusIs takes an absl::StatusCode or grpc::StatusCode");
  return ::testing::MakePolymorphicMatcher(StatusIsMatcher<Code>(
      code, ::testing::SafeMatcherCast<const std::string&>(std::forward<MessageMatcher>(message))));
}

// Matches a status whose code is `code`, whatever its message.
template <typename Code>
auto StatusIs(Code code) {
  return StatusIs(code, ::testing::_);
}

}  // namespace pitlane

#endif  // PITLANE_SERVER_UTIL_STATUS_MATCHERS_H_
