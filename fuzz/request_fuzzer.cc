// Fuzzes the api layer's checks and conversions with arbitrary request messages.
//
// Input: one byte that picks a pitlane.v1 request type, then that message's wire bytes. The
// message goes through what its handler does (server/api/simulator_service.cc) without gRPC:
// the conversion functions of convert.h, then the session call, on a fresh small session
// (LOCKSTEP, no scheduler, low limits). A request may fail; nothing may crash, trip a
// sanitizer, or leave a NaN or an infinity in a vehicle's state (fuzz_checks.h).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "fuzz/fuzz_checks.h"
#include "google/protobuf/stubs/logging.h"
#include "pitlane/v1/simulator.pb.h"
#include "server/api/convert.h"
#include "server/api/scenarios.h"
#include "server/session/session.h"
#include "server/session/session_manager.h"
#include "server/session/testing/recording_transport.h"
#include "spdlog/spdlog.h"

namespace pitlane::fuzz {
namespace {

namespace v1 = ::pitlane::v1;

// Low limits keep one input's work small: a Step of a few ticks of a few vehicles.
const session::ServerLimits kLimits = {
    .max_sessions = 4, .max_vehicles_per_session = 16, .max_ticks_per_step = 16};

// The session every request but CreateSession goes to: one vehicle of three models, a route
// for route followers, walls, an obstacle.
constexpr char kBaseSession[] = R"pb(
  name: "fuzz"
  max_vehicles: 16
  bounds { min_x_m: -200 min_y_m: -200 max_x_m: 200 max_y_m: 200 }
  obstacles { center_x_m: 30 length_m: 2 width_m: 2 }
  tracks {
    name: "loop"
    closed: true
    points { x_m: -50 y_m: -50 }
    points { x_m: 50 y_m: -50 }
    points { x_m: 50 y_m: 50 }
    points { x_m: -50 y_m: 50 }
  }
  spawn_points { name: "grid 1" pose { x_m: -40 y_m: -52 } }
  spawn_points { name: "grid 2" pose { x_m: -48 y_m: -48 } }
  race { laps: 1 countdown_s: 0.1 }
  vehicles { initial_speed_mps: 5 kinematic_bicycle {} }
  vehicles { initial_pose { y_m: 10 } physics_body {} }
  vehicles { initial_pose { y_m: 20 } four_wheel {} }
  vehicles {
    initial_pose { x_m: -50 y_m: -50 }
    single_track {}
    driver { route_follower { track: "loop" target_speed_mps: 10 } }
  }
)pb";

session::SessionManager& Manager() {
  static auto* const manager = new session::SessionManager(kLimits);
  return *manager;
}

std::shared_ptr<session::Session> BaseSession() {
  static const session::SessionRequest* const request = [] {
    const absl::StatusOr<v1::SessionConfig> config = api::ParseScenario("base", kBaseSession);
    if (!config.ok()) Fail("the base session does not parse");
    const auto converted = api::SessionRequestFromProto(*config);
    if (!converted.ok()) {
      std::fprintf(stderr, "%s\n", converted.status().ToString().c_str());
      Fail("the base session does not convert");
    }
    return new session::SessionRequest(*converted);
  }();
  absl::StatusOr<std::shared_ptr<session::Session>> session = Manager().Create(*request);
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    Fail("the base session cannot be created");
  }
  return *std::move(session);
}

// A few ticks, then the invariants.
void StepAndCheck(session::Session& session) {
  (void)session.Step(3, std::nullopt);
  CheckSession(session);
}

// What CreateSession does: the named scenario under the request's fields, conversion, the
// manager's checks and BuildWorld; then a few ticks of the new session.
void CreateSession(const v1::CreateSessionRequest& request) {
  v1::SessionConfig merged;
  if (!request.config().scenario().empty()) {
    absl::StatusOr<v1::SessionConfig> scenario =
        api::LoadScenario(request.config().scenario(), /*dir=*/"");
    if (!scenario.ok()) return;
    merged = *std::move(scenario);
  }
  merged.MergeFrom(request.config());
  merged.clear_scenario();
  absl::StatusOr<session::SessionRequest> converted = api::SessionRequestFromProto(merged);
  if (!converted.ok()) return;
  // A paced clock needs a scheduler, which this manager lacks: run the session in LOCKSTEP,
  // so that it steps here (Create still checks the rest of the clock).
  converted->clock.mode = session::ClockMode::kLockstep;
  absl::StatusOr<std::shared_ptr<session::Session>> session = Manager().Create(*converted);
  if (!session.ok()) return;
  CheckSession(**session);
  StepAndCheck(**session);
  (void)(*session)->Reset();
  CheckSession(**session);
  (void)Manager().Delete((*session)->id());
}

void SpawnVehicle(const v1::SpawnVehicleRequest& request, session::Session& session) {
  const absl::StatusOr<std::vector<sim::VehicleSpec>> specs =
      api::VehicleSpecsFromProto(request.vehicles(), session.config().route_names);
  if (!specs.ok()) return;
  (void)session.SpawnVehicles(*specs);
  StepAndCheck(session);
}

void SetControls(const v1::SetControlsRequest& request, session::Session& session) {
  std::vector<sim::VehicleInput> inputs;
  for (const v1::VehicleControl& control : request.controls()) {
    inputs.push_back(api::VehicleInputFromProto(control));
  }
  (void)session.SetControls(inputs);
  StepAndCheck(session);
}

void AddObstacle(const v1::AddObstacleRequest& request, session::Session& session) {
  std::vector<sim::ObstacleSpec> specs;
  for (const v1::ObstacleSpec& spec : request.obstacles()) {
    specs.push_back(api::ObstacleSpecFromProto(spec));
  }
  (void)session.AddObstacles(specs);
  StepAndCheck(session);
}

void Step(const v1::StepRequest& request, session::Session& session) {
  std::optional<std::uint64_t> expected_tick;
  if (request.has_expected_tick()) expected_tick = request.expected_tick();
  (void)session.Step(request.ticks(), expected_tick);
  CheckSession(session);
}

void SetClock(const v1::SetClockRequest& request, session::Session& session) {
  session::ClockUpdate update;
  if (request.has_clock_mode()) {
    const absl::StatusOr<session::ClockMode> mode = api::ClockModeFromProto(request.clock_mode());
    if (!mode.ok()) return;
    update.mode = *mode;
  }
  if (request.has_real_time_factor()) update.real_time_factor = request.real_time_factor();
  if (request.has_paused()) update.paused = request.paused();
  if (request.has_barrier_timeout_s()) update.barrier_timeout_s = request.barrier_timeout_s();
  (void)session.SetClock(update);
  StepAndCheck(session);
}

// The options StreamStates builds (its checks are in the handler), subscribed with a
// transport that takes every delivery.
void StreamStates(const v1::StreamStatesRequest& request, session::Session& session) {
  session::SubscriberOptions options;
  if (request.has_every_n_ticks()) options.every_n_ticks = request.every_n_ticks();
  if (request.has_max_rate_hz()) options.max_rate_hz = request.max_rate_hz();
  options.vehicle_ids.assign(request.vehicle_ids().begin(), request.vehicle_ids().end());
  std::sort(options.vehicle_ids.begin(), options.vehicle_ids.end());
  options.vehicle_ids.erase(std::unique(options.vehicle_ids.begin(), options.vehicle_ids.end()),
                            options.vehicle_ids.end());
  if (options.every_n_ticks < 1) return;
  if (options.max_rate_hz.has_value() &&
      !(*options.max_rate_hz > 0.0 && *options.max_rate_hz <= 1e9)) {
    return;
  }
  auto [transport, subscriber] = session::testutil::RecordingTransport::Make(session.clock(),
                                                                             options);
  if (!session.Subscribe(subscriber).ok()) return;
  StepAndCheck(session);
  for (const session::Delivery& delivery : transport->deliveries()) {
    CheckFrame(*delivery.frame, session.config().world.max_vehicles,
               session.config().world.max_contacts);
  }
  session.Unsubscribe(subscriber.get());
}

// A Drive stream's message. `attach`: a controller attaches to that vehicle, a control
// answers the current observation, a few ticks, it leaves. `control`: a controller attached
// to the first vehicle sends it for its tick (stale, late and future ticks alike).
void Drive(const v1::DriveRequest& request, session::Session& session) {
  auto [transport, controller] = session::testutil::RecordingTransport::Make(session.clock());
  if (request.has_attach()) {
    const v1::DriveAttach& attach = request.attach();
    const session::DisconnectAction on_disconnect =
        attach.on_disconnect() == v1::DISCONNECT_ACTION_HOLD_CONTROLS
            ? session::DisconnectAction::kHoldControls
            : session::DisconnectAction::kBrakeToStop;
    if (!session.AttachController(attach.vehicle_id(), on_disconnect, controller).ok()) return;
    v1::VehicleControl control;
    control.set_acceleration_mps2(2.0);
    (void)session.ApplyControl(controller.get(), session.Now().tick,
                               api::VehicleInputFromProto(control));
  } else if (request.has_control()) {
    const sim::VehicleId first = session.CurrentFrame()->vehicles.front().id;
    if (!session.AttachController(first, session::DisconnectAction::kBrakeToStop, controller)
             .ok()) {
      Fail("cannot attach to the base session's first vehicle");
    }
    StepAndCheck(session);
    (void)session.ApplyControl(controller.get(), request.control().tick(),
                               api::VehicleInputFromProto(request.control().control()));
  } else {
    return;
  }
  StepAndCheck(session);
  session.DetachController(controller.get());
  StepAndCheck(session);
}

// The race's results as the API encodes them (protobuf, and CSV or JSON as `format` asks;
// both for an unknown value), if there is one.
void RaceResults(session::Session& session, int format = v1::RESULTS_FORMAT_UNSPECIFIED) {
  const absl::StatusOr<session::RaceReport> race = session.Race();
  if (!race.ok()) return;
  v1::RaceStatus status;
  api::RaceStatusToProto(race->status, race->track, &status);
  if (format != v1::RESULTS_FORMAT_JSON && session::RaceResultsCsv(*race).empty()) {
    Fail("race results: empty CSV");
  }
  if (format != v1::RESULTS_FORMAT_CSV && session::RaceResultsJson(*race).empty()) {
    Fail("race results: empty JSON");
  }
}

// StartRace as its handler does it: the track by name, the rules over the session's, the
// cars, the grid from the spawn points; then the results in every format.
void StartRace(const v1::StartRaceRequest& request, session::Session& session) {
  const session::SessionConfig& config = session.config();
  session::StartRaceCommand command;
  absl::StatusOr<std::uint32_t> route = session.RaceTrack(request.track());
  if (!route.ok()) return;
  command.route = *route;
  absl::StatusOr<sim::RaceRules> rules =
      api::RaceRulesFromProto(request.rules(), config.race_rules, "rules");
  if (!rules.ok()) return;
  command.rules = *rules;
  command.vehicles.assign(request.vehicle_ids().begin(), request.vehicle_ids().end());
  command.replace = request.replace();
  if (request.grid_from_spawn_points()) {
    for (const session::SpawnPoint& slot : config.spawn_points) command.grid.push_back(slot.pose);
  }
  (void)session.StartRace(command);
  RaceResults(session);
}


enum class RequestType : std::uint8_t {
  kCreateSession,
  kSpawnVehicle,
  kSetControls,
  kAddObstacle,
  kStep,
  kSetClock,
  kStreamStates,
  kDrive,
  kRemoveVehicle,
  kRemoveObstacle,
  kResetSession,
  kStartRace,
  kGetRaceResults,
  kCount,
};

template <typename Message>
bool Parse(const std::string& bytes, Message& message) {
  return message.ParseFromString(bytes);
}

void Run(RequestType type, const std::string& bytes) {
  if (type == RequestType::kCreateSession) {
    v1::CreateSessionRequest request;
    if (Parse(bytes, request)) CreateSession(request);
    return;
  }
  const std::shared_ptr<session::Session> session = BaseSession();
  switch (type) {
    case RequestType::kSpawnVehicle: {
      v1::SpawnVehicleRequest request;
      if (Parse(bytes, request)) SpawnVehicle(request, *session);
      break;
    }
    case RequestType::kSetControls: {
      v1::SetControlsRequest request;
      if (Parse(bytes, request)) SetControls(request, *session);
      break;
    }
    case RequestType::kAddObstacle: {
      v1::AddObstacleRequest request;
      if (Parse(bytes, request)) AddObstacle(request, *session);
      break;
    }
    case RequestType::kStep: {
      v1::StepRequest request;
      if (Parse(bytes, request)) Step(request, *session);
      break;
    }
    case RequestType::kSetClock: {
      v1::SetClockRequest request;
      if (Parse(bytes, request)) SetClock(request, *session);
      break;
    }
    case RequestType::kStreamStates: {
      v1::StreamStatesRequest request;
      if (Parse(bytes, request)) StreamStates(request, *session);
      break;
    }
    case RequestType::kDrive: {
      v1::DriveRequest request;
      if (Parse(bytes, request)) Drive(request, *session);
      break;
    }
    case RequestType::kRemoveVehicle: {
      v1::RemoveVehicleRequest request;
      if (Parse(bytes, request)) {
        (void)session->RemoveVehicle(request.vehicle_id());
        StepAndCheck(*session);
      }
      break;
    }
    case RequestType::kRemoveObstacle: {
      v1::RemoveObstacleRequest request;
      if (Parse(bytes, request)) {
        (void)session->RemoveObstacle(request.obstacle_id());
        StepAndCheck(*session);
      }
      break;
    }
    case RequestType::kResetSession: {
      v1::ResetSessionRequest request;
      if (Parse(bytes, request)) {
        StepAndCheck(*session);
        (void)session->Reset();
        StepAndCheck(*session);
      }
      break;
    }
    case RequestType::kStartRace: {
      v1::StartRaceRequest request;
      if (Parse(bytes, request)) {
        StartRace(request, *session);
        StepAndCheck(*session);
      }
      break;
    }
    case RequestType::kGetRaceResults: {
      v1::GetRaceResultsRequest request;
      if (Parse(bytes, request)) {
        (void)session->StartRace({.rules = {.laps = 1, .countdown_s = 0.0}});
        StepAndCheck(*session);
        RaceResults(*session, request.format());
      }
      break;
    }
    case RequestType::kCreateSession:
    case RequestType::kCount:
      break;
  }
  (void)Manager().Delete(session->id());
}

}  // namespace
}  // namespace pitlane::fuzz

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  spdlog::set_level(spdlog::level::off);  // The manager logs every session it creates.
  // Protobuf logs every string field that is not UTF-8: noise, and slow.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using pitlane::fuzz::RequestType;
  if (size < 1) return 0;
  const auto type = static_cast<RequestType>(data[0] % static_cast<int>(RequestType::kCount));
  pitlane::fuzz::Run(type, std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  return 0;
}
