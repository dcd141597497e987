// Session ids that cannot be guessed: a session id is the only thing a client needs to drive,
// reset or delete a session, so it must not be derivable from another one.
#ifndef PITLANE_SERVER_SESSION_RANDOM_ID_H_
#define PITLANE_SERVER_SESSION_RANDOM_ID_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/util/random_bytes.h"

namespace pitlane::session {

// Characters in a session id after "s-": 128 random bits at 5 bits a character.
inline constexpr std::size_t kSessionIdRandomChars = 26;

// A new session id: "s-" and kSessionIdRandomChars characters of Base32Lowercase over 128
// bits from the OS's CSPRNG (FillRandom). Internal if the OS has no randomness to give, never
// a weaker id.
absl::StatusOr<std::string> NewSessionId();

using ::pitlane::Base32Lowercase;

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_RANDOM_ID_H_
