// pitlane: Pitlane from the command line, on the C++ client (pitlane::client).
//
//   pitlane [--address=HOST:PORT] [--token_file=FILE] [--tls --ca_file=FILE] COMMAND [ARGS]
//
//   health                       exit 0 if the server is SERVING (a health check)
//   ls                           the sessions: id, name, clock, tick, vehicles
//   create [--name=N] [--scenario=S] [--clock=lockstep|realtime|barrier]
//                                prints the new session's id (and its owner token, with tokens)
//   rm SESSION                   deletes a session
//   reset SESSION                back to tick 0 as created
//   spawn SESSION [--count=N] [--x=M --y=M --yaw=RAD --speed=M/S]
//                                kinematic bicycles; prints their ids
//   step SESSION [--ticks=N]     advances a LOCKSTEP session; prints the tick
//   watch SESSION [--messages=N] [--every_n_ticks=N] [--rate_hz=HZ]
//                                the session's cars (a table per message)
//   token SESSION --role=owner|driver|viewer [--vehicle=ID]
//                                mints a token; prints it and its id
//   drive SESSION --vehicle=ID [--ticks=N] [--accel=M/S2] [--steer=RAD]
//                                drives a car through Drive with constant controls for N
//                                observations (a BARRIER or REALTIME session moves on its
//                                own); prints the last tick and the car's speed
//   record SESSION [--telemetry_rate_hz=HZ] [--foxglove_rate_hz=HZ] [--max_mib=MIB] [--max_s=S]
//                                starts recording a session; prints the recording's id
//   stop-recording RECORDING     stops it; prints its ticks and bytes
//   recordings                   the recordings: id, session, state, ticks, seconds, bytes
//   fetch RECORDING [--out=FILE] downloads it (to RECORDING.mcap by default); prints the path
//   rm-recording RECORDING       deletes a stopped recording's file
//   play RECORDING [--start_s=S] [--play_speed=X] [--paused] [--clock=lockstep|realtime]
//                                plays a recording back into a new read-only session; prints
//                                its id (and its owner token, with tokens)
//   seek SESSION --time_s=S      moves a playback to S seconds into its recording; prints the
//                                frame shown and its tick
//   race SESSION [--laps=N] [--countdown_s=S] [--grid] [--vehicles=ID,ID,...] [--track=NAME]
//        [--replace]             calls a race (docs/racing.md): the cars named (in grid order),
//                                or every car timed on the track; --grid puts them on the
//                                session's spawn points; unset rules are the session's. Prints
//                                the grid
//   results SESSION [--format=table|csv|json]
//                                the results of its last race (the standings so far while it
//                                runs): a table, or the server's CSV or JSON for grading
//
// Exit codes: 0 done; 1 the server refused or could not be reached (the message says why);
// 2 a bad command line.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "pitlane/client.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051", "The server's gRPC address, host:port.");
ABSL_FLAG(std::string, token_file, "", "A file holding a Pitlane token (or $PITLANE_TOKEN).");
ABSL_FLAG(bool, tls, false, "Connect with TLS (--ca_file: the server's CA; else the system's).");
ABSL_FLAG(std::string, ca_file, "", "PEM certificates of the CA that signed the server's.");
ABSL_FLAG(std::string, replica, "", "Behind a proxy: the server that calls about no session go to.");
ABSL_FLAG(double, timeout_s, 30.0, "Deadline of every call, seconds.");
ABSL_FLAG(std::string, name, "", "create: the session's name.");
ABSL_FLAG(std::string, scenario, "", "create: a scenario to start from (demo, oval-race, ...).");
ABSL_FLAG(std::string, clock, "", "create: lockstep, realtime or barrier (default: the scenario's).");
ABSL_FLAG(int32_t, count, 1, "spawn: how many cars.");
ABSL_FLAG(double, x, 0.0, "spawn: x of the first car, metres (the others 6 m apart in y).");
ABSL_FLAG(double, y, 0.0, "spawn: y of the first car, metres.");
ABSL_FLAG(double, yaw, 0.0, "spawn: heading, radians.");
ABSL_FLAG(double, speed, 0.0, "spawn: initial speed, m/s.");
ABSL_FLAG(uint32_t, ticks, 1, "step: ticks to advance.");
ABSL_FLAG(int32_t, messages, 0, "watch: stop after this many messages (0: until the stream ends).");
ABSL_FLAG(uint32_t, every_n_ticks, 1, "watch: one message every N ticks.");
ABSL_FLAG(double, rate_hz, 0.0, "watch: at most this many messages a second (0: no limit).");
ABSL_FLAG(std::string, role, "", "token: owner, driver or viewer.");
ABSL_FLAG(uint64_t, vehicle, 0, "token: the car of a driver token; drive: the car to drive.");
ABSL_FLAG(double, accel, 0.0, "drive: acceleration, m/s².");
ABSL_FLAG(double, steer, 0.0, "drive: steering angle, radians.");
ABSL_FLAG(double, telemetry_rate_hz, 0.0, "record: telemetry frames a second (0: the server's default).");
ABSL_FLAG(double, foxglove_rate_hz, -1.0,
          "record: frames a second on the Foxglove channels (0: none; default: the server's).");
ABSL_FLAG(uint64_t, max_mib, 0, "record: size limit, MiB (0: the server's default).");
ABSL_FLAG(double, max_s, 0.0, "record: duration limit, simulated seconds (0: the server's default).");
ABSL_FLAG(std::string, out, "", "fetch: where to write the file (default RECORDING.mcap).");
ABSL_FLAG(double, start_s, 0.0, "play: where to start, seconds into the recording.");
ABSL_FLAG(double, play_speed, 1.0,
          "play: recorded seconds per second (0: as fast as the server can).");
ABSL_FLAG(bool, paused, false, "play: start paused.");
ABSL_FLAG(double, time_s, -1.0, "seek: where to go, seconds into the recording.");
ABSL_FLAG(uint32_t, laps, 0, "race: laps to race (0: the session's).");
ABSL_FLAG(double, countdown_s, -1.0, "race: seconds to the start (negative: the session's).");
ABSL_FLAG(bool, grid, false, "race: line the cars up on the session's spawn points first.");
ABSL_FLAG(std::vector<std::string>, vehicles, {}, "race: the cars, by id, in grid order.");
ABSL_FLAG(std::string, track, "", "race: the race track (default: the session's first).");
ABSL_FLAG(bool, replace, false, "race: abandon a race still running.");
ABSL_FLAG(std::string, format, "table", "results: table, csv or json.");

namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

int Usage(const std::string& why) {
  std::fprintf(stderr, "pitlane: %s (see --help)\n", why.c_str());
  return kExitUsage;
}

int Failed(const absl::Status& status) {
  std::fprintf(stderr, "pitlane: %s: %s\n", absl::StatusCodeToString(status.code()).c_str(),
               std::string(status.message()).c_str());
  return kExitFailed;
}

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return false;
  std::ostringstream text;
  text << file.rdbuf();
  *out = text.str();
  return true;
}

std::string ClockName(pitlane::v1::ClockMode mode) {
  absl::string_view name = pitlane::v1::ClockMode_Name(mode);
  absl::ConsumePrefix(&name, "CLOCK_MODE_");
  return absl::AsciiStrToLower(name);
}

int List(pitlane::Client& client) {
  absl::StatusOr<std::vector<pitlane::v1::SessionInfo>> sessions = client.ListSessions();
  if (!sessions.ok()) return Failed(sessions.status());
  std::printf("%-40s %-16s %-9s %10s %8s\n", "SESSION", "NAME", "CLOCK", "TICK", "VEHICLES");
  for (const pitlane::v1::SessionInfo& s : *sessions) {
    std::printf("%-40s %-16s %-9s %10llu %8u\n", s.session_id().c_str(),
                s.config().name().c_str(), ClockName(s.config().clock_mode()).c_str(),
                static_cast<unsigned long long>(s.time().tick()), s.vehicle_count());
  }
  return 0;
}

// Prints a new session's id, and with tokens on its owner token (shown only now).
int PrintNewSession(pitlane::Client& client,
                    const absl::StatusOr<pitlane::v1::SessionInfo>& session) {
  if (!session.ok()) return Failed(session.status());
  std::printf("%s\n", session->session_id().c_str());
  const std::string owner = client.OwnerToken(session->session_id());
  if (!owner.empty()) std::printf("owner token: %s\n", owner.c_str());
  return 0;
}

int Create(pitlane::Client& client) {
  pitlane::v1::SessionConfig config;
  config.set_name(absl::GetFlag(FLAGS_name));
  config.set_scenario(absl::GetFlag(FLAGS_scenario));
  const std::string clock = absl::GetFlag(FLAGS_clock);
  if (!clock.empty()) {
    pitlane::v1::ClockMode mode;
    if (!pitlane::v1::ClockMode_Parse("CLOCK_MODE_" + absl::AsciiStrToUpper(clock), &mode) ||
        mode == pitlane::v1::CLOCK_MODE_UNSPECIFIED) {
      return Usage("--clock: lockstep, realtime or barrier, got \"" + clock + "\"");
    }
    config.set_clock_mode(mode);
  }
  return PrintNewSession(client, client.CreateSession(config));
}

int Play(pitlane::Client& client, const std::string& recording_id) {
  pitlane::v1::PlayRecordingRequest request;
  request.set_recording_id(recording_id);
  request.set_start_time_s(absl::GetFlag(FLAGS_start_s));
  request.set_real_time_factor(absl::GetFlag(FLAGS_play_speed));
  request.set_paused(absl::GetFlag(FLAGS_paused));
  const std::string clock = absl::GetFlag(FLAGS_clock);
  if (clock == "lockstep") {
    request.set_clock_mode(pitlane::v1::CLOCK_MODE_LOCKSTEP);
  } else if (!clock.empty() && clock != "realtime") {
    return Usage("--clock: a playback is lockstep or realtime, got \"" + clock + "\"");
  }
  return PrintNewSession(client, client.PlayRecording(request));
}

int Spawn(pitlane::Client& client, const std::string& session_id) {
  const int count = absl::GetFlag(FLAGS_count);
  if (count < 1 || count > 100000) return Usage("--count: 1..100000");
  std::vector<pitlane::v1::VehicleSpec> specs(count);
  for (int i = 0; i < count; ++i) {
    pitlane::v1::VehicleSpec& spec = specs[i];
    spec.mutable_initial_pose()->set_x_m(absl::GetFlag(FLAGS_x));
    spec.mutable_initial_pose()->set_y_m(absl::GetFlag(FLAGS_y) + 6.0 * i);
    spec.mutable_initial_pose()->set_yaw_rad(absl::GetFlag(FLAGS_yaw));
    spec.set_initial_speed_mps(absl::GetFlag(FLAGS_speed));
    spec.mutable_kinematic_bicycle();
  }
  absl::StatusOr<std::vector<std::uint64_t>> ids = client.SpawnVehicles(session_id, specs);
  if (!ids.ok()) return Failed(ids.status());
  for (const std::uint64_t id : *ids) std::printf("%llu\n", static_cast<unsigned long long>(id));
  return 0;
}

int Watch(pitlane::Client& client, const std::string& session_id) {
  pitlane::v1::StreamStatesRequest request;
  request.set_session_id(session_id);
  request.set_every_n_ticks(absl::GetFlag(FLAGS_every_n_ticks));
  if (absl::GetFlag(FLAGS_rate_hz) > 0.0) request.set_max_rate_hz(absl::GetFlag(FLAGS_rate_hz));
  std::unique_ptr<pitlane::StateStream> stream = client.StreamStates(request);
  const int limit = absl::GetFlag(FLAGS_messages);
  pitlane::v1::StreamStatesResponse message;
  for (int n = 0; (limit == 0 || n < limit) && stream->Read(&message); ++n) {
    const pitlane::v1::WorldState& state = message.state();
    std::printf("tick %llu  t=%.2f s  %d vehicles  %d contacts\n",
                static_cast<unsigned long long>(state.time().tick()), state.time().sim_time_s(),
                state.vehicles_size(), state.contacts_size());
    std::printf("  %8s %10s %10s %8s %8s %s\n", "VEHICLE", "X_M", "Y_M", "YAW", "M/S", "");
    for (int i = 0; i < state.vehicles_size() && i < 20; ++i) {
      const pitlane::v1::VehicleState& v = state.vehicles(i);
      std::printf("  %8llu %10.3f %10.3f %8.3f %8.3f %s\n",
                  static_cast<unsigned long long>(v.vehicle_id()), v.x_m(), v.y_m(), v.yaw_rad(),
                  v.speed_mps(), v.crashed() ? "crashed" : "");
    }
    std::fflush(stdout);
  }
  stream->Cancel();
  const absl::Status status = stream->Finish();
  if (!status.ok() && !(limit > 0 && status.code() == absl::StatusCode::kCancelled)) {
    return Failed(status);
  }
  return 0;
}

int Token(pitlane::Client& client, const std::string& session_id) {
  const std::string role = absl::GetFlag(FLAGS_role);
  pitlane::v1::TokenRole value;
  if (!pitlane::v1::TokenRole_Parse("TOKEN_ROLE_" + absl::AsciiStrToUpper(role), &value) ||
      value == pitlane::v1::TOKEN_ROLE_UNSPECIFIED) {
    return Usage("--role: owner, driver or viewer, got \"" + role + "\"");
  }
  absl::StatusOr<pitlane::v1::MintTokenResponse> token =
      client.MintToken(session_id, value, absl::GetFlag(FLAGS_vehicle));
  if (!token.ok()) return Failed(token.status());
  std::printf("%s\n%s\n", token->token().c_str(), token->token_id().c_str());
  return 0;
}

int Drive(pitlane::Client& client, const std::string& session_id) {
  absl::StatusOr<std::unique_ptr<pitlane::Driver>> driver =
      client.Drive(session_id, absl::GetFlag(FLAGS_vehicle));
  if (!driver.ok()) return Failed(driver.status());
  pitlane::v1::VehicleControl control;
  control.set_acceleration_mps2(absl::GetFlag(FLAGS_accel));
  control.set_steering_angle_rad(absl::GetFlag(FLAGS_steer));
  pitlane::v1::DriveResponse observation;
  for (std::uint32_t n = 0; n <= absl::GetFlag(FLAGS_ticks); ++n) {
    if (!(*driver)->Observe(&observation)) break;
    if (n == absl::GetFlag(FLAGS_ticks)) {
      std::printf("%llu %.9f\n", static_cast<unsigned long long>(observation.time().tick()),
                  observation.vehicle().speed_mps());
      const absl::Status closed = (*driver)->Close();
      return closed.ok() ? 0 : Failed(closed);
    }
    (*driver)->Send(observation.time().tick(), control);
  }
  const absl::Status status = (*driver)->Close();
  return Failed(status.ok() ? absl::UnavailableError("the Drive stream ended early") : status);
}

std::string RecordingStateName(pitlane::v1::RecordingState state) {
  absl::string_view name = pitlane::v1::RecordingState_Name(state);
  absl::ConsumePrefix(&name, "RECORDING_STATE_");
  return absl::AsciiStrToLower(name);
}

int Record(pitlane::Client& client, const std::string& session_id) {
  pitlane::v1::RecordingOptions options;
  if (const double rate = absl::GetFlag(FLAGS_telemetry_rate_hz); rate != 0.0) {
    options.set_telemetry_rate_hz(rate);
  }
  if (const double rate = absl::GetFlag(FLAGS_foxglove_rate_hz); rate != -1.0) {
    options.set_foxglove_rate_hz(rate);
  }
  if (const std::uint64_t mib = absl::GetFlag(FLAGS_max_mib); mib != 0) {
    if (mib > (std::uint64_t{1} << 40)) return Usage("--max_mib: at most 2^40");
    options.set_max_bytes(mib << 20);
  }
  if (const double seconds = absl::GetFlag(FLAGS_max_s); seconds != 0.0) {
    options.set_max_duration_s(seconds);
  }
  absl::StatusOr<pitlane::v1::RecordingInfo> recording =
      client.StartRecording(session_id, options);
  if (!recording.ok()) return Failed(recording.status());
  std::printf("%s\n", recording->recording_id().c_str());
  return 0;
}

int Recordings(pitlane::Client& client) {
  absl::StatusOr<std::vector<pitlane::v1::RecordingInfo>> recordings = client.ListRecordings();
  if (!recordings.ok()) return Failed(recordings.status());
  std::printf("%-30s %-30s %-9s %10s %9s %12s\n", "RECORDING", "SESSION", "STATE", "TICKS",
              "SECONDS", "BYTES");
  for (const pitlane::v1::RecordingInfo& recording : *recordings) {
    std::printf("%-30s %-30s %-9s %10llu %9.1f %12llu\n", recording.recording_id().c_str(),
                recording.session_id().c_str(), RecordingStateName(recording.state()).c_str(),
                static_cast<unsigned long long>(recording.ticks()), recording.duration_s(),
                static_cast<unsigned long long>(recording.bytes()));
  }
  return 0;
}

std::string Seconds(bool set, double seconds) {
  return set ? absl::StrFormat("%.3f", seconds) : std::string("-");
}

void PrintStandings(const pitlane::v1::RaceStatus& race) {
  absl::string_view phase = pitlane::v1::RacePhase_Name(race.phase());
  absl::ConsumePrefix(&phase, "RACE_PHASE_");
  std::printf("%s · %u laps · %s · race time %.3f s\n", race.track().c_str(),
              race.rules().laps(), absl::AsciiStrToLower(phase).c_str(), race.race_time_s());
  std::printf("%3s %4s %-24s %4s %10s %9s %10s %7s %-8s\n", "POS", "GRID", "CAR", "LAPS",
              "TOTAL_S", "GAP", "BEST_LAP_S", "PEN_S", "STATE");
  for (const pitlane::v1::RaceStanding& s : race.standings()) {
    const std::string car = s.vehicle_name().empty()
                                ? absl::StrCat("#", s.vehicle_id())
                                : absl::StrCat(s.vehicle_name(), " #", s.vehicle_id());
    const std::string gap = s.position() == 1  ? std::string("-")
                            : s.gap_laps() > 0 ? absl::StrCat("+", s.gap_laps(), "L")
                            : s.has_gap_s()    ? absl::StrFormat("+%.3f", s.gap_s())
                                               : absl::StrFormat("+%.0fm", s.gap_m());
    std::printf("%3u %4u %-24s %4u %10.3f %9s %10s %7.1f %-8s\n", s.position(),
                s.grid_position(), car.substr(0, 24).c_str(), s.laps(), s.total_time_s(),
                gap.c_str(), Seconds(s.has_best_lap_s(), s.best_lap_s()).c_str(),
                s.penalties_s(),
                s.finished() ? "finished" : s.retired() ? "retired" : "running");
  }
}

int Race(pitlane::Client& client, const std::string& session_id) {
  pitlane::v1::StartRaceRequest request;
  request.set_session_id(session_id);
  request.set_track(absl::GetFlag(FLAGS_track));
  request.set_grid_from_spawn_points(absl::GetFlag(FLAGS_grid));
  request.set_replace(absl::GetFlag(FLAGS_replace));
  if (absl::GetFlag(FLAGS_laps) > 0) request.mutable_rules()->set_laps(absl::GetFlag(FLAGS_laps));
  if (absl::GetFlag(FLAGS_countdown_s) >= 0.0) {
    request.mutable_rules()->set_countdown_s(absl::GetFlag(FLAGS_countdown_s));
  }
  for (const std::string& id : absl::GetFlag(FLAGS_vehicles)) {
    std::uint64_t vehicle = 0;
    if (!absl::SimpleAtoi(id, &vehicle)) {
      return Usage("--vehicles: vehicle ids, comma-separated, got \"" + id + "\"");
    }
    request.add_vehicle_ids(vehicle);
  }
  absl::StatusOr<pitlane::v1::RaceStatus> race = client.StartRace(request);
  if (!race.ok()) return Failed(race.status());
  PrintStandings(*race);
  return 0;
}

int Results(pitlane::Client& client, const std::string& session_id) {
  const std::string format = absl::GetFlag(FLAGS_format);
  pitlane::v1::ResultsFormat wanted = pitlane::v1::RESULTS_FORMAT_UNSPECIFIED;
  if (format == "csv") {
    wanted = pitlane::v1::RESULTS_FORMAT_CSV;
  } else if (format == "json") {
    wanted = pitlane::v1::RESULTS_FORMAT_JSON;
  } else if (format != "table") {
    return Usage("--format: table, csv or json, got \"" + format + "\"");
  }
  absl::StatusOr<pitlane::v1::GetRaceResultsResponse> results =
      client.GetRaceResults(session_id, wanted);
  if (!results.ok()) return Failed(results.status());
  if (wanted == pitlane::v1::RESULTS_FORMAT_UNSPECIFIED) {
    PrintStandings(results->race());
  } else {
    std::fwrite(results->content().data(), 1, results->content().size(), stdout);
    if (wanted == pitlane::v1::RESULTS_FORMAT_JSON) std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Pitlane from the command line.\n"
      "Usage: pitlane [--address=HOST:PORT] [--token_file=FILE] COMMAND [SESSION] [flags]\n"
      "Commands: health, ls, create, rm, reset, spawn, step, watch, token, drive, record, "
      "stop-recording, recordings, fetch, rm-recording, play, seek, race, results (see "
      "client/cpp/cli.cc).");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) {
    return Usage(
        "name a command: health, ls, create, rm, reset, spawn, step, watch, token, drive, "
        "record, stop-recording, recordings, fetch, rm-recording, play, seek, race, results");
  }
  const std::string command = args[1];
  static const auto* const kCommands = new std::vector<std::string>{
      "health", "ls",     "create", "rm",    "reset",          "spawn",      "step", "watch",
      "token",  "drive", "record", "stop-recording", "recordings", "fetch", "rm-recording",
      "play",   "seek", "race", "results"};
  if (std::find(kCommands->begin(), kCommands->end(), command) == kCommands->end()) {
    return Usage("unknown command \"" + command + "\"");
  }

  const double timeout_s = absl::GetFlag(FLAGS_timeout_s);
  if (!(timeout_s > 0.0 && timeout_s <= 86400.0)) return Usage("--timeout_s: in (0, 86400]");
  if (absl::GetFlag(FLAGS_messages) < 0) return Usage("--messages: 0 (all) or more");
  pitlane::ClientOptions options;
  options.address = absl::GetFlag(FLAGS_address);
  options.replica = absl::GetFlag(FLAGS_replica);
  options.timeout = absl::Seconds(timeout_s);
  const std::string token_file = absl::GetFlag(FLAGS_token_file);
  if (!token_file.empty()) {
    if (!ReadFile(token_file, &options.token)) return Usage("--token_file: cannot read " + token_file);
  } else if (const char* token = std::getenv("PITLANE_TOKEN"); token != nullptr) {
    options.token = token;
  }
  options.token = std::string(absl::StripAsciiWhitespace(options.token));
  options.tls = absl::GetFlag(FLAGS_tls) || !absl::GetFlag(FLAGS_ca_file).empty();
  if (!absl::GetFlag(FLAGS_ca_file).empty() &&
      !ReadFile(absl::GetFlag(FLAGS_ca_file), &options.root_certificates)) {
    return Usage("--ca_file: cannot read " + absl::GetFlag(FLAGS_ca_file));
  }
  absl::StatusOr<std::unique_ptr<pitlane::Client>> connected = pitlane::Client::Connect(options);
  if (!connected.ok()) return Usage(std::string(connected.status().message()));
  pitlane::Client& client = **connected;

  const bool needs_session = command != "health" && command != "ls" && command != "create" &&
                             command != "recordings";
  const bool on_recording =
      command == "stop-recording" || command == "fetch" || command == "rm-recording" ||
      command == "play";
  if (needs_session && args.size() != 3) {
    return Usage(command + (on_recording ? ": name one RECORDING" : ": name one SESSION"));
  }
  if (!needs_session && args.size() != 2) return Usage(command + ": takes no arguments");
  const std::string session_id = needs_session ? args[2] : "";

  if (command == "health") {
    const absl::Status status = client.Health();
    if (!status.ok()) return Failed(status);
    std::printf("SERVING\n");
    return 0;
  }
  if (command == "ls") return List(client);
  if (command == "create") return Create(client);
  if (command == "rm") {
    const absl::Status status = client.DeleteSession(session_id);
    return status.ok() ? 0 : Failed(status);
  }
  if (command == "reset") {
    absl::StatusOr<pitlane::v1::WorldState> state = client.ResetSession(session_id);
    if (!state.ok()) return Failed(state.status());
    std::printf("%llu\n", static_cast<unsigned long long>(state->time().tick()));
    return 0;
  }
  if (command == "spawn") return Spawn(client, session_id);
  if (command == "step") {
    absl::StatusOr<pitlane::v1::WorldState> state =
        client.Step(session_id, absl::GetFlag(FLAGS_ticks));
    if (!state.ok()) return Failed(state.status());
    std::printf("%llu\n", static_cast<unsigned long long>(state->time().tick()));
    return 0;
  }
  if (command == "watch") return Watch(client, session_id);
  if (command == "token") return Token(client, session_id);
  if (command == "drive") return Drive(client, session_id);
  if (command == "record") return Record(client, session_id);
  if (command == "race") return Race(client, session_id);
  if (command == "results") return Results(client, session_id);
  if (command == "recordings") return Recordings(client);
  const std::string& recording_id = session_id;
  if (command == "stop-recording") {
    absl::StatusOr<pitlane::v1::RecordingInfo> recording = client.StopRecording(recording_id);
    if (!recording.ok()) return Failed(recording.status());
    std::printf("%llu ticks, %llu bytes\n", static_cast<unsigned long long>(recording->ticks()),
                static_cast<unsigned long long>(recording->bytes()));
    return 0;
  }
  if (command == "fetch") {
    std::string path = absl::GetFlag(FLAGS_out);
    if (path.empty()) {
      if (recording_id.empty() || recording_id.front() == '.' ||
          recording_id.find('/') != std::string::npos) {
        return Usage("fetch: RECORDING is not a recording id; give --out=FILE");
      }
      path = recording_id + ".mcap";
    }
    absl::StatusOr<std::uint64_t> bytes = client.DownloadRecording(recording_id, path);
    if (!bytes.ok()) return Failed(bytes.status());
    std::printf("%s %llu bytes\n", path.c_str(), static_cast<unsigned long long>(*bytes));
    return 0;
  }
  if (command == "rm-recording") {
    absl::StatusOr<std::uint64_t> freed = client.DeleteRecording(recording_id);
    return freed.ok() ? 0 : Failed(freed.status());
  }
  if (command == "play") return Play(client, recording_id);
  if (command == "seek") {
    const double time_s = absl::GetFlag(FLAGS_time_s);
    if (!(time_s >= 0.0)) return Usage("seek: give --time_s=SECONDS, >= 0");
    absl::StatusOr<pitlane::v1::SeekPlaybackResponse> sought = client.SeekPlayback(session_id, time_s);
    if (!sought.ok()) return Failed(sought.status());
    std::printf("frame %llu of %llu, tick %llu, %.3f s\n",
                static_cast<unsigned long long>(sought->playback().frame()),
                static_cast<unsigned long long>(sought->playback().frame_count()),
                static_cast<unsigned long long>(sought->time().tick()),
                sought->playback().position_s());
    return 0;
  }
  return Usage("unknown command \"" + command + "\"");
}
