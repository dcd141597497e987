// The server's command line, checked. Every flag's allowed range lives here, in one place, so
// that main.cc, its --help, docs/operations.md and the tests agree; main.cc only reads the
// flags into FlagValues and exits 2 with the message when OptionsFromFlags refuses them.
#ifndef PITLANE_SERVER_APP_OPTIONS_H_
#define PITLANE_SERVER_APP_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/app/server.h"
#include "spdlog/common.h"

namespace pitlane::app {

// Allowed ranges, inclusive. Wider than any real deployment needs, narrow enough that no
// value can overflow a conversion (max_receive_message_mib << 20 must fit in an int) or make
// the server refuse everything (a limit of 0).
inline constexpr std::int64_t kMaxSessionsMin = 1;
inline constexpr std::int64_t kMaxSessionsMax = 100'000;
inline constexpr std::int64_t kMaxVehiclesPerSessionMin = 1;
inline constexpr std::int64_t kMaxVehiclesPerSessionMax = 1'000'000;
inline constexpr std::int64_t kMaxTicksPerStepMin = 1;
inline constexpr std::int64_t kMaxTicksPerStepMax = 1'000'000;
inline constexpr std::int64_t kMaxContactsPerTickMin = 1;
inline constexpr std::int64_t kMaxContactsPerTickMax = 10'000'000;
inline constexpr std::int64_t kMaxReceiveMessageMibMin = 1;
inline constexpr std::int64_t kMaxReceiveMessageMibMax = 1024;
// 0 means one per CPU core (itself capped at the maximum).
inline constexpr std::int64_t kWorkerThreadsMin = 0;
inline constexpr std::int64_t kWorkerThreadsMax = 256;
// 0 means never; otherwise at least a second (a shorter one would reap sessions between two
// calls of an ordinary client) and at most about 115 days.
inline constexpr double kSessionIdleTimeoutMin_s = 1.0;
inline constexpr double kSessionIdleTimeoutMax_s = 1e7;
// --min_barrier_timeout_s and --max_barrier_timeout_s: each within the widest range a session
// allows (session::kMinBarrierTimeout_s, kMaxBarrierTimeout_s), min <= max.

// How log lines are written to stderr.
enum class LogFormat {
  kText,  // spdlog's default pattern, for people.
  kJson,  // One JSON object per line (see log_format.h), for log collectors.
};

// The flags as parsed, before any check: each field is its flag's value, out of range or not.
// Integers are 64-bit so that a negative or huge value reaches the range check instead of
// wrapping.
struct FlagValues {
  std::string listen = "127.0.0.1:50051";
  std::string http_listen = "127.0.0.1:8080";  // "" for no HTTP endpoint.
  std::string metrics_listen;                  // "" for none.
  std::int64_t max_sessions = 256;
  std::int64_t max_vehicles_per_session = 100'000;
  std::int64_t max_ticks_per_step = 10'000;
  std::int64_t max_contacts_per_tick = 100'000;
  std::int64_t max_receive_message_mib = 64;
  std::int64_t max_send_message_mib = 64;
  std::string log_level = "info";
  std::string log_format = "text";
  std::int64_t worker_threads = 0;
  double session_idle_timeout_s = 3600.0;
  double min_barrier_timeout_s = session::kMinBarrierTimeout_s;
  double max_barrier_timeout_s = session::kMaxBarrierTimeout_s;
  std::string scenario;
  std::string scenario_dir;
  std::string auth = "auto";
  std::string admin_token_file;
  // The environment's PITLANE_ADMIN_TOKEN (main.cc reads it); used when no file is given.
  std::string admin_token_env;
  bool allow_unauthenticated_remote_access = false;
  std::int64_t max_sessions_per_client = 8;
  std::int64_t max_tokens_per_session = 1'000;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  std::string replica;  // "" for a server on its own.
  std::string record_dir;  // "" for no recording.
  std::int64_t record_quota_mib = 10240;
  std::int64_t max_recording_mib = 1024;
  double max_recording_s = 3600.0;
  std::int64_t max_recordings = 16;
};

inline constexpr std::int64_t kMaxSessionsPerClientMin = 1;
inline constexpr std::int64_t kMaxSessionsPerClientMax = 100'000;
inline constexpr std::int64_t kMaxTokensPerSessionMin = 1;
inline constexpr std::int64_t kMaxTokensPerSessionMax = 1'000'000;
inline constexpr std::int64_t kRecordQuotaMibMin = 1;
inline constexpr std::int64_t kRecordQuotaMibMax = std::int64_t{1} << 24;  // 16 TiB.
inline constexpr std::int64_t kMaxRecordingMibMin = 1;
inline constexpr std::int64_t kMaxRecordingMibMax = std::int64_t{1} << 20;  // 1 TiB.
inline constexpr double kMaxRecordingMin_s = 1.0;
inline constexpr double kMaxRecordingMax_s = 1e7;
inline constexpr std::int64_t kMaxRecordingsMin = 1;
inline constexpr std::int64_t kMaxRecordingsMax = 1000;
// The environment variable that may hold the admin token.
inline constexpr char kAdminTokenEnv[] = "PITLANE_ADMIN_TOKEN";

// The checked command line: what the server and the logger are started with.
struct StartupOptions {
  ServerOptions server;
  spdlog::level::level_enum log_level = spdlog::level::info;
  LogFormat log_format = LogFormat::kText;
  // --auth=token without an admin token given: server.admin_token was generated here, and
  // main.cc prints it once.
  bool admin_token_generated = false;
  // Whether the port serves TLS (server.credentials).
  bool tls = false;
  // Valid but risky choices, for main.cc to log as warnings once the logger is up.
  std::vector<std::string> warnings;
};

// Checks every flag and converts them; reads the admin token and TLS files they name. --auth=auto
// is token when --listen or --http_listen is not a loopback address or an admin token is given,
// none otherwise; --auth=none on a non-loopback address needs
// --allow_unauthenticated_remote_access. `cpu_cores` (std::thread::hardware_concurrency(), which
// may be 0 when unknown) sizes worker_threads = 0. InvalidArgument naming the flag and its allowed
// range, e.g. "--max_sessions: must be in [1, 100000], got 0", for the first flag out of range.
absl::StatusOr<StartupOptions> OptionsFromFlags(const FlagValues& flags, unsigned cpu_cores);

// Checks that `address` is host:port with a port in [0, 65535] and a non-empty host, an IPv6
// host in brackets ([::1]:50051). InvalidArgument naming --`flag` otherwise.
absl::Status CheckListenAddress(absl::string_view address, absl::string_view flag = "listen");

// CheckListenAddress, and an IPv4 host (the HTTP endpoint's library takes no other form).
absl::Status CheckHttpListenAddress(absl::string_view address, absl::string_view flag);

}  // namespace pitlane::app

#endif  // PITLANE_SERVER_APP_OPTIONS_H_
