#include "server/app/log_format.h"

#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "grpc/support/log.h"
#include "server/api/audit.h"
#include "server/session/clock.h"
#include "server/util/json_text.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace pitlane::app {
namespace {

// gRPC's own messages, e.g. why a bind failed ("Address already in use"), logged by our logger
// so that a JSON log stays all JSON. gRPC drops those below its verbosity (GRPC_VERBOSITY,
// ERROR by default) before calling this. Clients can make gRPC write them (a failed TLS
// handshake is one ERROR line per connection), so they pass a rate limit of their own: the
// start-up messages fit in its burst.
void LogGrpcMessage(gpr_log_func_args* args) {
  static const session::SteadyClock* const clock = new session::SteadyClock();
  static api::LogRateLimiter* const limiter =
      new api::LogRateLimiter(clock, kGrpcLinesPerSecond, kGrpcBurstLines);
  spdlog::level::level_enum level = spdlog::level::debug;
  if (args->severity == GPR_LOG_SEVERITY_INFO) level = spdlog::level::info;
  if (args->severity == GPR_LOG_SEVERITY_ERROR) level = spdlog::level::err;
  if (!spdlog::should_log(level)) return;  // Filtered lines take nothing from the budget.
  const api::LogRateLimiter::Decision decision = limiter->Acquire();
  if (!decision.allowed) return;
  if (decision.suppressed > 0) {
    spdlog::warn("grpc: {} lines suppressed by the rate limit ({} a second)", decision.suppressed,
                 kGrpcLinesPerSecond);
  }
  spdlog::log(level, "grpc: {} ({}:{})", args->message, args->file, args->line);
}

}  // namespace

void JsonLogFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  const auto since_epoch = msg.time.time_since_epoch();
  const std::time_t seconds = std::chrono::duration_cast<std::chrono::seconds>(since_epoch).count();
  const auto micros =
      std::chrono::duration_cast<std::chrono::microseconds>(since_epoch).count() % 1'000'000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char time_text[64];
  std::snprintf(time_text, sizeof(time_text), "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ",
                utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min,
                utc.tm_sec, static_cast<long long>(micros));

  std::string line = "{\"time\":\"";
  line.append(time_text);
  line.append("\",\"level\":");
  const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
  json::AppendString(absl::string_view(level.data(), level.size()), &line);
  line.append(",\"message\":");
  json::AppendString(absl::string_view(msg.payload.data(), msg.payload.size()), &line);
  line.append("}\n");
  dest.append(line.data(), line.data() + line.size());
}

std::unique_ptr<spdlog::formatter> JsonLogFormatter::clone() const {
  return std::make_unique<JsonLogFormatter>();
}

void SetUpLogging(spdlog::level::level_enum level, LogFormat format) {
  std::shared_ptr<spdlog::logger> logger;
  switch (format) {
    case LogFormat::kText:
      logger = spdlog::stderr_color_mt("pitlane");
      break;
    case LogFormat::kJson:
      // No colour codes: a collector parses the line.
      logger = spdlog::stderr_logger_mt("pitlane");
      logger->set_formatter(std::make_unique<JsonLogFormatter>());
      break;
  }
  logger->set_level(level);
  spdlog::set_default_logger(std::move(logger));
  spdlog::set_level(level);
  gpr_set_log_function(&LogGrpcMessage);
}

}  // namespace pitlane::app
