#include "server/web/foxglove.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/util/json_text.h"

namespace pitlane::web::foxglove {
namespace {

using Json = nlohmann::json;

// A short, printable excerpt of what a client sent, for an error message.
std::string Excerpt(absl::string_view text) {
  constexpr std::size_t kMax = 40;
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMax)),
                      text.size() > kMax ? "...\"" : "\"");
}

// `value` (null: missing) as a u32, or InvalidArgument naming `field`. Whole numbers only; 3.0
// is taken as 3, as JavaScript may send it.
absl::StatusOr<std::uint32_t> U32(const Json* value, const std::string& field) {
  if (value == nullptr) return absl::InvalidArgumentError(absl::StrCat(field, ": missing"));
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint32_t>::max();
  if (value->is_number_unsigned() && value->get<std::uint64_t>() <= kMax) {
    return static_cast<std::uint32_t>(value->get<std::uint64_t>());
  }
  if (value->is_number_float()) {
    const double number = value->get<double>();
    if (number >= 0.0 && number <= static_cast<double>(kMax) &&
        number == static_cast<double>(static_cast<std::uint64_t>(number))) {
      return static_cast<std::uint32_t>(number);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": must be an integer in [0, 4294967295]"));
}

const Json* Member(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// `object[key]` as an array of at most kMaxEntriesPerMessage entries.
absl::StatusOr<const Json*> ArrayField(const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_array()) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": must be an array"));
  }
  if (it->size() > kMaxEntriesPerMessage) {
    return absl::InvalidArgumentError(absl::StrCat(key, ": at most ", kMaxEntriesPerMessage,
                                                   " entries, got ", it->size()));
  }
  return &*it;
}

void AppendChannel(const Channel& channel, std::string* out) {
  out->append("{\"id\":");
  json::AppendInteger(static_cast<std::uint64_t>(channel.id), out);
  out->append(",\"topic\":");
  json::AppendString(channel.topic, out);
  out->append(",\"encoding\":");
  json::AppendString(channel.encoding, out);
  out->append(",\"schemaName\":");
  json::AppendString(channel.schema_name, out);
  out->append(",\"schema\":");
  json::AppendString(channel.schema, out);
  out->append(",\"schemaEncoding\":");
  json::AppendString(channel.schema_encoding, out);
  out->push_back('}');
}

void AppendLittleEndian(std::uint64_t value, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

}  // namespace

std::string ServerInfo(absl::string_view name, absl::string_view session_id) {
  std::string out = "{\"op\":\"serverInfo\",\"name\":";
  json::AppendString(name, &out);
  out.append(",\"capabilities\":[],\"supportedEncodings\":[],\"metadata\":{},\"sessionId\":");
  json::AppendString(session_id, &out);
  out.push_back('}');
  return out;
}

std::string Advertise(absl::Span<const Channel> channels) {
  std::string out = "{\"op\":\"advertise\",\"channels\":[";
  for (std::size_t i = 0; i < channels.size(); ++i) {
    if (i > 0) out.push_back(',');
    AppendChannel(channels[i], &out);
  }
  out.append("]}");
  return out;
}

std::string Unadvertise(absl::Span<const std::uint32_t> channel_ids) {
  std::string out = "{\"op\":\"unadvertise\",\"channelIds\":[";
  for (std::size_t i = 0; i < channel_ids.size(); ++i) {
    if (i > 0) out.push_back(',');
    json::AppendInteger(static_cast<std::uint64_t>(channel_ids[i]), &out);
  }
  out.append("]}");
  return out;
}

std::string Status(StatusLevel level, absl::string_view message) {
  std::string out = "{\"op\":\"status\",\"level\":";
  json::AppendInteger(static_cast<std::uint64_t>(level), &out);
  out.append(",\"message\":");
  json::AppendString(message, &out);
  out.push_back('}');
  return out;
}

absl::StatusOr<ClientMessage> ParseClientMessage(absl::string_view text) {
  if (text.size() > kMaxClientMessageBytes) {
    return absl::InvalidArgumentError(absl::StrCat("message: at most ", kMaxClientMessageBytes,
                                                   " bytes, got ", text.size()));
  }
  // No exceptions: a parse error gives a discarded value. nlohmann parses without recursion.
  const Json message = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (message.is_discarded() || !message.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("message: must be a JSON object, got ", Excerpt(text)));
  }
  const auto op = message.find("op");
  if (op == message.end() || !op->is_string()) {
    return absl::InvalidArgumentError("op: must be a string");
  }
  const std::string& name = op->get_ref<const std::string&>();
  ClientMessage parsed;
  if (name == "subscribe") {
    parsed.op = ClientMessage::Op::kSubscribe;
    absl::StatusOr<const Json*> entries = ArrayField(message, "subscriptions");
    if (!entries.ok()) return entries.status();
    parsed.subscriptions.reserve((*entries)->size());
    for (std::size_t i = 0; i < (*entries)->size(); ++i) {
      const Json& entry = (**entries)[i];
      const std::string field = absl::StrCat("subscriptions[", i, "]");
      if (!entry.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(field, ": must be an object"));
      }
      absl::StatusOr<std::uint32_t> id = U32(Member(entry, "id"), field + ".id");
      if (!id.ok()) return id.status();
      absl::StatusOr<std::uint32_t> channel =
          U32(Member(entry, "channelId"), field + ".channelId");
      if (!channel.ok()) return channel.status();
      parsed.subscriptions.push_back({.id = *id, .channel_id = *channel});
    }
    return parsed;
  }
  if (name == "unsubscribe") {
    parsed.op = ClientMessage::Op::kUnsubscribe;
    absl::StatusOr<const Json*> entries = ArrayField(message, "subscriptionIds");
    if (!entries.ok()) return entries.status();
    parsed.subscription_ids.reserve((*entries)->size());
    for (std::size_t i = 0; i < (*entries)->size(); ++i) {
      absl::StatusOr<std::uint32_t> id =
          U32(&(**entries)[i], absl::StrCat("subscriptionIds[", i, "]"));
      if (!id.ok()) return id.status();
      parsed.subscription_ids.push_back(*id);
    }
    return parsed;
  }
  return absl::UnimplementedError(absl::StrCat(
      "op: ", Excerpt(name), " is not offered by this server (it reads subscribe and "
      "unsubscribe)"));
}

std::string MessageData(std::uint32_t subscription_id, std::uint64_t timestamp_ns,
                        absl::string_view payload) {
  std::string out;
  out.reserve(13 + payload.size());
  out.push_back('\x01');
  AppendLittleEndian(subscription_id, 4, &out);
  AppendLittleEndian(timestamp_ns, 8, &out);
  out.append(payload.data(), payload.size());
  return out;
}

}  // namespace pitlane::web::foxglove
