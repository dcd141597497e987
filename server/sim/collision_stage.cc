#include "server/sim/collision_stage.h"

#include <algorithm>
#include <cmath>

#include "server/sim/trig.h"

namespace pitlane::sim {
namespace {

constexpr double kDefaultCellSize_m = 5.0;
constexpr double kMinCellSize_m = 1e-3;
constexpr double kMaxCellSize_m = 1e3;

Contact MakeContact(VehicleId vehicle, ObjectKind kind, std::uint64_t other_id,
                    const BoxContact& box_contact) {
  return Contact{
      .pair = {.vehicle = vehicle, .other_kind = kind, .other_id = other_id},
      .normal_x = box_contact.normal_x,
      .normal_y = box_contact.normal_y,
      .depth_m = box_contact.depth_m,
  };
}

// The pose a fraction `s` in [0, 1] of the way from `from` to `to`, turning the short way.
Pose2 Interpolate(const Pose2& from, const Pose2& to, double s) {
  return Pose2{
      .x_m = from.x_m + s * (to.x_m - from.x_m),
      .y_m = from.y_m + s * (to.y_m - from.y_m),
      .yaw_rad = from.yaw_rad + s * WrapToPi(to.yaw_rad - from.yaw_rad),
  };
}

// How many poses to test along a vehicle's motion in one tick: enough that neighbouring
// samples are at most half the body's smaller side apart (so their boxes overlap and no
// obstacle fits between them), at least 1 (the end pose alone).
int SweepSamples(const BodyParams& body, const CollisionBox& from, const CollisionBox& to,
                 double turn_rad) {
  // No point of the body moves farther than the centre does plus the turn times the half
  // diagonal.
  const double half_diagonal_m =
      0.5 * std::sqrt(body.length_m * body.length_m + body.width_m * body.width_m);
  const double dx_m = to.center_x_m - from.center_x_m;
  const double dy_m = to.center_y_m - from.center_y_m;
  const double travel_m = std::sqrt(dx_m * dx_m + dy_m * dy_m) + std::abs(turn_rad) * half_diagonal_m;
  const double spacing_m = 0.5 * std::min(body.length_m, body.width_m);
  if (!(travel_m > spacing_m)) return 1;
  return static_cast<int>(std::min<double>(std::ceil(travel_m / spacing_m), kMaxSweepSamples));
}

}  // namespace

double GridCellSize(const KinematicBicycleFleet& fleet) {
  if (fleet.size() == 0) return kDefaultCellSize_m;
  double total_m = 0.0;
  for (const BodyParams& body : fleet.bodies) total_m += body.length_m;
  return std::clamp(total_m / static_cast<double>(fleet.size()), kMinCellSize_m, kMaxCellSize_m);
}

CollisionBox VehicleBoxAt(const BodyParams& body, const Pose2& pose) {
  double sin_yaw;
  double cos_yaw;
  SinCos(pose.yaw_rad, &sin_yaw, &cos_yaw);
  return CollisionBox{
      .center_x_m = pose.x_m + body.center_offset_m * cos_yaw,
      .center_y_m = pose.y_m + body.center_offset_m * sin_yaw,
      .axis_x = cos_yaw,
      .axis_y = sin_yaw,
      .half_length_m = 0.5 * body.length_m,
      .half_width_m = 0.5 * body.width_m,
  };
}

CollisionBox VehicleBox(const KinematicBicycleFleet& fleet, std::size_t index) {
  return VehicleBoxAt(fleet.bodies[index],
                      Pose2{fleet.x_m[index], fleet.y_m[index], fleet.yaw_rad[index]});
}

void ComputeVehicleBoxes(const KinematicBicycleFleet& fleet, CollisionScene& scene) {
  const std::size_t n = fleet.size();
  scene.vehicle_boxes.resize(n);
  scene.vehicle_bounds.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    scene.vehicle_boxes[i] = VehicleBox(fleet, i);
    scene.vehicle_bounds[i] = BoundingBox(scene.vehicle_boxes[i]);
  }
}

void IndexVehicles(const KinematicBicycleFleet& fleet, CollisionScene& scene) {
  ComputeVehicleBoxes(fleet, scene);
  scene.vehicle_grid.Build(scene.cell_size_m, scene.vehicle_bounds);
}

void IndexObstacles(absl::Span<const Obstacle> obstacles, CollisionScene& scene) {
  scene.obstacle_bounds.clear();
  for (const Obstacle& obstacle : obstacles) {
    scene.obstacle_bounds.push_back(BoundingBox(obstacle.box));
  }
  scene.obstacle_grid.Build(scene.cell_size_m, scene.obstacle_bounds);
}

void CollideWithObstacles(const KinematicBicycleFleet& fleet,
                          absl::Span<const Pose2> previous_poses,
                          absl::Span<const Obstacle> obstacles, CollisionScene& scene,
                          std::vector<Contact>& contacts, std::vector<EarlyContact>& early) {
  if (obstacles.empty()) return;
  const SpatialHashGrid& grid = scene.obstacle_grid;
  for (std::uint32_t i = 0; i < fleet.size(); ++i) {
    const CollisionBox& end_box = scene.vehicle_boxes[i];
    const Pose2 end_pose{fleet.x_m[i], fleet.y_m[i], fleet.yaw_rad[i]};
    int samples = 1;
    Aabb query = scene.vehicle_bounds[i];
    CollisionBox start_box;
    if (!previous_poses.empty()) {
      start_box = VehicleBoxAt(fleet.bodies[i], previous_poses[i]);
      samples = SweepSamples(fleet.bodies[i], start_box, end_box,
                             WrapToPi(end_pose.yaw_rad - previous_poses[i].yaw_rad));
      if (samples > 1) query = Union(query, BoundingBox(start_box));
    }

    scene.candidates.clear();
    grid.Query(query, [&](std::uint32_t k) { scene.candidates.push_back(k); });
    if (scene.candidates.empty()) continue;

    // The first sample (in time) that touches anything decides; every obstacle it touches
    // is a contact.
    for (int s = 1; s <= samples; ++s) {
      const bool last = s == samples;
      const Pose2 pose =
          last ? end_pose
               : Interpolate(previous_poses[i], end_pose, static_cast<double>(s) / samples);
      const CollisionBox box = last ? end_box : VehicleBoxAt(fleet.bodies[i], pose);
      bool touched = false;
      for (const std::uint32_t k : scene.candidates) {
        const BoxContact contact = CollideBoxes(box, obstacles[k].box);
        if (!contact.touching) continue;
        touched = true;
        contacts.push_back(MakeContact(fleet.ids[i], ObjectKind::kObstacle, obstacles[k].id,
                                       contact));
      }
      if (touched) {
        if (!last) early.push_back({.vehicle_index = i, .pose = pose});
        break;
      }
    }
  }
}

std::size_t CollideVehicles(const KinematicBicycleFleet& fleet, CollisionScene& scene,
                            std::vector<Contact>& contacts) {
  scene.pairs.clear();
  const std::size_t examined = scene.vehicle_grid.FindOverlappingPairs(scene.pairs);
  for (const auto& [first, second] : scene.pairs) {
    const BoxContact contact =
        CollideBoxes(scene.vehicle_boxes[first], scene.vehicle_boxes[second]);
    if (!contact.touching) continue;
    // Fleet order is id order, so first < second gives the lower id first.
    contacts.push_back(
        MakeContact(fleet.ids[first], ObjectKind::kVehicle, fleet.ids[second], contact));
  }
  return examined;
}

void CollideWithWalls(const KinematicBicycleFleet& fleet, const WorldBounds& bounds,
                      const CollisionScene& scene, std::vector<Contact>& contacts) {
  // A box's bounds are its exact extremes plus the tolerance, so comparing them with a wall
  // applies the same contact rule as the box-box test.
  const auto add = [&](std::size_t i, Wall wall, double normal_x, double normal_y,
                       double depth_m) {
    contacts.push_back(Contact{
        .pair = {.vehicle = fleet.ids[i],
                 .other_kind = ObjectKind::kWall,
                 .other_id = static_cast<std::uint64_t>(wall)},
        .normal_x = normal_x,
        .normal_y = normal_y,
        .depth_m = std::max(depth_m - kContactTolerance_m, 0.0),
    });
  };
  for (std::size_t i = 0; i < fleet.size(); ++i) {
    const Aabb& box = scene.vehicle_bounds[i];
    if (box.min_x_m <= bounds.min_x_m) add(i, Wall::kWest, -1.0, 0.0, bounds.min_x_m - box.min_x_m);
    if (box.max_x_m >= bounds.max_x_m) add(i, Wall::kEast, 1.0, 0.0, box.max_x_m - bounds.max_x_m);
    if (box.min_y_m <= bounds.min_y_m) {
      add(i, Wall::kSouth, 0.0, -1.0, bounds.min_y_m - box.min_y_m);
    }
    if (box.max_y_m >= bounds.max_y_m) add(i, Wall::kNorth, 0.0, 1.0, box.max_y_m - bounds.max_y_m);
  }
}

void SortContacts(std::vector<Contact>& contacts) {
  std::sort(contacts.begin(), contacts.end(),
            [](const Contact& a, const Contact& b) { return a.pair < b.pair; });
}

}  // namespace pitlane::sim
