// Requests and responses as bytes on the wire: every method of the service is raw (it takes
// and gives grpc::ByteBuffer), so that a request that does not parse is INVALID_ARGUMENT
// naming what is wrong, not gRPC's bare UNIMPLEMENTED, and so that nothing a client sends
// writes to the server's log.
#ifndef PITLANE_SERVER_API_WIRE_H_
#define PITLANE_SERVER_API_WIRE_H_

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>
#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
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

// Reads that build a large response (GetSession and GetState of a big world) hold about
// their response's size several times over while they build it, and its encoding until the
// client has taken it (a client that does not read keeps it in the server). At most
// kMaxHeavyReads of those (estimated at kHeavyReadBytes or more) are built or sent at once;
// more are refused with ResourceExhausted, to be retried. Thread-safe.
inline constexpr std::size_t kHeavyReadBytes = std::size_t{4} << 20;
inline constexpr int kMaxHeavyReads = 4;
class HeavyReads {
 public:
  // Held while a read builds its response and then by its encoding (SerializeMessage) until
  // gRPC has sent it; frees its place when destroyed. It shares the count, which gRPC may
  // free the bytes after the service is gone (a connection torn down at shutdown).
  class Slot {
   public:
    Slot() = default;
    explicit Slot(std::shared_ptr<std::atomic<int>> count) : count_(std::move(count)) {}
    Slot(Slot&& other) noexcept = default;
    Slot& operator=(Slot&&) = delete;
    ~Slot() {
      if (count_ != nullptr) count_->fetch_sub(1);
    }

   private:
    std::shared_ptr<std::atomic<int>> count_;
  };

  // A slot for a read whose response is estimated at `estimated_bytes`: an empty one for a
  // small read, ResourceExhausted when kMaxHeavyReads heavy ones are being built.
  absl::StatusOr<Slot> Admit(std::size_t estimated_bytes);

 private:
  const std::shared_ptr<std::atomic<int>> in_flight_ = std::make_shared<std::atomic<int>>(0);
};

// `message`'s encoding.
grpc::ByteBuffer SerializeMessage(const google::protobuf::Message& message);

// `message`'s encoding in one buffer that holds `held` until gRPC has sent the bytes and freed
// them: a heavy read's slot lasts as long as the memory its response takes.
grpc::ByteBuffer SerializeMessage(const google::protobuf::Message& message,
                                  HeavyReads::Slot held);


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
    return absl::InternalError(absl::StrCat("request: the server could not complete this call (",
                                            absl::CEscape(e.what()).substr(0, 200), ")"));
  }
}

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_WIRE_H_
