#include "server/web/frame_json.h"

#include <cmath>
#include <numbers>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace pitlane::web {
namespace {

using Json = nlohmann::json;

session::Frame OneCar(double x_m, double y_m, double yaw_rad, double speed_mps) {
  session::Frame frame;
  frame.time = {.tick = 150, .sim_time_s = 3.0};
  sim::VehicleSnapshot car;
  car.id = 7;
  car.kind = sim::ModelKind::kSingleTrack;
  car.pose = {.x_m = x_m, .y_m = y_m, .yaw_rad = yaw_rad};
  car.speed_mps = speed_mps;
  car.readout.steering_angle_rad = 0.125;
  car.readout.acceleration_mps2 = -1.5;
  frame.vehicles.push_back(car);
  return frame;
}

TEST(SceneJsonTest, DrawsTheBodyBoxAroundItsCentreTurnedByTheYaw) {
  const double yaw = std::numbers::pi / 2;  // North.
  const session::Frame frame = OneCar(10.0, -4.0, yaw, 12.5);
  SessionLook look;
  look.vehicles[7] = {.name = "red", .kind = sim::ModelKind::kSingleTrack,
                      .body = {.length_m = 4.0, .width_m = 2.0, .center_offset_m = 1.5}};
  const Json scene = Json::parse(SceneJson(frame, look, 3'000'000'000));
  ASSERT_EQ(scene["deletions"].size(), 1u);
  EXPECT_EQ(scene["deletions"][0]["type"], 1);  // All: the update replaces the last.
  ASSERT_EQ(scene["entities"].size(), 1u);
  const Json& entity = scene["entities"][0];
  EXPECT_EQ(entity["id"], "vehicle/7");
  EXPECT_EQ(entity["frame_id"], "world");
  EXPECT_EQ(entity["timestamp"]["sec"], 3);
  EXPECT_EQ(entity["timestamp"]["nsec"], 0);
  const Json& cube = entity["cubes"][0];
  // The centre is 1.5 m ahead of the reference point along the heading (north).
  EXPECT_NEAR(cube["pose"]["position"]["x"].get<double>(), 10.0, 1e-12);
  EXPECT_NEAR(cube["pose"]["position"]["y"].get<double>(), -2.5, 1e-12);
  // A turn of pi/2 about z: (0, 0, sin(pi/4), cos(pi/4)).
  EXPECT_NEAR(cube["pose"]["orientation"]["z"].get<double>(), std::sqrt(0.5), 1e-12);
  EXPECT_NEAR(cube["pose"]["orientation"]["w"].get<double>(), std::sqrt(0.5), 1e-12);
  EXPECT_EQ(cube["size"]["x"], 4.0);
  EXPECT_EQ(cube["size"]["y"], 2.0);
  EXPECT_EQ(entity["texts"][0]["text"], "red 12.5 m/s");
  for (const char* key : {"arrows", "cubes", "spheres", "cylinders", "lines", "triangles",
                          "texts", "models", "metadata"}) {
    EXPECT_TRUE(entity[key].is_array()) << key;
  }
}

TEST(SceneJsonTest, VehiclesInContactAreRedAndCrashedOnesGrey) {
  session::Frame frame = OneCar(0, 0, 0, 0);
  sim::VehicleSnapshot other = frame.vehicles[0];
  other.id = 8;
  other.crashed = true;
  frame.vehicles.push_back(other);
  frame.contacts.push_back({.pair = {.vehicle = 7, .other_kind = sim::ObjectKind::kObstacle,
                                     .other_id = 1}});
  const Json scene = Json::parse(SceneJson(frame, SessionLook{}, 1));
  EXPECT_GT(scene["entities"][0]["cubes"][0]["color"]["r"].get<double>(), 0.9);
  EXPECT_LT(scene["entities"][0]["cubes"][0]["color"]["g"].get<double>(), 0.2);
  EXPECT_EQ(scene["entities"][1]["cubes"][0]["color"]["r"], scene["entities"][1]["cubes"][0]["color"]["g"]);
  // Unknown bodies take the default 4.5 x 1.8 m.
  EXPECT_EQ(scene["entities"][1]["cubes"][0]["size"]["x"], 4.5);
}

TEST(MapJsonTest, RoutesAsWideAsTheirLanesWallsObstaclesAndSpawnPoints) {
  SessionLook look;
  look.routes.push_back({.points = {{0, 0}, {100, 0}, {100, 50}}, .closed = true, .lane_width_m = 7.0});
  look.route_names = {"loop"};
  look.bounds = sim::WorldBounds{.min_x_m = -10, .min_y_m = -20, .max_x_m = 110, .max_y_m = 60};
  sim::Obstacle cone;
  cone.id = 3;
  cone.spec = {.name = "cone", .center_x_m = 5, .center_y_m = 6, .length_m = 0.5, .width_m = 0.5};
  look.obstacles.push_back(cone);
  look.spawn_points.push_back({.name = "start", .pose = {.x_m = 1, .y_m = 2, .yaw_rad = 0}});
  const Json map = Json::parse(MapJson(look, 5));
  ASSERT_EQ(map["entities"].size(), 4u);
  const Json& route = map["entities"][0];
  EXPECT_EQ(route["id"], "route/0");
  EXPECT_EQ(route["lines"][0]["type"], 1);  // A loop.
  EXPECT_EQ(route["lines"][0]["thickness"], 7.0);
  EXPECT_EQ(route["lines"][0]["points"].size(), 3u);
  EXPECT_EQ(map["entities"][1]["id"], "walls");
  EXPECT_EQ(map["entities"][1]["lines"][0]["points"][2]["x"], 110.0);
  EXPECT_EQ(map["entities"][2]["id"], "obstacle/3");
  EXPECT_EQ(map["entities"][3]["id"], "spawn/0");
}

TEST(LookOfTest, FingerprintFollowsTheMapOnly) {
  session::SessionDescription description;
  description.vehicles.push_back({.id = 1});
  const SessionLook before = LookOf(description);
  description.vehicles.push_back({.id = 2});
  EXPECT_EQ(LookOf(description).map_fingerprint, before.map_fingerprint);
  sim::Obstacle obstacle;
  obstacle.id = 1;
  description.obstacles.push_back(obstacle);
  const SessionLook with_obstacle = LookOf(description);
  EXPECT_NE(with_obstacle.map_fingerprint, before.map_fingerprint);
  description.obstacles[0].spec.center_x_m = 1.0;
  EXPECT_NE(LookOf(description).map_fingerprint, with_obstacle.map_fingerprint);
}

TEST(TelemetryJsonTest, EveryFieldWithItsUnit) {
  const session::Frame frame = OneCar(1.0, 2.0, 0.5, 3.25);
  const VehicleLook look{.name = "a\"b", .has_driver = true};
  const sim::VehicleInput held{.acceleration_mps2 = 2.5, .steering_angle_rad = -0.25};
  const Json telemetry = Json::parse(TelemetryJson(frame, frame.vehicles[0], &look, &held, 7));
  EXPECT_EQ(telemetry["tick"], 150);
  EXPECT_EQ(telemetry["timestamp"]["nsec"], 7);
  EXPECT_EQ(telemetry["sim_time_s"], 3.0);
  EXPECT_EQ(telemetry["vehicle_id"], 7);
  EXPECT_EQ(telemetry["name"], "a\"b");
  EXPECT_EQ(telemetry["model"], "single_track");
  EXPECT_EQ(telemetry["driver"], "built-in");
  EXPECT_EQ(telemetry["x_m"], 1.0);
  EXPECT_EQ(telemetry["yaw_rad"], 0.5);
  EXPECT_EQ(telemetry["speed_mps"], 3.25);
  EXPECT_EQ(telemetry["steering_angle_rad"], 0.125);
  EXPECT_EQ(telemetry["acceleration_mps2"], -1.5);
  EXPECT_EQ(telemetry["crashed"], false);
  // single_track's controls: an acceleration and a steering angle, nothing else.
  EXPECT_EQ(telemetry["controls"], Json::parse(R"({"acceleration_mps2":2.5,"steering_angle_rad":-0.25})"));
  EXPECT_FALSE(telemetry.contains("track_progress"));  // Timed on no track.
}

TEST(TelemetryJsonTest, LapTimersOfAVehicleTimedOnATrack) {
  session::Frame frame = OneCar(1.0, 2.0, 0.5, 3.25);
  frame.track_names = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"lane", "oval"});
  sim::VehicleTrackReading reading{.id = frame.vehicles[0].id, .route = 1};
  reading.progress.distance_m = 812.5;
  reading.progress.position.lateral_m = -1.25;
  reading.progress.position.on_track = true;
  reading.progress.laps_completed = 2;
  reading.progress.sector = 1;
  reading.progress.lap_time_s = 4.5;
  reading.progress.best_lap_s = 30.25;
  reading.progress.last_lap_s = 31.5;
  reading.progress.off_track_count = 3;
  reading.progress.off_track_s = 0.75;
  frame.track.push_back(reading);
  const Json telemetry =
      Json::parse(TelemetryJson(frame, frame.vehicles[0], nullptr, nullptr, 7));
  EXPECT_EQ(telemetry["track_progress"], Json::parse(R"({"track":"oval","distance_m":812.5,
      "lateral_m":-1.25,"laps_completed":2,"sector":1,"lap_time_s":4.5,"last_lap_s":31.5,
      "best_lap_s":30.25,"off_track_count":3,"off_track_s":0.75,"on_track":true})"));
  // The schema lists every field with its type.
  const Json schema = Json::parse(VehicleTelemetrySchema());
  const Json& properties = schema["properties"]["track_progress"]["properties"];
  for (const auto& [key, value] : telemetry["track_progress"].items()) {
    ASSERT_TRUE(properties.contains(key)) << key;
    const std::string type = properties[key]["type"];
    EXPECT_TRUE(type == "number" ? value.is_number()
                : type == "integer" ? value.is_number_integer()
                : type == "boolean" ? value.is_boolean()
                                    : value.is_string())
        << key;
  }
}

TEST(ContactsJsonTest, ContactsAndEvents) {
  session::Frame frame = OneCar(0, 0, 0, 0);
  const sim::Contact contact{.pair = {.vehicle = 7, .other_kind = sim::ObjectKind::kWall,
                                      .other_id = 2},
                             .normal_x = 1.0, .depth_m = 0.25, .began_tick = 149};
  frame.contacts.push_back(contact);
  session::FrameEvents events;
  events.events.push_back({.tick = 149, .phase = sim::ContactPhase::kBegan, .contact = contact});
  events.dropped = 3;
  const Json contacts = Json::parse(ContactsJson(frame, events, 9));
  EXPECT_EQ(contacts["contacts"][0]["other_kind"], "wall");
  EXPECT_EQ(contacts["contacts"][0]["depth_m"], 0.25);
  EXPECT_EQ(contacts["events"][0]["phase"], "began");
  EXPECT_EQ(contacts["events"][0]["tick"], 149);
  EXPECT_EQ(contacts["events_dropped"], 3);
}

TEST(LogJsonTest, FoxgloveLog) {
  const Json log = Json::parse(LogJson(1'764'070'159'020'000'000ull, 3, "s-1", "reset"));
  EXPECT_EQ(log["level"], 3);
  EXPECT_EQ(log["timestamp"]["sec"], 1764070159);
  EXPECT_EQ(log["timestamp"]["nsec"], 20000000);
  EXPECT_EQ(log["message"], "reset");
  EXPECT_EQ(log["name"], "s-1");
  EXPECT_EQ(log["line"], 0);
}

TEST(SchemasTest, AreJsonObjects) {
  for (const std::string* schema : {&SceneUpdateSchema(), &VehicleTelemetrySchema(),
                                    &ContactsSchema(), &LogSchema()}) {
    const Json parsed = Json::parse(*schema);
    EXPECT_EQ(parsed["type"], "object");
  }
}

}  // namespace
}  // namespace pitlane::web
