// StatusIs (server/util/status_matchers.h) for grpc::Status, for the api tests:
//
//   EXPECT_THAT(stub->Step(context, request, &response),
//               StatusIs(grpc::StatusCode::NOT_FOUND, HasSubstr("session_id")));
#ifndef PITLANE_SERVER_API_TESTING_GRPC_STATUS_MATCHERS_H_
#define PITLANE_SERVER_API_TESTING_GRPC_STATUS_MATCHERS_H_

#include <string>

#include "grpcpp/support/status.h"
#include "server/util/status_matchers.h"

namespace pitlane {

template <>
struct StatusAccess<grpc::Status> {
  static grpc::StatusCode Code(const grpc::Status& status) { return status.error_code(); }
  static std::string Message(const grpc::Status& status) { return status.error_message(); }
};

}  // namespace pitlane

#endif  // PITLANE_SERVER_API_TESTING_GRPC_STATUS_MATCHERS_H_
