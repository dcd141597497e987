#include "server/app/options.h"

#include <algorithm>
#include <array>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/util/status_macros.h"

namespace pitlane::app {
namespace {

// The names --log_level accepts, in order of severity.
constexpr std::array<std::pair<absl::string_view, spdlog::level::level_enum>, 7> kLogLevels = {{
    {"trace", spdlog::level::trace},
    {"debug", spdlog::level::debug},
    {"info", spdlog::level::info},
    {"warn", spdlog::level::warn},
    {"error", spdlog::level::err},
    {"critical", spdlog::level::critical},
    {"off", spdlog::level::off},
}};

absl::StatusOr<spdlog::level::level_enum> LogLevelFromFlag(absl::string_view name) {
  for (const auto& [level_name, level] : kLogLevels) {
    if (name == level_name) return level;
  }
  std::string names;
  for (const auto& [level_name, level] : kLogLevels) {
    absl::StrAppend(&names, names.empty() ? "" : ", ", level_name);
  }
  return absl::InvalidArgumentError(absl::StrCat("--log_level: must be one of ", names, ", got \"",
                                                 absl::CHexEscape(name), "\""));
}

absl::StatusOr<LogFormat> LogFormatFromFlag(absl::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return absl::InvalidArgumentError(
      absl::StrCat("--log_format: must be text or json, got \"", absl::CHexEscape(name), "\""));
}

// The message has CheckInRange's form, with the bounds printed as integers (1000000, not
// 1e+06).
absl::Status CheckFlagRange(absl::string_view flag, std::int64_t value, std::int64_t lo,
                            std::int64_t hi) {
  if (value >= lo && value <= hi) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, ": must be in [", lo, ", ", hi, "], got ", value));
}

absl::Status CheckIdleTimeout(double timeout_s) {
  if (timeout_s == 0.0) return absl::OkStatus();
  if (timeout_s >= kSessionIdleTimeoutMin_s && timeout_s <= kSessionIdleTimeoutMax_s) {
    return absl::OkStatus();  // NaN fails both comparisons and lands below.
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--session_idle_timeout: must be 0 (never) or in [", kSessionIdleTimeoutMin_s,
                   ", ", kSessionIdleTimeoutMax_s, "] seconds, got ", timeout_s));
}

// Both in the widest range a session allows, and min <= max.
absl::Status CheckBarrierTimeouts(double min_s, double max_s) {
  for (const auto& [flag, value] : {std::pair<absl::string_view, double>{"min", min_s},
                                    std::pair<absl::string_view, double>{"max", max_s}}) {
    // NaN fails both comparisons.
    if (!(value >= session::kMinBarrierTimeout_s && value <= session::kMaxBarrierTimeout_s)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--", flag, "_barrier_timeout_s: must be in [", session::kMinBarrierTimeout_s, ", ",
          session::kMaxBarrierTimeout_s, "] seconds, got ", value));
    }
  }
  if (min_s > max_s) {
    return absl::InvalidArgumentError(
        absl::StrCat("--min_barrier_timeout_s: must be at most --max_barrier_timeout_s (", max_s,
                     "), got ", min_s));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckListenAddress(absl::string_view address) {
  const auto invalid = [address](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen: must be host:port with a port in [0, 65535] (e.g. "
                     "127.0.0.1:50051 or [::1]:50051); ",
                     why, ", got \"", absl::CHexEscape(address), "\""));
  };
  const size_t colon = address.rfind(':');
  if (colon == absl::string_view::npos) return invalid("no port");
  const absl::string_view host = address.substr(0, colon);
  const absl::string_view port = address.substr(colon + 1);
  if (host.empty()) return invalid("no host");
  // An unbracketed IPv6 host would make the port ambiguous ("::1:50051").
  const bool bracketed = host.front() == '[' && host.back() == ']' && host.size() > 2;
  if (!bracketed && host.find_first_of(":[]") != absl::string_view::npos) {
    return invalid("an IPv6 host must be in brackets");
  }
  int port_number = -1;
  if (port.empty() || port.size() > 5 ||
      !std::all_of(port.begin(), port.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(port, &port_number) || port_number > 65535) {
    return invalid("the port is not a number in [0, 65535]");
  }
  return absl::OkStatus();
}

absl::StatusOr<StartupOptions> OptionsFromFlags(const FlagValues& flags, unsigned cpu_cores) {
  RETURN_IF_ERROR(CheckListenAddress(flags.listen));
  RETURN_IF_ERROR(
      CheckFlagRange("max_sessions", flags.max_sessions, kMaxSessionsMin, kMaxSessionsMax));
  RETURN_IF_ERROR(CheckFlagRange("max_vehicles_per_session", flags.max_vehicles_per_session,
                                 kMaxVehiclesPerSessionMin, kMaxVehiclesPerSessionMax));
  RETURN_IF_ERROR(CheckFlagRange("max_ticks_per_step", flags.max_ticks_per_step,
                                 kMaxTicksPerStepMin, kMaxTicksPerStepMax));
  RETURN_IF_ERROR(CheckFlagRange("max_contacts_per_tick", flags.max_contacts_per_tick,
                                 kMaxContactsPerTickMin, kMaxContactsPerTickMax));
  RETURN_IF_ERROR(CheckFlagRange("max_receive_message_mib", flags.max_receive_message_mib,
                                 kMaxReceiveMessageMibMin, kMaxReceiveMessageMibMax));
  RETURN_IF_ERROR(CheckFlagRange("max_send_message_mib", flags.max_send_message_mib,
                                 kMaxReceiveMessageMibMin, kMaxReceiveMessageMibMax));
  RETURN_IF_ERROR(
      CheckFlagRange("worker_threads", flags.worker_threads, kWorkerThreadsMin, kWorkerThreadsMax));
  RETURN_IF_ERROR(CheckIdleTimeout(flags.session_idle_timeout_s));
  RETURN_IF_ERROR(CheckBarrierTimeouts(flags.min_barrier_timeout_s, flags.max_barrier_timeout_s));

  StartupOptions options;
  ASSIGN_OR_RETURN(options.log_level, LogLevelFromFlag(flags.log_level));
  ASSIGN_OR_RETURN(options.log_format, LogFormatFromFlag(flags.log_format));

  ServerOptions& server = options.server;
  server.listen_address = flags.listen;
  server.limits = {
      .max_sessions = static_cast<std::uint32_t>(flags.max_sessions),
      .max_vehicles_per_session = static_cast<std::uint32_t>(flags.max_vehicles_per_session),
      .max_ticks_per_step = static_cast<std::uint32_t>(flags.max_ticks_per_step),
      .max_contacts_per_tick = static_cast<std::uint32_t>(flags.max_contacts_per_tick),
      .session_idle_timeout_s = flags.session_idle_timeout_s,
      .clock_limits = {.min_barrier_timeout_s = flags.min_barrier_timeout_s,
                       .max_barrier_timeout_s = flags.max_barrier_timeout_s},
  };
  // At most 1024 MiB, so the shift stays below 2^31.
  server.max_receive_message_bytes = static_cast<int>(flags.max_receive_message_mib) << 20;
  server.max_send_message_bytes = static_cast<int>(flags.max_send_message_mib) << 20;
  const std::int64_t workers =
      flags.worker_threads > 0 ? flags.worker_threads : static_cast<std::int64_t>(cpu_cores);
  server.worker_threads = static_cast<int>(std::clamp<std::int64_t>(workers, 1, kWorkerThreadsMax));
  server.scenario_dir = flags.scenario_dir;
  server.startup_scenario = flags.scenario;
  return options;
}

}  // namespace pitlane::app
