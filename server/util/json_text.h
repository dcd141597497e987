// Pieces of JSON text, written straight into a string: the JSON log lines and the web
// endpoint's messages (thousands of vehicles a frame, so no document tree in between).
#ifndef PITLANE_SERVER_UTIL_JSON_TEXT_H_
#define PITLANE_SERVER_UTIL_JSON_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace pitlane::json {

// Appends `text` to `out` as a JSON string, quotes included. '"', '\\' and control characters
// are escaped; valid UTF-8 is copied; each byte of an invalid UTF-8 sequence (a stray
// continuation byte, a truncated, overlong or surrogate sequence, anything above U+10FFFF)
// becomes U+FFFD, so the result is always valid UTF-8 and valid JSON.
void AppendString(absl::string_view text, std::string* out);

// Appends the shortest decimal that reads back as exactly `value` (std::to_chars); `null` for
// NaN and the infinities, which JSON cannot hold.
void AppendNumber(double value, std::string* out);

// Appends an integer.
void AppendInteger(std::uint64_t value, std::string* out);
void AppendInteger(std::int64_t value, std::string* out);

}  // namespace pitlane::json

#endif  // PITLANE_SERVER_UTIL_JSON_TEXT_H_
