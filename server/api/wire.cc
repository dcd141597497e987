#include "server/api/wire.h"

#include <atomic>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/support/slice.h"
#include "spdlog/spdlog.h"

namespace pitlane::api {
namespace {

// While ParseRequest runs on this thread: where libprotobuf's complaints go instead of the log.
thread_local std::string* parse_complaints = nullptr;

void LogProtobuf(google::protobuf::LogLevel level, const char* filename, int line,
                 const std::string& message) {
  if (parse_complaints != nullptr) {
    parse_complaints->append(message);
    return;
  }
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      spdlog::debug("libprotobuf {}:{}: {}", filename, line, message);
      break;
    case google::protobuf::LOGLEVEL_WARNING:
      spdlog::warn("libprotobuf {}:{}: {}", filename, line, message);
      break;
    default:
      spdlog::error("libprotobuf {}:{}: {}", filename, line, message);
  }
}

// "String field 'pitlane.v1.GetStateRequest.session_id' contains invalid UTF-8 data when
// parsing a protocol buffer. ..." -> "pitlane.v1.GetStateRequest.session_id".
std::string InvalidUtf8Field(const std::string& complaints) {
  if (!absl::StrContains(complaints, "invalid UTF-8")) return "";
  const std::vector<std::string> parts = absl::StrSplit(complaints, '\'');
  return parts.size() >= 2 ? parts[1] : "";
}

}  // namespace

void InstallProtobufLogHandler() { google::protobuf::SetLogHandler(&LogProtobuf); }

absl::Status ParseRequest(const grpc::ByteBuffer& raw, google::protobuf::Message& out) {
  // A small request comes in one slice, parsed where it lies; a larger one is joined first.
  grpc::Slice single;
  std::string joined;
  const char* data = nullptr;
  std::size_t size = 0;
  if (raw.TrySingleSlice(&single).ok()) {
    data = reinterpret_cast<const char*>(single.begin());
    size = single.size();
  } else {
    std::vector<grpc::Slice> slices;
    if (raw.Dump(&slices).ok()) {
      joined.reserve(raw.Length());
      for (const grpc::Slice& slice : slices) {
        joined.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      }
    }
    data = joined.data();
    size = joined.size();
  }
  if (size > static_cast<std::size_t>(std::numeric_limits<int>::max())) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: not a valid ", out.GetDescriptor()->full_name()));
  }
  std::string complaints;
  parse_complaints = &complaints;
  const bool parsed = out.ParseFromArray(data, static_cast<int>(size));
  parse_complaints = nullptr;
  if (parsed) return absl::OkStatus();
  const std::string field = InvalidUtf8Field(complaints);
  if (field.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request: not a valid ", out.GetDescriptor()->full_name()));
  }
  // The request's own fields by their path; nested ones by their message.
  const std::string prefix = absl::StrCat(out.GetDescriptor()->full_name(), ".");
  if (absl::StartsWith(field, prefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat("request.", field.substr(prefix.size()), ": not valid UTF-8"));
  }
  return absl::InvalidArgumentError(absl::StrCat("request: ", field, " is not valid UTF-8"));
}

grpc::ByteBuffer SerializeMessage(const google::protobuf::Message& message) {
  // Straight into gRPC's own buffer: no string to copy from.
  const std::size_t size = message.ByteSizeLong();
  grpc::Slice slice(size);
  message.SerializeWithCachedSizesToArray(const_cast<std::uint8_t*>(slice.begin()));
  return grpc::ByteBuffer(&slice, 1);
}

grpc::ByteBuffer SerializeMessage(const google::protobuf::Message& message,
                                  HeavyReads::Slot held) {
  struct Encoded {
    std::string bytes;
    HeavyReads::Slot held;
  };
  auto* encoded = new Encoded{message.SerializeAsString(), std::move(held)};
  grpc::Slice slice(
      encoded->bytes.data(), encoded->bytes.size(),
      [](void* user_data) { delete static_cast<Encoded*>(user_data); }, encoded);
  return grpc::ByteBuffer(&slice, 1);
}

namespace {
std::atomic<std::size_t> max_response_bytes{std::size_t{64} << 20};
}  // namespace

void SetMaxResponseBytes(std::size_t bytes) { max_response_bytes.store(bytes); }
std::size_t MaxResponseBytes() { return max_response_bytes.load(std::memory_order_relaxed); }

absl::Status CheckResponseSize(std::size_t bytes, absl::string_view ask_for_less) {
  const std::size_t limit = MaxResponseBytes();
  if (bytes <= limit) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "response: ", bytes, " bytes, more than the server sends in one message (", limit,
      " bytes, --max_send_message_mib); ", ask_for_less));
}

absl::StatusOr<HeavyReads::Slot> HeavyReads::Admit(std::size_t estimated_bytes) {
  if (estimated_bytes < kHeavyReadBytes) return Slot();
  if (in_flight_->fetch_add(1) >= kMaxHeavyReads) {
    in_flight_->fetch_sub(1);
    return absl::ResourceExhaustedError(absl::StrCat(
        "response: ", kMaxHeavyReads,
        " large reads are being answered already (this one would be about ",
        estimated_bytes >> 20, " MiB); retry in a moment, or ask for less (ListSessions, "
        "StreamStates with vehicle_ids)"));
  }
  return Slot(in_flight_);
}

}  // namespace pitlane::api
