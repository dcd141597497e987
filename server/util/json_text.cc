#include "server/util/json_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

namespace pitlane::json {
namespace {

// The length of the valid UTF-8 sequence at the start of `text` (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF), or 0 if it does not start with one.
size_t Utf8SequenceLength(absl::string_view text) {
  const auto byte = [text](size_t i) { return static_cast<std::uint8_t>(text[i]); };
  const std::uint8_t lead = byte(0);
  if (lead < 0x80) return 1;
  size_t length = 0;
  // The range of the second byte; later bytes are always 0x80..0xBF. The narrowed ranges
  // after E0, ED, F0 and F4 exclude overlong forms, surrogates and code points > U+10FFFF.
  std::uint8_t second_lo = 0x80;
  std::uint8_t second_hi = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0) second_lo = 0xA0;
    if (lead == 0xED) second_hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0) second_lo = 0x90;
    if (lead == 0xF4) second_hi = 0x8F;
  } else {
    return 0;  // A continuation byte, an overlong lead (C0, C1) or F5..FF.
  }
  if (text.size() < length) return 0;
  if (byte(1) < second_lo || byte(1) > second_hi) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (byte(i) < 0x80 || byte(i) > 0xBF) return 0;
  }
  return length;
}

}  // namespace

void AppendString(absl::string_view text, std::string* out) {
  out->push_back('"');
  while (!text.empty()) {
    const char c = text.front();
    const auto u = static_cast<std::uint8_t>(c);
    size_t consumed = 1;
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(c);
    } else if (c == '\n') {
      out->append("\\n");
    } else if (c == '\t') {
      out->append("\\t");
    } else if (c == '\r') {
      out->append("\\r");
    } else if (u < 0x20 || u == 0x7F) {
      // DEL is legal in JSON but escaped too: no terminal control byte reaches a log file raw.
      char escaped[7];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", u);
      out->append(escaped);
    } else if (u < 0x80) {
      out->push_back(c);
    } else if (const size_t length = Utf8SequenceLength(text); length > 0) {
      out->append(text.data(), length);
      consumed = length;
    } else {
      out->append("\xEF\xBF\xBD");  // U+FFFD REPLACEMENT CHARACTER.
    }
    text.remove_prefix(consumed);
  }
  out->push_back('"');
}

void AppendNumber(double value, std::string* out) {
  if (!std::isfinite(value)) {
    out->append("null");
    return;
  }
  char buffer[32];  // The shortest form of a double takes at most 24 characters.
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, result.ptr);
}

void AppendInteger(std::uint64_t value, std::string* out) {
  char buffer[24];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, result.ptr);
}

void AppendInteger(std::int64_t value, std::string* out) {
  char buffer[24];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out->append(buffer, result.ptr);
}

}  // namespace pitlane::json
