// A race's results for grading: the standings as CSV and as JSON (docs/racing.md has the
// columns). The gRPC API, the web endpoint and the CLI all hand out these same bytes.
#ifndef PITLANE_SERVER_SESSION_RACE_RESULTS_H_
#define PITLANE_SERVER_SESSION_RACE_RESULTS_H_

#include <string>
#include <vector>

#include "absl/types/span.h"

#include "server/session/frame.h"
#include "server/sim/racing/readings.h"

namespace pitlane::session {

// A race as it stands, with its session, its track's name and when.
struct RaceReport {
  std::string session_id;
  SimTime time;
  std::string track;
  sim::RaceStatus status;
};

// "countdown", "racing", "finished".
const char* RacePhaseName(sim::RacePhase phase);
// A standing's state: "finished", "retired", or "running".
const char* StandingState(const sim::RaceStanding& standing);

// "start", "jump_start", "sector", "lap", "penalty", "finish", "retired", "race_finished".
const char* RaceEventKindName(sim::RaceEvent::Kind kind);
// "jump_start", "contact", "off_track" ("" for none).
const char* PenaltyCauseName(sim::RaceEvent::Cause cause);

// The standings as a JSON array: one object per car by position, the CSV's columns.
std::string StandingsJson(const std::vector<sim::RaceStanding>& standings);
// A race's events as a JSON array of objects (tick, kind, vehicle_id, race_time_s, lap,
// sector, duration_s or penalty_s and cause).
std::string RaceEventsJson(absl::Span<const TrackEvent> events);

// RFC 4180 CSV: a header row, then one row per car by position; CRLF line ends. Times in
// seconds with millisecond digits; a time not set (no full lap, no gap) is an empty field. A
// vehicle name that a spreadsheet would read as a formula (starting with = + - @, a tab or
// a carriage return) is written with a leading apostrophe.
std::string RaceResultsCsv(const RaceReport& report);
// One JSON object: the session, the track, the phase, the time, the rules, and "standings"
// (one object per car by position, the CSV's columns; null for a time not set).
std::string RaceResultsJson(const RaceReport& report);

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_RACE_RESULTS_H_
