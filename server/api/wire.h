// Requests and responses as bytes on the wire: every method of the service is raw (it takes
// and gives grpc::ByteBuffer), so that a request that does not parse is INVALID_ARGUMENT
// naming what is wrong, not gRPC's bare UNIMPLEMENTED, and so that nothing a client sends
// writes to the server's log.
#ifndef PITLANE_SERVER_API_WIRE_H_
#define PITLANE_SERVER_API_WIRE_H_

#include <cstddef>
#include <exception>
#include <new>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"

namespace pitlane::api {

// Routes libprotobuf's own log lines through Pitlane's (spdlog) instead of stderr, and lets
// ParseRequest catch those that a bad request causes. Call once, before serving.
void InstallProtobufLogHandler();

// Parses `raw` into `out`. InvalidArgument: "request: not a valid pitlane.v1.StepRequest" (bytes
// that do not parse), or naming the string field that holds invalid UTF-8 ("request.session_id:
// not valid UTF-8"; a nested field is named by its message and field,
// "request: pitlane.v1.VehicleSpec.name is not valid UTF-8"). Never logs.
absl::Status ParseRequest(const grpc::ByteBuffer& raw, google::protobuf::Message& out);

// `message`'s encoding.
grpc::ByteBuffer SerializeMessage(const google::protobuf::Message& message);

// The largest message the server sends (--max_send_message_mib, which also sets gRPC's own
// limit). Process-wide; 64 MiB until set.
void SetMaxResponseBytes(std::size_t bytes);
std::size_t MaxResponseBytes();

// OK if a response of `bytes` bytes may be sent; else ResourceExhausted naming the budget and
// `ask_for_less` (how to ask for less, e.g. "ask for fewer vehicles with vehicle_ids").
absl::Status CheckResponseSize(std::size_t bytes, absl::string_view ask_for_less);

// Runs `fn` (returning absl::Status); an exception out of it becomes an error status of this
// call alone: ResourceExhausted when memory ran out, Internal otherwise. Never rethrows.
template <typename Fn>
absl::Status Guarded(Fn&& fn) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "memory: the server could not allocate what this call needs; ask for less (fewer "
        "vehicles, obstacles or ticks per call)");
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("the server failed this call: ", e.what()));
  }
}

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_WIRE_H_
