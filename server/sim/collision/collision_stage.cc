#include "server/sim/collision/collision_stage.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <iterator>
#include <utility>

#include "server/sim/collision/radix_sort.h"
#include "server/sim/math/trig.h"

namespace pitlane::sim {
namespace {

constexpr double kDefaultCellSize_m = 5.0;
// Cells no narrower than this, however small the vehicles: bounds the work of long queries
// and keeps the clamped edge cells (2^30 cells out) beyond 268,000 km.
constexpr double kMinCellSize_m = 0.25;
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

// Keep beyond the budget: counts the contact and marks its vehicles. Out of line, so that the
// common path stays in the callers' loops.
[[gnu::noinline]] void DropBeyondBudget(CollisionScene& scene, std::uint32_t vehicle,
                                        std::int64_t other) {
  ++scene.contacts_dropped;
  if (scene.touched_beyond_budget.empty()) {
    scene.touched_beyond_budget.assign(scene.vehicle_boxes.size(), 0);
  }
  scene.touched_beyond_budget[vehicle] = 1;
  if (other >= 0) scene.touched_beyond_budget[static_cast<std::size_t>(other)] = 1;
}

// Appends `contact` (of vehicle `vehicle`, and of vehicle `other` unless it is -1) within the
// scene's budget; beyond it, counts it and marks its vehicles instead.
inline void Keep(CollisionScene& scene, std::vector<Contact>& contacts, const Contact& contact,
                 std::uint32_t vehicle, std::int64_t other = -1) {
  if (scene.contacts_kept < scene.contact_limit) [[likely]] {
    ++scene.contacts_kept;
    contacts.push_back(contact);
    return;
  }
  DropBeyondBudget(scene, vehicle, other);
}

// The vehicle grid's candidate pairs, at most `max_pairs` of them (`too_many` set if there
// were more); returns how many pairs of boxes the grid compared. Out of line: inlined into
// CollideVehicles beside the streaming pass's copy of the same sweep, it made the parking
// scene's step 4 to 5 % slower.
[[gnu::noinline]] std::size_t CollectPairs(const CenterGrid& grid, std::size_t max_pairs,
                                           std::vector<IndexPair>& pairs, bool& too_many) {
  return grid.ForEachOverlappingPair([&](std::uint32_t first, std::uint32_t second) {
    if (pairs.size() < max_pairs) {
      pairs.emplace_back(first, second);
    } else {
      too_many = true;
    }
  });
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
struct Sweep {
  int samples = 1;        // Poses tested, the last being the end pose.
  double bulge_m = 0.0;   // How far a sample's corners may stray beyond the end poses' bounds.
};

// How to sweep a body over one tick from `from` to `to`: enough poses that neighbouring ones
// are at most half the body's smaller side apart (so their boxes overlap), at least 1.
Sweep PlanSweep(const BodyParams& body, const Pose2& from, const Pose2& to) {
  // No point of the body moves farther than the reference point does plus the turn times the
  // farthest a body point lies from it (at most |centre offset| + half diagonal).
  const double reach_m =
      std::abs(body.center_offset_m) +
      0.5 * std::sqrt(body.length_m * body.length_m + body.width_m * body.width_m);
  const double dx_m = to.x_m - from.x_m;
  const double dy_m = to.y_m - from.y_m;
  const double turn_rad = std::abs(WrapToPi(to.yaw_rad - from.yaw_rad));
  const double travel_m = std::sqrt(dx_m * dx_m + dy_m * dy_m) + turn_rad * reach_m;
  const double spacing_m = 0.5 * std::min(body.length_m, body.width_m);
  if (!(travel_m > spacing_m)) return Sweep{};
  // An interpolated heading swings a point at distance r from the reference point off the
  // chord between its end positions by at most r (1 - cos(turn / 2)) <= r turn² / 8.
  return Sweep{
      .samples = static_cast<int>(
          std::min<double>(std::ceil(travel_m / spacing_m), kMaxSweepSamples)),
      .bulge_m = reach_m * turn_rad * turn_rad / 8.0,
  };
}

}  // namespace

double GridCellSize(const VehicleTable& fleet) {
  if (fleet.size() == 0) return kDefaultCellSize_m;
  const auto diagonal = [](const BodyParams& body) {
    return std::sqrt(body.length_m * body.length_m + body.width_m * body.width_m);
  };
  double total_m = 0.0;
  for (const BodyParams& body : fleet.bodies) total_m += diagonal(body);
  const double cap_m = 4.0 * total_m / static_cast<double>(fleet.size());
  double widest_m = 0.0;
  for (const BodyParams& body : fleet.bodies) {
    const double d = diagonal(body);
    if (d <= cap_m) widest_m = std::max(widest_m, d);
  }
  // Room for the bounding boxes' tolerance margin and for rounding.
  const double cell_m = widest_m * (1.0 + 1e-9) + 4.0 * kContactTolerance_m;
  return std::clamp(cell_m, kMinCellSize_m, kMaxCellSize_m);
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

CollisionBox VehicleBox(const VehicleTable& fleet, std::size_t index) {
  // As VehicleBoxAt, with the fleet's cos and sin of the yaw (the same SinCos values).
  const BodyParams& body = fleet.bodies[index];
  const double cos_yaw = fleet.cos_yaw[index];
  const double sin_yaw = fleet.sin_yaw[index];
  return CollisionBox{
      .center_x_m = fleet.x_m[index] + body.center_offset_m * cos_yaw,
      .center_y_m = fleet.y_m[index] + body.center_offset_m * sin_yaw,
      .axis_x = cos_yaw,
      .axis_y = sin_yaw,
      .half_length_m = 0.5 * body.length_m,
      .half_width_m = 0.5 * body.width_m,
  };
}

void ComputeVehicleBoxes(const VehicleTable& fleet, CollisionScene& scene) {
  const std::size_t n = fleet.size();
  scene.vehicle_boxes.resize(n);
  scene.vehicle_bounds.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    scene.vehicle_boxes[i] = VehicleBox(fleet, i);
    scene.vehicle_bounds[i] = BoundingBox(scene.vehicle_boxes[i]);
  }
}

void IndexVehicles(const VehicleTable& fleet, CollisionScene& scene) {
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

void CollideWithObstacles(const VehicleTable& fleet,
                          absl::Span<const Pose2> previous_poses,
                          absl::Span<const Obstacle> obstacles, bool stop_at_first_contact,
                          CollisionScene& scene, std::vector<Contact>& contacts,
                          std::vector<EarlyContact>& early) {
  if (obstacles.empty()) return;
  scene.left_to_obstacles.assign(fleet.size(), 0);
  // With fewer obstacles than vehicles, the vehicles that need no sweep are found from the
  // obstacles' side later (CollideObstaclesWithVehicles): far fewer grid queries.
  const bool by_obstacle = obstacles.size() <= fleet.size();
  const SpatialHashGrid& grid = scene.obstacle_grid;
  for (std::uint32_t i = 0; i < fleet.size(); ++i) {
    const CollisionBox& end_box = scene.vehicle_boxes[i];
    const Pose2 end_pose{fleet.x_m[i], fleet.y_m[i], fleet.yaw_rad[i]};
    const Sweep sweep =
        previous_poses.empty() ? Sweep{} : PlanSweep(fleet.bodies[i], previous_poses[i], end_pose);
    if (by_obstacle && sweep.samples == 1 &&
        CenterGrid::Fits(scene.vehicle_bounds[i], scene.cell_size_m)) {
      scene.left_to_obstacles[i] = 1;
      continue;
    }
    Aabb query = scene.vehicle_bounds[i];
    if (sweep.samples > 1) {
      query = Union(query, BoundingBox(VehicleBoxAt(fleet.bodies[i], previous_poses[i])));
      query = Aabb{query.min_x_m - sweep.bulge_m, query.min_y_m - sweep.bulge_m,
                   query.max_x_m + sweep.bulge_m, query.max_y_m + sweep.bulge_m};
    }

    scene.candidates.clear();
    grid.Query(query, [&](std::uint32_t k) { scene.candidates.push_back(k); });
    if (scene.candidates.empty()) continue;
    std::sort(scene.candidates.begin(), scene.candidates.end());  // Obstacle id order.

    // The first sample (in time) that touches anything decides; every obstacle it touches
    // is a contact. Under REPORT the vehicle does not stop there, so the obstacles its end
    // pose touches are contacts too.
    const std::size_t first_contact = contacts.size();
    scene.sample_hits.clear();  // In obstacle id order, as the candidates.
    for (int s = 1; s <= sweep.samples; ++s) {
      const bool last = s == sweep.samples;
      const Pose2 pose =
          last ? end_pose
               : Interpolate(previous_poses[i], end_pose, static_cast<double>(s) / sweep.samples);
      const CollisionBox box = last ? end_box : VehicleBoxAt(fleet.bodies[i], pose);
      const Aabb box_bounds = last ? scene.vehicle_bounds[i] : BoundingBox(box);
      for (const std::uint32_t k : scene.candidates) {
        if (!Overlaps(box_bounds, scene.obstacle_bounds[k])) continue;
        const BoxContact contact = CollideBoxes(box, obstacles[k].box);
        if (!contact.touching) continue;
        scene.sample_hits.push_back(obstacles[k].id);
        Keep(scene, contacts,
             MakeContact(fleet.ids[i], ObjectKind::kObstacle, obstacles[k].id, contact), i);
      }
      if (scene.sample_hits.empty()) continue;
      if (last) break;
      if (stop_at_first_contact) {
        early.push_back({.vehicle_index = i, .pose = pose});
        break;
      }
      const std::size_t at_first_sample = contacts.size();
      for (const std::uint32_t k : scene.candidates) {
        const ObstacleId id = obstacles[k].id;
        const bool seen =
            std::binary_search(scene.sample_hits.begin(), scene.sample_hits.end(), id);
        if (seen || !Overlaps(scene.vehicle_bounds[i], scene.obstacle_bounds[k])) continue;
        const BoxContact contact = CollideBoxes(end_box, obstacles[k].box);
        if (contact.touching) {
          Keep(scene, contacts, MakeContact(fleet.ids[i], ObjectKind::kObstacle, id, contact), i);
        }
      }
      std::inplace_merge(contacts.begin() + first_contact, contacts.begin() + at_first_sample,
                         contacts.end(), [](const Contact& a, const Contact& b) {
                           return a.pair < b.pair;
                         });
      break;
    }
  }
}

void CollideObstaclesWithVehicles(const VehicleTable& fleet,
                                  absl::Span<const Obstacle> obstacles,
                                  CollisionScene& scene, std::vector<Contact>& contacts) {
  const std::size_t run_start = contacts.size();
  // A vehicle whose box overlaps an obstacle's bounds has its centre within half a cell of
  // them (it fits in a cell); a little more for rounding.
  const double margin_m = 0.5 * scene.cell_size_m * (1.0 + 1e-9) + kContactTolerance_m;
  for (std::size_t k = 0; k < obstacles.size(); ++k) {
    const Aabb& bounds = scene.obstacle_bounds[k];
    const Aabb area{bounds.min_x_m - margin_m, bounds.min_y_m - margin_m,
                    bounds.max_x_m + margin_m, bounds.max_y_m + margin_m};
    scene.vehicle_grid.ForEachCenterIn(area, [&](std::uint32_t i) {
      if (scene.left_to_obstacles[i] == 0) return;
      const BoxContact contact = CollideBoxes(scene.vehicle_boxes[i], obstacles[k].box);
      if (contact.touching) {
        Keep(scene, contacts,
             MakeContact(fleet.ids[i], ObjectKind::kObstacle, obstacles[k].id, contact), i);
      }
    });
  }
  std::sort(contacts.begin() + run_start, contacts.end(),
            [](const Contact& a, const Contact& b) { return a.pair < b.pair; });
}

std::size_t CollideVehicles(const VehicleTable& fleet, CollisionScene& scene,
                            std::vector<Contact>& contacts) {
  scene.pairs.clear();
  bool too_many_pairs = false;
  const std::size_t examined =
      CollectPairs(scene.vehicle_grid, scene.max_pairs, scene.pairs, too_many_pairs);
  if (too_many_pairs) {
    // Vehicles piled up: test the pairs as the broad phase finds them, holding none, and keep
    // the first contacts found (in the grid's order) within the budget, sorted by pair.
    scene.pairs.clear();
    scene.streamed_contacts.clear();
    scene.vehicle_grid.ForEachOverlappingPair([&](std::uint32_t first, std::uint32_t second) {
      const BoxContact contact =
          CollideBoxes(scene.vehicle_boxes[first], scene.vehicle_boxes[second]);
      if (!contact.touching) return;
      Keep(scene, scene.streamed_contacts,
           MakeContact(fleet.ids[first], ObjectKind::kVehicle, fleet.ids[second], contact), first,
           second);
    });
    std::sort(scene.streamed_contacts.begin(), scene.streamed_contacts.end(),
              [](const Contact& a, const Contact& b) { return a.pair < b.pair; });
    contacts.insert(contacts.end(), scene.streamed_contacts.begin(),
                    scene.streamed_contacts.end());
    return examined;
  }
  // By (first, second): the narrow phase then reads the first box of each pair in memory
  // order, and its contacts come out in pair order (fleet order is id order).
  const int index_bits = std::bit_width(fleet.size());
  StableSortByKey(
      scene.pairs, 2 * index_bits,
      [index_bits](const IndexPair& pair) {
        return (std::uint64_t{pair.first} << index_bits) | pair.second;
      },
      scene.pair_scratch);
  for (const auto& [first, second] : scene.pairs) {
    const BoxContact contact =
        CollideBoxes(scene.vehicle_boxes[first], scene.vehicle_boxes[second]);
    if (!contact.touching) continue;
    // Fleet order is id order, so first < second gives the lower id first.
    Keep(scene, contacts,
         MakeContact(fleet.ids[first], ObjectKind::kVehicle, fleet.ids[second], contact), first,
         second);
  }
  return examined;
}

void CollideWithWalls(const VehicleTable& fleet, const WorldBounds& bounds,
                      CollisionScene& scene, std::vector<Contact>& contacts) {
  // A box's bounds are its exact extremes plus the tolerance, so comparing them with a wall
  // applies the same contact rule as the box-box test.
  const auto add = [&](std::size_t i, Wall wall, double normal_x, double normal_y,
                       double depth_m) {
    Keep(scene, contacts,
         Contact{
             .pair = {.vehicle = fleet.ids[i],
                      .other_kind = ObjectKind::kWall,
                      .other_id = static_cast<std::uint64_t>(wall)},
             .normal_x = normal_x,
             .normal_y = normal_y,
             .depth_m = std::max(depth_m - kContactTolerance_m, 0.0),
         },
         static_cast<std::uint32_t>(i));
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

void ResetContactBudget(std::size_t contact_limit, std::size_t vehicle_count,
                        CollisionScene& scene) {
  scene.contact_limit = contact_limit;
  scene.contacts_kept = 0;
  scene.contacts_dropped = 0;
  scene.touched_beyond_budget.clear();
  scene.max_pairs = std::max(4 * contact_limit, 8 * vehicle_count);
}

void MergeContactRuns(absl::Span<const std::size_t> run_ends, std::vector<Contact>& contacts,
                      std::vector<Contact>& scratch) {
  const auto by_pair = [](const Contact& a, const Contact& b) { return a.pair < b.pair; };
  std::size_t merged_end = 0;  // [0, merged_end) is sorted.
  for (const std::size_t run_end : run_ends) {
    if (merged_end > 0 && run_end > merged_end) {
      scratch.clear();
      std::merge(contacts.begin(), contacts.begin() + merged_end, contacts.begin() + merged_end,
                 contacts.begin() + run_end, std::back_inserter(scratch), by_pair);
      std::copy(scratch.begin(), scratch.end(), contacts.begin());
    }
    merged_end = run_end;
  }
}

}  // namespace pitlane::sim
