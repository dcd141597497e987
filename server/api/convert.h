// Pure conversions between the wire API (pitlane.v1 protos) and the core and session types.
//
// FromProto functions validate what the core cannot see (unset vs zero, unknown enum values,
// a missing oneof) and return InvalidArgument naming the field relative to the message they
// convert; callers prefix the message's own position (e.g. "vehicles[2]").
#ifndef PITLANE_SERVER_API_CONVERT_H_
#define PITLANE_SERVER_API_CONVERT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "pitlane/v1/simulator.pb.h"
#include "server/session/session.h"
#include "server/session/session_manager.h"
#include "server/sim/vehicles/vehicle.h"

namespace pitlane::api {

namespace v1 = ::pitlane::v1;

absl::StatusOr<session::SessionRequest> SessionRequestFromProto(const v1::SessionConfig& config);
// InvalidArgument ("clock_mode") for a value the enum does not have.
absl::StatusOr<session::ClockMode> ClockModeFromProto(int mode);
v1::ClockMode ClockModeToProto(session::ClockMode mode);
// `route_names`: the session's tracks, by index, for a driver that names its track.
absl::StatusOr<sim::VehicleSpec> VehicleSpecFromProto(
    const v1::VehicleSpec& spec, absl::Span<const std::string> route_names = {});
// Every spec of a repeated field; errors name the entry ("vehicles[2].length_m").
absl::StatusOr<std::vector<sim::VehicleSpec>> VehicleSpecsFromProto(
    const google::protobuf::RepeatedPtrField<v1::VehicleSpec>& specs,
    absl::Span<const std::string> route_names);
sim::VehicleInput VehicleInputFromProto(const v1::VehicleControl& control);
// Copies the fields; sim::CheckObstacleSpec validates them.
sim::ObstacleSpec ObstacleSpecFromProto(const v1::ObstacleSpec& spec);

void SimTimeToProto(const session::SimTime& time, v1::SimTime* out);
void SessionToProto(const session::SessionDescription& session, v1::SessionInfo* out);
void PlaybackToProto(const session::PlaybackPosition& playback, v1::PlaybackInfo* out);
// Every field of `config` with its defaults filled in; `with_contents`: also its obstacles
// and vehicles (SessionInfo leaves them out: it lists those present now).
void SessionConfigToProto(const session::SessionConfig& config, v1::SessionConfig* out,
                          bool with_contents);
void VehicleInputToProto(const sim::VehicleInput& input, v1::VehicleControl* out);
void VehicleSpecToProto(const sim::VehicleSpec& spec, absl::Span<const std::string> route_names,
                        v1::VehicleSpec* out);
void ObstacleSpecToProto(const sim::ObstacleSpec& spec, v1::ObstacleSpec* out);
void ContactToProto(const sim::Contact& contact, v1::Contact* out);
void FrameToProto(const session::Frame& frame, v1::WorldState* out);
// `vehicle` of `frame`, with its progress on its track when it has one.
void VehicleStateToProto(const session::Frame& frame, const sim::VehicleSnapshot& vehicle,
                         v1::VehicleState* out);
void EventsToProto(const session::FrameEvents& events,
                   google::protobuf::RepeatedPtrField<v1::ContactEvent>* out);
// The track events of `events` (their lap events' tracks named as `frame` names them).
void TrackEventsToProto(const session::FrameEvents& events, const session::Frame& frame,
                        google::protobuf::RepeatedPtrField<v1::LapEvent>* laps,
                        google::protobuf::RepeatedPtrField<v1::RaceEvent>* races);

// `rules`' fields that are set, over `defaults`, checked: InvalidArgument naming the field
// under `field` ("rules.laps: must be in [1, 1000], got 0").
absl::StatusOr<sim::RaceRules> RaceRulesFromProto(const v1::RaceRules& rules,
                                                  const sim::RaceRules& defaults,
                                                  absl::string_view field);
void RaceRulesToProto(const sim::RaceRules& rules, v1::RaceRules* out);
// `race` on the track named `track`.
void RaceStatusToProto(const sim::RaceStatus& race, const std::string& track,
                       v1::RaceStatus* out);

}  // namespace pitlane::api

#endif  // PITLANE_SERVER_API_CONVERT_H_
