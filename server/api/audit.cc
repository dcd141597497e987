#include "server/api/audit.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "spdlog/spdlog.h"

namespace pitlane::api {
namespace {

bool IsSecretKey(absl::string_view key) {
  const std::string lower = absl::AsciiStrToLower(key);
  return absl::StrContains(lower, "token") || absl::StrContains(lower, "secret");
}

}  // namespace

std::string FormatAuditLine(absl::string_view peer, absl::string_view action,
                            absl::Span<const AuditField> fields) {
  std::string line = absl::StrCat("audit: peer=", Echo(peer), " action=", Echo(action));
  for (const AuditField& field : fields) {
    absl::StrAppend(&line, " ", Echo(field.key), "=\"",
                    IsSecretKey(field.key) ? "[redacted]" : Echo(field.value), "\"");
  }
  return line;
}

void Audit(absl::string_view peer, absl::string_view action,
           absl::Span<const AuditField> fields) {
  static const session::SteadyClock* const clock = new session::SteadyClock();
  static LogRateLimiter* const limiter =
      new LogRateLimiter(clock, kAuditLinesPerSecond, kAuditBurstLines);
  const LogRateLimiter::Decision decision = limiter->Acquire();
  if (!decision.allowed) return;
  if (decision.suppressed > 0) {
    spdlog::warn("audit: {} lines suppressed by the rate limit ({} a second)", decision.suppressed,
                 kAuditLinesPerSecond);
  }
  spdlog::info("{}", FormatAuditLine(peer, action, fields));
}

LogRateLimiter::LogRateLimiter(const session::Clock* clock, double rate_per_s, double burst)
    : clock_(clock),
      rate_per_ns_(rate_per_s * 1e-9),
      burst_(burst),
      tokens_(burst),
      last_ns_(clock->NowNanos()) {}

LogRateLimiter::Decision LogRateLimiter::Acquire() {
  absl::MutexLock lock(&mutex_);
  // Read under the lock, so that the times of successive calls never go back.
  const std::int64_t now_ns = clock_->NowNanos();
  tokens_ = std::min(burst_, tokens_ + static_cast<double>(now_ns - last_ns_) * rate_per_ns_);
  last_ns_ = now_ns;
  if (tokens_ < 1.0) {
    ++suppressed_;
    return {.allowed = false};
  }
  tokens_ -= 1.0;
  Decision decision = {.allowed = true, .suppressed = suppressed_};
  suppressed_ = 0;
  return decision;
}

}  // namespace pitlane::api
