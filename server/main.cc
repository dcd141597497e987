// pitlane-server: flags, logging, wiring and signals. Everything else lives in the layers.
#include <signal.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "server/app/server.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "host:port for gRPC. Port 0 picks a free port. Use 0.0.0.0:50051 to accept remote "
          "clients (e.g. a classroom or a container).");
ABSL_FLAG(std::uint32_t, max_sessions, 256, "Most sessions alive at once.");
ABSL_FLAG(std::uint32_t, max_vehicles_per_session, 100000,
          "Most vehicles in one session: the default and the cap of a session's max_vehicles.");
ABSL_FLAG(std::uint32_t, max_ticks_per_step, 10000, "Most ticks one Step call may advance.");
ABSL_FLAG(std::uint32_t, max_receive_message_mib, 64, "Largest request accepted, MiB.");
ABSL_FLAG(std::string, log_level, "info", "trace, debug, info, warn, error or off.");
ABSL_FLAG(std::uint32_t, worker_threads, 0,
          "Threads that step REALTIME and BARRIER sessions; 0 = one per CPU core.");
ABSL_FLAG(std::string, scenario, "",
          "A scenario to create a session from at start, e.g. demo (shipped: demo, oval-race, "
          "parking-lot, intersection, highway); empty for none.");
ABSL_FLAG(std::string, scenario_dir, "",
          "A directory of <name>.textproto scenarios that CreateSession may name, beside the "
          "shipped ones.");
ABSL_FLAG(double, session_idle_timeout, 3600.0,
          "Seconds a session may go without a client call or an open stream before it is "
          "deleted; 0 = never.");

namespace {

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
  absl::SetProgramUsageMessage(
      "Pitlane simulation server: many lockstep vehicle-simulation sessions over gRPC.\n"
      "Usage: pitlane-server [--listen=127.0.0.1:50051] [flags]");
  absl::ParseCommandLine(argc, argv);

  // Logs go to stderr; stdout carries only the banner below.
  spdlog::set_default_logger(spdlog::stderr_color_mt("pitlane"));
  spdlog::set_level(spdlog::level::from_str(absl::GetFlag(FLAGS_log_level)));

  const sigset_t signals = BlockShutdownSignals();

  pitlane::app::ServerOptions options;
  const std::uint32_t workers = absl::GetFlag(FLAGS_worker_threads);
  options.worker_threads =
      static_cast<int>(workers > 0 ? std::min<std::uint32_t>(workers, 256)
                                   : std::max(1u, std::thread::hardware_concurrency()));
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.limits = {
      .max_sessions = absl::GetFlag(FLAGS_max_sessions),
      .max_vehicles_per_session = absl::GetFlag(FLAGS_max_vehicles_per_session),
      .max_ticks_per_step = absl::GetFlag(FLAGS_max_ticks_per_step),
      .session_idle_timeout_s = std::max(0.0, absl::GetFlag(FLAGS_session_idle_timeout)),
  };
  options.max_receive_message_bytes =
      static_cast<int>(absl::GetFlag(FLAGS_max_receive_message_mib)) << 20;
  options.scenario_dir = absl::GetFlag(FLAGS_scenario_dir);
  options.startup_scenario = absl::GetFlag(FLAGS_scenario);

  auto server = pitlane::app::Server::Start(options);
  if (!server.ok()) {
    spdlog::critical("{}", server.status().ToString());
    return 1;
  }
  spdlog::info("server started: max {} sessions, {} vehicles per session, {} ticks per Step",
               options.limits.max_sessions, options.limits.max_vehicles_per_session,
               options.limits.max_ticks_per_step);
  // Plain stdout, for people and for scripts that wait for the port.
  std::printf(
      "Pitlane listening on %s\n"
      "  Python:  from pitlane import Client; client = Client(\"%s\")\n"
      "  Health:  grpc.health.v1.Health/Check; reflection is on (grpcurl -plaintext %s list)\n"
      "  Stop:    Ctrl-C\n",
      (*server)->address().c_str(), (*server)->address().c_str(), (*server)->address().c_str());
  if (!(*server)->startup_session_id().empty()) {
    std::printf("  Scenario \"%s\" is running as session %s; watch it:\n"
                "    PYTHONPATH=client/python /usr/bin/python3 client/python/examples/watch.py "
                "--address %s --session %s\n",
                options.startup_scenario.c_str(), (*server)->startup_session_id().c_str(),
                (*server)->address().c_str(), (*server)->startup_session_id().c_str());
  }
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  spdlog::info("signal {} received; shutting down", signal_number);
  (*server)->Shutdown();
  spdlog::info("server stopped");
  return 0;
}
