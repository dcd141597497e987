// A session's frames as the web endpoint sends them, in JSON: foxglove.SceneUpdate for the 3D
// panel (the vehicles each frame; the map, which changes rarely, on a channel of its own),
// per-vehicle telemetry for plots, contacts and foxglove.Log lines. Units are the API's:
// metres, radians, seconds; the world frame is "world" (x east, y north, z up).
#ifndef PITLANE_SERVER_WEB_FRAME_JSON_H_
#define PITLANE_SERVER_WEB_FRAME_JSON_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "server/session/frame.h"
#include "server/session/session.h"
#include "server/session/subscriber.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/obstacle.h"

namespace pitlane::web {

// What a frame does not say of a vehicle: its name, model, body and whether a built-in
// driver steers it.
struct VehicleLook {
  std::string name;
  sim::ModelKind kind = sim::ModelKind::kKinematicBicycle;
  sim::BodyParams body;
  bool has_driver = false;
};

// A session's look beyond its frames: its vehicles' bodies and the map.
struct SessionLook {
  std::string id;
  std::string name;
  absl::flat_hash_map<sim::VehicleId, VehicleLook> vehicles;
  std::vector<sim::Obstacle> obstacles;
  std::vector<sim::Route> routes;
  std::vector<std::string> route_names;
  std::optional<sim::WorldBounds> bounds;
  std::vector<session::SpawnPoint> spawn_points;
  // Equal for equal maps (obstacles, routes, bounds, spawn points): the map is sent again
  // when it changes.
  std::uint64_t map_fingerprint = 0;
};

// From a description with its vehicles and obstacles (Session::Describe(true)).
SessionLook LookOf(const session::SessionDescription& description);

// Every message carries a timestamp, `stamp_ns`: when the server published the frame, ns
// since the Unix epoch, from one monotonic clock for every session (Foxglove's player takes
// a timestamp older than the last as a seek). The frame's own simulated time is in its fields.

// foxglove.SceneUpdate: one entity per vehicle ("vehicle/<id>": its body as a cube coloured
// by state, an arrow for its heading, a label with its name or id and speed), those in
// contact red. Vehicles missing from `look` are drawn with the default body.
std::string SceneJson(const session::Frame& frame, const SessionLook& look,
                      std::uint64_t stamp_ns);
// foxglove.SceneUpdate of the map: routes as lines as wide as their lanes, walls, obstacles
// as boxes, spawn points as arrows.
std::string MapJson(const SessionLook& look, std::uint64_t stamp_ns);
// One vehicle's telemetry (pitlane.VehicleTelemetry, schema VehicleTelemetrySchema()), with
// its range scan when it has one.
// `held`: the controls it holds (null: none known), written as "controls" with its model's
// fields.
std::string TelemetryJson(const session::Frame& frame, const sim::VehicleSnapshot& vehicle,
                          const VehicleLook* look, const sim::VehicleInput* held,
                          std::uint64_t stamp_ns);
// The contacts in effect and the events since the previous delivery (pitlane.Contacts).
std::string ContactsJson(const session::Frame& frame, const session::FrameEvents& events,
                         std::uint64_t stamp_ns);
// foxglove.Log: level 2 info, 3 warning.
// The race of `frame` as pitlane.Race: its track, phase, race time, laps, the standings, and
// the race's events in `events` (those since the previous message); with no race (a reset
// ended it), phase "none" and no standings.
std::string RaceJson(const session::Frame& frame, const session::FrameEvents& events,
                     std::uint64_t stamp_ns);
std::string LogJson(std::uint64_t stamp_ns, int level, absl::string_view name,
                    absl::string_view message);

// The foxglove.Log lines of a delivery of session `id`, for a reader that saw the vehicles
// `before` (nullopt: a new reader, told what it watches from `describe()`): a reset, vehicles
// added and removed, contacts begun (at most 50 lines). `ids` is set to the frame's vehicle
// ids, the next call's `before`.
std::vector<std::string> LogLines(absl::string_view id, const session::Delivery& delivery,
                                  const std::optional<std::vector<sim::VehicleId>>& before,
                                  const std::function<session::SessionDescription()>& describe,
                                  std::uint64_t stamp_ns, std::vector<sim::VehicleId>& ids);

// The browser viewer's compact frame (docs/dashboards.md, "The viewer's channel"): a header,
// then 16 bytes per vehicle in the order of `frame.vehicles`, which is the order of the roster
// whose version it names.
//   'F', version 1, u16 0, u32 roster version, u64 tick, f64 sim_time_s, u32 vehicle count,
//   u32 contacts in effect; per vehicle: f32 x_m, f32 y_m, i16 yaw (rad x 32767/pi),
//   i16 speed (cm/s, clamped), i16 steering angle (rad x 10000, clamped), u8 flags
//   (1 crashed, 2 in contact, 4 built-in driver), u8 model (ModelKind).
inline constexpr std::size_t kViewerHeaderBytes = 32;
inline constexpr std::size_t kViewerVehicleBytes = 16;
std::string ViewerFrame(const session::Frame& frame, const SessionLook& look,
                        std::uint32_t roster_version);
// The roster a viewer frame's vehicles follow: 'R', then JSON {"version", "ids", "names",
// "length_m", "width_m", "offset_m" (reference point to body centre, along the heading)}.
std::string ViewerRoster(const session::Frame& frame, const SessionLook& look,
                         std::uint32_t version);
// The version of the roster of `frame` (a hash of its vehicle ids; never 0).
std::uint32_t RosterVersion(const session::Frame& frame);

// "lockstep", "realtime" or "barrier".
const char* ClockModeName(session::ClockMode mode);
// "vehicle", "obstacle" or "wall".
const char* OtherKindName(sim::ObjectKind kind);

// JSON Schemas of what the functions above write (advertised with each channel).
const std::string& SceneUpdateSchema();
const std::string& VehicleTelemetrySchema();
const std::string& ContactsSchema();
const std::string& LogSchema();
const std::string& RaceSchema();

}  // namespace pitlane::web

#endif  // PITLANE_SERVER_WEB_FRAME_JSON_H_
