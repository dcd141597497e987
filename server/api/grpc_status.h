// The one mapping from absl::Status to grpc::Status.
#ifndef PITLANE_SERVER_API_GRPC_STATUS_H_
#define PITLANE_SERVER_API_GRPC_STATUS_H_

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace pitlane::api {

// Same code (absl and gRPC share the canonical code numbering) and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_GRPC_STATUS_H_
