// Session ids that cannot be guessed: a session id is the only thing a client needs to drive,
// reset or delete a session, so it must not be derivable from another one.
#ifndef PITLANE_SERVER_SESSION_RANDOM_ID_H_
#define PITLANE_SERVER_SESSION_RANDOM_ID_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/util/random_bytes.h"

namespace pitlane::session {

// Characters in a session id after "s-": 128 random bits at 5 bits a character.
inline constexpr std::size_t kSessionIdRandomChars = 26;

// The longest replica name (--replica).
inline constexpr std::size_t kMaxReplicaNameChars = 32;

// Whether `name` may name a replica (--replica): 1 to kMaxReplicaNameChars of a-z, 0-9 and
// '-', beginning and ending with a letter or digit (a DNS label: a Kubernetes pod's name is
// one), so that it ends a session id unambiguously and a proxy can match it.
bool IsReplicaName(absl::string_view name);

// A new session id: "s-" and kSessionIdRandomChars characters of Base32Lowercase over 128
// bits from the OS's CSPRNG (FillRandom), then, on a server that is one of several replicas
// behind a proxy, "." and `replica` (IsReplicaName): the routing key a proxy sends every call
// about the session to its replica by (docs/deployment.md). Internal if the OS has no
// randomness to give, never a weaker id.
absl::StatusOr<std::string> NewSessionId(absl::string_view replica = "");

using ::pitlane::Base32Lowercase;

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_RANDOM_ID_H_
