// Client strings (ids, names) quoted back in error messages and log lines.
//
// A client chooses these strings, so quoted whole they could make a status message as large as
// the request (a 1 MiB session_id), break a log line in two (a newline) or pass for another
// field (a quote). Echo keeps them short and on one line:
//
//   absl::NotFoundError(absl::StrCat("session_id: no session \"", Echo(id), "\""));
#ifndef PITLANE_SERVER_UTIL_ECHO_H_
#define PITLANE_SERVER_UTIL_ECHO_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace pitlane {

// The most bytes of a client's string that Echo keeps, before escaping. Longer than any id
// the server makes ("s-" and 26 characters), so those are always echoed whole.
inline constexpr std::size_t kEchoMaxBytes = 64;

// `text` to put between quotes in a message: its first kEchoMaxBytes bytes, C-escaped
// (quotes, backslashes, control and non-ASCII bytes as \n, \", \xNN), followed by "..." when
// it was longer. At most 4 x kEchoMaxBytes + 3 bytes, whatever `text` holds.
std::string Echo(absl::string_view text);

}  // namespace pitlane

#endif  // PITLANE_SERVER_UTIL_ECHO_H_
