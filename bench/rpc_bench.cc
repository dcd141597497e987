// RPC overhead: a lockstep Step of a one-vehicle session next to an empty unary call, both
// over a real loopback TCP socket to the same server, in the same run. Run:
//   build/bin/rpc_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// BM_StepVsEmpty alternates the two calls within each iteration (which goes first alternates
// too) and reports the medians of their latencies and their ratio, which is what
// docs/benchmarks.md quotes: on a noisy machine, alternating calls see the same noise.
// BM_StepWithTokenVsWithout alternates a Step on a server without access control and one on a
// server checking tokens (--auth=token, the owner token sent); BM_StepOnTwoServers is its
// baseline, the same Step on two identical servers without tokens (what comparing two servers
// shows by itself); BM_TlsStepVsEmpty is BM_StepVsEmpty over TLS (a certificate made with
// openssl at start).
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "grpcpp/grpcpp.h"
#include "pitlane/bench/baseline.grpc.pb.h"
#include "pitlane/v1/simulator.grpc.pb.h"
#include "server/app/server.h"
#include "server/auth/tokens.h"

namespace pitlane {
namespace {

class BaselineService final : public bench::Baseline::CallbackService {
  grpc::ServerUnaryReactor* Ping(grpc::CallbackServerContext* context,
                                  const bench::Empty* /*request*/,
                                  bench::Empty* /*response*/) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream contents;
  contents << in.rdbuf();
  return contents.str();
}

// A self-signed certificate for 127.0.0.1 and its key, made by openssl in a temporary
// directory: {certificate, key}.
std::pair<std::string, std::string> SelfSignedCertificate() {
  char dir[] = "/tmp/pitlane-rpc-bench-XXXXXX";
  if (mkdtemp(dir) == nullptr) return {};
  const std::string d = dir;
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " + d + "/key.pem -out " + d +
      "/cert.pem 2>/dev/null";
  if (std::system(command.c_str()) != 0) return {};
  std::pair<std::string, std::string> pem{ReadFile(d + "/cert.pem"), ReadFile(d + "/key.pem")};
  std::system(("rm -rf " + d).c_str());
  return pem;
}

struct FixtureOptions {
  bool token = false;  // --auth=token; calls send the session owner's token.
  bool tls = false;
};

// One server for the whole run, with the baseline service beside the Simulator, and a client
// channel to it over TCP.
class Fixture {
 public:
  explicit Fixture(FixtureOptions fixture = {}) {
    app::ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    if (fixture.token) {
      options.access.mode = api::AuthMode::kToken;
      options.admin_token = *auth::NewToken();
      admin_token_ = options.admin_token;
    }
    std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
    if (fixture.tls) {
      const auto [certificate, key] = SelfSignedCertificate();
      if (certificate.empty()) std::abort();  // openssl is missing.
      grpc::SslServerCredentialsOptions ssl;
      ssl.pem_key_cert_pairs.push_back({key, certificate});
      options.credentials = grpc::SslServerCredentials(ssl);
      credentials = grpc::SslCredentials({.pem_root_certs = certificate});
    }
    server_ = *app::Server::Start(options, {&baseline_});
    channel_ = grpc::CreateChannel(server_->address(), credentials);
    simulator_ = v1::Simulator::NewStub(channel_);
    baseline_stub_ = bench::Baseline::NewStub(channel_);
  }

  // A new session holding one kinematic bicycle; returns its id. With tokens, later calls
  // send its owner token.
  std::string NewOneVehicleSession() {
    grpc::ClientContext create_context;
    Authorize(create_context, admin_token_);
    v1::CreateSessionResponse created;
    (void)simulator_->CreateSession(&create_context, {}, &created);
    owner_token_ = created.owner_token();
    v1::SpawnVehicleRequest spawn;
    spawn.set_session_id(created.session().session_id());
    spawn.add_vehicles()->mutable_kinematic_bicycle();
    grpc::ClientContext spawn_context;
    Authorize(spawn_context, owner_token_);
    v1::SpawnVehicleResponse spawned;
    (void)simulator_->SpawnVehicle(&spawn_context, spawn, &spawned);
    return created.session().session_id();
  }

  bool Empty() {
    grpc::ClientContext context;
    bench::Empty request;
    bench::Empty response;
    return baseline_stub_->Ping(&context, request, &response).ok();
  }

  bool Step(const v1::StepRequest& request) {
    grpc::ClientContext context;
    Authorize(context, owner_token_);
    v1::StepResponse response;
    return simulator_->Step(&context, request, &response).ok();
  }

 private:
  static void Authorize(grpc::ClientContext& context, const std::string& token) {
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
  }

  std::string admin_token_;
  std::string owner_token_;
  BaselineService baseline_;
  std::unique_ptr<app::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Simulator::Stub> simulator_;
  std::unique_ptr<bench::Baseline::Stub> baseline_stub_;
};

Fixture& Shared() {
  static Fixture* fixture = new Fixture();
  return *fixture;
}

Fixture& SharedWithTokens() {
  static Fixture* fixture = new Fixture({.token = true});
  return *fixture;
}

// A second server exactly like Shared(): BM_StepOnTwoServers measures what comparing two
// servers costs by itself (which threads are warm, where each server's memory lies).
Fixture& SharedTwin() {
  static Fixture* fixture = new Fixture();
  return *fixture;
}

Fixture& SharedTls() {
  static Fixture* fixture = new Fixture({.tls = true});
  return *fixture;
}

v1::StepRequest OneTick(const std::string& session_id) {
  v1::StepRequest request;
  request.set_session_id(session_id);
  request.set_ticks(1);
  return request;
}

void BM_EmptyUnary(benchmark::State& state) {
  Fixture& fixture = Shared();
  for (auto _ : state) {
    if (!fixture.Empty()) state.SkipWithError("Empty failed");
  }
}
BENCHMARK(BM_EmptyUnary)->UseRealTime();

void BM_Step1Vehicle(benchmark::State& state) {
  Fixture& fixture = Shared();
  const v1::StepRequest request = OneTick(fixture.NewOneVehicleSession());
  for (auto _ : state) {
    if (!fixture.Step(request)) state.SkipWithError("Step failed");
  }
}
BENCHMARK(BM_Step1Vehicle)->UseRealTime();

double Median(std::vector<double>& values) {
  std::nth_element(values.begin(), values.begin() + values.size() / 2, values.end());
  return values[values.size() / 2];
}

// Alternates `first` and `second` (each a call returning whether it succeeded) and reports the
// medians of their latencies as counters `first_name` and `second_name`, µs, and their ratio
// second / first as `ratio_name`.
template <typename First, typename Second>
void Alternate(benchmark::State& state, First first, Second second, const char* first_name,
               const char* second_name, const char* ratio_name) {
  using Clock = std::chrono::steady_clock;
  std::vector<double> first_us;
  std::vector<double> second_us;
  // Each call's latency, µs, and whether it succeeded.
  const auto timed = [](auto& call, std::vector<double>& latencies_us) {
    const Clock::time_point start = Clock::now();
    const bool ok = call();
    latencies_us.push_back(
        std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    return ok;
  };
  bool swap = false;  // Which goes first alternates, so that neither gains from its place.
  for (auto _ : state) {
    const bool ok = swap ? timed(second, second_us) && timed(first, first_us)
                         : timed(first, first_us) && timed(second, second_us);
    if (!ok) state.SkipWithError("call failed");
    swap = !swap;
  }
  const double first_median = Median(first_us);
  const double second_median = Median(second_us);
  state.counters[first_name] = first_median;
  state.counters[second_name] = second_median;
  state.counters[ratio_name] = second_median / first_median;
}

void StepVsEmpty(benchmark::State& state, Fixture& fixture) {
  const v1::StepRequest request = OneTick(fixture.NewOneVehicleSession());
  Alternate(
      state, [&] { return fixture.Empty(); }, [&] { return fixture.Step(request); }, "empty_us",
      "step_us", "step_over_empty");
}

void BM_StepVsEmpty(benchmark::State& state) { StepVsEmpty(state, Shared()); }
BENCHMARK(BM_StepVsEmpty)->UseRealTime()->MinTime(2.0);

// A one-tick Step on `first`'s server and on `second`'s, alternated (Alternate's counters).
void StepOnTwo(benchmark::State& state, Fixture& first, Fixture& second, const char* first_name,
               const char* second_name, const char* ratio_name) {
  const v1::StepRequest on_first = OneTick(first.NewOneVehicleSession());
  const v1::StepRequest on_second = OneTick(second.NewOneVehicleSession());
  Alternate(
      state, [&] { return first.Step(on_first); }, [&] { return second.Step(on_second); },
      first_name, second_name, ratio_name);
}

// The cost of access control: the same Step on a server without it and on one checking a
// token (digest, lookup, role).
void BM_StepWithTokenVsWithout(benchmark::State& state) {
  StepOnTwo(state, Shared(), SharedWithTokens(), "without_token_us", "with_token_us",
            "with_over_without");
}
BENCHMARK(BM_StepWithTokenVsWithout)->UseRealTime()->MinTime(2.0);

// The same Step on two servers without access control: the ratio a comparison of two servers
// shows when nothing differs (BM_StepWithTokenVsWithout's baseline).
void BM_StepOnTwoServers(benchmark::State& state) {
  StepOnTwo(state, Shared(), SharedTwin(), "one_us", "twin_us", "twin_over_one");
}
BENCHMARK(BM_StepOnTwoServers)->UseRealTime()->MinTime(2.0);

// BM_StepVsEmpty over TLS.
void BM_TlsStepVsEmpty(benchmark::State& state) { StepVsEmpty(state, SharedTls()); }
BENCHMARK(BM_TlsStepVsEmpty)->UseRealTime()->MinTime(2.0);

}  // namespace
}  // namespace pitlane

int main(int argc, char** argv) {
  // As pitlane-server does: Debian's Abseil checks every lock for lock-order cycles otherwise.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
