#include "server/app/log_format.h"

#include <time.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "grpc/support/log.h"
#include "server/api/audit.h"
#include "server/session/clock.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/stdout_sinks.h"

namespace pitlane::app {
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

void AppendJsonString(absl::string_view text, std::string* out) {
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
  AppendJsonString(absl::string_view(level.data(), level.size()), &line);
  line.append(",\"message\":");
  AppendJsonString(absl::string_view(msg.payload.data(), msg.payload.size()), &line);
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
