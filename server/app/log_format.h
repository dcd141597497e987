// How the server's log lines look on stderr (--log_format): spdlog's text pattern for people,
// or one JSON object per line for log collectors:
//
//   {"time":"2026-11-25T11:29:19.123456Z","level":"info","message":"server started: ..."}
//
// Messages may carry what clients sent (session names, peer addresses), so every byte is
// escaped: a line is valid JSON whatever the message holds, invalid UTF-8 included.
#ifndef PITLANE_SERVER_APP_LOG_FORMAT_H_
#define PITLANE_SERVER_APP_LOG_FORMAT_H_

#include <memory>
#include <string>

#include "absl/strings/string_view.h"
#include "server/app/options.h"
#include "spdlog/formatter.h"
#include "spdlog/spdlog.h"

namespace pitlane::app {

// Formats each spdlog message as one JSON object: "time" (UTC, ISO 8601 with microseconds),
// "level" (spdlog's name: trace, debug, info, warning, error, critical) and "message".
class JsonLogFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override;
  std::unique_ptr<spdlog::formatter> clone() const override;
};

// gRPC's own log lines (a failed TLS handshake writes one per connection) pass a process-wide
// token bucket of their own: this many a second, in bursts of at most kGrpcBurstLines.
inline constexpr double kGrpcLinesPerSecond = 10.0;
inline constexpr double kGrpcBurstLines = 50.0;

// Makes the process's default logger write to stderr at `level` in `format`, and gRPC's own
// messages go through it too.
void SetUpLogging(spdlog::level::level_enum level, LogFormat format);

}  // namespace pitlane::app

#endif  // PITLANE_SERVER_APP_LOG_FORMAT_H_
