// load_tool: loads a Pitlane server the way many clients would and reports how it keeps up.
// A command-line tool, not a Google Benchmark and not a test. Three modes:
//
//   --mode=realtime  S sessions (--sessions, default 200) of V kinematic bicycles (--vehicles,
//                    default 10) driving circles, in CLOCK_MODE_REALTIME at --tick_rate_hz
//                    (default 50), one StreamStates subscriber each (a ClientReadReactor per
//                    stream, all in this process, over --channels connections), for --seconds.
//                    Reports ticks, missed deadlines and lateness from every session's
//                    SessionInfo.clock_stats, frames and skipped frames per subscriber, and the
//                    server's CPU. --sweep runs S = --sweep_start, +--sweep_step, ... until
//                    misses reach --sweep_max_miss_percent or the worst session's lateness p99
//                    exceeds --sweep_max_p99_ms, and prints the largest S that held.
//   --mode=drive     Drive round trip in a CLOCK_MODE_BARRIER session with one vehicle and one
//                    controller: the time from sending the control for an observation to
//                    receiving the next observation, for --iterations round trips after
//                    --warmup ones; interleaved with a bare bidi gRPC ping-pong
//                    (pitlane.bench.Echo, bench/proto/pitlane/bench/echo.proto) moving messages
//                    of the same sizes over the same channel. Always an in-process server (the
//                    app::Server wiring with the Echo service beside the Simulator), over
//                    loopback TCP; client and server share this process. --drive_client=cpp
//                    drives through the C++ client's Driver (pitlane::client, its own channel)
//                    instead of the generated stub.
//   --mode=steps     Lockstep Steps on the session workers: two sessions of V vehicles
//                    (--vehicles, default 20000); a Step of --ticks ticks (default 2000) on one
//                    session alone, then one on each session at once from two client threads,
//                    --repetitions times (default 3). Reports the medians and parallel / alone:
//                    about 1 when the server has two cores free for its two workers.
//   --mode=stream    StreamStates throughput to one blocking C++ reader of a session of
//                    V vehicles (--vehicles, default 1000) in REALTIME with real_time_factor 0
//                    (as fast as the server can step it): vehicle states, frames and ticks per
//                    second, and skipped frames.
//
// Server: realtime and stream start --server_binary (default build/bin/pitlane-server) as a
// child process on 127.0.0.1 with a free port and stop it at the end, or use the server at
// --address (its CPU is reported only if --server_pid is given). --worker_threads is passed to
// the server (0: its default, one per core).
//
// Output: a readable table, then one line of JSON (prefixed "JSON ") for the docs.
//
// Build and run (from the repository root, Release build):
//   ninja -C build load_tool pitlane-server
//   build/bin/load_tool --mode=realtime --sessions=200 --vehicles=10 --seconds=20
//   build/bin/load_tool --mode=realtime --sweep --seconds=10
//   build/bin/load_tool --mode=drive --iterations=20000
//   build/bin/load_tool --mode=stream --seconds=20
//   build/bin/load_tool --mode=steps
// The tool prints the server's pid, so a profile can be taken meanwhile:
//   perf record -g -p <pid> -- sleep 10
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "pitlane/client.h"
#include "pitlane/bench/echo.grpc.pb.h"
#include "pitlane/v1/simulator.grpc.pb.h"
#include "server/app/server.h"
#include "server/util/status_macros.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, mode, "realtime", "realtime, drive, stream or steps.");
ABSL_FLAG(std::string, address, "",
          "host:port of a running server. Empty: start --server_binary as a child process "
          "(realtime and stream; drive always runs an in-process server).");
ABSL_FLAG(std::string, server_binary, "build/bin/pitlane-server", "The server to start.");
ABSL_FLAG(int, server_pid, 0, "With --address: the server's pid, for its CPU time.");
ABSL_FLAG(std::uint32_t, worker_threads, 0,
          "Server threads that step REALTIME and BARRIER sessions; 0 = one per core.");
ABSL_FLAG(int, sessions, 200, "realtime: sessions.");
ABSL_FLAG(int, vehicles, 0,
          "Vehicles per session; 0 = the mode's default (realtime 10, stream 1000).");
ABSL_FLAG(double, tick_rate_hz, 50.0, "realtime: ticks per simulated second of each session.");
ABSL_FLAG(double, seconds, 20.0, "realtime and stream: measured wall-clock seconds (per step).");
ABSL_FLAG(int, channels, 8, "realtime: client connections; the subscribers are spread over them.");
ABSL_FLAG(bool, sweep, false, "realtime: find the most sessions that keep time.");
ABSL_FLAG(int, sweep_start, 50, "realtime --sweep: first session count.");
ABSL_FLAG(int, sweep_step, 50, "realtime --sweep: session count increment.");
ABSL_FLAG(int, sweep_max, 2000, "realtime --sweep: stop after this session count.");
ABSL_FLAG(double, sweep_max_miss_percent, 1.0,
          "realtime --sweep: a step fails at this share of missed deadlines, percent.");
ABSL_FLAG(double, sweep_max_p99_ms, 2.0,
          "realtime --sweep: a step fails when a session's lateness p99 exceeds this, ms.");
ABSL_FLAG(int, iterations, 20000, "drive: measured round trips of each kind.");
ABSL_FLAG(int, ticks, 2000, "steps: ticks of each Step.");
ABSL_FLAG(int, repetitions, 3, "steps: measurements of each kind.");
ABSL_FLAG(int, warmup, 2000, "drive: round trips of each kind before measuring.");
ABSL_FLAG(std::string, drive_client, "stub",
          "drive: stub (the generated gRPC stub) or cpp (the C++ client's Driver).");

namespace pitlane::load_tool {
namespace {

namespace v1 = ::pitlane::v1;
using SteadyClock = std::chrono::steady_clock;

// Every vehicle: a kinematic bicycle at 10 m/s with its wheels at 0.1 rad, a circle of radius
// L / tan(0.1) = 26.9 m (default wheelbase 2.7 m). Spawned 100 m apart on a square grid, so
// no two circles meet and no contacts are reported.
constexpr double kSpeed_mps = 10.0;
constexpr double kSteering_rad = 0.1;
constexpr double kSpacing_m = 100.0;

constexpr absl::Duration kStartupTimeout = absl::Seconds(30);
constexpr absl::Duration kStopTimeout = absl::Seconds(10);

// ---------------------------------------------------------------------------------------------
// Small helpers

// The status of a failed call, with the call's name in front.
absl::Status FromGrpc(absl::string_view call, const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(call, ": ", status.error_message()));
}

absl::Status ErrnoError(absl::string_view what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

// The q-quantile (q in [0, 1]) of `sorted` by nearest rank; 0 if empty.
double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0.0;
  const auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size())));
  return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

// Polls `done` every millisecond until it holds or `timeout` passes; returns whether it held.
bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return true;
}

int CoreCount() { return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN))); }

// CPU time a process has used, user + system, seconds: fields 14 and 15 of /proc/<pid>/stat.
absl::StatusOr<double> ProcessCpuSeconds(pid_t pid) {
  const std::string path = absl::StrCat("/proc/", pid, "/stat");
  std::ifstream file(path);
  const std::string text((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  // The command name (field 2) is in parentheses and may hold spaces: count from its end.
  const std::size_t paren = text.rfind(')');
  if (paren == std::string::npos) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(text).substr(paren + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (the state), so utime and stime are fields[11] and fields[12].
  std::uint64_t utime = 0;
  std::uint64_t stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::InternalError(absl::StrCat("unexpected format of ", path));
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// One flat JSON object, fields in the order added.
class JsonObject {
 public:
  JsonObject& Number(absl::string_view key, double value) {
    return Raw(key, std::isfinite(value) ? absl::StrFormat("%.6g", value) : "null");
  }
  JsonObject& Number(absl::string_view key, std::optional<double> value) {
    return value.has_value() ? Number(key, *value) : Raw(key, "null");
  }
  JsonObject& Integer(absl::string_view key, std::int64_t value) {
    return Raw(key, absl::StrCat(value));
  }
  // `value` must need no escaping (our keys and labels are plain ASCII).
  JsonObject& String(absl::string_view key, absl::string_view value) {
    return Raw(key, absl::StrCat("\"", value, "\""));
  }
  JsonObject& Raw(absl::string_view key, absl::string_view json) {
    fields_.push_back(absl::StrCat("\"", key, "\":", json));
    return *this;
  }
  std::string str() const { return absl::StrCat("{", absl::StrJoin(fields_, ","), "}"); }

 private:
  std::vector<std::string> fields_;
};

// ---------------------------------------------------------------------------------------------
// The server under load

// pitlane-server as a child process: started on a free port of 127.0.0.1, stopped (SIGTERM,
// then SIGKILL after kStopTimeout) when destroyed. Its stdout is read for the address and
// then drained; its stderr (logs at warn and above) goes to ours.
class ChildServer {
 public:
  static absl::StatusOr<std::unique_ptr<ChildServer>> Start(const std::string& binary,
                                                            const std::vector<std::string>& flags) {
    if (access(binary.c_str(), X_OK) != 0) {
      return absl::NotFoundError(
          absl::StrCat("server binary ", binary, " not found (build it or set --server_binary)"));
    }
    std::vector<std::string> args = {binary, "--listen=127.0.0.1:0", "--http_listen=",
                                     "--log_level=warn"};
    args.insert(args.end(), flags.begin(), flags.end());
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);

    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return ErrnoError("pipe2");
    const pid_t pid = fork();
    if (pid < 0) {
      const absl::Status error = ErrnoError("fork");
      close(fds[0]);
      close(fds[1]);
      return error;
    }
    if (pid == 0) {  // The child: only async-signal-safe calls until exec.
      dup2(fds[1], STDOUT_FILENO);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    auto child = std::unique_ptr<ChildServer>(new ChildServer(pid, fds[0]));
    child->command_ = absl::StrJoin(args, " ");
    ASSIGN_OR_RETURN(child->address_, child->ReadAddress());
    child->drain_ = std::thread([fd = fds[0]] {
      char buffer[4096];
      while (read(fd, buffer, sizeof buffer) > 0) {
      }
    });
    return child;
  }

  ~ChildServer() {
    kill(pid_, SIGTERM);
    const absl::Time deadline = absl::Now() + kStopTimeout;
    while (waitpid(pid_, nullptr, WNOHANG) == 0) {
      if (absl::Now() > deadline) {
        std::fprintf(stderr, "server %d did not stop within %s: killing it\n", pid_,
                     absl::FormatDuration(kStopTimeout).c_str());
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        break;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    if (drain_.joinable()) drain_.join();  // Ends at EOF: the child has exited.
    close(stdout_fd_);
  }

  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }
  const std::string& command() const { return command_; }

 private:
  ChildServer(pid_t pid, int stdout_fd) : pid_(pid), stdout_fd_(stdout_fd) {}

  // Reads stdout until the banner's "listening on <host:port>" (as tests/e2e/conftest.py).
  absl::StatusOr<std::string> ReadAddress() {
    constexpr std::string_view kBanner = "listening on ";
    const absl::Time deadline = absl::Now() + kStartupTimeout;
    std::string output;
    while (true) {
      const std::size_t at = output.find(kBanner);
      if (at != std::string::npos) {
        const std::size_t begin = at + kBanner.size();
        const std::size_t end = output.find_first_of(" \r\n", begin);
        if (end != std::string::npos) return output.substr(begin, end - begin);
      }
      const absl::Duration left = deadline - absl::Now();
      pollfd poll_fd = {.fd = stdout_fd_, .events = POLLIN};
      const int ready = left > absl::ZeroDuration()
                            ? poll(&poll_fd, 1, static_cast<int>(absl::ToInt64Milliseconds(left)))
                            : 0;
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) {
        return absl::DeadlineExceededError(
            absl::StrCat(command_, " did not print 'listening on <address>' within ",
                         absl::FormatDuration(kStartupTimeout), "; stdout: ", output));
      }
      char buffer[1024];
      const ssize_t n = read(stdout_fd_, buffer, sizeof buffer);
      if (n <= 0) {
        return absl::UnavailableError(
            absl::StrCat(command_, " exited before listening; stdout: ", output));
      }
      output.append(buffer, static_cast<std::size_t>(n));
    }
  }

  const pid_t pid_;
  const int stdout_fd_;
  std::string command_;
  std::string address_;
  std::thread drain_;
};

// Where the load goes: a child server, or the one at --address.
struct Target {
  std::string address;
  std::optional<pid_t> pid;  // Known for a child, or from --server_pid.
  std::string description;
  std::unique_ptr<ChildServer> child;

  // The server's CPU time so far, seconds, if its pid is known.
  std::optional<double> CpuSeconds() const {
    if (!pid.has_value()) return std::nullopt;
    const absl::StatusOr<double> seconds = ProcessCpuSeconds(*pid);
    return seconds.ok() ? std::optional<double>(*seconds) : std::nullopt;
  }
};

std::string WorkerThreadsLabel() {
  const std::uint32_t workers = absl::GetFlag(FLAGS_worker_threads);
  return workers > 0 ? absl::StrCat(workers, " worker threads")
                     : absl::StrCat("one worker thread per core (", CoreCount(), ")");
}

// Starts a child server that admits `max_sessions` sessions of `max_vehicles` vehicles, or
// takes --address.
absl::StatusOr<Target> ConnectOrStart(int max_sessions, int max_vehicles) {
  Target target;
  const std::string address = absl::GetFlag(FLAGS_address);
  if (!address.empty()) {
    target.address = address;
    if (absl::GetFlag(FLAGS_server_pid) > 0) target.pid = absl::GetFlag(FLAGS_server_pid);
    target.description = absl::StrCat("the server at ", address,
                                      target.pid.has_value() ? absl::StrCat(", pid ", *target.pid)
                                                             : " (pid unknown: no server CPU)");
    return target;
  }
  std::vector<std::string> flags = {absl::StrCat("--max_sessions=", max_sessions),
                                    absl::StrCat("--max_vehicles_per_session=", max_vehicles)};
  if (absl::GetFlag(FLAGS_worker_threads) > 0) {
    flags.push_back(absl::StrCat("--worker_threads=", absl::GetFlag(FLAGS_worker_threads)));
  }
  ASSIGN_OR_RETURN(target.child, ChildServer::Start(absl::GetFlag(FLAGS_server_binary), flags));
  target.address = target.child->address();
  target.pid = target.child->pid();
  target.description = absl::StrCat("child pid ", *target.pid, " on ", target.address, ", ",
                                    WorkerThreadsLabel(), ": ", target.child->command());
  return target;
}

// A channel of its own (its own TCP connection: channels with equal arguments share one) that
// has connected.
absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(const std::string& address, int index) {
  grpc::ChannelArguments args;
  args.SetInt("pitlane.load_tool.channel", index);
  args.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
  }
  return channel;
}

// ---------------------------------------------------------------------------------------------
// Sessions

struct CirclingSession {
  std::string id;
  std::vector<std::uint64_t> vehicle_ids;
};

// Creates a session with `config` and `vehicles` kinematic bicycles driving circles.
absl::StatusOr<CirclingSession> CreateCirclingSession(v1::Simulator::Stub& stub,
                                                      const v1::SessionConfig& config,
                                                      int vehicles) {
  CirclingSession session;
  {
    v1::CreateSessionRequest request;
    *request.mutable_config() = config;
    v1::CreateSessionResponse response;
    grpc::ClientContext context;
    RETURN_IF_ERROR(FromGrpc("CreateSession", stub.CreateSession(&context, request, &response)));
    session.id = response.session().session_id();
  }
  {
    v1::SpawnVehicleRequest request;
    request.set_session_id(session.id);
    const int columns = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(vehicles))));
    for (int i = 0; i < vehicles; ++i) {
      v1::VehicleSpec* spec = request.add_vehicles();
      spec->mutable_kinematic_bicycle();
      spec->mutable_initial_pose()->set_x_m(kSpacing_m * (i % columns));
      spec->mutable_initial_pose()->set_y_m(kSpacing_m * (i / columns));
      spec->set_initial_speed_mps(kSpeed_mps);
    }
    v1::SpawnVehicleResponse response;
    grpc::ClientContext context;
    RETURN_IF_ERROR(FromGrpc("SpawnVehicle", stub.SpawnVehicle(&context, request, &response)));
    session.vehicle_ids.assign(response.vehicle_ids().begin(), response.vehicle_ids().end());
  }
  {
    v1::SetControlsRequest request;
    request.set_session_id(session.id);
    for (const std::uint64_t id : session.vehicle_ids) {
      v1::VehicleControl* control = request.add_controls();
      control->set_vehicle_id(id);
      control->set_steering_angle_rad(kSteering_rad);
    }
    v1::SetControlsResponse response;
    grpc::ClientContext context;
    RETURN_IF_ERROR(FromGrpc("SetControls", stub.SetControls(&context, request, &response)));
  }
  return session;
}

absl::Status SetPaused(v1::Simulator::Stub& stub, const std::string& session_id, bool paused) {
  v1::SetClockRequest request;
  request.set_session_id(session_id);
  request.set_paused(paused);
  v1::SetClockResponse response;
  grpc::ClientContext context;
  return FromGrpc("SetClock", stub.SetClock(&context, request, &response));
}

absl::StatusOr<v1::SessionInfo> GetSession(v1::Simulator::Stub& stub,
                                           const std::string& session_id) {
  v1::GetSessionRequest request;
  request.set_session_id(session_id);
  v1::GetSessionResponse response;
  grpc::ClientContext context;
  RETURN_IF_ERROR(FromGrpc("GetSession", stub.GetSession(&context, request, &response)));
  return response.session();
}

absl::Status DeleteSession(v1::Simulator::Stub& stub, const std::string& session_id) {
  v1::DeleteSessionRequest request;
  request.set_session_id(session_id);
  v1::DeleteSessionResponse response;
  grpc::ClientContext context;
  return FromGrpc("DeleteSession", stub.DeleteSession(&context, request, &response));
}

// ---------------------------------------------------------------------------------------------
// realtime

// One StreamStates call on the callback API: counts frames and skipped frames, one read in
// flight, the next started from OnReadDone. The destructor waits for the call to end
// (cancelling it if the session is still streaming).
class StateSubscriber final : public grpc::ClientReadReactor<v1::StreamStatesResponse> {
 public:
  StateSubscriber(v1::Simulator::Stub& stub, const std::string& session_id) {
    request_.set_session_id(session_id);
    stub.async()->StreamStates(&context_, &request_, this);
    StartRead(&response_);
    StartCall();
  }

  ~StateSubscriber() override {
    if (!WaitDone(kStopTimeout)) {
      context_.TryCancel();
      WaitDone(absl::InfiniteDuration());
    }
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // The call is over; OnDone has its status.
    skipped_.fetch_add(response_.skipped_frames(), std::memory_order_relaxed);
    frames_.fetch_add(1, std::memory_order_relaxed);
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    absl::MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

  std::uint64_t frames() const { return frames_.load(std::memory_order_relaxed); }
  std::uint64_t skipped() const { return skipped_.load(std::memory_order_relaxed); }

  // The call's status once it has ended.
  std::optional<grpc::Status> status() const {
    absl::MutexLock lock(&mu_);
    return done_ ? std::optional<grpc::Status>(status_) : std::nullopt;
  }

  bool WaitDone(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    return mu_.AwaitWithTimeout(absl::Condition(&done_), timeout);
  }

 private:
  grpc::ClientContext context_;
  v1::StreamStatesRequest request_;
  v1::StreamStatesResponse response_;  // The read in flight.
  std::atomic<std::uint64_t> frames_{0};
  std::atomic<std::uint64_t> skipped_{0};
  mutable absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

// What one realtime run measured.
struct RealtimeRun {
  int sessions = 0;
  int vehicles = 0;
  double wall_s = 0.0;  // From just before resuming the sessions to the end of the window.
  // Summed over the sessions' clock_stats, read just after the window (they still run).
  std::uint64_t ticks = 0;
  std::uint64_t missed = 0;
  // Lateness, ms, over the sessions: the largest p50, p99 and max, and the median p99.
  double p50_max_ms = 0.0;
  double p99_max_ms = 0.0;
  double p99_median_ms = 0.0;
  double max_ms = 0.0;
  // Frames each subscriber received in the window: least, mean, most; skipped frames summed.
  double frames_min = 0.0;
  double frames_mean = 0.0;
  double frames_max = 0.0;
  std::uint64_t skipped = 0;
  std::optional<double> server_cpu_s;  // CPU time of the server in the window.
  double client_cpu_s = 0.0;           // ... and of this process.

  double miss_percent() const {
    return ticks == 0 ? 100.0 : 100.0 * static_cast<double>(missed) / static_cast<double>(ticks);
  }
  bool Held(double max_miss_percent, double max_p99_ms) const {
    return miss_percent() < max_miss_percent && p99_max_ms <= max_p99_ms;
  }
};

// S paused sessions, a subscriber each; resumed together; measured for `seconds`; deleted.
absl::StatusOr<RealtimeRun> RunRealtime(
    const Target& target, const std::vector<std::unique_ptr<v1::Simulator::Stub>>& stubs,
    int sessions, int vehicles, double seconds) {
  const auto stub = [&](std::size_t i) -> v1::Simulator::Stub& { return *stubs[i % stubs.size()]; };
  v1::SessionConfig config;
  config.set_clock_mode(v1::CLOCK_MODE_REALTIME);
  config.set_tick_rate_hz(absl::GetFlag(FLAGS_tick_rate_hz));
  config.set_paused(true);  // Resumed together once every subscriber is in place.

  // Destroyed last: a subscriber waits for its call to end.
  std::vector<std::unique_ptr<StateSubscriber>> subscribers;
  std::vector<std::string> ids;
  // Runs first on the way out: deleting a session ends its stream with OK.
  absl::Cleanup delete_sessions = [&] {
    for (std::size_t i = 0; i < ids.size(); ++i) (void)DeleteSession(stub(i), ids[i]);
  };

  for (int i = 0; i < sessions; ++i) {
    ASSIGN_OR_RETURN(const CirclingSession session,
                     CreateCirclingSession(stub(i), config, vehicles));
    ids.push_back(session.id);
  }
  for (int i = 0; i < sessions; ++i) {
    subscribers.push_back(std::make_unique<StateSubscriber>(stub(i), ids[i]));
  }
  // The first frame (the current state) shows the subscription is in place.
  for (const auto& subscriber : subscribers) {
    if (!WaitUntil([&] { return subscriber->frames() > 0 || subscriber->status().has_value(); },
                   kStartupTimeout) ||
        subscriber->frames() == 0) {
      const std::optional<grpc::Status> status = subscriber->status();
      return absl::UnavailableError(
          absl::StrCat("a StreamStates call got no first frame",
                       status.has_value() ? absl::StrCat(": ", status->error_message()) : ""));
    }
  }

  std::vector<std::uint64_t> frames_before;
  std::uint64_t skipped_before = 0;
  for (const auto& subscriber : subscribers) {
    frames_before.push_back(subscriber->frames());
    skipped_before += subscriber->skipped();
  }
  const std::optional<double> server_cpu_before = target.CpuSeconds();
  ASSIGN_OR_RETURN(const double client_cpu_before, ProcessCpuSeconds(getpid()));
  const SteadyClock::time_point start = SteadyClock::now();
  for (int i = 0; i < sessions; ++i) RETURN_IF_ERROR(SetPaused(stub(i), ids[i], false));

  absl::SleepFor(absl::Seconds(seconds));

  const SteadyClock::time_point end = SteadyClock::now();
  const std::optional<double> server_cpu_after = target.CpuSeconds();
  ASSIGN_OR_RETURN(const double client_cpu_after, ProcessCpuSeconds(getpid()));
  RealtimeRun run{.sessions = sessions, .vehicles = vehicles, .wall_s = Seconds(end - start)};
  std::vector<double> frames;
  for (std::size_t i = 0; i < subscribers.size(); ++i) {
    const std::optional<grpc::Status> status = subscribers[i]->status();
    if (status.has_value()) {
      return absl::UnavailableError(absl::StrCat("the stream of session ", ids[i],
                                                 " ended early: ", status->error_message()));
    }
    frames.push_back(static_cast<double>(subscribers[i]->frames() - frames_before[i]));
    run.skipped += subscribers[i]->skipped();
  }
  run.skipped -= skipped_before;
  std::sort(frames.begin(), frames.end());
  run.frames_min = frames.front();
  run.frames_max = frames.back();
  for (const double f : frames) run.frames_mean += f / static_cast<double>(frames.size());
  if (server_cpu_before.has_value() && server_cpu_after.has_value()) {
    run.server_cpu_s = *server_cpu_after - *server_cpu_before;
  }
  run.client_cpu_s = client_cpu_after - client_cpu_before;

  // Clock stats cover the sessions' whole lives: they were paused until the window began.
  std::vector<double> p99s;
  for (int i = 0; i < sessions; ++i) {
    ASSIGN_OR_RETURN(const v1::SessionInfo info, GetSession(stub(i), ids[i]));
    const v1::ClockStats& stats = info.clock_stats();
    run.ticks += stats.paced_ticks();
    run.missed += stats.missed_deadlines();
    run.p50_max_ms = std::max(run.p50_max_ms, stats.lateness_p50_ms());
    run.p99_max_ms = std::max(run.p99_max_ms, stats.lateness_p99_ms());
    run.max_ms = std::max(run.max_ms, stats.lateness_max_ms());
    p99s.push_back(stats.lateness_p99_ms());
  }
  std::sort(p99s.begin(), p99s.end());
  run.p99_median_ms = Quantile(p99s, 0.5);
  return run;
}

std::string CpuLabel(std::optional<double> cpu_s, double wall_s) {
  if (!cpu_s.has_value()) return "unknown";
  const double percent = 100.0 * *cpu_s / wall_s;
  return absl::StrFormat("%.1f %% of one core, %.1f %% of the machine (%d cores)", percent,
                         percent / CoreCount(), CoreCount());
}

void PrintRealtime(const RealtimeRun& run) {
  const double rate_hz = absl::GetFlag(FLAGS_tick_rate_hz);
  const double expected_ticks = run.sessions * rate_hz * run.wall_s;
  absl::PrintF("  %-34s %d x %d kinematic bicycles at %.0f Hz, %.1f s\n", "sessions", run.sessions,
               run.vehicles, rate_hz, run.wall_s);
  absl::PrintF("  %-34s %d (%.0f expected)\n", "paced ticks", run.ticks, expected_ticks);
  absl::PrintF("  %-34s %d (%.3f %%)\n", "missed deadlines", run.missed, run.miss_percent());
  absl::PrintF("  %-34s p50 %.2f, p99 %.2f, max %.2f ms\n", "lateness, worst session",
               run.p50_max_ms, run.p99_max_ms, run.max_ms);
  absl::PrintF("  %-34s %.2f ms\n", "lateness p99, median session", run.p99_median_ms);
  absl::PrintF("  %-34s min %.0f, mean %.1f, max %.0f (%.0f expected)\n", "frames per subscriber",
               run.frames_min, run.frames_mean, run.frames_max, rate_hz * run.wall_s);
  absl::PrintF("  %-34s %d\n", "skipped frames, all subscribers", run.skipped);
  absl::PrintF("  %-34s %s\n", "server CPU", CpuLabel(run.server_cpu_s, run.wall_s));
  absl::PrintF("  %-34s %s\n", "client CPU (this process)", CpuLabel(run.client_cpu_s, run.wall_s));
}

// Adds the fields of `run` to `json`.
void AddRealtimeJson(const RealtimeRun& run, JsonObject& json) {
  json.Integer("sessions", run.sessions)
      .Integer("vehicles", run.vehicles)
      .Number("tick_rate_hz", absl::GetFlag(FLAGS_tick_rate_hz))
      .Number("seconds", run.wall_s)
      .Integer("ticks", static_cast<std::int64_t>(run.ticks))
      .Integer("missed_deadlines", static_cast<std::int64_t>(run.missed))
      .Number("missed_percent", run.miss_percent())
      .Number("lateness_p50_max_ms", run.p50_max_ms)
      .Number("lateness_p99_max_ms", run.p99_max_ms)
      .Number("lateness_p99_median_ms", run.p99_median_ms)
      .Number("lateness_max_ms", run.max_ms)
      .Number("frames_per_subscriber_min", run.frames_min)
      .Number("frames_per_subscriber_mean", run.frames_mean)
      .Integer("skipped_frames", static_cast<std::int64_t>(run.skipped))
      .Number("server_cpu_percent_of_core",
              run.server_cpu_s.has_value()
                  ? std::optional<double>(100.0 * *run.server_cpu_s / run.wall_s)
                  : std::nullopt)
      .Number("client_cpu_percent_of_core", 100.0 * run.client_cpu_s / run.wall_s);
}

absl::Status RunRealtimeMode() {
  const bool sweep = absl::GetFlag(FLAGS_sweep);
  const int vehicles = absl::GetFlag(FLAGS_vehicles) > 0 ? absl::GetFlag(FLAGS_vehicles) : 10;
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const int most_sessions = sweep ? absl::GetFlag(FLAGS_sweep_max) : absl::GetFlag(FLAGS_sessions);
  ASSIGN_OR_RETURN(const Target target, ConnectOrStart(most_sessions + 16, vehicles));
  absl::PrintF("server: %s\n", target.description);
  std::fflush(stdout);  // The pid, for a profiler, even when stdout is a file.

  std::vector<std::unique_ptr<v1::Simulator::Stub>> stubs;
  for (int i = 0; i < std::max(1, absl::GetFlag(FLAGS_channels)); ++i) {
    ASSIGN_OR_RETURN(const auto channel, Connect(target.address, i));
    stubs.push_back(v1::Simulator::NewStub(channel));
  }

  if (!sweep) {
    absl::PrintF("realtime, %d connections\n", stubs.size());
    ASSIGN_OR_RETURN(const RealtimeRun run,
                     RunRealtime(target, stubs, absl::GetFlag(FLAGS_sessions), vehicles, seconds));
    PrintRealtime(run);
    JsonObject json;
    json.String("mode", "realtime");
    AddRealtimeJson(run, json);
    absl::PrintF("JSON %s\n", json.str());
    return absl::OkStatus();
  }

  const double max_miss_percent = absl::GetFlag(FLAGS_sweep_max_miss_percent);
  const double max_p99_ms = absl::GetFlag(FLAGS_sweep_max_p99_ms);
  absl::PrintF(
      "realtime sweep, %d connections: a step holds while missed deadlines < %.2f %% and every "
      "session's lateness p99 <= %.2f ms\n",
      stubs.size(), max_miss_percent, max_p99_ms);
  std::vector<RealtimeRun> runs;
  int largest_held = 0;
  for (int sessions = absl::GetFlag(FLAGS_sweep_start); sessions <= most_sessions;
       sessions += std::max(1, absl::GetFlag(FLAGS_sweep_step))) {
    ASSIGN_OR_RETURN(RealtimeRun run, RunRealtime(target, stubs, sessions, vehicles, seconds));
    const bool held = run.Held(max_miss_percent, max_p99_ms);
    absl::PrintF("step %d sessions: %s\n", sessions, held ? "held" : "FAILED");
    PrintRealtime(run);
    std::fflush(stdout);
    runs.push_back(run);
    if (!held) break;
    largest_held = sessions;
  }

  absl::PrintF("\n%8s %10s %9s %9s %9s %9s %9s %10s %8s %10s\n", "sessions", "ticks", "missed%",
               "p50max", "p99max", "p99med", "max_ms", "frames/sub", "skipped", "server%cpu");
  std::vector<std::string> steps;
  for (const RealtimeRun& run : runs) {
    absl::PrintF("%8d %10d %9.3f %9.2f %9.2f %9.2f %9.2f %10.1f %8d %10s\n", run.sessions,
                 run.ticks, run.miss_percent(), run.p50_max_ms, run.p99_max_ms, run.p99_median_ms,
                 run.max_ms, run.frames_mean, run.skipped,
                 run.server_cpu_s.has_value()
                     ? absl::StrFormat("%.1f", 100.0 * *run.server_cpu_s / run.wall_s)
                     : "-");
    JsonObject step;
    AddRealtimeJson(run, step);
    steps.push_back(step.str());
  }
  absl::PrintF("largest session count that held: %d\n", largest_held);
  JsonObject json;
  json.String("mode", "realtime_sweep")
      .Integer("largest_sessions_held", largest_held)
      .Number("max_miss_percent", max_miss_percent)
      .Number("max_p99_ms", max_p99_ms)
      .Raw("steps", absl::StrCat("[", absl::StrJoin(steps, ","), "]"));
  absl::PrintF("JSON %s\n", json.str());
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// drive

// A `bytes payload` of the length that gives `message` a serialized size of `bytes` (or one
// byte less, where the length's varint would grow).
template <typename Message>
void FitPayload(std::size_t bytes, Message& message) {
  std::size_t length = bytes;
  do {
    message.set_payload(std::string(length, 'x'));
  } while (message.ByteSizeLong() > bytes && length-- > 0);
}

// pitlane.bench.Echo: one reply of the size asked for per request, one write in flight.
class EchoService final : public bench::Echo::CallbackService {
  grpc::ServerBidiReactor<bench::EchoRequest, bench::EchoReply>* Exchange(
      grpc::CallbackServerContext* /*context*/) override {
    class Reactor final : public grpc::ServerBidiReactor<bench::EchoRequest, bench::EchoReply> {
     public:
      Reactor() { StartRead(&request_); }
      void OnReadDone(bool ok) override {
        if (!ok) {  // The client half-closed.
          Finish(grpc::Status::OK);
          return;
        }
        if (request_.reply_bytes() != reply_bytes_) {
          reply_bytes_ = request_.reply_bytes();
          FitPayload(reply_bytes_, reply_);
        }
        StartWrite(&reply_);
      }
      void OnWriteDone(bool ok) override {
        if (!ok) {
          Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the stream broke"));
          return;
        }
        StartRead(&request_);
      }
      void OnDone() override { delete this; }

     private:
      bench::EchoRequest request_;
      bench::EchoReply reply_;
      std::uint32_t reply_bytes_ = 0;
    };
    return new Reactor();
  }
};

struct LatencySummary {
  double p50_us, p90_us, p99_us, max_us;
};

LatencySummary Summarize(std::vector<double>& latencies_us) {
  std::sort(latencies_us.begin(), latencies_us.end());
  return {Quantile(latencies_us, 0.5), Quantile(latencies_us, 0.9), Quantile(latencies_us, 0.99),
          latencies_us.empty() ? 0.0 : latencies_us.back()};
}

absl::Status RunDriveMode() {
  if (!absl::GetFlag(FLAGS_address).empty()) {
    return absl::InvalidArgumentError(
        "--mode=drive runs its own in-process server (for the Echo baseline): drop --address");
  }
  const int iterations = absl::GetFlag(FLAGS_iterations);
  const int warmup = absl::GetFlag(FLAGS_warmup);

  spdlog::set_level(spdlog::level::warn);  // The in-process server's logs, as --log_level=warn.
  EchoService echo_service;
  app::ServerOptions options;
  options.listen_address = "127.0.0.1:0";
  const std::uint32_t workers = absl::GetFlag(FLAGS_worker_threads);
  options.worker_threads = workers > 0 ? static_cast<int>(workers) : CoreCount();
  ASSIGN_OR_RETURN(const std::unique_ptr<app::Server> server,
                   app::Server::Start(options, {&echo_service}));
  absl::PrintF("server: in-process (app::Server, Simulator + Echo) on %s, %s\n", server->address(),
               WorkerThreadsLabel());
  ASSIGN_OR_RETURN(const auto channel, Connect(server->address(), 0));
  const auto simulator = v1::Simulator::NewStub(channel);
  const auto echo = bench::Echo::NewStub(channel);

  v1::SessionConfig config;
  config.set_clock_mode(v1::CLOCK_MODE_BARRIER);
  config.set_barrier_timeout_s(60.0);  // A timeout would be an outlier, not a round trip.
  ASSIGN_OR_RETURN(const CirclingSession session, CreateCirclingSession(*simulator, config, 1));

  const std::string drive_client = absl::GetFlag(FLAGS_drive_client);
  if (drive_client != "stub" && drive_client != "cpp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--drive_client: stub or cpp, got \"", drive_client, "\""));
  }
  grpc::ClientContext drive_context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::DriveRequest, v1::DriveResponse>> drive;
  std::unique_ptr<Client> cpp_client;
  std::unique_ptr<Driver> driver;
  v1::DriveResponse observation;
  if (drive_client == "cpp") {
    ASSIGN_OR_RETURN(cpp_client, Client::Connect({.address = server->address()}));
    ASSIGN_OR_RETURN(driver, cpp_client->Drive(session.id, session.vehicle_ids.front()));
    if (!driver->Observe(&observation)) {
      RETURN_IF_ERROR(driver->Close());
      return absl::UnavailableError(
          "Drive (attach): the stream ended before its first observation");
    }
  } else {
    drive = simulator->Drive(&drive_context);
    v1::DriveRequest attach;
    attach.mutable_attach()->set_session_id(session.id);
    attach.mutable_attach()->set_vehicle_id(session.vehicle_ids.front());
    if (!drive->Write(attach) || !drive->Read(&observation)) {
      return FromGrpc("Drive (attach)", drive->Finish());
    }
  }
  grpc::ClientContext echo_context;
  const auto exchange = echo->Exchange(&echo_context);

  v1::DriveRequest control;
  control.mutable_control()->mutable_control()->set_steering_angle_rad(kSteering_rad);
  bench::EchoRequest echo_request;
  bench::EchoReply echo_reply;
  std::size_t fitted_request_bytes = 0;
  std::vector<double> drive_us;
  std::vector<double> echo_us;
  drive_us.reserve(iterations);
  echo_us.reserve(iterations);
  std::uint64_t irregular = 0;  // Observations that were not of the next tick.

  // One Drive round trip: the control for the latest observation, then the next observation.
  const auto drive_round_trip = [&]() -> absl::StatusOr<double> {
    const std::uint64_t tick = observation.time().tick();
    control.mutable_control()->set_tick(tick);
    const SteadyClock::time_point sent = SteadyClock::now();
    if (driver != nullptr) {
      if (!driver->Send(tick, control.control().control()) || !driver->Observe(&observation)) {
        RETURN_IF_ERROR(driver->Close());
        return absl::UnavailableError("Drive: the stream ended");
      }
    } else if (!drive->Write(control) || !drive->Read(&observation)) {
      return FromGrpc("Drive", drive->Finish());
    }
    const SteadyClock::time_point received = SteadyClock::now();
    if (observation.time().tick() != tick + 1) ++irregular;
    return std::chrono::duration<double, std::micro>(received - sent).count();
  };
  // One ping-pong with the sizes of the Drive messages just exchanged.
  const auto echo_round_trip = [&]() -> absl::StatusOr<double> {
    echo_request.set_reply_bytes(static_cast<std::uint32_t>(observation.ByteSizeLong()));
    if (control.ByteSizeLong() != fitted_request_bytes) {
      fitted_request_bytes = control.ByteSizeLong();
      FitPayload(fitted_request_bytes, echo_request);
    }
    const SteadyClock::time_point sent = SteadyClock::now();
    if (!exchange->Write(echo_request) || !exchange->Read(&echo_reply)) {
      return FromGrpc("Echo.Exchange", exchange->Finish());
    }
    const SteadyClock::time_point received = SteadyClock::now();
    return std::chrono::duration<double, std::micro>(received - sent).count();
  };

  // Interleaved, in alternating order, so that both see the same noise.
  for (int i = 0; i < warmup + iterations; ++i) {
    double drive_latency_us = 0.0;
    double echo_latency_us = 0.0;
    if (i % 2 == 0) {
      ASSIGN_OR_RETURN(drive_latency_us, drive_round_trip());
      ASSIGN_OR_RETURN(echo_latency_us, echo_round_trip());
    } else {
      ASSIGN_OR_RETURN(echo_latency_us, echo_round_trip());
      ASSIGN_OR_RETURN(drive_latency_us, drive_round_trip());
    }
    if (i >= warmup) {
      drive_us.push_back(drive_latency_us);
      echo_us.push_back(echo_latency_us);
    }
  }
  const std::size_t observation_bytes = observation.ByteSizeLong();
  const std::size_t echo_request_bytes = echo_request.ByteSizeLong();
  const std::size_t echo_reply_bytes = echo_reply.ByteSizeLong();

  if (driver != nullptr) {
    RETURN_IF_ERROR(driver->Close());
  } else {
    drive->WritesDone();
    while (drive->Read(&observation)) {
    }
    RETURN_IF_ERROR(FromGrpc("Drive (end)", drive->Finish()));
  }
  exchange->WritesDone();
  while (exchange->Read(&echo_reply)) {
  }
  RETURN_IF_ERROR(FromGrpc("Echo.Exchange (end)", exchange->Finish()));
  ASSIGN_OR_RETURN(const v1::SessionInfo info, GetSession(*simulator, session.id));

  const LatencySummary drive_summary = Summarize(drive_us);
  const LatencySummary echo_summary = Summarize(echo_us);
  const double ratio = drive_summary.p50_us / echo_summary.p50_us;
  absl::PrintF("drive: %d round trips of each kind after %d warm-up, interleaved\n", iterations,
               warmup);
  absl::PrintF("  %-30s %8s %8s %8s %8s %14s\n", "", "p50 us", "p90 us", "p99 us", "max us",
               "bytes out/in");
  absl::PrintF("  %-30s %8.1f %8.1f %8.1f %8.1f %8d / %-4d\n",
               absl::StrCat("Drive (", drive_client, ") ctl -> obs"),
               drive_summary.p50_us, drive_summary.p90_us, drive_summary.p99_us,
               drive_summary.max_us, control.ByteSizeLong(), observation_bytes);
  absl::PrintF("  %-30s %8.1f %8.1f %8.1f %8.1f %8d / %-4d\n", "bidi ping-pong (Echo)",
               echo_summary.p50_us, echo_summary.p90_us, echo_summary.p99_us, echo_summary.max_us,
               echo_request_bytes, echo_reply_bytes);
  absl::PrintF("  p50 Drive / ping-pong: %.2f (target <= 1.1)\n", ratio);
  absl::PrintF(
      "  session: %d paced ticks, %d barrier timeouts, %d observations not of the next "
      "tick\n",
      info.clock_stats().paced_ticks(), info.clock_stats().barrier_timeouts(), irregular);
  JsonObject json;
  json.String("mode", "drive")
      .String("server", "in-process")
      .String("drive_client", drive_client)
      .Integer("iterations", iterations)
      .Number("drive_p50_us", drive_summary.p50_us)
      .Number("drive_p90_us", drive_summary.p90_us)
      .Number("drive_p99_us", drive_summary.p99_us)
      .Number("pingpong_p50_us", echo_summary.p50_us)
      .Number("pingpong_p90_us", echo_summary.p90_us)
      .Number("pingpong_p99_us", echo_summary.p99_us)
      .Number("p50_ratio", ratio)
      .Integer("barrier_timeouts", static_cast<std::int64_t>(info.clock_stats().barrier_timeouts()))
      .Integer("irregular_observations", static_cast<std::int64_t>(irregular));
  absl::PrintF("JSON %s\n", json.str());
  server->Shutdown();
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------------
// stream

absl::Status RunStreamMode() {
  const int vehicles = absl::GetFlag(FLAGS_vehicles) > 0 ? absl::GetFlag(FLAGS_vehicles) : 1000;
  const double seconds = absl::GetFlag(FLAGS_seconds);
  ASSIGN_OR_RETURN(const Target target, ConnectOrStart(16, vehicles));
  absl::PrintF("server: %s\n", target.description);
  std::fflush(stdout);  // The pid, for a profiler, even when stdout is a file.
  ASSIGN_OR_RETURN(const auto channel, Connect(target.address, 0));
  const auto stub = v1::Simulator::NewStub(channel);

  v1::SessionConfig config;
  config.set_clock_mode(v1::CLOCK_MODE_REALTIME);
  config.set_real_time_factor(0.0);  // As fast as the server can step it.
  config.set_paused(true);           // Resumed once the reader is in place.
  ASSIGN_OR_RETURN(const CirclingSession session, CreateCirclingSession(*stub, config, vehicles));
  bool deleted = false;
  absl::Cleanup delete_session = [&] {
    if (!deleted) (void)DeleteSession(*stub, session.id);
  };

  // The reader: a tight blocking loop on its own thread, reusing one message (its repeated
  // fields keep their allocations from frame to frame).
  grpc::ClientContext context;
  v1::StreamStatesRequest request;
  request.set_session_id(session.id);
  const auto reader = stub->StreamStates(&context, request);
  std::atomic<std::uint64_t> frames{0};
  std::atomic<std::uint64_t> states{0};
  std::atomic<std::uint64_t> skipped{0};
  std::thread reading([&] {
    v1::StreamStatesResponse response;
    while (reader->Read(&response)) {
      states.fetch_add(response.state().vehicles_size(), std::memory_order_relaxed);
      skipped.fetch_add(response.skipped_frames(), std::memory_order_relaxed);
      frames.fetch_add(1, std::memory_order_relaxed);
    }
  });
  absl::Cleanup stop_reading = [&] {
    if (!deleted) context.TryCancel();  // Else the stream ends with OK on its own.
    reading.join();
  };
  if (!WaitUntil([&] { return frames.load() > 0; }, kStartupTimeout)) {
    return absl::UnavailableError("StreamStates: no first frame");
  }

  const std::uint64_t frames_before = frames.load();
  const std::uint64_t states_before = states.load();
  const std::uint64_t skipped_before = skipped.load();
  const std::optional<double> server_cpu_before = target.CpuSeconds();
  ASSIGN_OR_RETURN(const double client_cpu_before, ProcessCpuSeconds(getpid()));
  const SteadyClock::time_point start = SteadyClock::now();
  RETURN_IF_ERROR(SetPaused(*stub, session.id, false));

  absl::SleepFor(absl::Seconds(seconds));

  const std::uint64_t frames_in_window = frames.load() - frames_before;
  const std::uint64_t states_in_window = states.load() - states_before;
  const std::uint64_t skipped_in_window = skipped.load() - skipped_before;
  const SteadyClock::time_point end = SteadyClock::now();
  const std::optional<double> server_cpu_after = target.CpuSeconds();
  ASSIGN_OR_RETURN(const double client_cpu_after, ProcessCpuSeconds(getpid()));
  ASSIGN_OR_RETURN(const v1::SessionInfo info, GetSession(*stub, session.id));
  const std::uint64_t ticks = info.clock_stats().paced_ticks();  // All since the resume.

  RETURN_IF_ERROR(DeleteSession(*stub, session.id));
  deleted = true;
  std::move(stop_reading).Invoke();
  RETURN_IF_ERROR(FromGrpc("StreamStates", reader->Finish()));

  const double wall_s = Seconds(end - start);
  const double states_per_s = static_cast<double>(states_in_window) / wall_s;
  std::optional<double> server_cpu_s;
  if (server_cpu_before.has_value() && server_cpu_after.has_value()) {
    server_cpu_s = *server_cpu_after - *server_cpu_before;
  }
  const double client_cpu_s = client_cpu_after - client_cpu_before;
  absl::PrintF(
      "stream: one reader of a %d-vehicle REALTIME session at real_time_factor 0, "
      "%.1f s\n",
      vehicles, wall_s);
  absl::PrintF("  %-30s %.3f million/s (target >= 6)\n", "vehicle states received",
               states_per_s * 1e-6);
  absl::PrintF("  %-30s %.0f/s (%d in the window)\n", "frames received",
               static_cast<double>(frames_in_window) / wall_s, frames_in_window);
  absl::PrintF("  %-30s %.0f/s (at least %d in the window)\n", "session ticks",
               static_cast<double>(ticks) / wall_s, ticks);
  absl::PrintF("  %-30s %d (%.1f %% of the ticks)\n", "skipped frames", skipped_in_window,
               ticks == 0 ? 0.0 : 100.0 * static_cast<double>(skipped_in_window) / ticks);
  absl::PrintF("  %-30s %s\n", "server CPU", CpuLabel(server_cpu_s, wall_s));
  absl::PrintF("  %-30s %s\n", "client CPU (this process)", CpuLabel(client_cpu_s, wall_s));
  JsonObject json;
  json.String("mode", "stream")
      .Integer("vehicles", vehicles)
      .Number("seconds", wall_s)
      .Number("vehicle_states_per_s", states_per_s)
      .Number("frames_per_s", static_cast<double>(frames_in_window) / wall_s)
      .Number("ticks_per_s", static_cast<double>(ticks) / wall_s)
      .Integer("skipped_frames", static_cast<std::int64_t>(skipped_in_window))
      .Number("server_cpu_percent_of_core",
              server_cpu_s.has_value() ? std::optional<double>(100.0 * *server_cpu_s / wall_s)
                                       : std::nullopt)
      .Number("client_cpu_percent_of_core", 100.0 * client_cpu_s / wall_s);
  absl::PrintF("JSON %s\n", json.str());
  return absl::OkStatus();
}

// Steps of two big lockstep sessions, alone and two at once (see --mode=steps).
absl::Status RunStepsMode() {
  const int vehicles = absl::GetFlag(FLAGS_vehicles) > 0 ? absl::GetFlag(FLAGS_vehicles) : 20000;
  const int ticks = absl::GetFlag(FLAGS_ticks);
  const int repetitions = std::max(1, absl::GetFlag(FLAGS_repetitions));
  ASSIGN_OR_RETURN(const Target target, ConnectOrStart(4, vehicles));
  absl::PrintF("server: %s\n", target.description);
  std::fflush(stdout);
  std::vector<std::unique_ptr<v1::Simulator::Stub>> stubs;
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    ASSIGN_OR_RETURN(const auto channel, Connect(target.address, i));
    stubs.push_back(v1::Simulator::NewStub(channel));
    ASSIGN_OR_RETURN(const CirclingSession session,
                     CreateCirclingSession(*stubs.back(), v1::SessionConfig(), vehicles));
    ids.push_back(session.id);
  }
  const auto step = [&](int i) -> absl::Status {
    v1::StepRequest request;
    request.set_session_id(ids[i]);
    request.set_ticks(ticks);
    v1::StepResponse response;
    grpc::ClientContext context;
    return FromGrpc("Step", stubs[i]->Step(&context, request, &response));
  };
  const auto seconds_since = [](SteadyClock::time_point start) {
    return std::chrono::duration<double>(SteadyClock::now() - start).count();
  };
  std::vector<double> alone_s;
  std::vector<double> parallel_s;
  for (int r = 0; r < repetitions; ++r) {
    SteadyClock::time_point start = SteadyClock::now();
    RETURN_IF_ERROR(step(0));
    alone_s.push_back(seconds_since(start));
    start = SteadyClock::now();
    absl::Status other;
    std::thread second([&] { other = step(1); });
    const absl::Status first = step(0);
    second.join();
    RETURN_IF_ERROR(first);
    RETURN_IF_ERROR(other);
    parallel_s.push_back(seconds_since(start));
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double alone = median(alone_s);
  const double parallel = median(parallel_s);
  absl::PrintF("steps: Step{ticks: %d} of %d-vehicle lockstep sessions, medians of %d\n", ticks,
               vehicles, repetitions);
  absl::PrintF("  %-30s %.3f s\n", "one session alone", alone);
  absl::PrintF("  %-30s %.3f s\n", "two sessions at once", parallel);
  absl::PrintF("  %-30s %.2f (1 = perfectly parallel, 2 = serial)\n", "parallel / alone",
               parallel / alone);
  JsonObject json;
  json.String("mode", "steps")
      .Integer("vehicles", vehicles)
      .Integer("ticks", ticks)
      .Number("alone_s", alone)
      .Number("parallel_s", parallel)
      .Number("parallel_over_alone", parallel / alone);
  absl::PrintF("JSON %s\n", json.str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace pitlane::load_tool

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Loads a Pitlane server: --mode=realtime (many REALTIME sessions and subscribers, "
      "--sweep), drive (Drive round trip vs a bidi ping-pong) or stream (StreamStates "
      "throughput). See bench/load_tool.cc.");
  absl::ParseCommandLine(argc, argv);
  // As the server does (server/main.cc): no lock-order checks on every Mutex acquisition.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);

  const std::string mode = absl::GetFlag(FLAGS_mode);
  absl::Status status;
  if (mode == "realtime") {
    status = pitlane::load_tool::RunRealtimeMode();
  } else if (mode == "drive") {
    status = pitlane::load_tool::RunDriveMode();
  } else if (mode == "stream") {
    status = pitlane::load_tool::RunStreamMode();
  } else if (mode == "steps") {
    status = pitlane::load_tool::RunStepsMode();
  } else {
    status = absl::InvalidArgumentError(
        absl::StrCat("--mode: must be realtime, drive, stream or steps, got '", mode, "'"));
  }
  if (!status.ok()) {
    std::fprintf(stderr, "load_tool: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}
