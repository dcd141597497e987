// The collision stage of a world's step: body boxes, broad phase, narrow phase, and the
// index that sensors query afterwards.
//
// Vehicles against vehicles are tested at the poses the step ends with. Vehicles against
// static obstacles are swept: a vehicle that moved more than half its smaller side in the
// tick is tested at evenly spaced poses along its motion (at most half that side apart, up
// to kMaxSweepSamples of them), and the first pose that touches is the contact. So a vehicle
// cannot pass through an obstacle however thin, up to kMaxSweepSamples half-sides per tick
// (over 200 m per tick for a car). Boundary walls are half planes and cannot be crossed at
// all. Two vehicles can pass through each other only if they close by more than the sum of
// their lengths in one tick (450 m/s at 50 Hz for two cars).
#ifndef PITLANE_SERVER_SIM_COLLISION_COLLISION_STAGE_H_
#define PITLANE_SERVER_SIM_COLLISION_COLLISION_STAGE_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "absl/types/span.h"
#include "server/sim/collision/center_grid.h"
#include "server/sim/collision/collision.h"
#include "server/sim/collision/contacts.h"
#include "server/sim/math/geometry.h"
#include "server/sim/world/vehicle_table.h"
#include "server/sim/world/obstacle.h"
#include "server/sim/collision/spatial_grid.h"

namespace pitlane::sim {

inline constexpr int kMaxSweepSamples = 256;

// Collision data derived from a world's state: every field can be recomputed from the
// state, so it is neither hashed nor compared. Kept between steps so that the memory is
// reused and sensors can query the grids of the last step.
struct CollisionScene {
  double cell_size_m = 5.0;                 // Side of a grid cell, metres.
  std::vector<CollisionBox> vehicle_boxes;  // One per vehicle, in fleet order.
  std::vector<Aabb> vehicle_bounds;         // BoundingBox of each vehicle box.
  CenterGrid vehicle_grid;                  // Over vehicle_bounds.
  SpatialHashGrid obstacle_grid;            // Over the obstacles' bounds, same cell size.
  // Scratch memory of the stage.
  std::vector<Aabb> obstacle_bounds;
  std::vector<IndexPair> pairs;
  std::vector<IndexPair> pair_scratch;
  std::vector<std::uint32_t> candidates;
  std::vector<Contact> contact_scratch;
  // Per vehicle: 1 if CollideWithObstacles left it to CollideObstaclesWithVehicles.
  std::vector<std::uint8_t> left_to_obstacles;
  std::vector<ObstacleId> sample_hits;  // CollideWithObstacles: what a sample touched.

  // The contact budget of a step (see ResetContactBudget): the first contact_limit contacts
  // found, stage by stage in the order World::Step runs them, are kept; the others are only
  // counted (contacts_dropped), and their vehicles marked (touched_beyond_budget, one per
  // vehicle, empty while nothing was dropped) so that the collision response still sees them.
  std::size_t contact_limit = std::numeric_limits<std::size_t>::max();
  std::size_t contacts_kept = 0;
  std::uint64_t contacts_dropped = 0;
  std::vector<std::uint8_t> touched_beyond_budget;
  // The most candidate pairs CollideVehicles keeps for its sorted narrow phase; with more, it
  // tests them as the broad phase finds them, keeping none.
  std::size_t max_pairs = std::numeric_limits<std::size_t>::max();
  std::vector<Contact> streamed_contacts;  // Scratch of that streaming pass.
};

// Starts a step's contact budget: at most `contact_limit` contacts kept, and at most
// max(4 contact_limit, 8 vehicles) candidate pairs between vehicles held at once.
void ResetContactBudget(std::size_t contact_limit, std::size_t vehicle_count,
                        CollisionScene& scene);

// The grid cell size for a fleet: wide enough for every vehicle's bounding box in any
// heading (the largest body diagonal), except that vehicles more than four times the mean
// diagonal do not widen it (they go to the grid's large list). 5 m for an empty fleet.
double GridCellSize(const VehicleTable& fleet);

// The body box of vehicle `index` at its current pose.
CollisionBox VehicleBox(const VehicleTable& fleet, std::size_t index);
// The body box of a vehicle with body `body` whose reference point is at `pose`.
CollisionBox VehicleBoxAt(const BodyParams& body, const Pose2& pose);

// Computes every vehicle's box and bounds (vehicle_boxes, vehicle_bounds).
void ComputeVehicleBoxes(const VehicleTable& fleet, CollisionScene& scene);
// ComputeVehicleBoxes, then rebuilds the vehicle grid with the scene's cell size.
void IndexVehicles(const VehicleTable& fleet, CollisionScene& scene);
// Rebuilds the obstacle grid with the scene's cell size.
void IndexObstacles(absl::Span<const Obstacle> obstacles, CollisionScene& scene);

// A vehicle whose sweep found an obstacle before the end of its motion.
struct EarlyContact {
  std::uint32_t vehicle_index = 0;
  Pose2 pose;  // Reference pose at the first touching sample.
};

// Appends the contacts of vehicles with the obstacles, sweeping vehicles that moved from
// `previous_poses` (fleet order; empty means none moved far). Uses vehicle_boxes/bounds and
// the obstacle grid; returns in `early` the vehicles whose first contact came before the end
// of their motion. Contacts are appended sorted by pair (vehicle, then obstacle id). When
// there are no more obstacles than vehicles, vehicles that need no sweep are left to
// CollideObstaclesWithVehicles (marked in scene.left_to_obstacles).
//
// A swept vehicle's contacts are those of the first sample that touches anything; unless
// `stop_at_first_contact` (policy STOP: the vehicle will be moved back there), also those of
// its end pose.
void CollideWithObstacles(const VehicleTable& fleet,
                          absl::Span<const Pose2> previous_poses,
                          absl::Span<const Obstacle> obstacles, bool stop_at_first_contact,
                          CollisionScene& scene, std::vector<Contact>& contacts,
                          std::vector<EarlyContact>& early);

// Appends, sorted by pair, the contacts with obstacles of the vehicles CollideWithObstacles
// left out (scene.left_to_obstacles), found from each obstacle through the vehicle grid, which
// must be built.
void CollideObstaclesWithVehicles(const VehicleTable& fleet,
                                  absl::Span<const Obstacle> obstacles,
                                  CollisionScene& scene, std::vector<Contact>& contacts);

// Appends the contacts between vehicles (from the vehicle grid and boxes), sorted by pair.
// Returns the number of box pairs the broad phase compared. Every Collide function keeps
// within the scene's contact budget.
std::size_t CollideVehicles(const VehicleTable& fleet, CollisionScene& scene,
                            std::vector<Contact>& contacts);

// Appends the contacts of every vehicle with the boundary walls, sorted by pair.
void CollideWithWalls(const VehicleTable& fleet, const WorldBounds& bounds,
                      CollisionScene& scene, std::vector<Contact>& contacts);

// Sorts contacts by pair, the order in which they are reported, given that they are made of
// runs already sorted: [0, run_ends[0]), [run_ends[0], run_ends[1]), ... Linear time; `scratch`
// is reused memory.
void MergeContactRuns(absl::Span<const std::size_t> run_ends, std::vector<Contact>& contacts,
                      std::vector<Contact>& scratch);

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_COLLISION_COLLISION_STAGE_H_
