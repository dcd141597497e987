// The messages of Foxglove's WebSocket protocol (subprotocol "foxglove.websocket.v1"), which
// Foxglove and Lichtblick speak to open a live data source: the server's JSON text messages
// (serverInfo, advertise, unadvertise, status), the client's (subscribe, unsubscribe) read
// with every field checked, and the binary Message Data frame.
//
// The server advertises channels (a topic, its encoding and schema); a client subscribes to a
// channel under an id of its choosing and receives each message of it as
//   0x01 | subscription id (u32, little-endian) | timestamp (u64 ns, little-endian) | payload.
#ifndef PITLANE_SERVER_WEB_FOXGLOVE_H_
#define PITLANE_SERVER_WEB_FOXGLOVE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pitlane::web::foxglove {

inline constexpr char kSubprotocol[] = "foxglove.websocket.v1";

// Client messages longer than this are refused (a subscribe of a few thousand channels fits).
inline constexpr std::size_t kMaxClientMessageBytes = 256 * 1024;
// Entries one subscribe or unsubscribe may hold.
inline constexpr std::size_t kMaxEntriesPerMessage = 10'000;

struct Channel {
  std::uint32_t id = 0;
  std::string topic;
  std::string encoding;         // "json" or "protobuf".
  std::string schema_name;      // "foxglove.SceneUpdate", "pitlane.v1.WorldState", ...
  std::string schema;           // JSON Schema text, or a base64 FileDescriptorSet.
  std::string schema_encoding;  // "jsonschema" or "protobuf".
};

// {"op":"serverInfo",...}: the server's name, no optional capabilities, and `session_id`,
// which a client compares with the one it saw before to know the server restarted.
std::string ServerInfo(absl::string_view name, absl::string_view session_id);
std::string Advertise(absl::Span<const Channel> channels);
std::string Unadvertise(absl::Span<const std::uint32_t> channel_ids);

enum class StatusLevel { kInfo = 0, kWarning = 1, kError = 2 };
std::string Status(StatusLevel level, absl::string_view message);

struct Subscription {
  std::uint32_t id = 0;  // The client's.
  std::uint32_t channel_id = 0;
  friend bool operator==(const Subscription&, const Subscription&) = default;
};

struct ClientMessage {
  enum class Op { kSubscribe, kUnsubscribe };
  Op op = Op::kSubscribe;
  std::vector<Subscription> subscriptions;     // kSubscribe.
  std::vector<std::uint32_t> subscription_ids;  // kUnsubscribe.
};

// A client's text message. InvalidArgument naming the field ("subscriptions[2].channelId:
// must be an integer in [0, 4294967295]"), or Unimplemented for an op this server does not
// offer (a capability it did not advertise). Never echoes more than a short excerpt.
absl::StatusOr<ClientMessage> ParseClientMessage(absl::string_view text);

// A Message Data frame: the header above, then `payload`.
std::string MessageData(std::uint32_t subscription_id, std::uint64_t timestamp_ns,
                        absl::string_view payload);

}  // namespace pitlane::web::foxglove

#endif  // PITLANE_SERVER_WEB_FOXGLOVE_H_
