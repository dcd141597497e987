#include "server/sim/sensors/sensors.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "server/sim/math/trig.h"

namespace pitlane::sim {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// Beyond this many cells per beam, testing every object is cheaper than walking the grid.
constexpr double kMaxCellsPerRay = 2048.0;

// Distance to the boundary walls from inside the rectangle (0 from outside it: the origin is
// then within a wall, which is a half plane).
double RayToWalls(double ox, double oy, double dx, double dy, const WorldBounds& bounds) {
  if (ox <= bounds.min_x_m || ox >= bounds.max_x_m || oy <= bounds.min_y_m ||
      oy >= bounds.max_y_m) {
    return 0.0;
  }
  double t = kInfinity;
  if (dx > 0.0) t = std::min(t, (bounds.max_x_m - ox) / dx);
  if (dx < 0.0) t = std::min(t, (bounds.min_x_m - ox) / dx);
  if (dy > 0.0) t = std::min(t, (bounds.max_y_m - oy) / dy);
  if (dy < 0.0) t = std::min(t, (bounds.min_y_m - oy) / dy);
  return t;
}

// How WalkCells entered a cell.
enum class Entered { kStart, kStepX, kStepY };

// Walks the cells of a grid `cell_m` wide that the ray from (ox, oy) along (dx, dy) crosses,
// in order (Amanatides and Woo), from `start` (the origin's cell), calling
// enter(cell, how, step_x, step_y) for each, until a cell starts beyond min(best, max_range_m)
// (`best` may shrink as enter() finds hits). t_next_* is the distance at which the ray crosses
// the next vertical / horizontal cell border.
template <typename Enter>
void WalkCells(GridCell start, double ox, double oy, double dx, double dy, double cell_m,
               double max_range_m, const double& best, Enter&& enter) {
  GridCell cell = start;
  const int step_x = dx > 0.0 ? 1 : -1;
  const int step_y = dy > 0.0 ? 1 : -1;
  double t_next_x =
      dx != 0.0 ? ((cell.x + (dx > 0.0 ? 1.0 : 0.0)) * cell_m - ox) / dx : kInfinity;
  double t_next_y =
      dy != 0.0 ? ((cell.y + (dy > 0.0 ? 1.0 : 0.0)) * cell_m - oy) / dy : kInfinity;
  const double t_delta_x = dx != 0.0 ? cell_m / std::abs(dx) : kInfinity;
  const double t_delta_y = dy != 0.0 ? cell_m / std::abs(dy) : kInfinity;
  enter(cell, Entered::kStart, step_x, step_y);
  // Enough cells to cover the range whatever the rounding; bounds the loop.
  const int max_cells = 2 * static_cast<int>(max_range_m / cell_m) + 4;
  for (int visited = 0; visited < max_cells; ++visited) {
    double t_cell;  // Where the ray enters the next cell.
    Entered how;
    if (t_next_x < t_next_y) {
      t_cell = t_next_x;
      t_next_x += t_delta_x;
      cell.x += step_x;
      how = Entered::kStepX;
    } else {
      t_cell = t_next_y;
      t_next_y += t_delta_y;
      cell.y += step_y;
      how = Entered::kStepY;
    }
    if (t_cell > std::min(best, max_range_m)) return;
    enter(cell, how, step_x, step_y);
  }
}

// Whether a walk over cells `cell_m` wide stays clear of the clamped edge cells (see
// ClampedCellCoordinate) and is short enough to beat testing every object.
bool CanWalk(double origin_x_m, double origin_y_m, double max_range_m, double cell_m) {
  const double reach_m = std::max(std::abs(origin_x_m), std::abs(origin_y_m)) + max_range_m;
  return max_range_m / cell_m <= kMaxCellsPerRay && reach_m < 0.5 * cell_m * kMaxCellCoordinate;
}

}  // namespace

double CastRay(double origin_x_m, double origin_y_m, double dir_x, double dir_y,
               double max_range_m, std::uint32_t ignore_vehicle, const CollisionScene& scene,
               absl::Span<const Obstacle> obstacles, const std::optional<WorldBounds>& bounds) {
  double best = bounds.has_value() ? RayToWalls(origin_x_m, origin_y_m, dir_x, dir_y, *bounds)
                                   : kInfinity;
  const auto try_vehicle = [&](std::uint32_t k) {
    if (k != ignore_vehicle) {
      best = std::min(best, RayToBox(origin_x_m, origin_y_m, dir_x, dir_y, scene.vehicle_boxes[k]));
    }
  };
  const auto try_obstacle = [&](std::uint32_t k) {
    best = std::min(best, RayToBox(origin_x_m, origin_y_m, dir_x, dir_y, obstacles[k].box));
  };

  // Obstacles, listed in every cell they cover of their own grid. (A ray that would walk too
  // far, or into the clamped edge cells, tests every object instead.)
  const SpatialHashGrid& statics = scene.obstacle_grid;
  if (!CanWalk(origin_x_m, origin_y_m, max_range_m, statics.cell_size_m())) {
    for (std::uint32_t k = 0; k < statics.object_count(); ++k) try_obstacle(k);
  } else if (statics.object_count() > 0) {
    for (const std::uint32_t k : statics.large_objects()) try_obstacle(k);
    WalkCells(statics.CellOf(origin_x_m, origin_y_m), origin_x_m, origin_y_m, dir_x, dir_y,
              statics.cell_size_m(), max_range_m, best,
              [&](GridCell cell, Entered, int, int) { statics.ForEachInCell(cell, try_obstacle); });
  }

  // Vehicles, listed only in the cell of their centre: a vehicle the ray meets at a point is
  // narrower than a cell, so its centre lies within one cell of that point's cell. The walk
  // looks at the 3 x 3 block around each cell it enters, i.e. at the cells that join the
  // block at each step.
  const CenterGrid& vehicles = scene.vehicle_grid;
  if (!CanWalk(origin_x_m, origin_y_m, max_range_m, vehicles.cell_size_m())) {
    for (std::uint32_t k = 0; k < vehicles.object_count(); ++k) try_vehicle(k);
  } else if (vehicles.object_count() > 0) {
    for (const std::uint32_t k : vehicles.large_objects()) try_vehicle(k);
    WalkCells(vehicles.CellOf(origin_x_m, origin_y_m), origin_x_m, origin_y_m, dir_x, dir_y,
              vehicles.cell_size_m(), max_range_m, best,
              [&](GridCell cell, Entered how, int step_x, int step_y) {
                switch (how) {
                  case Entered::kStart:
                    for (std::int32_t dy = -1; dy <= 1; ++dy) {
                      vehicles.ForEachInRowSpan(GridCell{cell.x - 1, cell.y + dy}, cell.x + 1,
                                                try_vehicle);
                    }
                    break;
                  case Entered::kStepX:
                    for (std::int32_t dy = -1; dy <= 1; ++dy) {
                      vehicles.ForEachInRowSpan(GridCell{cell.x + step_x, cell.y + dy},
                                                cell.x + step_x, try_vehicle);
                    }
                    break;
                  case Entered::kStepY:
                    vehicles.ForEachInRowSpan(GridCell{cell.x - 1, cell.y + step_y}, cell.x + 1,
                                              try_vehicle);
                    break;
                }
              });
  }
  return best <= max_range_m ? best : kInfinity;
}

RangeScanReading ScanRange(const RangeScanSpec& spec, std::uint32_t self,
                           const CollisionScene& scene, absl::Span<const Obstacle> obstacles,
                           const std::optional<WorldBounds>& bounds) {
  RangeScanReading reading;
  const bool full_circle = spec.field_of_view_rad >= kTwoPi;
  if (full_circle) {
    reading.angle_min_rad = -kPi;
    reading.angle_increment_rad = kTwoPi / spec.beam_count;
  } else if (spec.beam_count > 1) {
    reading.angle_min_rad = -0.5 * spec.field_of_view_rad;
    reading.angle_increment_rad = spec.field_of_view_rad / (spec.beam_count - 1);
  }
  const CollisionBox& body = scene.vehicle_boxes[self];
  reading.ranges_m.resize(spec.beam_count);
  for (std::uint32_t i = 0; i < spec.beam_count; ++i) {
    double sin_beam;
    double cos_beam;
    SinCos(reading.angle_min_rad + i * reading.angle_increment_rad, &sin_beam, &cos_beam);
    // The beam's direction: the body axis turned by the beam angle.
    const double dir_x = body.axis_x * cos_beam - body.axis_y * sin_beam;
    const double dir_y = body.axis_x * sin_beam + body.axis_y * cos_beam;
    reading.ranges_m[i] = CastRay(body.center_x_m, body.center_y_m, dir_x, dir_y,
                                  spec.max_range_m, self, scene, obstacles, bounds);
  }
  return reading;
}

std::vector<NearbyObject> FindNearestObjects(const NearestObjectsSpec& spec, std::uint32_t self,
                                             const VehicleTable& fleet,
                                             const CollisionScene& scene,
                                             absl::Span<const Obstacle> obstacles) {
  const CollisionBox& body = scene.vehicle_boxes[self];
  const double self_yaw = fleet.yaw_rad[self];
  const Aabb query{
      .min_x_m = body.center_x_m - spec.radius_m,
      .min_y_m = body.center_y_m - spec.radius_m,
      .max_x_m = body.center_x_m + spec.radius_m,
      .max_y_m = body.center_y_m + spec.radius_m,
  };
  std::vector<NearbyObject> found;
  const auto consider = [&](ObjectKind kind, std::uint64_t id, const CollisionBox& box,
                            double yaw_rad, double speed_mps) {
    const double dx = box.center_x_m - body.center_x_m;
    const double dy = box.center_y_m - body.center_y_m;
    const double distance_m = std::sqrt(dx * dx + dy * dy);
    if (distance_m > spec.radius_m) return;
    found.push_back(NearbyObject{
        .kind = kind,
        .id = id,
        .x_m = dx * body.axis_x + dy * body.axis_y,
        .y_m = -dx * body.axis_y + dy * body.axis_x,
        .distance_m = distance_m,
        .relative_yaw_rad = WrapToPi(yaw_rad - self_yaw),
        .speed_mps = speed_mps,
    });
  };
  scene.vehicle_grid.ForEachCenterIn(query, [&](std::uint32_t k) {
    if (k == self) return;
    consider(ObjectKind::kVehicle, fleet.ids[k], scene.vehicle_boxes[k], fleet.yaw_rad[k],
             fleet.speed_mps[k]);
  });
  scene.obstacle_grid.Query(query, [&](std::uint32_t k) {
    consider(ObjectKind::kObstacle, obstacles[k].id, obstacles[k].box, obstacles[k].spec.yaw_rad,
             0.0);
  });
  const auto nearer = [](const NearbyObject& a, const NearbyObject& b) {
    if (a.distance_m != b.distance_m) return a.distance_m < b.distance_m;
    if (a.kind != b.kind) return a.kind < b.kind;
    return a.id < b.id;
  };
  const std::size_t keep = std::min<std::size_t>(spec.count, found.size());
  std::partial_sort(found.begin(), found.begin() + keep, found.end(), nearer);
  found.resize(keep);
  return found;
}

}  // namespace pitlane::sim
