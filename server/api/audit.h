// Audit lines: one line at info for every change a client makes (a session created, deleted or
// reset, vehicles spawned or removed, obstacles, clock changes, a controller attaching or
// leaving), naming the client's address. A handler calls, after the change succeeded:
//
//   Audit(context->peer(), "session.create", {{"session", id}, {"name", config.name()}});
//   Audit(context->peer(), "vehicles.spawn", {{"session", id}, {"count", ids.size()}});
//
// which logs
//
//   audit: peer=ipv4:127.0.0.1:51234 action=session.create session="s-..." name="demo"
//
// Clients trigger these lines, so they must not be able to flood the log or forge lines:
// every value (and the peer) is cut to kAuditValueMaxBytes and C-escaped (Echo: quotes,
// backslashes, control and non-ASCII bytes as \xNN), values of a key naming a token or secret are
// never written, and the lines pass a process-wide token bucket (kAuditLinesPerSecond, bursts of
// kAuditBurstLines); the lines refused are counted and reported by the next line let through
// ("audit: N lines suppressed by the rate limit").
#ifndef PITLANE_SERVER_API_AUDIT_H_
#define PITLANE_SERVER_API_AUDIT_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/session/clock.h"
#include "server/util/echo.h"

namespace pitlane::api {

// The longest peer or value written, bytes before escaping; longer ones end in "...".
inline constexpr size_t kAuditValueMaxBytes = kEchoMaxBytes;
// Sustained audit lines per second for the whole process, and the burst above it.
inline constexpr double kAuditLinesPerSecond = 100.0;
inline constexpr double kAuditBurstLines = 200.0;

// One key=value of an audit line. The value is anything absl::StrCat takes (strings, numbers).
struct AuditField {
  // Keeps one byte past kAuditValueMaxBytes, so that a huge client string is not copied whole
  // and Audit still knows it was cut.
  AuditField(absl::string_view key, const absl::AlphaNum& value)
      : key(key), value(value.Piece().substr(0, kAuditValueMaxBytes + 1)) {}
  absl::string_view key;  // A fixed name chosen by the handler.
  std::string value;      // Escaped (and cut to kAuditValueMaxBytes) when written.
};

// Logs one audit line at info, if the process-wide rate limit lets it through. `peer` is
// grpc::ServerContext::peer(); `action` a fixed name like "session.create"; never pass a token
// (a field whose key contains "token" or "secret" is written as [redacted]). Thread-safe.
void Audit(absl::string_view peer, absl::string_view action,
           absl::Span<const AuditField> fields = {});

// The audit line Audit writes, without the rate limit: for tests and for callers that log
// through their own limiter.
std::string FormatAuditLine(absl::string_view peer, absl::string_view action,
                            absl::Span<const AuditField> fields);

// A token bucket: `rate_per_s` lines a second on average, at most `burst` at once. Counts the
// lines it refuses so that the next line let through can say how many were lost. Thread-safe.
class LogRateLimiter {
 public:
  // `clock` is not owned and must outlive the limiter. The bucket starts full.
  LogRateLimiter(const session::Clock* clock, double rate_per_s, double burst);

  // Whether a line may be written now; takes a token if so.
  struct Decision {
    bool allowed = false;
    // When allowed: the lines refused since the last one allowed (to report, then reset).
    std::int64_t suppressed = 0;
  };
  Decision Acquire();

 private:
  const session::Clock* const clock_;
  const double rate_per_ns_;
  const double burst_;
  absl::Mutex mutex_;
  double tokens_ ABSL_GUARDED_BY(mutex_);
  std::int64_t last_ns_ ABSL_GUARDED_BY(mutex_);
  std::int64_t suppressed_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_AUDIT_H_
