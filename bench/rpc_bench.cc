// RPC overhead: a lockstep Step of a one-vehicle session next to an empty unary call, both
// over a real loopback TCP socket to the same server, in the same run. Run:
//   build/bin/rpc_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// BM_StepVsEmpty alternates the two calls within each iteration and reports the medians of
// their latencies and their ratio, which is what docs/benchmarks.md quotes: on a noisy
// machine, alternating calls see the same noise.
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "grpcpp/grpcpp.h"
#include "pitlane/bench/baseline.grpc.pb.h"
#include "pitlane/v1/simulator.grpc.pb.h"
#include "server/app/server.h"

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

// One server for the whole run, with the baseline service beside the Simulator, and a client
// channel to it over TCP.
class Fixture {
 public:
  Fixture() {
    app::ServerOptions options;
    options.listen_address = "127.0.0.1:0";
    server_ = *app::Server::Start(options, {&baseline_});
    channel_ = grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials());
    simulator_ = v1::Simulator::NewStub(channel_);
    baseline_stub_ = bench::Baseline::NewStub(channel_);
  }

  // A new session holding one kinematic bicycle; returns its id.
  std::string NewOneVehicleSession() {
    grpc::ClientContext create_context;
    v1::CreateSessionResponse created;
    (void)simulator_->CreateSession(&create_context, {}, &created);
    v1::SpawnVehicleRequest spawn;
    spawn.set_session_id(created.session().session_id());
    spawn.add_vehicles()->mutable_kinematic_bicycle();
    grpc::ClientContext spawn_context;
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
    v1::StepResponse response;
    return simulator_->Step(&context, request, &response).ok();
  }

 private:
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

void BM_StepVsEmpty(benchmark::State& state) {
  using Clock = std::chrono::steady_clock;
  Fixture& fixture = Shared();
  const v1::StepRequest request = OneTick(fixture.NewOneVehicleSession());
  std::vector<double> empty_us;
  std::vector<double> step_us;
  for (auto _ : state) {
    const Clock::time_point t0 = Clock::now();
    const bool empty_ok = fixture.Empty();
    const Clock::time_point t1 = Clock::now();
    const bool step_ok = fixture.Step(request);
    const Clock::time_point t2 = Clock::now();
    if (!empty_ok || !step_ok) state.SkipWithError("call failed");
    empty_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    step_us.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
  }
  const double empty_median = Median(empty_us);
  const double step_median = Median(step_us);
  state.counters["empty_us"] = empty_median;
  state.counters["step_us"] = step_median;
  state.counters["step_over_empty"] = step_median / empty_median;
}
BENCHMARK(BM_StepVsEmpty)->UseRealTime()->MinTime(2.0);

}  // namespace
}  // namespace pitlane

BENCHMARK_MAIN();
