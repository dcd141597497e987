#include "server/api/recording_codec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "server/api/convert.h"
#include "server/api/frame_encoder.h"

#ifndef PITLANE_VERSION
#define PITLANE_VERSION "unknown"
#endif

namespace pitlane::api {

void CommandToProto(std::uint64_t run, std::uint64_t tick, const session::Command& command,
                    absl::Span<const std::string> route_names, v1::RecordedCommand* out) {
  out->Clear();
  out->set_run(run);
  out->set_tick(tick);
  std::visit(
      [&](const auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, session::SpawnVehiclesCommand>) {
          v1::RecordedCommand::SpawnVehicles* spawn = out->mutable_spawn();
          for (const sim::VehicleSpec& spec : c.specs) {
            VehicleSpecToProto(spec, route_names, spawn->add_vehicles());
          }
        } else if constexpr (std::is_same_v<T, session::RemoveVehicleCommand>) {
          out->set_remove_vehicle(c.vehicle_id);
        } else if constexpr (std::is_same_v<T, session::AddObstaclesCommand>) {
          v1::RecordedCommand::AddObstacles* add = out->mutable_add_obstacles();
          for (const sim::ObstacleSpec& spec : c.specs) ObstacleSpecToProto(spec, add->add_obstacles());
        } else if constexpr (std::is_same_v<T, session::RemoveObstacleCommand>) {
          out->set_remove_obstacle(c.obstacle_id);
        } else if constexpr (std::is_same_v<T, session::SetControlsCommand>) {
          v1::RecordedCommand::SetControls* controls = out->mutable_set_controls();
          for (const sim::VehicleInput& input : c.inputs) {
            VehicleInputToProto(input, controls->add_controls());
          }
        } else if constexpr (std::is_same_v<T, session::AttachControllerCommand>) {
          out->set_attach_controller(c.vehicle_id);
        } else if constexpr (std::is_same_v<T, session::DetachControllerCommand>) {
          v1::RecordedCommand::DetachedController* detach = out->mutable_detach_controller();
          detach->set_vehicle_id(c.vehicle_id);
          detach->set_on_disconnect(c.on_disconnect == session::DisconnectAction::kHoldControls
                                        ? v1::DISCONNECT_ACTION_HOLD_CONTROLS
                                        : v1::DISCONNECT_ACTION_BRAKE_TO_STOP);
        } else if constexpr (std::is_same_v<T, session::SetClockCommand>) {
          v1::RecordedCommand::ClockChange* clock = out->mutable_set_clock();
          const session::ClockUpdate& update = c.update;
          if (update.mode.has_value()) clock->set_clock_mode(ClockModeToProto(*update.mode));
          if (update.real_time_factor.has_value()) {
            clock->set_real_time_factor(*update.real_time_factor);
          }
          if (update.paused.has_value()) clock->set_paused(*update.paused);
          if (update.barrier_timeout_s.has_value()) {
            clock->set_barrier_timeout_s(*update.barrier_timeout_s);
          }
        } else if constexpr (std::is_same_v<T, session::ResetCommand>) {
          out->mutable_reset();
        } else if constexpr (std::is_same_v<T, session::StepCommand>) {
          out->set_step(c.ticks);
        } else if constexpr (std::is_same_v<T, session::StartRaceCommand>) {
          v1::RecordedCommand::StartedRace* race = out->mutable_start_race();
          race->set_track_index(c.route);
          RaceRulesToProto(c.rules, race->mutable_rules());
          race->mutable_vehicle_ids()->Add(c.vehicles.begin(), c.vehicles.end());
          race->set_replace(c.replace);
          for (const sim::Pose2& slot : c.grid) {
            v1::Pose2D* pose = race->add_grid();
            pose->set_x_m(slot.x_m);
            pose->set_y_m(slot.y_m);
            pose->set_yaw_rad(slot.yaw_rad);
          }
        }
      },
      command);
}

absl::StatusOr<session::RecordedCommand> CommandFromProto(
    const v1::RecordedCommand& recorded, absl::Span<const std::string> route_names) {
  session::RecordedCommand out{.tick = recorded.tick()};
  switch (recorded.command_case()) {
    case v1::RecordedCommand::kSpawn: {
      absl::StatusOr<std::vector<sim::VehicleSpec>> specs =
          VehicleSpecsFromProto(recorded.spawn().vehicles(), route_names);
      if (!specs.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("spawn.", specs.status().message()));
      }
      out.command = session::SpawnVehiclesCommand{.specs = *std::move(specs)};
      break;
    }
    case v1::RecordedCommand::kRemoveVehicle:
      out.command = session::RemoveVehicleCommand{.vehicle_id = recorded.remove_vehicle()};
      break;
    case v1::RecordedCommand::kAddObstacles: {
      session::AddObstaclesCommand add;
      for (const v1::ObstacleSpec& spec : recorded.add_obstacles().obstacles()) {
        add.specs.push_back(ObstacleSpecFromProto(spec));
      }
      out.command = std::move(add);
      break;
    }
    case v1::RecordedCommand::kRemoveObstacle:
      out.command = session::RemoveObstacleCommand{.obstacle_id = recorded.remove_obstacle()};
      break;
    case v1::RecordedCommand::kSetControls: {
      session::SetControlsCommand controls;
      for (const v1::VehicleControl& control : recorded.set_controls().controls()) {
        controls.inputs.push_back(VehicleInputFromProto(control));
      }
      out.command = std::move(controls);
      break;
    }
    case v1::RecordedCommand::kAttachController:
      out.command = session::AttachControllerCommand{.vehicle_id = recorded.attach_controller()};
      break;
    case v1::RecordedCommand::kDetachController: {
      const v1::RecordedCommand::DetachedController& detach = recorded.detach_controller();
      session::DisconnectAction action;
      switch (detach.on_disconnect()) {
        case v1::DISCONNECT_ACTION_UNSPECIFIED:
        case v1::DISCONNECT_ACTION_BRAKE_TO_STOP:
          action = session::DisconnectAction::kBrakeToStop;
          break;
        case v1::DISCONNECT_ACTION_HOLD_CONTROLS:
          action = session::DisconnectAction::kHoldControls;
          break;
        default:
          return absl::InvalidArgumentError(
              absl::StrCat("detach_controller.on_disconnect: no such value ",
                           static_cast<int>(detach.on_disconnect())));
      }
      out.command = session::DetachControllerCommand{.vehicle_id = detach.vehicle_id(),
                                                     .on_disconnect = action};
      break;
    }
    case v1::RecordedCommand::kSetClock: {
      const v1::RecordedCommand::ClockChange& clock = recorded.set_clock();
      session::ClockUpdate update;
      if (clock.has_clock_mode()) {
        absl::StatusOr<session::ClockMode> mode = ClockModeFromProto(clock.clock_mode());
        if (!mode.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("set_clock.", mode.status().message()));
        }
        update.mode = *mode;
      }
      if (clock.has_real_time_factor()) update.real_time_factor = clock.real_time_factor();
      if (clock.has_paused()) update.paused = clock.paused();
      if (clock.has_barrier_timeout_s()) update.barrier_timeout_s = clock.barrier_timeout_s();
      out.command = session::SetClockCommand{.update = update};
      break;
    }
    case v1::RecordedCommand::kReset:
      out.command = session::ResetCommand{};
      break;
    case v1::RecordedCommand::kStep:
      out.command = session::StepCommand{.ticks = recorded.step()};
      break;
    case v1::RecordedCommand::kStartRace: {
      const v1::RecordedCommand::StartedRace& race = recorded.start_race();
      absl::StatusOr<sim::RaceRules> rules =
          RaceRulesFromProto(race.rules(), {}, "start_race.rules");
      if (!rules.ok()) return rules.status();
      // The world checks the track and the vehicles when the command is applied.
      out.command = session::StartRaceCommand{
          .route = race.track_index(),
          .rules = *rules,
          .vehicles = {race.vehicle_ids().begin(), race.vehicle_ids().end()},
          .replace = race.replace()};
      for (const v1::Pose2D& slot : race.grid()) {
        std::get<session::StartRaceCommand>(out.command)
            .grid.push_back({slot.x_m(), slot.y_m(), slot.yaw_rad()});
      }
      break;
    }
    case v1::RecordedCommand::COMMAND_NOT_SET:
      return absl::InvalidArgumentError("command: none set");
  }
  return out;
}

namespace {

// `value` * `scale`, to the nearest whole number (halves away from zero), held within what a
// double counts exactly; 0 for NaN (a state never holds one: see fuzz_checks.h).
std::int64_t Quantize(double value, double scale) {
  constexpr double kLimit = 9007199254740992.0;  // 2^53
  const double scaled = value * scale;
  if (std::isnan(scaled)) return 0;
  return std::llround(std::clamp(scaled, -kLimit, kLimit));
}

}  // namespace

void FrameToRecordedStates(const session::Frame& frame, v1::RecordedStates* out) {
  out->Clear();
  out->set_run(frame.run);
  out->set_tick(frame.time.tick);
  out->set_sim_time_s(frame.time.sim_time_s);
  const int count = static_cast<int>(frame.lean ? frame.motion.size() : frame.vehicles.size());
  out->mutable_vehicle_id_steps()->Reserve(count);
  out->mutable_x_mm()->Reserve(count);
  out->mutable_y_mm()->Reserve(count);
  out->mutable_yaw_100urad()->Reserve(count);
  out->mutable_speed_mmps()->Reserve(count);
  sim::VehicleId previous = 0;
  const auto add = [&](sim::VehicleId id, const sim::Pose2& pose, double speed_mps, bool crashed) {
    out->add_vehicle_id_steps(id - previous);
    previous = id;
    out->add_x_mm(Quantize(pose.x_m, 1e3));
    out->add_y_mm(Quantize(pose.y_m, 1e3));
    out->add_yaw_100urad(static_cast<std::int32_t>(Quantize(pose.yaw_rad, 1e4)));
    out->add_speed_mmps(Quantize(speed_mps, 1e3));
    if (crashed) out->add_crashed_vehicle_ids(id);
  };
  if (frame.lean) {
    const sim::MotionColumns& motion = frame.motion;
    for (std::size_t i = 0; i < motion.size(); ++i) {
      add(motion.ids[i], {motion.x_m[i], motion.y_m[i], motion.yaw_rad[i]}, motion.speed_mps[i],
          motion.crashed[i] != 0);
    }
    return;
  }
  for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
    add(vehicle.id, vehicle.pose, vehicle.speed_mps, vehicle.crashed);
  }
}

ProtoRecordingEncoder::ProtoRecordingEncoder(FrameWriter telemetry, VehicleDescriber describe)
    : telemetry_(std::move(telemetry)), describe_(std::move(describe)) {}

void ProtoRecordingEncoder::DescribeNew(const session::Frame& frame, std::uint64_t time_ns,
                                        record::RecordingOutput& out) {
  // Frames list their vehicles by ascending id: the new ones are at the end (ids are >= 1).
  const sim::VehicleId last = frame.lean ? (frame.motion.ids.empty() ? 0 : frame.motion.ids.back())
                                         : (frame.vehicles.empty() ? 0 : frame.vehicles.back().id);
  if (describe_ == nullptr || last <= described_up_to_) return;
  std::vector<sim::VehicleId> ids;
  if (frame.lean) {
    ids = frame.motion.ids;
  } else {
    ids.reserve(frame.vehicles.size());
    for (const sim::VehicleSnapshot& vehicle : frame.vehicles) ids.push_back(vehicle.id);
  }
  std::vector<sim::VehicleDescription> now = describe_();
  std::sort(now.begin(), now.end(),
            [](const sim::VehicleDescription& a, const sim::VehicleDescription& b) {
              return a.id < b.id;
            });
  v1::RecordedVehicles message;
  auto known = now.begin();
  for (const sim::VehicleId id : ids) {
    if (id <= described_up_to_) continue;
    v1::RecordedVehicle* described = message.add_vehicles();
    described->set_vehicle_id(id);
    // Both by ascending id.
    while (known != now.end() && known->id < id) ++known;
    if (known != now.end() && known->id == id) {
      VehicleSpecToProto(known->spec, route_names_, described->mutable_spec());
    }
  }
  described_up_to_ = ids.back();
  Write(out, vehicles_, time_ns, message);
}

std::uint16_t ProtoRecordingEncoder::Channel(record::RecordingOutput& out,
                                             const std::string& topic,
                                             const google::protobuf::Descriptor* message) {
  std::string& schema = schemas_[message->full_name()];
  if (schema.empty()) schema = DescriptorSetFor(message);
  return out.Channel({.topic = topic,
                      .message_encoding = "protobuf",
                      .schema_name = message->full_name(),
                      .schema_encoding = "protobuf",
                      .schema = schema});
}

void ProtoRecordingEncoder::Write(record::RecordingOutput& out, std::uint16_t channel,
                                  std::uint64_t time_ns, const google::protobuf::Message& message) {
  scratch_.clear();
  message.SerializeToString(&scratch_);
  out.Write(channel, time_ns, scratch_);
}

void ProtoRecordingEncoder::Begin(const record::RecordingStart& start,
                                  record::RecordingOutput& out) {
  route_names_ = start.config.route_names;
  v1::RecordingHeader header;
  header.set_recording_id(start.recording_id);
  header.set_session_id(start.session_id);
  SessionConfigToProto(start.config, header.mutable_config(), /*with_contents=*/true);
  header.set_start_tick(start.start.tick);
  header.set_start_run(start.start.run);
  header.set_start_state_hash(start.start.state_hash);
  header.set_replayable_from_start(start.start.pristine);
  header.set_telemetry_every_n_ticks(start.telemetry_every_n_ticks);
  header.set_foxglove_every_n_ticks(start.foxglove_every_n_ticks);
  header.set_time_origin_unix_ns(start.time_origin_ns);
  header.set_server_version(PITLANE_VERSION);
  header.set_max_contacts_per_tick(start.config.world.max_contacts);
  header.set_first_vehicle_id(start.start.first_ids.next_vehicle_id);
  header.set_first_obstacle_id(start.start.first_ids.next_obstacle_id);
  Write(out, Channel(out, kRecordingSessionTopic, v1::RecordingHeader::descriptor()),
        start.time_origin_ns, header);
  commands_ = Channel(out, kRecordingCommandsTopic, v1::RecordedCommand::descriptor());
  hashes_ = Channel(out, kRecordingStateHashTopic, v1::TickHash::descriptor());
  if (describe_ != nullptr) {
    vehicles_ = Channel(out, kRecordingVehiclesTopic, v1::RecordedVehicles::descriptor());
  }
  states_ = Channel(out, kRecordingStatesTopic, v1::RecordedStates::descriptor());
  foxglove_every_n_ticks_ = start.foxglove_every_n_ticks;
  if (foxglove_every_n_ticks_ != 0) {
    world_state_ = Channel(out, absl::StrCat("/", start.session_id, "/world_state"),
                           v1::WorldState::descriptor());
  }
}

void ProtoRecordingEncoder::Command(std::uint64_t run, std::uint64_t tick,
                                    const session::Command& command, std::uint64_t time_ns,
                                    record::RecordingOutput& out) {
  CommandToProto(run, tick, command, route_names_, &command_);
  Write(out, commands_, time_ns, command_);
}

void ProtoRecordingEncoder::Hash(std::uint64_t run, std::uint64_t tick, std::uint64_t state_hash,
                                 std::uint64_t time_ns, record::RecordingOutput& out) {
  v1::TickHash hash;
  hash.set_run(run);
  hash.set_tick(tick);
  hash.set_state_hash(state_hash);
  Write(out, hashes_, time_ns, hash);
}

void ProtoRecordingEncoder::Frame(const session::Delivery& delivery, std::uint64_t time_ns,
                                  record::RecordingOutput& out) {
  const session::Frame& frame = *delivery.frame;
  DescribeNew(frame, time_ns, out);
  FrameToRecordedStates(frame, &states_message_);
  Write(out, states_, time_ns, states_message_);
  if (foxglove_every_n_ticks_ == 0) return;
  // The Foxglove channels show the frames of their own rate, each with the contact events
  // since the last one shown (a reset's first frame starts them afresh).
  if (delivery.first_frame) {
    foxglove_events_ = delivery.events;
    foxglove_first_frame_ = true;
  } else {
    foxglove_events_ = session::MergeEvents(std::move(foxglove_events_), delivery.events);
  }
  if (frame.time.tick % foxglove_every_n_ticks_ != 0) return;
  world_state_message_.Clear();  // Keeps its vehicles' messages for the next frame.
  FrameToProto(frame, &world_state_message_);
  Write(out, world_state_, time_ns, world_state_message_);
  if (telemetry_) {
    session::Delivery shown;
    shown.frame = delivery.frame;
    shown.events = std::move(foxglove_events_);
    shown.first_frame = foxglove_first_frame_;
    telemetry_(shown, time_ns, out);
  }
  foxglove_events_ = {};
  foxglove_first_frame_ = false;
}

void ProtoRecordingEncoder::Gap(const record::RecordingGap& gap, std::uint64_t time_ns,
                                record::RecordingOutput& out) {
  v1::RecordingGap message;
  message.set_kind(gap.kind == record::RecordingGap::Kind::kFrames
                       ? v1::RecordingGap::KIND_FRAMES
                       : v1::RecordingGap::KIND_COMMANDS);
  message.set_count(gap.count);
  message.set_first_run(gap.first_run);
  message.set_first_tick(gap.first_tick);
  message.set_run(gap.last_run);
  message.set_last_tick(gap.last_tick);
  Write(out, Channel(out, kRecordingGapsTopic, v1::RecordingGap::descriptor()), time_ns, message);
}

void ProtoRecordingEncoder::End(const record::RecordingProgress& progress, std::uint64_t time_ns,
                                record::RecordingOutput& out) {
  v1::RecordingEnd message;
  message.set_reason(progress.end_reason);
  message.set_ticks(progress.ticks);
  message.set_frames_lost(progress.frames_lost);
  message.set_commands_lost(progress.commands_lost);
  Write(out, Channel(out, kRecordingEndTopic, v1::RecordingEnd::descriptor()), time_ns, message);
}

}  // namespace pitlane::api
