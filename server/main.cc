// pitlane-server: flags, logging, wiring and signals. Everything else lives in the layers.
//
// Exit codes: 0 after SIGINT or SIGTERM; 2 for a bad command line (an unknown flag, a value
// that does not parse or is out of its range, a stray argument), checked before anything
// starts; 1 when valid flags cannot start the server (the --listen port is taken, the
// --scenario cannot be loaded).
#include <signal.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/config.h"
#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/app/banner.h"
#include "server/app/healthcheck.h"
#include "server/app/log_format.h"
#include "server/app/options.h"
#include "server/app/server.h"
#include "server/auth/tokens.h"
#include "server/web/assets.h"
#include "spdlog/spdlog.h"

// Integer flags are 64-bit so that a negative or huge value reaches OptionsFromFlags, which
// names the allowed range, instead of wrapping. The ranges are in server/app/options.h.
ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "host:port for gRPC. Port 0 picks a free port. Use 0.0.0.0:50051 to accept remote "
          "clients (e.g. a classroom or a container).");
ABSL_FLAG(std::string, http_listen, "127.0.0.1:8080",
          "host:port of the HTTP endpoint: /healthz, /readyz and /metrics (Prometheus; with "
          "tokens on it needs the admin token). Port 0 picks a free port; empty turns it off.");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port serving /metrics alone, to whoever can reach it (for a Prometheus on a "
          "network of its own). Empty: none.");
ABSL_FLAG(std::int64_t, max_sessions, 256, "Most sessions alive at once; 1..100000.");
ABSL_FLAG(std::int64_t, max_vehicles_per_session, 100000,
          "Most vehicles in one session: the default and the cap of a session's max_vehicles; "
          "1..1000000.");
ABSL_FLAG(std::int64_t, max_ticks_per_step, 10000,
          "Most ticks one Step call may advance; 1..1000000.");
ABSL_FLAG(std::int64_t, max_contacts_per_tick, 100000,
          "Most contacts one tick of a session keeps (56 bytes each in the state and in every "
          "frame); beyond, the first found are kept and the rest counted "
          "(WorldState.dropped_contacts); 1..10000000.");
ABSL_FLAG(std::int64_t, max_receive_message_mib, 64, "Largest request accepted, MiB; 1..1024.");
ABSL_FLAG(std::int64_t, max_send_message_mib, 64,
          "Largest response or stream message sent, MiB; a bigger one is refused with "
          "RESOURCE_EXHAUSTED saying how to ask for less; 1..1024.");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error, critical or off.");
ABSL_FLAG(std::string, log_format, "text",
          "text (for people) or json (one JSON object per line, for log collectors).");
ABSL_FLAG(std::int64_t, worker_threads, 0,
          "Threads that step every session; 0 = one per CPU core; 0..256.");
ABSL_FLAG(std::string, scenario, "",
          "A scenario to create a session from at start, e.g. demo (shipped: demo, oval-race, "
          "parking-lot, intersection, highway); empty for none.");
ABSL_FLAG(std::string, scenario_dir, "",
          "A directory of <name>.textproto scenarios that CreateSession may name, beside the "
          "shipped ones.");
ABSL_FLAG(double, session_idle_timeout, 3600.0,
          "Seconds a session may go without a client call or an open stream before it is "
          "deleted; 0 = never, otherwise 1..1e7.");
ABSL_FLAG(double, min_barrier_timeout_s, 0.001,
          "Shortest barrier_timeout_s a BARRIER session may set, seconds; 0.001..60, at most "
          "--max_barrier_timeout_s.");
ABSL_FLAG(double, max_barrier_timeout_s, 60.0,
          "Longest barrier_timeout_s a BARRIER session may set, seconds: how long one silent "
          "controller can hold each tick of a race; 0.001..60.");
ABSL_FLAG(std::string, auth, "auto",
          "Who may do what: token (every call shows a token: admin, session owner, vehicle "
          "driver or viewer; see docs/security.md), none (anyone may do everything), or auto: "
          "token when --listen is not a loopback address or an admin token is given, none "
          "otherwise.");
ABSL_FLAG(std::string, admin_token_file, "",
          "A file holding the admin token (make one with --new_token). Otherwise the "
          "PITLANE_ADMIN_TOKEN environment variable; with neither, --auth=token generates one "
          "and prints it once.");
ABSL_FLAG(bool, allow_unauthenticated_remote_access, false,
          "Lets --auth=none serve a non-loopback --listen address, where anyone who can reach "
          "the port may control and delete every session.");
ABSL_FLAG(std::int64_t, max_sessions_per_client, 8,
          "Most sessions one client may hold at once (an admin token and, with --auth=none, "
          "clients on this machine are not limited); 1..100000.");
ABSL_FLAG(std::int64_t, max_tokens_per_session, 1000,
          "Most live tokens (owner, driver, viewer) one session may hold; 1..1000000.");
ABSL_FLAG(std::string, tls_cert_file, "",
          "A PEM certificate (chain) to serve TLS with, with --tls_key_file; plaintext clients "
          "are then refused.");
ABSL_FLAG(std::string, tls_key_file, "", "The PEM private key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM certificates of the CAs whose client certificates are accepted: mutual TLS; "
          "clients without such a certificate are refused.");
ABSL_FLAG(std::string, replica, "",
          "This server's name among several behind a proxy (docs/deployment.md): it ends every "
          "session id (s-<26 characters>.<replica>), the key the proxy routes a session's calls "
          "by. 1 to 32 characters of a-z, 0-9 and '-' (a Kubernetes pod name); empty: none.");
ABSL_FLAG(std::string, record_dir, "",
          "A directory to write recordings in (StartRecording; docs/recording.md); empty: "
          "recording is off.");
ABSL_FLAG(std::int64_t, record_quota_mib, 10240,
          "Most MiB all the recordings in --record_dir may hold, those already there "
          "included; 1..16777216.");
ABSL_FLAG(std::int64_t, max_recording_mib, 1024,
          "Largest recording, MiB (a recording's max_bytes: its default and upper bound); "
          "1..1048576.");
ABSL_FLAG(double, max_recording_s, 3600.0,
          "Longest recording, seconds of simulated time (a recording's max_duration_s: its "
          "default and upper bound); 1..10000000.");
ABSL_FLAG(std::int64_t, max_recordings, 16, "Most recordings at once; 1..1000.");
ABSL_FLAG(bool, healthcheck, false,
          "Asks the server started with the same flags whether it is ready (its HTTP endpoint's "
          "/readyz on --http_listen) and exits 0 if so, 1 if not: a container's HEALTHCHECK.");
ABSL_FLAG(bool, new_token, false, "Prints a new random token (for --admin_token_file) and exits.");

// Abseil reports each flag it cannot parse (an unknown name, "abc" for a number) on stderr,
// calls this hook and later exits 1. Exiting here makes every command-line error exit 2, the
// code OptionsFromFlags's refusals exit with.
extern "C" void ABSL_INTERNAL_C_SYMBOL(AbslInternalReportFatalUsageError)(absl::string_view) {
  std::fputs("pitlane-server: run with --help for every flag and its allowed values\n", stderr);
  std::_Exit(2);
}

namespace {

constexpr int kExitBadCommandLine = 2;
constexpr int kExitCannotStart = 1;

constexpr absl::string_view kUsage =
    "Pitlane simulation server: many lockstep vehicle-simulation sessions over gRPC.\n"
    "Usage: pitlane-server [--listen=127.0.0.1:50051] [flags]";

// Pitlane's own flags, in the order --help lists them.
std::vector<const absl::CommandLineFlag*> PitlaneFlags() {
  return {&absl::GetFlagReflectionHandle(FLAGS_listen),
          &absl::GetFlagReflectionHandle(FLAGS_http_listen),
          &absl::GetFlagReflectionHandle(FLAGS_metrics_listen),
          &absl::GetFlagReflectionHandle(FLAGS_max_sessions),
          &absl::GetFlagReflectionHandle(FLAGS_max_vehicles_per_session),
          &absl::GetFlagReflectionHandle(FLAGS_max_ticks_per_step),
          &absl::GetFlagReflectionHandle(FLAGS_max_contacts_per_tick),
          &absl::GetFlagReflectionHandle(FLAGS_max_receive_message_mib),
          &absl::GetFlagReflectionHandle(FLAGS_max_send_message_mib),
          &absl::GetFlagReflectionHandle(FLAGS_log_level),
          &absl::GetFlagReflectionHandle(FLAGS_log_format),
          &absl::GetFlagReflectionHandle(FLAGS_worker_threads),
          &absl::GetFlagReflectionHandle(FLAGS_session_idle_timeout),
          &absl::GetFlagReflectionHandle(FLAGS_min_barrier_timeout_s),
          &absl::GetFlagReflectionHandle(FLAGS_max_barrier_timeout_s),
          &absl::GetFlagReflectionHandle(FLAGS_scenario),
          &absl::GetFlagReflectionHandle(FLAGS_scenario_dir),
          &absl::GetFlagReflectionHandle(FLAGS_auth),
          &absl::GetFlagReflectionHandle(FLAGS_admin_token_file),
          &absl::GetFlagReflectionHandle(FLAGS_allow_unauthenticated_remote_access),
          &absl::GetFlagReflectionHandle(FLAGS_max_sessions_per_client),
          &absl::GetFlagReflectionHandle(FLAGS_max_tokens_per_session),
          &absl::GetFlagReflectionHandle(FLAGS_tls_cert_file),
          &absl::GetFlagReflectionHandle(FLAGS_tls_key_file),
          &absl::GetFlagReflectionHandle(FLAGS_tls_client_ca_file),
          &absl::GetFlagReflectionHandle(FLAGS_replica),
          &absl::GetFlagReflectionHandle(FLAGS_record_dir),
          &absl::GetFlagReflectionHandle(FLAGS_record_quota_mib),
          &absl::GetFlagReflectionHandle(FLAGS_max_recording_mib),
          &absl::GetFlagReflectionHandle(FLAGS_max_recording_s),
          &absl::GetFlagReflectionHandle(FLAGS_max_recordings),
          &absl::GetFlagReflectionHandle(FLAGS_healthcheck),
          &absl::GetFlagReflectionHandle(FLAGS_new_token)};
}

// The environment variable that sets --`flag` when the command line does not (for containers):
// PITLANE_ and the flag's name in capitals, e.g. PITLANE_HTTP_LISTEN. --healthcheck and
// --new_token, which change what the process does, have none.
std::string EnvironmentName(absl::string_view flag) {
  if (flag == "healthcheck" || flag == "new_token") return "";
  return absl::StrCat("PITLANE_", absl::AsciiStrToUpper(flag));
}

// Sets each flag whose environment variable is set (before the command line is parsed, so
// that the command line wins). False, having said why on stderr, for a value that does not
// parse.
bool ApplyEnvironment() {
  for (const absl::CommandLineFlag* flag : PitlaneFlags()) {
    const std::string variable = EnvironmentName(flag->Name());
    const char* value = variable.empty() ? nullptr : std::getenv(variable.c_str());
    if (value == nullptr) continue;
    std::string error;
    if (!absl::FindCommandLineFlag(flag->Name())->ParseFrom(value, &error)) {
      std::fprintf(stderr, "pitlane-server: %s (for --%s): %s\n", variable.c_str(),
                   std::string(flag->Name()).c_str(), error.c_str());
      return false;
    }
  }
  return true;
}

// Abseil's --help lists the flags of files it deems "main" by a naming rule our sources do
// not follow ("No flags matched"), and exits 1; ours lists exactly our flags and exits 0.
bool WantsHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-help" || arg == "-h") return true;
  }
  return false;
}

void PrintHelp() {
  std::string help = absl::StrCat(kUsage,
                                  "\n\nFlags (--name=value; --flagfile=FILE reads them "
                                  "from a file; the environment variable named sets a flag "
                                  "the command line does not; --helpfull lists Abseil's "
                                  "flags too):\n");
  for (const absl::CommandLineFlag* flag : PitlaneFlags()) {
    const std::string default_value = flag->DefaultValue();
    const std::string variable = EnvironmentName(flag->Name());
    absl::StrAppend(&help, "  --", flag->Name(), " (default ",
                    default_value.empty() ? "\"\"" : default_value,
                    variable.empty() ? "" : absl::StrCat("; environment ", variable), ")\n      ",
                    flag->Help(), "\n");
  }
  absl::StrAppend(&help,
                  "\nExit codes: 0 after SIGINT or SIGTERM; 1 if the server cannot start (the "
                  "--listen port is taken, the --scenario cannot be loaded); 2 for a bad command "
                  "line.\n");
  std::fputs(help.c_str(), stdout);
}

pitlane::app::FlagValues ReadFlags() {
  return {
      .listen = absl::GetFlag(FLAGS_listen),
      .http_listen = absl::GetFlag(FLAGS_http_listen),
      .metrics_listen = absl::GetFlag(FLAGS_metrics_listen),
      .max_sessions = absl::GetFlag(FLAGS_max_sessions),
      .max_vehicles_per_session = absl::GetFlag(FLAGS_max_vehicles_per_session),
      .max_ticks_per_step = absl::GetFlag(FLAGS_max_ticks_per_step),
      .max_contacts_per_tick = absl::GetFlag(FLAGS_max_contacts_per_tick),
      .max_receive_message_mib = absl::GetFlag(FLAGS_max_receive_message_mib),
      .max_send_message_mib = absl::GetFlag(FLAGS_max_send_message_mib),
      .log_level = absl::GetFlag(FLAGS_log_level),
      .log_format = absl::GetFlag(FLAGS_log_format),
      .worker_threads = absl::GetFlag(FLAGS_worker_threads),
      .session_idle_timeout_s = absl::GetFlag(FLAGS_session_idle_timeout),
      .min_barrier_timeout_s = absl::GetFlag(FLAGS_min_barrier_timeout_s),
      .max_barrier_timeout_s = absl::GetFlag(FLAGS_max_barrier_timeout_s),
      .scenario = absl::GetFlag(FLAGS_scenario),
      .scenario_dir = absl::GetFlag(FLAGS_scenario_dir),
      .auth = absl::GetFlag(FLAGS_auth),
      .admin_token_file = absl::GetFlag(FLAGS_admin_token_file),
      .admin_token_env = std::getenv(pitlane::app::kAdminTokenEnv) != nullptr
                             ? std::getenv(pitlane::app::kAdminTokenEnv)
                             : "",
      .allow_unauthenticated_remote_access =
          absl::GetFlag(FLAGS_allow_unauthenticated_remote_access),
      .max_sessions_per_client = absl::GetFlag(FLAGS_max_sessions_per_client),
      .max_tokens_per_session = absl::GetFlag(FLAGS_max_tokens_per_session),
      .tls_cert_file = absl::GetFlag(FLAGS_tls_cert_file),
      .tls_key_file = absl::GetFlag(FLAGS_tls_key_file),
      .tls_client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file),
      .replica = absl::GetFlag(FLAGS_replica),
      .record_dir = absl::GetFlag(FLAGS_record_dir),
      .record_quota_mib = absl::GetFlag(FLAGS_record_quota_mib),
      .max_recording_mib = absl::GetFlag(FLAGS_max_recording_mib),
      .max_recording_s = absl::GetFlag(FLAGS_max_recording_s),
      .max_recordings = absl::GetFlag(FLAGS_max_recordings),
  };
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

// Blocks SIGINT and SIGTERM in every thread (call before any thread starts) and returns the
// set, so that the main thread alone takes them with sigwait.
sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  // Debian's Abseil checks every Mutex acquisition for lock-order cycles (a debugging aid that
  // costs on every lock); the tests keep it, the server does not pay for it.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // --helpfull names each flag's file: from server/ on, not the build machine's path.
  absl::FlagsUsageConfig usage_config;
  usage_config.normalize_filename = [](absl::string_view file) {
    const size_t server = file.rfind("server/");
    return std::string(server == absl::string_view::npos ? file : file.substr(server));
  };
  absl::SetFlagsUsageConfig(usage_config);
  if (WantsHelp(argc, argv)) {
    PrintHelp();
    return 0;
  }
  if (!ApplyEnvironment()) return kExitBadCommandLine;
  const std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    std::fprintf(stderr,
                 "pitlane-server: unexpected argument \"%s\"; flags are --name=value (see "
                 "--help)\n",
                 positional[1]);
    return kExitBadCommandLine;
  }
  if (absl::GetFlag(FLAGS_new_token)) {
    const absl::StatusOr<std::string> token = pitlane::auth::NewToken();
    if (!token.ok()) {
      std::fprintf(stderr, "pitlane-server: %s\n", std::string(token.status().message()).c_str());
      return kExitCannotStart;
    }
    std::printf("%s\n", token->c_str());
    return 0;
  }
  if (absl::GetFlag(FLAGS_healthcheck)) {
    // Only --http_listen matters: the other flags may be the server's own (a container's
    // environment), which this process does not start.
    const absl::Status ready =
        pitlane::app::CheckReady(absl::GetFlag(FLAGS_http_listen), absl::Seconds(3));
    if (!ready.ok()) {
      std::fprintf(stderr, "pitlane-server: not ready: %s\n",
                   std::string(ready.message()).c_str());
      return 1;
    }
    std::puts("ready");
    return 0;
  }
  absl::StatusOr<pitlane::app::StartupOptions> startup =
      pitlane::app::OptionsFromFlags(ReadFlags(), std::thread::hardware_concurrency());
  if (!startup.ok()) {
    std::fprintf(stderr, "pitlane-server: %s\n", std::string(startup.status().message()).c_str());
    return kExitBadCommandLine;
  }
  const pitlane::app::ServerOptions& options = startup->server;

  // Logs go to stderr; stdout carries only the banner below.
  pitlane::app::SetUpLogging(startup->log_level, startup->log_format);

  const sigset_t signals = BlockShutdownSignals();

  auto server = pitlane::app::Server::Start(options);
  if (!server.ok()) {
    spdlog::critical("{}", std::string(server.status().message()));
    return kExitCannotStart;
  }
  spdlog::info(
      "server started: max {} sessions, {} vehicles per session, {} ticks per Step; "
      "barrier_timeout_s in [{}, {}]; auth {}, {}",
      options.limits.max_sessions, options.limits.max_vehicles_per_session,
      options.limits.max_ticks_per_step, options.limits.clock_limits.min_barrier_timeout_s,
      options.limits.clock_limits.max_barrier_timeout_s,
      options.access.mode == pitlane::api::AuthMode::kToken ? "token" : "none",
      startup->tls ? "TLS" : "plaintext");
  for (const std::string& warning : startup->warnings) spdlog::warn("{}", warning);
  // Plain stdout, for people and for scripts that wait for the port.
  std::fputs(pitlane::app::Banner((*server)->address(), HostName(), options.startup_scenario,
                                  (*server)->startup_session_id(), (*server)->http_address(),
                                  (*server)->metrics_address(), pitlane::web::PythonWheelPath())
                 .c_str(),
             stdout);
  if (startup->admin_token_generated) {
    // Once, on stdout (never in the logs): the operator's key to every session.
    std::printf(
        "Admin token (generated, shown once; pass --admin_token_file to choose one): %s\n",
        options.admin_token.c_str());
  }
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("signal {} received; shutting down", signal_number);
  (*server)->Shutdown();
  spdlog::info("server stopped");
  // Everything is drained and stopped; what is left is freeing memory. gRPC's own teardown
  // (grpc_shutdown, from the gRPC server's destructor) can wait forever for a thread of its
  // own after an allocation failed (seen under `ulimit -v` in tests/e2e/test_budgets.py), so
  // the process ends here, without it.
  spdlog::shutdown();
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(0);
}
