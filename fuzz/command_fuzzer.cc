// Fuzzes the session's one door: a sequence of commands decoded from the input, applied with
// Session::Apply to a small LOCKSTEP session (no scheduler).
//
// Values come from the bytes, special ones included (NaN, infinities, huge, negative, raw
// bit patterns) and ids alive, gone or never given. After every command: no NaN or infinity
// in any vehicle's state and no more vehicles than max_vehicles (fuzz_checks.h). At the end,
// determinism: the run, recorded with a CommandLog, replayed into a fresh session of the same
// config gives the same state hash at every tick. A broken invariant aborts.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <variant>
#include <limits>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_checks.h"
#include "fuzzer/FuzzedDataProvider.h"
#include "server/session/command.h"
#include "server/session/replay.h"
#include "server/session/session.h"

namespace pitlane::fuzz {
namespace {

constexpr std::uint32_t kMaxVehicles = 4;
// Replay steps in chunks of 1000 ticks (replay.cc), so a session it can replay allows that.
constexpr std::uint32_t kMaxTicksPerStep = 1000;
// Most Steps are short; a few ask one tick more than allowed.
constexpr std::uint32_t kMaxFuzzedTicks = 9;
constexpr int kMaxCommands = 64;

// A double from the input: often a special value, else an ordinary one in a physical range,
// else any bit pattern.
double ConsumeDouble(FuzzedDataProvider& data) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  static constexpr std::array<double, 14> kSpecial = {
      std::numeric_limits<double>::quiet_NaN(), kInf, -kInf, 0.0, -0.0,
      std::numeric_limits<double>::max(), std::numeric_limits<double>::lowest(),
      std::numeric_limits<double>::denorm_min(), 1e7, -1e7, 1e300, 1.0, -1.0, 1000.0};
  switch (data.ConsumeIntegralInRange(0, 3)) {
    case 0:
      return kSpecial[data.ConsumeIntegralInRange<std::size_t>(0, kSpecial.size() - 1)];
    case 1: {
      const auto bits = data.ConsumeIntegral<std::uint64_t>();
      double value;
      std::memcpy(&value, &bits, sizeof value);
      return value;
    }
    default:
      return data.ConsumeFloatingPointInRange(-100.0, 100.0);
  }
}

// Sometimes unset, else ConsumeDouble.
std::optional<double> ConsumeOptionalDouble(FuzzedDataProvider& data) {
  if (data.ConsumeBool()) return std::nullopt;
  return ConsumeDouble(data);
}

// A vehicle id: mostly one alive in `now` (the session's current frame), else one from a small
// range (gone or not yet given), else any.
sim::VehicleId ConsumeVehicleId(FuzzedDataProvider& data, const session::Frame& now) {
  const std::vector<sim::VehicleSnapshot>& alive = now.vehicles;
  switch (data.ConsumeIntegralInRange(0, 3)) {
    case 0:
      return data.ConsumeIntegralInRange<sim::VehicleId>(0, 32);
    case 1:
      return data.ConsumeIntegral<sim::VehicleId>();
    default:
      if (alive.empty()) return 1;
      return alive[data.ConsumeIntegralInRange<std::size_t>(0, alive.size() - 1)].id;
  }
}

// The default spec of model `index` (an alternative of sim::VehicleModelSpec).
template <std::size_t... kIndex>
sim::VehicleModelSpec DefaultModel(std::size_t index, std::index_sequence<kIndex...>) {
  sim::VehicleModelSpec model;
  ((index == kIndex ? (model.emplace<kIndex>(), 0) : 0), ...);
  return model;
}

sim::VehicleSpec ConsumeVehicleSpec(FuzzedDataProvider& data) {
  sim::VehicleSpec spec;
  spec.model = DefaultModel(data.ConsumeIntegralInRange<std::size_t>(0, sim::kModelKindCount - 1),
                            std::make_index_sequence<sim::kModelKindCount>());
  // Mostly ordinary poses (so vehicles meet), sometimes anything.
  if (data.ConsumeBool()) {
    spec.initial_pose = {.x_m = data.ConsumeFloatingPointInRange(-30.0, 30.0),
                         .y_m = data.ConsumeFloatingPointInRange(-30.0, 30.0),
                         .yaw_rad = data.ConsumeFloatingPointInRange(-4.0, 4.0)};
  } else {
    spec.initial_pose = {ConsumeDouble(data), ConsumeDouble(data), ConsumeDouble(data)};
  }
  if (data.ConsumeBool()) spec.initial_speed_mps = ConsumeDouble(data);
  if (data.ConsumeBool()) {
    spec.length_m = ConsumeDouble(data);
    spec.width_m = ConsumeDouble(data);
  }
  if (data.ConsumeBool()) {
    spec.limits.max_steering_angle_rad = ConsumeOptionalDouble(data);
    spec.limits.max_acceleration_mps2 = ConsumeOptionalDouble(data);
    spec.limits.max_braking_mps2 = ConsumeOptionalDouble(data);
    spec.limits.max_speed_mps = ConsumeOptionalDouble(data);
    spec.limits.max_reverse_speed_mps = ConsumeOptionalDouble(data);
    spec.limits.max_steering_rate_radps = ConsumeOptionalDouble(data);
  }
  if (data.ConsumeIntegralInRange(0, 7) == 0) {
    spec.range_scan = sim::RangeScanSpec{
        .beam_count = data.ConsumeIntegralInRange<std::uint32_t>(0, 70),
        .field_of_view_rad = ConsumeDouble(data),
        .max_range_m = ConsumeDouble(data)};
  }
  if (data.ConsumeIntegralInRange(0, 7) == 0) {
    spec.nearest_objects = sim::NearestObjectsSpec{
        .count = data.ConsumeIntegralInRange<std::uint32_t>(0, 10),
        .radius_m = ConsumeDouble(data)};
  }
  switch (data.ConsumeIntegralInRange(0, 5)) {
    case 0:
      spec.driver = sim::CruiseDriverSpec{.target_speed_mps = ConsumeDouble(data)};
      break;
    case 1:
      // The session's one route is 0; others do not exist.
      spec.driver = sim::RouteFollowerSpec{
          .route = data.ConsumeIntegralInRange<std::uint32_t>(0, 1),
          .target_speed_mps = ConsumeDouble(data),
          .style = static_cast<sim::DriverStyle>(data.ConsumeIntegralInRange(0, 3))};
      break;
    default:
      break;
  }
  return spec;
}

sim::ObstacleSpec ConsumeObstacleSpec(FuzzedDataProvider& data) {
  sim::ObstacleSpec spec;
  spec.center_x_m = data.ConsumeBool() ? data.ConsumeFloatingPointInRange(-30.0, 30.0)
                                       : ConsumeDouble(data);
  spec.center_y_m = data.ConsumeBool() ? data.ConsumeFloatingPointInRange(-30.0, 30.0)
                                       : ConsumeDouble(data);
  if (data.ConsumeBool()) spec.yaw_rad = ConsumeDouble(data);
  if (data.ConsumeBool()) {
    spec.length_m = ConsumeDouble(data);
    spec.width_m = ConsumeDouble(data);
  }
  return spec;
}

sim::VehicleInput ConsumeInput(FuzzedDataProvider& data, const session::Frame& now) {
  // Each field set with some probability: a model rejects the fields it does not use.
  sim::VehicleInput input{.id = ConsumeVehicleId(data, now)};
  if (data.ConsumeBool()) input.acceleration_mps2 = ConsumeDouble(data);
  if (data.ConsumeBool()) input.steering_angle_rad = ConsumeDouble(data);
  if (data.ConsumeBool()) input.throttle = ConsumeDouble(data);
  if (data.ConsumeBool()) input.brake = ConsumeDouble(data);
  if (data.ConsumeBool()) input.target_speed_mps = ConsumeDouble(data);
  if (data.ConsumeBool()) input.yaw_rate_radps = ConsumeDouble(data);
  return input;
}

// A race on the loop (route 0), or on a route that is none; rules, cars and a grid from the
// bytes.
session::StartRaceCommand ConsumeRace(FuzzedDataProvider& data, const session::Frame& now) {
  session::StartRaceCommand race{.route = data.ConsumeIntegralInRange<std::uint32_t>(0, 1)};
  if (data.ConsumeBool()) race.rules.laps = data.ConsumeIntegralInRange<std::uint32_t>(0, 3);
  if (data.ConsumeBool()) race.rules.countdown_s = ConsumeDouble(data);
  if (data.ConsumeBool()) race.rules.jump_start_m = ConsumeDouble(data);
  if (data.ConsumeBool()) race.rules.penalty_contact_s = ConsumeDouble(data);
  if (data.ConsumeBool()) race.rules.finish_timeout_s = ConsumeDouble(data);
  const int cars = data.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < cars; ++i) race.vehicles.push_back(ConsumeVehicleId(data, now));
  race.replace = data.ConsumeBool();
  const int slots = data.ConsumeIntegralInRange(0, 4);
  for (int i = 0; i < slots; ++i) {
    race.grid.push_back({ConsumeDouble(data), ConsumeDouble(data), ConsumeDouble(data)});
  }
  return race;
}

session::Command ConsumeCommand(FuzzedDataProvider& data, const session::Frame& now) {
  switch (data.ConsumeIntegralInRange(0, 10)) {
    case 0:
    case 1: {
      session::SpawnVehiclesCommand spawn;
      const int count = data.ConsumeIntegralInRange(0, 3);
      for (int i = 0; i < count; ++i) spawn.specs.push_back(ConsumeVehicleSpec(data));
      return spawn;
    }
    case 2:
      return session::RemoveVehicleCommand{.vehicle_id = ConsumeVehicleId(data, now)};
    case 3: {
      session::AddObstaclesCommand add;
      const int count = data.ConsumeIntegralInRange(0, 3);
      for (int i = 0; i < count; ++i) add.specs.push_back(ConsumeObstacleSpec(data));
      return add;
    }
    case 4:
      return session::RemoveObstacleCommand{
          .obstacle_id = data.ConsumeBool() ? data.ConsumeIntegralInRange<sim::ObstacleId>(0, 16)
                                            : data.ConsumeIntegral<sim::ObstacleId>()};
    case 5: {
      session::SetControlsCommand controls;
      const int count = data.ConsumeIntegralInRange(0, 3);
      for (int i = 0; i < count; ++i) controls.inputs.push_back(ConsumeInput(data, now));
      return controls;
    }
    case 6:
      return session::AttachControllerCommand{.vehicle_id = ConsumeVehicleId(data, now)};
    case 7:
      return session::DetachControllerCommand{
          .vehicle_id = ConsumeVehicleId(data, now),
          .on_disconnect = data.ConsumeBool() ? session::DisconnectAction::kBrakeToStop
                                              : session::DisconnectAction::kHoldControls};
    case 8: {
      session::ClockUpdate update;
      if (data.ConsumeBool()) {
        update.mode = static_cast<session::ClockMode>(data.ConsumeIntegralInRange(0, 2));
      }
      if (data.ConsumeBool()) update.real_time_factor = ConsumeDouble(data);
      if (data.ConsumeBool()) update.paused = data.ConsumeBool();
      if (data.ConsumeBool()) update.barrier_timeout_s = ConsumeDouble(data);
      return session::SetClockCommand{.update = update};
    }
    case 9:
      if (data.ConsumeIntegralInRange(0, 3) == 0) return session::ResetCommand{};
      [[fallthrough]];
    case 10:
      // (A race from a case of its own would move the choices of the corpus' inputs.)
      if (data.ConsumeIntegralInRange(0, 3) == 0) return ConsumeRace(data, now);
      [[fallthrough]];
    default:
      return session::StepCommand{
          .ticks = data.ConsumeIntegralInRange(0, 15) == 0
                       ? kMaxTicksPerStep + 1
                       : data.ConsumeIntegralInRange<std::uint32_t>(0, kMaxFuzzedTicks)};
  }
}

// With PITLANE_FUZZ_TRACE set (to reproduce a crash: command_fuzzer CRASH_FILE), each command
// and the vehicles after it, on stderr.
const bool kTrace = std::getenv("PITLANE_FUZZ_TRACE") != nullptr;

std::string Optional(const std::optional<double>& value) {
  return value.has_value() ? absl::StrCat(*value) : "unset";
}

std::string Describe(const session::Command& command) {
  return std::visit(
      [](const auto& c) -> std::string {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, session::SpawnVehiclesCommand>) {
          std::string text = "spawn";
          for (const sim::VehicleSpec& spec : c.specs) {
            const sim::VehicleLimitsSpec& l = spec.limits;
            absl::StrAppend(&text, "\n  model ", spec.model.index(), " pose (",
                            spec.initial_pose.x_m, ", ", spec.initial_pose.y_m, ", ",
                            spec.initial_pose.yaw_rad, ") speed ", spec.initial_speed_mps,
                            " size ", spec.length_m, "x", spec.width_m, " limits steer ",
                            Optional(l.max_steering_angle_rad), " accel ",
                            Optional(l.max_acceleration_mps2), " brake ",
                            Optional(l.max_braking_mps2), " speed ", Optional(l.max_speed_mps),
                            " reverse ", Optional(l.max_reverse_speed_mps), " rate ",
                            Optional(l.max_steering_rate_radps), " driver ",
                            spec.driver.has_value() ? spec.driver->index() + 1 : 0,
                            spec.range_scan.has_value() ? " range_scan" : "",
                            spec.nearest_objects.has_value() ? " nearest" : "");
          }
          return text;
        } else if constexpr (std::is_same_v<T, session::SetControlsCommand>) {
          std::string text = "controls";
          for (const sim::VehicleInput& in : c.inputs) {
            absl::StrAppend(&text, "\n  id ", in.id, " accel ", in.acceleration_mps2, " steer ",
                            in.steering_angle_rad, " throttle ", in.throttle, " brake ",
                            in.brake, " target ", Optional(in.target_speed_mps), " yaw_rate ",
                            in.yaw_rate_radps);
          }
          return text;
        } else if constexpr (std::is_same_v<T, session::StepCommand>) {
          return absl::StrCat("step ", c.ticks);
        } else if constexpr (std::is_same_v<T, session::SetClockCommand>) {
          return absl::StrCat("clock rtf ", Optional(c.update.real_time_factor), " barrier ",
                              Optional(c.update.barrier_timeout_s));
        } else if constexpr (std::is_same_v<T, session::AddObstaclesCommand>) {
          std::string text = "obstacles";
          for (const sim::ObstacleSpec& o : c.specs) {
            absl::StrAppend(&text, "\n  (", o.center_x_m, ", ", o.center_y_m, ") yaw ",
                            o.yaw_rad, " ", o.length_m, "x", o.width_m);
          }
          return text;
        } else if constexpr (std::is_same_v<T, session::StartRaceCommand>) {
          std::string text = absl::StrCat("race route ", c.route, " laps ", c.rules.laps,
                                          " countdown ", c.rules.countdown_s, " replace ",
                                          c.replace, " cars");
          for (const sim::VehicleId id : c.vehicles) absl::StrAppend(&text, " ", id);
          for (const sim::Pose2& slot : c.grid) {
            absl::StrAppend(&text, "\n  slot (", slot.x_m, ", ", slot.y_m, ", ", slot.yaw_rad, ")");
          }
          return text;
        } else {
          return absl::StrCat("command ", typeid(T).name());
        }
      },
      command);
}

void Trace(const session::Command& command, const absl::Status& status,
           const session::Frame& after) {
  if (!kTrace) return;
  std::fprintf(stderr, "%s -> %s\n", Describe(command).c_str(), status.ToString().c_str());
  for (const sim::VehicleSnapshot& v : after.vehicles) {
    std::fprintf(stderr, "    vehicle %llu (%.17g, %.17g, %.17g) speed %.17g\n",
                 static_cast<unsigned long long>(v.id), v.pose.x_m, v.pose.y_m, v.pose.yaw_rad,
                 v.speed_mps);
  }
}

std::shared_ptr<session::Session> MakeSession(const session::SessionConfig& config) {
  const absl::StatusOr<sim::World> world = session::BuildWorld(config);
  if (!world.ok()) Fail("the fuzz session's config does not build");
  auto session = std::make_shared<session::Session>("s-fuzz", config, *world, kMaxTicksPerStep);
  session->Start();
  return session;
}

void Run(FuzzedDataProvider& data) {
  // One route (for route followers), walls or none, either collision policy.
  session::SessionConfig config{
      .name = "fuzz",
      .world = {.tick_rate_hz = data.ConsumeBool() ? 50.0 : 1000.0,
                .seed = data.ConsumeIntegral<std::uint8_t>(),
                .max_vehicles = kMaxVehicles,
                // Small enough that piles of vehicles and obstacles go over it, on both the
                // sorted and the streaming path.
                .max_contacts = 1u + data.ConsumeIntegralInRange<std::uint32_t>(0, 40),
                .collision_policy = data.ConsumeBool() ? sim::CollisionPolicy::kReport
                                                       : sim::CollisionPolicy::kStop,
                .routes = {sim::Route{
                    .points = {{-20, -20}, {20, -20}, {20, 20}, {-20, 20}}, .closed = true}}},
      .route_names = {"loop"}};
  if (data.ConsumeBool()) {
    config.world.bounds = sim::WorldBounds{.min_x_m = -40, .min_y_m = -40, .max_x_m = 40,
                                           .max_y_m = 40};
  }
  const std::shared_ptr<session::Session> original = MakeSession(config);
  auto log = std::make_shared<session::CommandLog>();
  original->AddObserver(log);
  // Checked after every command; the frame checked is also where the next command's vehicle
  // ids come from (one frame per command: a frame computes every sensor).
  std::shared_ptr<const session::Frame> now = CheckSession(*original);
  for (int i = 0; i < kMaxCommands && data.remaining_bytes() > 0; ++i) {
    const session::Command command = ConsumeCommand(data, *now);
    const absl::Status status = original->Apply(command);
    if (kTrace) Trace(command, status, *original->CurrentFrame());
    now = CheckSession(*original);
  }

  // The same run again, from the record alone.
  const std::shared_ptr<session::Session> copy = MakeSession(config);
  auto replayed = std::make_shared<session::CommandLog>();
  copy->AddObserver(replayed);
  const absl::Status status = session::Replay(*copy, log->commands(), original->Now().tick);
  if (!status.ok()) {
    std::fprintf(stderr, "replay: %s\n", status.ToString().c_str());
    Fail("the replay failed");
  }
  const std::vector<session::TickHash> expected = log->hashes();
  const std::vector<session::TickHash> actual = replayed->hashes();
  if (actual != expected) {
    for (std::size_t i = 0; i < std::min(actual.size(), expected.size()); ++i) {
      if (actual[i] == expected[i]) continue;
      std::fprintf(stderr, "tick %llu: hash %llx recorded, %llx replayed\n",
                   static_cast<unsigned long long>(expected[i].tick),
                   static_cast<unsigned long long>(expected[i].state_hash),
                   static_cast<unsigned long long>(actual[i].state_hash));
      break;
    }
    Fail("the replay's hashes differ (ticks recorded, replayed)",
         static_cast<double>(expected.size() * 100000 + actual.size()));
  }
  if (copy->StateHash() != original->StateHash()) Fail("the final state hashes differ");
}

}  // namespace
}  // namespace pitlane::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider provider(data, size);
  pitlane::fuzz::Run(provider);
  return 0;
}
