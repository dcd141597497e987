#include "server/web/frame_json.h"

#include <algorithm>
#include <array>
#include <iterator>
#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "server/util/json_text.h"

namespace pitlane::web {
namespace {

using json::AppendInteger;
using json::AppendNumber;
using json::AppendString;

struct Rgba {
  double r, g, b, a;
};

// One colour per model (ModelKind order), readable on a dark or a light background.
constexpr std::array<Rgba, sim::kModelKindCount> kModelColors = {{
    {0.26, 0.52, 0.96, 1.0},  // kinematic_bicycle: blue
    {0.20, 0.73, 0.45, 1.0},  // physics_body: green
    {0.96, 0.62, 0.12, 1.0},  // single_track: orange
    {0.62, 0.40, 0.90, 1.0},  // front_wheel_drive: violet
    {0.10, 0.75, 0.80, 1.0},  // all_wheel_drive: teal
    {0.90, 0.35, 0.70, 1.0},  // force_based: pink
    {0.75, 0.70, 0.20, 1.0},  // four_wheel: olive
}};
constexpr Rgba kCrashed = {0.45, 0.45, 0.45, 1.0};
constexpr Rgba kInContact = {0.95, 0.15, 0.15, 1.0};
constexpr Rgba kHeading = {1.0, 1.0, 1.0, 1.0};
constexpr Rgba kRoute = {0.55, 0.55, 0.60, 0.45};
constexpr Rgba kWall = {0.85, 0.85, 0.85, 1.0};
constexpr Rgba kObstacle = {0.60, 0.45, 0.30, 1.0};
constexpr Rgba kSpawn = {0.30, 0.90, 0.30, 1.0};

void Key(const char* key, std::string* out) {
  out->push_back('"');
  out->append(key);
  out->append("\":");
}

void Time(std::uint64_t ns, std::string* out) {
  out->append("{\"sec\":");
  AppendInteger(ns / 1'000'000'000u, out);
  out->append(",\"nsec\":");
  AppendInteger(ns % 1'000'000'000u, out);
  out->push_back('}');
}

void Color(const Rgba& color, std::string* out) {
  out->append("{\"r\":");
  AppendNumber(color.r, out);
  out->append(",\"g\":");
  AppendNumber(color.g, out);
  out->append(",\"b\":");
  AppendNumber(color.b, out);
  out->append(",\"a\":");
  AppendNumber(color.a, out);
  out->push_back('}');
}

void Vector3(double x, double y, double z, std::string* out) {
  out->append("{\"x\":");
  AppendNumber(x, out);
  out->append(",\"y\":");
  AppendNumber(y, out);
  out->append(",\"z\":");
  AppendNumber(z, out);
  out->push_back('}');
}

// A pose in the plane at height `z_m`, turned by `yaw_rad` about z.
void Pose(double x_m, double y_m, double z_m, double yaw_rad, std::string* out) {
  out->append("{\"position\":");
  Vector3(x_m, y_m, z_m, out);
  out->append(",\"orientation\":{\"x\":0,\"y\":0,\"z\":");
  AppendNumber(std::sin(yaw_rad / 2.0), out);
  out->append(",\"w\":");
  AppendNumber(std::cos(yaw_rad / 2.0), out);
  out->append("}}");
}

void Cube(double x_m, double y_m, double yaw_rad, double length_m, double width_m,
          double height_m, const Rgba& color, std::string* out) {
  out->append("{\"pose\":");
  Pose(x_m, y_m, height_m / 2.0, yaw_rad, out);
  out->append(",\"size\":");
  Vector3(length_m, width_m, height_m, out);
  out->append(",\"color\":");
  Color(color, out);
  out->push_back('}');
}

void Arrow(double x_m, double y_m, double z_m, double yaw_rad, double length_m,
           const Rgba& color, std::string* out) {
  out->append("{\"pose\":");
  Pose(x_m, y_m, z_m, yaw_rad, out);
  out->append(",\"shaft_length\":");
  AppendNumber(length_m * 0.7, out);
  out->append(",\"shaft_diameter\":");
  AppendNumber(length_m * 0.08, out);
  out->append(",\"head_length\":");
  AppendNumber(length_m * 0.3, out);
  out->append(",\"head_diameter\":");
  AppendNumber(length_m * 0.2, out);
  out->append(",\"color\":");
  Color(color, out);
  out->push_back('}');
}

// An entity's head: everything before its primitives. The caller appends the arrays in
// EntityArrays order.
void EntityHead(std::uint64_t timestamp_ns, absl::string_view id,
                const std::vector<std::pair<std::string, std::string>>& metadata,
                std::string* out) {
  out->append("{\"timestamp\":");
  Time(timestamp_ns, out);
  out->append(",\"frame_id\":\"world\",\"id\":");
  AppendString(id, out);
  out->append(",\"lifetime\":{\"sec\":0,\"nsec\":0},\"frame_locked\":false,\"metadata\":[");
  for (std::size_t i = 0; i < metadata.size(); ++i) {
    if (i > 0) out->push_back(',');
    out->append("{\"key\":");
    AppendString(metadata[i].first, out);
    out->append(",\"value\":");
    AppendString(metadata[i].second, out);
    out->push_back('}');
  }
  out->push_back(']');
}

// The primitives of an entity; each a JSON array's contents, possibly empty.
struct Primitives {
  std::string arrows, cubes, lines, texts;
};

void EntityTail(const Primitives& primitives, std::string* out) {
  out->append(",\"arrows\":[");
  out->append(primitives.arrows);
  out->append("],\"cubes\":[");
  out->append(primitives.cubes);
  out->append("],\"spheres\":[],\"cylinders\":[],\"lines\":[");
  out->append(primitives.lines);
  out->append("],\"triangles\":[],\"texts\":[");
  out->append(primitives.texts);
  out->append("],\"models\":[]}");
}

void Text(double x_m, double y_m, double z_m, absl::string_view text, std::string* out) {
  out->append("{\"pose\":");
  Pose(x_m, y_m, z_m, 0.0, out);
  out->append(",\"billboard\":true,\"font_size\":14,\"scale_invariant\":true,\"color\":");
  Color(kHeading, out);
  out->append(",\"text\":");
  AppendString(text, out);
  out->push_back('}');
}

// A line primitive through `points` (x, y pairs) at height `z_m`.
void Line(int type, const std::vector<std::pair<double, double>>& points, double z_m,
          double thickness_m, const Rgba& color, std::string* out) {
  out->append("{\"type\":");
  AppendInteger(static_cast<std::uint64_t>(type), out);
  out->append(",\"pose\":");
  Pose(0.0, 0.0, 0.0, 0.0, out);
  out->append(",\"thickness\":");
  AppendNumber(thickness_m, out);
  out->append(",\"scale_invariant\":false,\"points\":[");
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (i > 0) out->push_back(',');
    Vector3(points[i].first, points[i].second, z_m, out);
  }
  out->append("],\"color\":");
  Color(color, out);
  out->append(",\"colors\":[],\"indices\":[]}");
}

constexpr int kLineStrip = 0;
constexpr int kLineLoop = 1;
constexpr double kVehicleHeight_m = 1.5;

const char* PhaseName(sim::ContactPhase phase) {
  switch (phase) {
    case sim::ContactPhase::kBegan:
      return "began";
    case sim::ContactPhase::kOngoing:
      return "ongoing";
    case sim::ContactPhase::kEnded:
      return "ended";
  }
  return "unknown";
}

void ContactFields(const sim::Contact& contact, std::string* out) {
  out->append("\"vehicle_id\":");
  AppendInteger(static_cast<std::uint64_t>(contact.pair.vehicle), out);
  out->append(",\"other_kind\":\"");
  out->append(OtherKindName(contact.pair.other_kind));
  out->append("\",\"other_id\":");
  AppendInteger(contact.pair.other_id, out);
  out->append(",\"depth_m\":");
  AppendNumber(contact.depth_m, out);
  out->append(",\"normal_x\":");
  AppendNumber(contact.normal_x, out);
  out->append(",\"normal_y\":");
  AppendNumber(contact.normal_y, out);
  out->append(",\"began_tick\":");
  AppendInteger(contact.began_tick, out);
}

// The vehicles in contact at the frame's tick (either side of a pair), for the highlight.
absl::flat_hash_set<sim::VehicleId> Touching(const session::Frame& frame) {
  absl::flat_hash_set<sim::VehicleId> touching;
  for (const sim::Contact& contact : frame.contacts) {
    touching.insert(contact.pair.vehicle);
    if (contact.pair.other_kind == sim::ObjectKind::kVehicle) touching.insert(contact.pair.other_id);
  }
  return touching;
}

// FNV-1a over the bytes of `value`.
template <typename T>
void Mix(std::uint64_t& hash, const T& value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  for (const unsigned char byte : bytes) {
    hash ^= byte;
    hash *= 0x100000001b3ull;
  }
}

}  // namespace

const char* OtherKindName(sim::ObjectKind kind) {
  switch (kind) {
    case sim::ObjectKind::kVehicle:
      return "vehicle";
    case sim::ObjectKind::kObstacle:
      return "obstacle";
    case sim::ObjectKind::kWall:
      return "wall";
  }
  return "unknown";
}

const char* ClockModeName(session::ClockMode mode) {
  switch (mode) {
    case session::ClockMode::kLockstep:
      return "lockstep";
    case session::ClockMode::kRealtime:
      return "realtime";
    case session::ClockMode::kBarrier:
      return "barrier";
  }
  return "unknown";
}

SessionLook LookOf(const session::SessionDescription& description) {
  SessionLook look;
  look.id = description.id;
  look.name = description.config.name;
  look.vehicles.reserve(description.vehicles.size());
  for (const sim::VehicleDescription& vehicle : description.vehicles) {
    look.vehicles[vehicle.id] = {.name = vehicle.spec.name,
                                 .kind = sim::ModelKindOf(vehicle.spec.model),
                                 .body = sim::BodyOf(vehicle.spec),
                                 .has_driver = vehicle.spec.driver.has_value()};
  }
  look.obstacles = description.obstacles;
  look.routes = description.config.world.routes;
  look.route_names = description.config.route_names;
  look.bounds = description.config.world.bounds;
  look.spawn_points = description.config.spawn_points;
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const sim::Obstacle& obstacle : look.obstacles) {
    Mix(hash, obstacle.id);
    Mix(hash, std::hash<std::string>()(obstacle.spec.name));
    Mix(hash, obstacle.spec.center_x_m);
    Mix(hash, obstacle.spec.center_y_m);
    Mix(hash, obstacle.spec.yaw_rad);
    Mix(hash, obstacle.spec.length_m);
    Mix(hash, obstacle.spec.width_m);
  }
  Mix(hash, look.obstacles.size());
  for (const sim::Route& route : look.routes) {
    Mix(hash, route.points.size());
    Mix(hash, route.closed);
    Mix(hash, route.lane_width_m);
    for (const sim::RoutePoint& point : route.points) {
      Mix(hash, point.x_m);
      Mix(hash, point.y_m);
    }
  }
  if (look.bounds.has_value()) {
    Mix(hash, look.bounds->min_x_m);
    Mix(hash, look.bounds->min_y_m);
    Mix(hash, look.bounds->max_x_m);
    Mix(hash, look.bounds->max_y_m);
  }
  Mix(hash, look.spawn_points.size());
  for (const session::SpawnPoint& spawn : look.spawn_points) {
    Mix(hash, spawn.pose.x_m);
    Mix(hash, spawn.pose.y_m);
    Mix(hash, spawn.pose.yaw_rad);
  }
  look.map_fingerprint = hash;
  return look;
}

std::string SceneJson(const session::Frame& frame, const SessionLook& look,
                      std::uint64_t stamp_ns) {
  const std::uint64_t ns = stamp_ns;
  // Vehicles in contact, for the highlight: the contacts are few and sorted by pair.
  const absl::flat_hash_set<sim::VehicleId> touching = Touching(frame);
  std::string out;
  out.reserve(96 + frame.vehicles.size() * 900);
  // Each update replaces the last: vehicles removed since then disappear.
  out.append("{\"deletions\":[{\"timestamp\":");
  Time(ns, &out);
  out.append(",\"type\":1,\"id\":\"\"}],\"entities\":[");
  static const VehicleLook kDefault{.body = {.length_m = 4.5, .width_m = 1.8}};
  Primitives primitives;
  for (std::size_t i = 0; i < frame.vehicles.size(); ++i) {
    const sim::VehicleSnapshot& vehicle = frame.vehicles[i];
    const auto found = look.vehicles.find(vehicle.id);
    const VehicleLook& body = found != look.vehicles.end() ? found->second : kDefault;
    const double c = std::cos(vehicle.pose.yaw_rad);
    const double s = std::sin(vehicle.pose.yaw_rad);
    const double cx = vehicle.pose.x_m + body.body.center_offset_m * c;
    const double cy = vehicle.pose.y_m + body.body.center_offset_m * s;
    const Rgba& color = vehicle.crashed                ? kCrashed
                        : touching.contains(vehicle.id) ? kInContact
                                                        : kModelColors[static_cast<int>(vehicle.kind)];
    if (i > 0) out.push_back(',');
    const std::string label =
        absl::StrCat(body.name.empty() ? absl::StrCat("#", vehicle.id) : body.name, " ",
                     absl::SixDigits(vehicle.speed_mps), " m/s");
    EntityHead(ns, absl::StrCat("vehicle/", vehicle.id),
               {{"model", sim::ModelName(vehicle.kind)},
                {"driver", body.has_driver ? "built-in" : "client"},
                {"crashed", vehicle.crashed ? "true" : "false"}},
               &out);
    primitives.cubes.clear();
    primitives.arrows.clear();
    primitives.texts.clear();
    Cube(cx, cy, vehicle.pose.yaw_rad, body.body.length_m, body.body.width_m, kVehicleHeight_m,
         color, &primitives.cubes);
    Arrow(cx, cy, kVehicleHeight_m + 0.05, vehicle.pose.yaw_rad, body.body.length_m * 0.5,
          kHeading, &primitives.arrows);
    Text(cx, cy, kVehicleHeight_m + 1.0, label, &primitives.texts);
    EntityTail(primitives, &out);
  }
  out.append("]}");
  return out;
}

std::string MapJson(const SessionLook& look, std::uint64_t stamp_ns) {
  const std::uint64_t ns = stamp_ns;
  std::string out = "{\"deletions\":[{\"timestamp\":";
  Time(ns, &out);
  out.append(",\"type\":1,\"id\":\"\"}],\"entities\":[");
  bool first = true;
  const auto next = [&] {
    if (!first) out.push_back(',');
    first = false;
  };
  std::vector<std::pair<double, double>> points;
  for (std::size_t i = 0; i < look.routes.size(); ++i) {
    const sim::Route& route = look.routes[i];
    points.clear();
    for (const sim::RoutePoint& point : route.points) points.emplace_back(point.x_m, point.y_m);
    Primitives primitives;
    Line(route.closed ? kLineLoop : kLineStrip, points, 0.0, route.lane_width_m, kRoute,
         &primitives.lines);
    next();
    EntityHead(ns, absl::StrCat("route/", i),
               {{"name", i < look.route_names.size() ? look.route_names[i] : ""},
                {"lane_width_m", absl::StrCat(route.lane_width_m)}},
               &out);
    EntityTail(primitives, &out);
  }
  if (look.bounds.has_value()) {
    const sim::WorldBounds& b = *look.bounds;
    Primitives primitives;
    Line(kLineLoop, {{b.min_x_m, b.min_y_m}, {b.max_x_m, b.min_y_m}, {b.max_x_m, b.max_y_m},
                     {b.min_x_m, b.max_y_m}},
         0.0, 0.3, kWall, &primitives.lines);
    next();
    EntityHead(ns, "walls", {}, &out);
    EntityTail(primitives, &out);
  }
  for (const sim::Obstacle& obstacle : look.obstacles) {
    Primitives primitives;
    Cube(obstacle.spec.center_x_m, obstacle.spec.center_y_m, obstacle.spec.yaw_rad,
         obstacle.spec.length_m, obstacle.spec.width_m, 1.0, kObstacle, &primitives.cubes);
    next();
    EntityHead(ns, absl::StrCat("obstacle/", obstacle.id), {{"name", obstacle.spec.name}}, &out);
    EntityTail(primitives, &out);
  }
  for (std::size_t i = 0; i < look.spawn_points.size(); ++i) {
    const session::SpawnPoint& spawn = look.spawn_points[i];
    Primitives primitives;
    Arrow(spawn.pose.x_m, spawn.pose.y_m, 0.1, spawn.pose.yaw_rad, 3.0, kSpawn,
          &primitives.arrows);
    next();
    EntityHead(ns, absl::StrCat("spawn/", i), {{"name", spawn.name}}, &out);
    EntityTail(primitives, &out);
  }
  out.append("]}");
  return out;
}

std::string TelemetryJson(const session::Frame& frame, const sim::VehicleSnapshot& vehicle,
                          const VehicleLook* look, const sim::VehicleInput* held,
                          std::uint64_t stamp_ns) {
  std::string out = "{\"timestamp\":";
  Time(stamp_ns, &out);
  out.append(",\"tick\":");
  AppendInteger(frame.time.tick, &out);
  out.append(",\"sim_time_s\":");
  AppendNumber(frame.time.sim_time_s, &out);
  out.append(",\"vehicle_id\":");
  AppendInteger(static_cast<std::uint64_t>(vehicle.id), &out);
  out.append(",\"name\":");
  AppendString(look != nullptr ? look->name : "", &out);
  out.append(",\"model\":\"");
  out.append(sim::ModelName(vehicle.kind));
  out.append("\",\"driver\":\"");
  out.append(look != nullptr && look->has_driver ? "built-in" : "client");
  const std::pair<const char*, double> fields[] = {
      {"x_m", vehicle.pose.x_m},
      {"y_m", vehicle.pose.y_m},
      {"yaw_rad", vehicle.pose.yaw_rad},
      {"speed_mps", vehicle.speed_mps},
      {"acceleration_mps2", vehicle.readout.acceleration_mps2},
      {"steering_angle_rad", vehicle.readout.steering_angle_rad},
      {"yaw_rate_radps", vehicle.readout.yaw_rate_radps},
      {"lateral_speed_mps", vehicle.readout.lateral_speed_mps},
      {"kinetic_energy_j", vehicle.readout.kinetic_energy_j},
      {"dissipated_energy_j", vehicle.readout.dissipated_energy_j},
  };
  out.push_back('"');
  for (const auto& [key, value] : fields) {
    out.push_back(',');
    Key(key, &out);
    AppendNumber(value, &out);
  }
  out.append(",\"crashed\":");
  out.append(vehicle.crashed ? "true" : "false");
  if (held != nullptr) {
    // The model's own controls: pedals, an acceleration, or physics_body's target speed.
    out.append(",\"controls\":{");
    const auto field = [&out](const char* key, double value, bool first = false) {
      if (!first) out.push_back(',');
      Key(key, &out);
      AppendNumber(value, &out);
    };
    switch (vehicle.kind) {
      case sim::ModelKind::kFrontWheelDrive:
      case sim::ModelKind::kAllWheelDrive:
      case sim::ModelKind::kForceBased:
        field("throttle", held->throttle, true);
        field("brake", held->brake);
        field("steering_angle_rad", held->steering_angle_rad);
        break;
      case sim::ModelKind::kPhysicsBody:
        if (held->target_speed_mps.has_value()) {
          field("target_speed_mps", *held->target_speed_mps, true);
        } else {
          field("acceleration_mps2", held->acceleration_mps2, true);
        }
        field("yaw_rate_radps", held->yaw_rate_radps);
        break;
      case sim::ModelKind::kKinematicBicycle:
      case sim::ModelKind::kSingleTrack:
      case sim::ModelKind::kFourWheel:
        field("acceleration_mps2", held->acceleration_mps2, true);
        field("steering_angle_rad", held->steering_angle_rad);
        break;
    }
    out.push_back('}');
  }
  if (vehicle.range_scan.has_value()) {
    const sim::RangeScanReading& scan = *vehicle.range_scan;
    // Beams that meet nothing read +infinity, which JSON cannot hold: null.
    out.append(",\"range_scan\":{\"angle_min_rad\":");
    AppendNumber(scan.angle_min_rad, &out);
    out.append(",\"angle_increment_rad\":");
    AppendNumber(scan.angle_increment_rad, &out);
    out.append(",\"ranges_m\":[");
    for (std::size_t i = 0; i < scan.ranges_m.size(); ++i) {
      if (i > 0) out.push_back(',');
      AppendNumber(scan.ranges_m[i], &out);
    }
    out.append("]}");
  }
  if (const sim::VehicleTrackReading* reading = session::TrackReadingOf(frame, vehicle.id)) {
    // Its progress on its race track (docs/racing.md): lap timers to plot.
    const sim::LapProgress& progress = reading->progress;
    out.append(",\"track_progress\":{\"track\":");
    AppendString(session::TrackNameOf(frame, *reading), &out);
    const auto field = [&out](const char* key, double value) {
      out.push_back(',');
      Key(key, &out);
      AppendNumber(value, &out);
    };
    const auto count = [&out](const char* key, std::uint64_t value) {
      out.push_back(',');
      Key(key, &out);
      AppendInteger(value, &out);
    };
    field("distance_m", progress.distance_m);
    field("lateral_m", progress.position.lateral_m);
    count("laps_completed", progress.laps_completed);
    count("sector", progress.sector);
    field("lap_time_s", progress.lap_time_s);
    if (progress.last_lap_s.has_value()) field("last_lap_s", *progress.last_lap_s);
    if (progress.best_lap_s.has_value()) field("best_lap_s", *progress.best_lap_s);
    count("off_track_count", progress.off_track_count);
    field("off_track_s", progress.off_track_s);
    out.append(",\"on_track\":");
    out.append(progress.position.on_track ? "true" : "false");
    out.push_back('}');
  }
  out.push_back('}');
  return out;
}

namespace {

template <typename T>
void AppendBytes(T value, std::string& out) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));  // x86-64 and ARM64 are little-endian.
  out.append(bytes, sizeof(T));
}

std::int16_t Clamp16(double value) {
  if (!(value > -32767.0)) return -32767;  // NaN too.
  if (value > 32767.0) return 32767;
  return static_cast<std::int16_t>(std::lround(value));
}

}  // namespace

std::uint32_t RosterVersion(const session::Frame& frame) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const sim::VehicleSnapshot& vehicle : frame.vehicles) Mix(hash, vehicle.id);
  Mix(hash, frame.vehicles.size());
  const auto version = static_cast<std::uint32_t>(hash ^ (hash >> 32));
  return version == 0 ? 1 : version;
}

std::string ViewerFrame(const session::Frame& frame, const SessionLook& look,
                        std::uint32_t roster_version) {
  const absl::flat_hash_set<sim::VehicleId> touching = Touching(frame);
  std::string out;
  out.reserve(kViewerHeaderBytes + frame.vehicles.size() * kViewerVehicleBytes);
  out.push_back('F');
  out.push_back('\x01');
  AppendBytes<std::uint16_t>(0, out);
  AppendBytes<std::uint32_t>(roster_version, out);
  AppendBytes<std::uint64_t>(frame.time.tick, out);
  AppendBytes<double>(frame.time.sim_time_s, out);
  AppendBytes<std::uint32_t>(static_cast<std::uint32_t>(frame.vehicles.size()), out);
  AppendBytes<std::uint32_t>(static_cast<std::uint32_t>(frame.contacts.size()), out);
  constexpr double kYawScale = 32767.0 / 3.14159265358979323846;
  for (const sim::VehicleSnapshot& vehicle : frame.vehicles) {
    AppendBytes<float>(static_cast<float>(vehicle.pose.x_m), out);
    AppendBytes<float>(static_cast<float>(vehicle.pose.y_m), out);
    AppendBytes<std::int16_t>(Clamp16(vehicle.pose.yaw_rad * kYawScale), out);
    AppendBytes<std::int16_t>(Clamp16(vehicle.speed_mps * 100.0), out);
    AppendBytes<std::int16_t>(Clamp16(vehicle.readout.steering_angle_rad * 10000.0), out);
    const auto found = look.vehicles.find(vehicle.id);
    const bool driver = found != look.vehicles.end() && found->second.has_driver;
    const std::uint8_t flags = (vehicle.crashed ? 1 : 0) | (touching.contains(vehicle.id) ? 2 : 0) |
                               (driver ? 4 : 0);
    out.push_back(static_cast<char>(flags));
    out.push_back(static_cast<char>(vehicle.kind));
  }
  return out;
}

std::string ViewerRoster(const session::Frame& frame, const SessionLook& look,
                         std::uint32_t version) {
  static const VehicleLook kDefault{.body = {.length_m = 4.5, .width_m = 1.8}};
  std::string ids, names, lengths, widths, offsets;
  for (std::size_t i = 0; i < frame.vehicles.size(); ++i) {
    const sim::VehicleId id = frame.vehicles[i].id;
    const auto found = look.vehicles.find(id);
    const VehicleLook& vehicle = found != look.vehicles.end() ? found->second : kDefault;
    if (i > 0) {
      ids.push_back(',');
      names.push_back(',');
      lengths.push_back(',');
      widths.push_back(',');
      offsets.push_back(',');
    }
    AppendInteger(static_cast<std::uint64_t>(id), &ids);
    AppendString(vehicle.name, &names);
    AppendNumber(vehicle.body.length_m, &lengths);
    AppendNumber(vehicle.body.width_m, &widths);
    AppendNumber(vehicle.body.center_offset_m, &offsets);
  }
  std::string out = "R{\"version\":";
  AppendInteger(static_cast<std::uint64_t>(version), &out);
  absl::StrAppend(&out, ",\"ids\":[", ids, "],\"names\":[", names, "],\"length_m\":[", lengths,
                  "],\"width_m\":[", widths, "],\"offset_m\":[", offsets, "]}");
  return out;
}

std::string ContactsJson(const session::Frame& frame, const session::FrameEvents& events,
                         std::uint64_t stamp_ns) {
  std::string out = "{\"timestamp\":";
  Time(stamp_ns, &out);
  out.append(",\"tick\":");
  AppendInteger(frame.time.tick, &out);
  out.append(",\"sim_time_s\":");
  AppendNumber(frame.time.sim_time_s, &out);
  out.append(",\"contacts\":[");
  for (std::size_t i = 0; i < frame.contacts.size(); ++i) {
    if (i > 0) out.push_back(',');
    out.push_back('{');
    ContactFields(frame.contacts[i], &out);
    out.push_back('}');
  }
  out.append("],\"contacts_dropped\":");
  AppendInteger(frame.contacts_dropped, &out);
  out.append(",\"events\":[");
  for (std::size_t i = 0; i < events.events.size(); ++i) {
    const sim::ContactEvent& event = events.events[i];
    if (i > 0) out.push_back(',');
    out.append("{\"tick\":");
    AppendInteger(event.tick, &out);
    out.append(",\"phase\":\"");
    out.append(PhaseName(event.phase));
    out.append("\",");
    ContactFields(event.contact, &out);
    out.push_back('}');
  }
  out.append("],\"events_dropped\":");
  AppendInteger(events.dropped, &out);
  out.push_back('}');
  return out;
}

std::string RaceJson(const session::Frame& frame, const session::FrameEvents& events,
                     std::uint64_t stamp_ns) {
  std::string out = "{\"timestamp\":";
  Time(stamp_ns, &out);
  out.append(",\"tick\":");
  AppendInteger(frame.time.tick, &out);
  if (frame.race != nullptr) {
    const sim::RaceStatus& race = *frame.race;
    out.append(",\"track\":");
    AppendString(session::RaceTrackName(frame), &out);
    out.append(",\"phase\":\"");
    out.append(session::RacePhaseName(race.phase));
    out.append("\",\"race_time_s\":");
    AppendNumber(race.race_time_s, &out);
    out.append(",\"laps\":");
    AppendInteger(static_cast<std::uint64_t>(race.rules.laps), &out);
    out.append(",\"standings\":");
    out.append(session::StandingsJson(race.standings));
  } else {
    out.append(",\"phase\":\"none\",\"standings\":[]");  // None (any more): a reset.
  }
  out.append(",\"events\":");
  out.append(session::RaceEventsJson(events.race_events));
  out.push_back('}');
  return out;
}

std::string LogJson(std::uint64_t stamp_ns, int level, absl::string_view name,
                    absl::string_view message) {
  std::string out = "{\"timestamp\":";
  Time(stamp_ns, &out);
  out.append(",\"level\":");
  AppendInteger(static_cast<std::uint64_t>(level), &out);
  out.append(",\"message\":");
  AppendString(message, &out);
  out.append(",\"name\":");
  AppendString(name, &out);
  out.append(",\"file\":\"\",\"line\":0}");
  return out;
}

std::vector<std::string> LogLines(absl::string_view id, const session::Delivery& delivery,
                                  const std::optional<std::vector<sim::VehicleId>>& before,
                                  const std::function<session::SessionDescription()>& describe,
                                  std::uint64_t stamp_ns, std::vector<sim::VehicleId>& ids) {
  const session::Frame& frame = *delivery.frame;
  std::vector<std::string> lines;
  ids.clear();
  ids.reserve(frame.vehicles.size());
  for (const sim::VehicleSnapshot& vehicle : frame.vehicles) ids.push_back(vehicle.id);
  if (!before.has_value()) {
    // A new reader of the log: what it is watching.
    const session::SessionDescription description = describe();
    lines.push_back(LogJson(
        stamp_ns, 2, id,
        absl::StrCat("watching session \"", description.config.name, "\": ",
                     frame.vehicles.size(), " vehicles, ", description.obstacle_count,
                     " obstacles, tick ", frame.time.tick, ", ",
                     ClockModeName(description.config.clock.mode), " clock",
                     description.config.clock.paused ? " (paused)" : "")));
  } else {
    if (delivery.first_frame) lines.push_back(LogJson(stamp_ns, 3, id, "the session was reset"));
    std::vector<sim::VehicleId> added;
    std::vector<sim::VehicleId> removed;
    std::set_difference(ids.begin(), ids.end(), before->begin(), before->end(),
                        std::back_inserter(added));
    std::set_difference(before->begin(), before->end(), ids.begin(), ids.end(),
                        std::back_inserter(removed));
    static constexpr std::size_t kListed = 20;
    const auto list = [](const std::vector<sim::VehicleId>& list) {
      std::string text;
      for (std::size_t i = 0; i < std::min(list.size(), kListed); ++i) {
        absl::StrAppend(&text, i > 0 ? ", " : "", list[i]);
      }
      if (list.size() > kListed) absl::StrAppend(&text, " and ", list.size() - kListed, " more");
      return text;
    };
    if (!added.empty()) {
      lines.push_back(LogJson(stamp_ns, 2, id, absl::StrCat("vehicles added: ", list(added))));
    }
    if (!removed.empty()) {
      lines.push_back(
          LogJson(stamp_ns, 2, id, absl::StrCat("vehicles removed: ", list(removed))));
    }
  }
  for (const sim::ContactEvent& event : delivery.events.events) {
    if (event.phase != sim::ContactPhase::kBegan) continue;
    lines.push_back(LogJson(
        stamp_ns, 3, id,
        absl::StrCat("contact: vehicle ", event.contact.pair.vehicle, " and ",
                     OtherKindName(event.contact.pair.other_kind), " ",
                     event.contact.pair.other_id, " at tick ", event.tick)));
    if (lines.size() >= 50) break;  // A pile-up is summarised by the contacts channel.
  }
  return lines;
}

const std::string& SceneUpdateSchema() {
  static const std::string* const schema = new std::string(
      R"({"title":"foxglove.SceneUpdate","type":"object","properties":{)"
      R"("deletions":{"type":"array","items":{"type":"object"}},)"
      R"("entities":{"type":"array","items":{"type":"object"}}},)"
      R"("required":["deletions","entities"]})");
  return *schema;
}

const std::string& VehicleTelemetrySchema() {
  static const std::string* const schema = [] {
    std::string text =
        R"({"title":"pitlane.VehicleTelemetry","type":"object","properties":{)"
        R"("timestamp":{"type":"object","properties":{"sec":{"type":"integer"},"nsec":{"type":"integer"}}},)"
        R"("tick":{"type":"integer"},"sim_time_s":{"type":"number"},"vehicle_id":{"type":"integer"},)"
        R"("name":{"type":"string"},"model":{"type":"string"},"driver":{"type":"string"},)";
    for (const char* key : {"x_m", "y_m", "yaw_rad", "speed_mps", "acceleration_mps2",
                            "steering_angle_rad", "yaw_rate_radps", "lateral_speed_mps",
                            "kinetic_energy_j", "dissipated_energy_j"}) {
      absl::StrAppend(&text, "\"", key, "\":{\"type\":\"number\"},");
    }
    text.append(R"("crashed":{"type":"boolean"},)"
                R"("controls":{"type":"object","additionalProperties":{"type":"number"}},)"
                R"("range_scan":{"type":"object","properties":{"angle_min_rad":{"type":"number"},)"
                R"("angle_increment_rad":{"type":"number"},)"
                R"("ranges_m":{"type":"array","items":{"type":["number","null"]}}}},)"
                R"("track_progress":{"type":"object","properties":{"track":{"type":"string"},)");
    for (const char* key : {"distance_m", "lateral_m", "lap_time_s", "last_lap_s", "best_lap_s",
                            "off_track_s"}) {
      absl::StrAppend(&text, "\"", key, "\":{\"type\":\"number\"},");
    }
    text.append(R"("laps_completed":{"type":"integer"},"sector":{"type":"integer"},)"
                R"("off_track_count":{"type":"integer"},"on_track":{"type":"boolean"}},)"
                R"("required":["track","distance_m","laps_completed","lap_time_s","on_track"]}}})");
    return new std::string(std::move(text));
  }();
  return *schema;
}

const std::string& ContactsSchema() {
  static const std::string* const schema = new std::string(
      R"({"title":"pitlane.Contacts","type":"object","properties":{)"
      R"("timestamp":{"type":"object"},"tick":{"type":"integer"},)"
      R"("contacts":{"type":"array","items":{"type":"object"}},)"
      R"("contacts_dropped":{"type":"integer"},)"
      R"("events":{"type":"array","items":{"type":"object"}},"events_dropped":{"type":"integer"}}})");
  return *schema;
}

const std::string& LogSchema() {
  static const std::string* const schema = new std::string(
      R"({"title":"foxglove.Log","type":"object","properties":{)"
      R"("timestamp":{"type":"object"},"level":{"type":"integer"},"message":{"type":"string"},)"
      R"("name":{"type":"string"},"file":{"type":"string"},"line":{"type":"integer"}}})");
  return *schema;
}

const std::string& RaceSchema() {
  static const std::string* const schema = new std::string(
      R"({"title":"pitlane.Race","type":"object","properties":{)"
      R"("timestamp":{"type":"object"},"tick":{"type":"integer"},"track":{"type":"string"},)"
      R"("phase":{"type":"string","enum":["countdown","racing","finished","none"]},)"
      R"("race_time_s":{"type":"number"},"laps":{"type":"integer"},)"
      R"("standings":{"type":"array","items":{"type":"object","properties":{)"
      R"("position":{"type":"integer"},"vehicle_id":{"type":"integer"},)"
      R"("vehicle_name":{"type":"string"},"state":{"type":"string"},)"
      R"("grid_position":{"type":"integer"},"laps":{"type":"integer"},)"
      R"("race_time_s":{"type":"number"},"penalties_s":{"type":"number"},)"
      R"("total_time_s":{"type":"number"},"gap_s":{"type":["number","null"]},)"
      R"("gap_laps":{"type":"integer"},"gap_m":{"type":"number"},)"
      R"("best_lap_s":{"type":["number","null"]},"last_lap_s":{"type":["number","null"]},)"
      R"("distance_m":{"type":"number"},"jump_starts":{"type":"integer"},)"
      R"("contacts":{"type":"integer"},"off_tracks":{"type":"integer"}},)"
      R"("required":["position","vehicle_id","state","laps","total_time_s"]}},)"
      R"("events":{"type":"array","items":{"type":"object","properties":{)"
      R"("tick":{"type":"integer"},"kind":{"type":"string"},"vehicle_id":{"type":"integer"},)"
      R"("race_time_s":{"type":"number"},"lap":{"type":"integer"},"sector":{"type":"integer"},)"
      R"("duration_s":{"type":"number"},"penalty_s":{"type":"number"},"cause":{"type":"string"}},)"
      R"("required":["tick","kind","vehicle_id","race_time_s"]}}},"required":["timestamp","tick","events"]})");
  return *schema;
}

}  // namespace pitlane::web
