#include "server/session/race_results.h"

#include <cmath>
#include <cstdint>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "server/util/json_text.h"

namespace pitlane::session {
namespace {

std::string Seconds(double seconds) { return absl::StrFormat("%.3f", seconds); }
// Tenths of a metre; a value that rounds to zero is "0.0", never "-0.0".
std::string Metres(double metres) {
  const double tenths = std::round(metres * 10.0);
  return absl::StrFormat("%.1f", tenths == 0.0 ? 0.0 : tenths / 10.0);
}
std::string Seconds(const std::optional<double>& seconds) {
  return seconds.has_value() ? Seconds(*seconds) : "";
}

// One standing's columns, in order: the header's name and the value (JSON: already a JSON
// value; CSV: the same text, strings unquoted).
struct Column {
  const char* name;
  std::string value;
  bool text = false;      // A string (quoted in JSON).
  bool optional = false;  // Empty means not set (null in JSON).
};

std::vector<Column> Columns(const sim::RaceStanding& s) {
  return {
      {"position", absl::StrCat(s.position)},
      {"vehicle_id", absl::StrCat(s.vehicle)},
      {"vehicle_name", s.name, true},
      {"state", StandingState(s), true},
      {"grid_position", absl::StrCat(s.grid_position)},
      {"laps", absl::StrCat(s.laps)},
      {"race_time_s", Seconds(s.race_time_s)},
      {"penalties_s", Seconds(s.penalties_s)},
      {"total_time_s", Seconds(s.race_time_s + s.penalties_s)},
      {"gap_s", Seconds(s.gap_s), false, true},
      {"gap_laps", absl::StrCat(s.gap_laps)},
      {"gap_m", Metres(s.gap_m)},
      {"best_lap_s", Seconds(s.best_lap_s), false, true},
      {"last_lap_s", Seconds(s.last_lap_s), false, true},
      {"distance_m", Metres(s.distance_m)},
      {"jump_starts", absl::StrCat(s.jump_starts)},
      {"contacts", absl::StrCat(s.contacts)},
      {"off_tracks", absl::StrCat(s.off_tracks)},
  };
}

std::string CsvField(std::string value) {
  if (!value.empty() && (value[0] == '=' || value[0] == '+' || value[0] == '-' ||
                         value[0] == '@' || value[0] == '\t' || value[0] == '\r')) {
    value.insert(0, "'");
  }
  if (value.find_first_of(",\"\r\n") == std::string::npos) return value;
  std::string quoted = "\"";
  for (const char c : value) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

std::string JsonString(absl::string_view value) {
  std::string out;
  json::AppendString(value, &out);
  return out;
}

}  // namespace

const char* RacePhaseName(sim::RacePhase phase) {
  switch (phase) {
    case sim::RacePhase::kCountdown: return "countdown";
    case sim::RacePhase::kRacing: return "racing";
    case sim::RacePhase::kFinished: return "finished";
  }
  return "unknown";
}

const char* RaceEventKindName(sim::RaceEvent::Kind kind) {
  using K = sim::RaceEvent::Kind;
  switch (kind) {
    case K::kStart: return "start";
    case K::kJumpStart: return "jump_start";
    case K::kSector: return "sector";
    case K::kLap: return "lap";
    case K::kPenalty: return "penalty";
    case K::kFinish: return "finish";
    case K::kRetired: return "retired";
    case K::kRaceFinished: return "race_finished";
  }
  return "unknown";
}

const char* PenaltyCauseName(sim::RaceEvent::Cause cause) {
  using C = sim::RaceEvent::Cause;
  switch (cause) {
    case C::kNone: return "";
    case C::kJumpStart: return "jump_start";
    case C::kContact: return "contact";
    case C::kOffTrack: return "off_track";
  }
  return "";
}

const char* StandingState(const sim::RaceStanding& standing) {
  if (standing.finished) return "finished";
  if (standing.retired) return "retired";
  return "running";
}

std::string RaceResultsCsv(const RaceReport& report) {
  std::string out;
  std::vector<std::string> header;
  for (const Column& column : Columns({})) header.push_back(column.name);
  absl::StrAppend(&out, absl::StrJoin(header, ","), "\r\n");
  for (const sim::RaceStanding& standing : report.status.standings) {
    std::vector<std::string> row;
    for (Column& column : Columns(standing)) {
      row.push_back(column.text ? CsvField(std::move(column.value)) : std::move(column.value));
    }
    absl::StrAppend(&out, absl::StrJoin(row, ","), "\r\n");
  }
  return out;
}

std::string StandingsJson(const std::vector<sim::RaceStanding>& standings) {
  std::string out = "[";
  for (std::size_t i = 0; i < standings.size(); ++i) {
    if (i > 0) out += ',';
    out += '{';
    bool first = true;
    for (const Column& column : Columns(standings[i])) {
      absl::StrAppend(&out, first ? "" : ",", "\"", column.name, "\":",
                      column.text                                ? JsonString(column.value)
                      : column.optional && column.value.empty() ? std::string("null")
                                                                 : column.value);
      first = false;
    }
    out += '}';
  }
  out += ']';
  return out;
}

std::string RaceEventsJson(absl::Span<const TrackEvent> events) {
  std::string out = "[";
  bool first = true;
  for (const TrackEvent& track_event : events) {
    const auto* event = std::get_if<sim::RaceEvent>(&track_event.event);
    if (event == nullptr) continue;
    absl::StrAppend(&out, first ? "" : ",", "{\"tick\":", track_event.tick, ",\"kind\":\"",
                    RaceEventKindName(event->kind), "\",\"vehicle_id\":", event->vehicle,
                    ",\"race_time_s\":", Seconds(event->time_s), ",\"lap\":", event->lap,
                    ",\"sector\":", event->sector);
    if (event->kind == sim::RaceEvent::Kind::kPenalty) {
      absl::StrAppend(&out, ",\"penalty_s\":", Seconds(event->value), ",\"cause\":\"",
                      PenaltyCauseName(event->cause), "\"");
    } else if (event->kind == sim::RaceEvent::Kind::kLap ||
               event->kind == sim::RaceEvent::Kind::kSector) {
      absl::StrAppend(&out, ",\"duration_s\":", Seconds(event->value));
    }
    out += '}';
    first = false;
  }
  out += ']';
  return out;
}

std::string RaceResultsJson(const RaceReport& report) {
  const sim::RaceRules& rules = report.status.rules;
  return absl::StrCat(
      "{\"session_id\":", JsonString(report.session_id), ",\"track\":", JsonString(report.track),
      ",\"phase\":\"", RacePhaseName(report.status.phase), "\",\"tick\":", report.time.tick,
      ",\"sim_time_s\":", Seconds(report.time.sim_time_s),
      ",\"race_time_s\":", Seconds(report.status.race_time_s), ",\"rules\":{\"laps\":",
      rules.laps, ",\"countdown_s\":", Seconds(rules.countdown_s),
      ",\"jump_start_m\":", Seconds(rules.jump_start_m),
      ",\"penalty_jump_start_s\":", Seconds(rules.penalty_jump_start_s),
      ",\"penalty_contact_s\":", Seconds(rules.penalty_contact_s),
      ",\"penalty_off_track_s\":", Seconds(rules.penalty_off_track_s),
      ",\"finish_timeout_s\":", Seconds(rules.finish_timeout_s),
      "},\"standings\":", StandingsJson(report.status.standings), "}");
}

}  // namespace pitlane::session
