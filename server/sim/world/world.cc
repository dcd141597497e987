#include "server/sim/world/world.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/base/macros.h"
#include "absl/strings/str_cat.h"
#include "server/sim/sensors/sensors.h"
#include "server/util/field_checks.h"
#include "server/util/status_macros.h"

namespace pitlane::sim {
namespace {

absl::Status IndexedError(std::size_t index, const absl::Status& status) {
  return PrefixField(absl::StrCat("[", index, "]"), status);
}

// StateHasher's run of whole 64-byte blocks: each of the eight 64-bit lanes takes the word at
// its place in the block with an xor, a rotation left by 29 and an addition. The eight lanes
// are one vector, built for the vector units each machine has (chosen when the program
// loads): AVX-512 does a block in three instructions, AVX2 and the x86-64 baseline split it
// in two and four. Integer arithmetic: the same value on all of them.
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#if defined(__x86_64__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void MixBlocks(std::uint64_t* lanes, const unsigned char* bytes, std::size_t blocks) {
  using Lanes = std::uint64_t __attribute__((vector_size(64)));
  Lanes local;
  std::memcpy(&local, lanes, sizeof(local));
  for (std::size_t b = 0; b < blocks; ++b, bytes += sizeof(Lanes)) {
    Lanes word;
    std::memcpy(&word, bytes, sizeof(word));
    local ^= word;
    local = ((local << 29) | (local >> 35)) + word;
  }
  std::memcpy(lanes, &local, sizeof(local));
}
#else
void MixBlocks(std::uint64_t* lanes, const unsigned char* bytes, std::size_t blocks) {
  constexpr std::size_t kLanes = 8;
  for (std::size_t b = 0; b < blocks; ++b, bytes += kLanes * sizeof(std::uint64_t)) {
    for (std::size_t i = 0; i < kLanes; ++i) {
      std::uint64_t word;
      std::memcpy(&word, bytes + i * sizeof(std::uint64_t), sizeof(word));
      if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
      lanes[i] = std::rotl(lanes[i] ^ word, 29) + word;
    }
  }
}
#endif

// A 64-bit hash of a stream of bytes, read as little-endian 64-bit words into eight lanes
// that do not wait on each other: a recorder takes it every tick (byte-at-a-time FNV-1a cost
// 108 us for 1,000 vehicles; this, 2 to 4 us). Each lane mixes a word in with an xor, a rotation
// and an addition (one cycle each); the lanes, the length and splitmix64's finalizer make the
// value. It finds runs that diverged, not an adversary's collisions. Integer arithmetic
// only: the same on every machine.
class StateHasher {
 public:
  void Add(const void* data, std::size_t size) {
    if (size == 0) return;  // An empty column's data() may be null.
    const auto* bytes = static_cast<const unsigned char*>(data);
    total_ += size;
    if (buffered_ > 0) {
      const std::size_t take = std::min(size, kBlock - buffered_);
      std::memcpy(buffer_ + buffered_, bytes, take);
      buffered_ += take;
      bytes += take;
      size -= take;
      if (buffered_ < kBlock) return;
      Block(buffer_);
      buffered_ = 0;
    }
    if (size >= kBlock) {
      const std::size_t blocks = size / kBlock;
      MixBlocks(lanes_.data(), bytes, blocks);
      bytes += blocks * kBlock;
      size -= blocks * kBlock;
    }
    std::memcpy(buffer_, bytes, size);
    buffered_ = size;
  }
  template <typename T>
  void AddColumn(const std::vector<T>& column) {
    Add(column.data(), column.size() * sizeof(T));
  }
  std::uint64_t value() const {
    std::array<std::uint64_t, kLanes> lanes = lanes_;
    unsigned char tail[kBlock] = {};
    std::memcpy(tail, buffer_, buffered_);
    Mix(lanes, tail);
    std::uint64_t hash = total_ * kMultiplier;
    for (const std::uint64_t lane : lanes) hash = Avalanche(hash ^ Avalanche(lane));
    return hash;
  }

 private:
  static constexpr std::size_t kLanes = 8;
  static constexpr std::size_t kBlock = kLanes * sizeof(std::uint64_t);
  static constexpr std::uint64_t kMultiplier = 0x9e3779b97f4a7c15ULL;  // Odd.

  static std::uint64_t Word(const unsigned char* bytes) {
    std::uint64_t word;
    std::memcpy(&word, bytes, sizeof(word));
    if constexpr (std::endian::native == std::endian::big) word = __builtin_bswap64(word);
    return word;
  }
  static void Mix(std::array<std::uint64_t, kLanes>& lanes, const unsigned char* block) {
    for (std::size_t i = 0; i < kLanes; ++i) {
      const std::uint64_t word = Word(block + i * sizeof(std::uint64_t));
      lanes[i] = std::rotl(lanes[i] ^ word, 29) + word;
    }
  }
  // splitmix64's finalizer.
  static std::uint64_t Avalanche(std::uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  void Block(const unsigned char* block) { Mix(lanes_, block); }

  std::array<std::uint64_t, kLanes> lanes_ = {
      0x243f6a8885a308d3ULL, 0x13198a2e03707344ULL, 0xa4093822299f31d0ULL,
      0x082efa98ec4e6c89ULL, 0x452821e638d01377ULL, 0xbe5466cf34e90c6cULL,
      0xc0ac29b7c97c50ddULL, 0x3f84d5b5b5470917ULL};  // The digits of pi.
  unsigned char buffer_[kBlock] = {};
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;
};

// What a driver sees of the vehicle at table row `row`.
DriverView DriverViewOf(const VehicleTable& table, std::size_t row) {
  return DriverView{.x_m = table.x_m[row],
                    .y_m = table.y_m[row],
                    .cos_yaw = table.cos_yaw[row],
                    .sin_yaw = table.sin_yaw[row],
                    .speed_mps = table.speed_mps[row]};
}

}  // namespace

absl::StatusOr<World> World::Create(const WorldSpec& spec, IdCounters first_ids,
                                    const World* same_spec) {
  // The counters come from another world, never from a client: 0 would be a bug of ours.
  ABSL_ASSERT(first_ids.next_vehicle_id >= 1 && first_ids.next_obstacle_id >= 1);
  RETURN_IF_ERROR(
      CheckInRange("tick_rate_hz", spec.tick_rate_hz, kMinTickRate_hz, kMaxTickRate_hz));
  if (spec.max_vehicles < 1) {
    return absl::InvalidArgumentError("max_vehicles: must be >= 1, got 0");
  }
  if (spec.max_contacts < 1) {
    return absl::InvalidArgumentError("max_contacts: must be >= 1, got 0");
  }
  if (spec.bounds.has_value()) RETURN_IF_ERROR(PrefixField("bounds", CheckWorldBounds(*spec.bounds)));
  if (spec.routes.size() > kMaxRoutes) {
    return absl::InvalidArgumentError(
        absl::StrCat("routes: at most ", kMaxRoutes, " routes, got ", spec.routes.size()));
  }
  std::size_t points = 0;
  for (const Route& route : spec.routes) points += route.points.size();
  if (points > kMaxRoutePointsPerWorld) {
    return absl::InvalidArgumentError(absl::StrCat("routes: at most ", kMaxRoutePointsPerWorld,
                                                   " points over all routes, got ", points));
  }
  std::vector<RouteParams> routes;
  std::vector<std::shared_ptr<const TrackGeometry>> tracks(spec.routes.size());
  std::vector<std::string> not_raced_because(spec.routes.size());
  std::size_t edges = 0;  // Of the tracks so far.
  if (same_spec != nullptr) {
    routes = same_spec->params_.routes;
    tracks = same_spec->params_.tracks;
    not_raced_because = same_spec->params_.not_raced_because;
  } else {
    routes.reserve(spec.routes.size());
  }
  for (std::size_t i = 0; same_spec == nullptr && i < spec.routes.size(); ++i) {
    const std::string field = absl::StrCat("routes[", i, "]");
    absl::StatusOr<RouteParams> route = MakeRouteParams(spec.routes[i]);
    if (!route.ok()) return PrefixField(field, route.status());
    const std::vector<double>& sectors = spec.routes[i].sector_starts_m;
    if (!route->closed && !sectors.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".sector_starts_m: only a closed route is raced as a track with sectors"));
    }
    // Every closed route that can be raced is a track; one that cannot (too short, too
    // tight for its width, beyond the world's budget of edges) is not, unless it was given
    // sectors: then why is an error.
    if (route->closed) {
      absl::StatusOr<TrackGeometry> track =
          MakeTrackGeometry(*route, sectors, kMaxTrackEdgesPerWorld - edges);
      if (track.ok()) {
        edges += track->edges.size();
        tracks[i] = std::make_shared<const TrackGeometry>(*std::move(track));
      } else if (!sectors.empty()) {
        return PrefixField(field, track.status());
      } else {
        not_raced_because[i] = std::string(track.status().message());
        if (track.status().code() == absl::StatusCode::kResourceExhausted) {
          absl::StrAppend(&not_raced_because[i], " (the session's race tracks may have ",
                          kMaxTrackEdgesPerWorld, " edge segments in all; ", edges,
                          " are taken)");
        }
      }
    } else {
      not_raced_because[i] = "closed: it is open (only a closed track is raced)";
    }
    routes.push_back(*std::move(route));
  }
  return World(WorldParams{
      .tick_rate_hz = spec.tick_rate_hz,
      .dt_s = 1.0 / spec.tick_rate_hz,
      .seed = spec.seed,
      .max_vehicles = spec.max_vehicles,
      .max_contacts = spec.max_contacts,
      .collision_policy = spec.collision_policy,
      .bounds = spec.bounds,
      .routes = std::move(routes),
      .tracks = std::move(tracks),
      .not_raced_because = std::move(not_raced_because),
      .first_ids = first_ids,
  });
}

absl::StatusOr<std::vector<VehicleId>> World::Spawn(absl::Span<const VehicleSpec> specs) {
  // Validate everything before touching the state: all or none.
  std::vector<VehicleSpec> resolved(specs.begin(), specs.end());
  for (std::size_t i = 0; i < resolved.size(); ++i) {
    RETURN_IF_ERROR(IndexedError(i, ResolveVehicleSpec(resolved[i])));
    const auto* follower = resolved[i].driver.has_value()
                               ? std::get_if<RouteFollowerSpec>(&*resolved[i].driver)
                               : nullptr;
    if (follower != nullptr && follower->route >= params_.routes.size()) {
      return IndexedError(i, absl::InvalidArgumentError(absl::StrCat(
                                 "driver.route_follower.route: no route ", follower->route,
                                 " (the world has ", params_.routes.size(), ")")));
    }
    RETURN_IF_ERROR(IndexedError(i, ResolveTimingRoute(resolved[i])));
  }
  if (vehicle_count() + resolved.size() > params_.max_vehicles) {
    return absl::ResourceExhaustedError(
        absl::StrCat("vehicles: the session holds ", vehicle_count(), " of at most ",
                     params_.max_vehicles, " vehicles (max_vehicles); cannot add ",
                     resolved.size()));
  }
  std::uint64_t beams = state_.scan_beams;
  std::uint64_t slots = state_.nearest_object_slots;
  for (const VehicleSpec& spec : resolved) {
    beams += spec.range_scan.has_value() ? spec.range_scan->beam_count : 0;
    beams += spec.track_sensor.has_value() ? spec.track_sensor->beam_angles_rad.size() : 0;
    slots += spec.nearest_objects.has_value() ? spec.nearest_objects->count : 0;
  }
  if (beams > kMaxScanBeamsPerWorld) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "vehicles: the session's range scans and track sensors would total ", beams,
        " beams, above its limit of ",
        kMaxScanBeamsPerWorld));
  }
  if (slots > kMaxNearestObjectsPerWorld) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "vehicles: the session's nearest_objects counts would total ", slots,
        ", above its limit of ", kMaxNearestObjectsPerWorld));
  }
  state_.scan_beams = beams;
  state_.nearest_object_slots = slots;
  std::vector<VehicleId> ids;
  ids.reserve(resolved.size());
  VehicleTable& table = state_.vehicles;
  for (const VehicleSpec& spec : resolved) {
    const VehicleId id = state_.next_ids.next_vehicle_id++;
    const auto row = static_cast<std::uint32_t>(table.size());
    table.Append(id, spec);
    state_.fleets.Visit(table.kinds[row], [&](auto& fleet) {
      table.slots[row] = static_cast<std::uint32_t>(fleet.size());
      fleet.Append(row, spec, params_.dt_s, table);
    });
    if (spec.driver.has_value()) {
      DrivenVehicle& driven = state_.drivers.emplace_back(DrivenVehicle{
          .row = row,
          .spec = *spec.driver,
          .vehicle = MakeDriverVehicleParams(spec, params_.dt_s),
      });
      if (const auto* follower = std::get_if<RouteFollowerSpec>(&driven.spec)) {
        driven.route = StartFollowing(params_.routes[follower->route], driven.vehicle,
                                      DriverViewOf(table, row));
      }
    }
    if (spec.timing_track.has_value()) {
      state_.timed.push_back(TimedVehicle{
          .row = row,
          .route = *spec.timing_track,
          .tracker = LapTracker(*params_.tracks[*spec.timing_track], table.PoseAt(row)),
      });
    }
    ids.push_back(id);
  }
  cell_size_stale_ = vehicle_grid_stale_ = true;
  return ids;
}

absl::Status World::Remove(VehicleId id) {
  VehicleTable& table = state_.vehicles;
  const std::ptrdiff_t found = table.Find(id);
  if (found < 0) {
    return absl::NotFoundError(absl::StrCat("vehicle_id: no vehicle ", id, " in this world"));
  }
  const auto row = static_cast<std::uint32_t>(found);
  const VehicleSpec& spec = table.specs[row];
  state_.scan_beams -= spec.range_scan.has_value() ? spec.range_scan->beam_count : 0;
  state_.scan_beams -= spec.track_sensor.has_value() ? spec.track_sensor->beam_angles_rad.size() : 0;
  state_.nearest_object_slots -= spec.nearest_objects.has_value() ? spec.nearest_objects->count : 0;
  const ModelKind kind = table.kinds[row];
  const std::uint32_t slot = table.slots[row];
  state_.fleets.Visit(kind, [slot](auto& fleet) { fleet.Erase(slot); });
  table.Erase(row);
  // Renumber: the rows after the removed one, and the slots after it in its fleet.
  state_.fleets.ForEach([row](auto& fleet) {
    for (std::uint32_t& r : fleet.rows) r -= r > row ? 1 : 0;
  });
  for (std::size_t i = row; i < table.size(); ++i) {
    if (table.kinds[i] == kind) --table.slots[i];
  }
  const std::ptrdiff_t driver = DriverOf(row);
  if (driver >= 0) state_.drivers.erase(state_.drivers.begin() + driver);
  for (DrivenVehicle& driven : state_.drivers) driven.row -= driven.row > row ? 1 : 0;
  std::erase_if(state_.timed, [row](const TimedVehicle& timed) { return timed.row == row; });
  for (TimedVehicle& timed : state_.timed) timed.row -= timed.row > row ? 1 : 0;
  cell_size_stale_ = vehicle_grid_stale_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ObstacleId>> World::AddObstacles(
    absl::Span<const ObstacleSpec> specs) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    RETURN_IF_ERROR(IndexedError(i, CheckObstacleSpec(specs[i])));
  }
  if (state_.obstacles.size() + specs.size() > kMaxObstacles) {
    return absl::ResourceExhaustedError(
        absl::StrCat("obstacles: the session holds ", state_.obstacles.size(), " of at most ",
                     kMaxObstacles, " obstacles; cannot add ", specs.size()));
  }
  std::vector<ObstacleId> ids;
  ids.reserve(specs.size());
  for (const ObstacleSpec& spec : specs) {
    const ObstacleId id = state_.next_ids.next_obstacle_id++;
    state_.obstacles.push_back(Obstacle{
        .id = id,
        .spec = spec,
        .box = ToCollisionBox(OrientedBox{
            .center_x_m = spec.center_x_m,
            .center_y_m = spec.center_y_m,
            .yaw_rad = spec.yaw_rad,
            .half_length_m = 0.5 * spec.length_m,
            .half_width_m = 0.5 * spec.width_m,
        }),
    });
    ids.push_back(id);
  }
  obstacle_grid_stale_ = true;
  return ids;
}

absl::Status World::RemoveObstacle(ObstacleId id) {
  std::vector<Obstacle>& obstacles = state_.obstacles;
  const auto it = std::lower_bound(
      obstacles.begin(), obstacles.end(), id,
      [](const Obstacle& obstacle, ObstacleId wanted) { return obstacle.id < wanted; });
  if (it == obstacles.end() || it->id != id) {
    return absl::NotFoundError(absl::StrCat("obstacle_id: no obstacle ", id, " in this world"));
  }
  obstacles.erase(it);
  obstacle_grid_stale_ = true;
  return absl::OkStatus();
}

absl::Status World::SetInputs(absl::Span<const VehicleInput> inputs) {
  VehicleTable& table = state_.vehicles;
  // Validate and look up everything first: all or none.
  std::vector<std::size_t> indices;
  indices.reserve(inputs.size());
  // A repeated id: a few inputs (one car per session is common) are compared pairwise, more
  // go through a set.
  constexpr std::size_t kPairwiseBelow = 16;
  absl::flat_hash_set<VehicleId> seen;
  if (inputs.size() >= kPairwiseBelow) seen.reserve(inputs.size());
  const auto repeated = [&](std::size_t i) {
    if (inputs.size() >= kPairwiseBelow) return !seen.insert(inputs[i].id).second;
    for (std::size_t k = 0; k < i; ++k) {
      if (inputs[k].id == inputs[i].id) return true;
    }
    return false;
  };
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const VehicleInput& input = inputs[i];
    const std::ptrdiff_t index = table.Find(input.id);
    if (index < 0) {
      return IndexedError(i, absl::NotFoundError(absl::StrCat("vehicle_id: no vehicle ", input.id,
                                                              " in this world")));
    }
    if (DriverOf(static_cast<std::size_t>(index)) >= 0) {
      return IndexedError(i, absl::FailedPreconditionError(absl::StrCat(
                                 "vehicle_id: vehicle ", input.id, " has a built-in driver")));
    }
    RETURN_IF_ERROR(IndexedError(i, CheckControls(table.kinds[index], input)));
    if (repeated(i)) {
      return IndexedError(i, absl::InvalidArgumentError(absl::StrCat(
                                 "vehicle_id: vehicle ", input.id, " appears more than once")));
    }
    indices.push_back(static_cast<std::size_t>(index));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::size_t row = indices[i];
    if (table.crashed[row] != 0) continue;
    const std::uint32_t slot = table.slots[row];
    state_.fleets.Visit(table.kinds[row],
                        [&](auto& fleet) { fleet.SetControls(slot, inputs[i]); });
  }
  return absl::OkStatus();
}

std::vector<std::optional<VehicleInput>> World::HeldControls(
    absl::Span<const VehicleId> ids) const {
  const VehicleTable& table = state_.vehicles;
  std::vector<std::optional<VehicleInput>> held;
  held.reserve(ids.size());
  for (const VehicleId id : ids) {
    const std::ptrdiff_t row = table.Find(id);
    if (row < 0) {
      held.emplace_back();
      continue;
    }
    const std::uint32_t slot = table.slots[static_cast<std::size_t>(row)];
    VehicleInput input = state_.fleets.Visit(
        table.kinds[static_cast<std::size_t>(row)],
        [slot](const auto& fleet) { return fleet.HeldAt(slot); });
    input.id = id;
    held.push_back(input);
  }
  return held;
}

std::ptrdiff_t World::DriverOf(std::size_t row) const {
  const auto it = std::lower_bound(
      state_.drivers.begin(), state_.drivers.end(), row,
      [](const DrivenVehicle& driven, std::size_t wanted) { return driven.row < wanted; });
  if (it == state_.drivers.end() || it->row != row) return -1;
  return it - state_.drivers.begin();
}

void World::DriveVehicles() {
  const VehicleTable& table = state_.vehicles;
  // Where every route follower is on its route (crashed ones too: they block the way), then
  // the vehicle ahead of each.
  occupants_.clear();
  leaders_.assign(state_.drivers.size(), std::nullopt);
  for (std::size_t k = 0; k < state_.drivers.size(); ++k) {
    DrivenVehicle& driven = state_.drivers[k];
    const auto* follower = std::get_if<RouteFollowerSpec>(&driven.spec);
    if (follower == nullptr) continue;
    TrackRoute(params_.routes[follower->route], driven.vehicle, DriverViewOf(table, driven.row),
               driven.route);
    occupants_.push_back(RouteOccupant{.route = follower->route,
                                       .s_m = driven.route.s_m,
                                       .front_m = driven.vehicle.front_m,
                                       .rear_m = driven.vehicle.rear_m,
                                       .speed_mps = table.speed_mps[driven.row],
                                       .index = static_cast<std::uint32_t>(k)});
  }
  if (!occupants_.empty()) FindLeaders(params_.routes, occupants_, absl::MakeSpan(leaders_));

  // Each driver's intent, as controls its model takes; a race's cars wait for its start.
  const bool waiting_for_start =
      state_.race.has_value() && state_.race->race.phase() == RacePhase::kCountdown;
  for (std::size_t k = 0; k < state_.drivers.size(); ++k) {
    DrivenVehicle& driven = state_.drivers[k];
    const std::uint32_t row = driven.row;
    if (table.crashed[row] != 0) continue;
    if (waiting_for_start && state_.race->race.Entered(table.ids[row])) {
      // On the grid until the start: brakes to a stop, then holds still.
      const VehicleInput hold = BrakeToStopInput(table.kinds[row], table.ids[row],
                                                 table.speed_mps[row], params_.dt_s);
      const std::uint32_t slot = table.slots[row];
      state_.fleets.Visit(table.kinds[row], [&](auto& fleet) { fleet.SetControls(slot, hold); });
      continue;
    }
    const DriverView view = DriverViewOf(table, row);
    DriverIntent intent;
    if (const auto* follower = std::get_if<RouteFollowerSpec>(&driven.spec)) {
      intent = RouteFollowerIntent(*follower, params_.routes[follower->route], driven.vehicle,
                                   view, leaders_[k], driven.route);
    } else {
      intent = CruiseIntent(std::get<CruiseDriverSpec>(driven.spec), driven.vehicle,
                            view.speed_mps);
    }
    const VehicleInput input =
        ControlsForIntent(driven.vehicle, table.ids[row], intent, view.speed_mps);
    ABSL_ASSERT(CheckControls(table.kinds[row], input).ok());
    const std::uint32_t slot = table.slots[row];
    state_.fleets.Visit(table.kinds[row], [&](auto& fleet) { fleet.SetControls(slot, input); });
  }
}

void World::RefreshStaticIndex() {
  if (cell_size_stale_) {
    const double cell_size_m = GridCellSize(state_.vehicles);
    if (cell_size_m != scene_.cell_size_m) {
      scene_.cell_size_m = cell_size_m;
      obstacle_grid_stale_ = true;
    }
    cell_size_stale_ = false;
  }
  if (obstacle_grid_stale_) {
    IndexObstacles(state_.obstacles, scene_);
    obstacle_grid_stale_ = false;
  }
}

void World::Crash(std::size_t row) {
  VehicleTable& table = state_.vehicles;
  table.crashed[row] = 1;
  const std::uint32_t slot = table.slots[row];
  state_.fleets.Visit(table.kinds[row], [&](auto& fleet) { fleet.Halt(slot, table); });
}

void World::SetPose(std::size_t row, const Pose2& pose) {
  VehicleTable& table = state_.vehicles;
  const std::uint32_t slot = table.slots[row];
  state_.fleets.Visit(table.kinds[row], [&](auto& fleet) { fleet.SetPose(slot, pose, table); });
}

void World::Step(std::vector<ContactEvent>* transitions) {
  VehicleTable& table = state_.vehicles;
  const std::size_t n = table.size();
  const bool stop_on_contact = params_.collision_policy == CollisionPolicy::kStop;
  // Inputs: the held controls in state_ apply as they are; clients change them only between
  // ticks (SetInputs). The built-in drivers set theirs here, from the state at the start of
  // the tick.
  if (!state_.drivers.empty()) DriveVehicles();

  // Poses at the start of the tick, to sweep vehicles against obstacles.
  previous_poses_.clear();
  if (!state_.obstacles.empty()) {
    previous_poses_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      previous_poses_[i] = Pose2{table.x_m[i], table.y_m[i], table.yaw_rad[i]};
    }
  }

  // Vehicle dynamics, model by model; then the new poses go into the table.
  state_.fleets.ForEach([this, &table](auto& model_fleet) {
    if (model_fleet.size() == 0) return;
    model_fleet.Step(params_.dt_s, table);
  });

  // Vehicles that moved far are swept against obstacles first: under kStop one that hit an
  // obstacle part-way through the tick goes back to where it hit, before it meets others.
  RefreshStaticIndex();
  ComputeVehicleBoxes(table, scene_);
  contacts_.clear();
  early_contacts_.clear();
  ResetContactBudget(params_.max_contacts, table.size(), scene_);
  // Each collision below appends a run of contacts sorted by pair; merged at the end.
  std::size_t run_ends[4];
  CollideWithObstacles(table, previous_poses_, state_.obstacles, stop_on_contact, scene_,
                       contacts_, early_contacts_);
  if (stop_on_contact) {
    for (const EarlyContact& early : early_contacts_) {
      const std::uint32_t i = early.vehicle_index;
      SetPose(i, early.pose);
      scene_.vehicle_boxes[i] = VehicleBox(table, i);
      scene_.vehicle_bounds[i] = BoundingBox(scene_.vehicle_boxes[i]);
    }
  }

  // Broad phase between vehicles; through it, the rest of the obstacle contacts; narrow phase
  // between vehicles; then the walls.
  run_ends[0] = contacts_.size();
  scene_.vehicle_grid.Build(scene_.cell_size_m, scene_.vehicle_bounds);
  vehicle_grid_stale_ = false;
  CollideObstaclesWithVehicles(table, state_.obstacles, scene_, contacts_);
  run_ends[1] = contacts_.size();
  CollideVehicles(table, scene_, contacts_);
  run_ends[2] = contacts_.size();
  if (params_.bounds.has_value()) CollideWithWalls(table, *params_.bounds, scene_, contacts_);
  run_ends[3] = contacts_.size();
  MergeContactRuns(run_ends, contacts_, scene_.contact_scratch);

  // Collision response.
  if (stop_on_contact) {
    for (const Contact& contact : contacts_) {
      Crash(static_cast<std::size_t>(table.Find(contact.pair.vehicle)));
      if (contact.pair.other_kind == ObjectKind::kVehicle) {
        Crash(static_cast<std::size_t>(table.Find(contact.pair.other_id)));
      }
    }
    for (std::size_t i = 0; i < scene_.touched_beyond_budget.size(); ++i) {
      if (scene_.touched_beyond_budget[i] != 0) Crash(i);
    }
  }
  state_.contacts_dropped = scene_.contacts_dropped;

  // Progress on the tracks, from where the vehicles ended the tick.
  lap_events_.clear();
  for (TimedVehicle& timed : state_.timed) {
    lap_scratch_.clear();
    timed.tracker.Update(table.PoseAt(timed.row), params_.dt_s, &lap_scratch_);
    for (const LapEvent& event : lap_scratch_) {
      lap_events_.push_back({.id = table.ids[timed.row], .route = timed.route, .event = event});
    }
  }

  // Events, and the clock.
  ++state_.tick;
  transitions_.clear();
  std::vector<ContactEvent>& events = transitions != nullptr ? *transitions : transitions_;
  const std::size_t events_before = events.size();
  DiffContacts(state_.contacts, state_.tick, absl::MakeSpan(contacts_), events);
  state_.contacts.swap(contacts_);

  // The race, from where the vehicles ended the tick and the contacts that began in it.
  race_events_.clear();
  if (state_.race.has_value() && state_.race->race.phase() != RacePhase::kFinished) {
    contacts_begun_.clear();
    for (std::size_t i = events_before; i < events.size(); ++i) {
      if (events[i].phase != ContactPhase::kBegan) continue;
      const ContactPair& pair = events[i].contact.pair;
      contacts_begun_.push_back(pair.vehicle);
      if (pair.other_kind == ObjectKind::kVehicle) contacts_begun_.push_back(pair.other_id);
    }
    state_.race->race.Update(
        sim_time_s(),
        [&table](VehicleId id) -> std::optional<Pose2> {
          const std::ptrdiff_t row = table.Find(id);
          if (row < 0) return std::nullopt;
          return table.PoseAt(static_cast<std::size_t>(row));
        },
        contacts_begun_, &race_events_);
  }
}

absl::Status World::StartRace(std::uint32_t route, const RaceRules& rules,
                              absl::Span<const VehicleId> vehicles, bool replace,
                              absl::Span<const Pose2> grid) {
  if (!params_.IsRaceTrack(route)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "track: route ", route, " is not a race track",
        route < params_.not_raced_because.size() && !params_.not_raced_because[route].empty()
            ? absl::StrCat(" (", params_.not_raced_because[route], ")")
            : ""));
  }
  if (state_.race.has_value() && state_.race->race.phase() != RacePhase::kFinished && !replace) {
    return absl::FailedPreconditionError(
        "replace: a race is running (its countdown or its laps); set replace to abandon it");
  }
  const VehicleTable& table = state_.vehicles;
  std::vector<Race::Entry> entries;
  if (vehicles.empty()) {
    for (const TimedVehicle& timed : state_.timed) {
      if (timed.route == route) {
        entries.push_back({table.ids[timed.row], table.PoseAt(timed.row),
                           table.specs[timed.row].name, DriverOf(timed.row) >= 0});
      }
    }
    if (entries.empty()) {
      return absl::InvalidArgumentError(
          "vehicle_ids: no vehicle is timed on the track; spawn cars on it or name them");
    }
  }
  absl::flat_hash_set<VehicleId> named;
  for (std::size_t i = 0; i < vehicles.size(); ++i) {
    if (!named.insert(vehicles[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("vehicle_ids[", i, "]: vehicle ", vehicles[i], " is named twice"));
    }
    const std::ptrdiff_t row = table.Find(vehicles[i]);
    if (row < 0) {
      return absl::NotFoundError(
          absl::StrCat("vehicle_ids[", i, "]: no vehicle ", vehicles[i], " in the session"));
    }
    entries.push_back({vehicles[i], table.PoseAt(static_cast<std::size_t>(row)),
                       table.specs[static_cast<std::size_t>(row)].name,
                       DriverOf(static_cast<std::size_t>(row)) >= 0});
  }
  if (!grid.empty()) {
    if (grid.size() < entries.size()) {
      return absl::InvalidArgumentError(absl::StrCat("grid: ", entries.size(),
                                                     " cars, but only ", grid.size(),
                                                     " grid slots"));
    }
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const Pose2& slot = grid[i];
      if (!std::isfinite(slot.x_m) || !std::isfinite(slot.y_m) || !std::isfinite(slot.yaw_rad) ||
          std::abs(slot.x_m) > kMaxCoordinate_m || std::abs(slot.y_m) > kMaxCoordinate_m) {
        return absl::InvalidArgumentError(
            absl::StrCat("grid[", i, "]: must be finite, |x|, |y| <= ", kMaxCoordinate_m));
      }
      entries[i].grid_pose = slot;
    }
    RETURN_IF_ERROR(CheckGridIsClear(entries));
  }
  ASSIGN_OR_RETURN(Race race,
                   Race::Create(*params_.tracks[route], rules, entries, sim_time_s()));
  // Nothing fails from here: the cars go to their slots.
  if (!grid.empty()) {
    for (const Race::Entry& entry : entries) {
      PlaceOnGrid(static_cast<std::size_t>(table.Find(entry.vehicle)), entry.grid_pose);
    }
  }
  state_.race = WorldRace{.route = route, .race = std::move(race)};
  return absl::OkStatus();
}

absl::Status World::CheckGridIsClear(absl::Span<const Race::Entry> entries) const {
  // The bodies: each car entered at its slot, every other vehicle where it is; by the x of
  // their centres. Each entered car's body is tested (the separating-axis test) against every
  // body whose bounding circle can reach it.
  const VehicleTable& table = state_.vehicles;
  struct Body {
    double center_x_m;
    std::ptrdiff_t entry;  // Index into `entries`, or -1 for a vehicle not entered.
    std::size_t row;
    CollisionBox box;
  };
  const auto radius = [](const CollisionBox& box) {
    return std::sqrt(box.half_length_m * box.half_length_m + box.half_width_m * box.half_width_m);
  };
  absl::flat_hash_set<VehicleId> placed;
  std::vector<Body> bodies;
  bodies.reserve(table.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    placed.insert(entries[i].vehicle);
    const auto row = static_cast<std::size_t>(table.Find(entries[i].vehicle));
    const CollisionBox box = VehicleBoxAt(table.bodies[row], entries[i].grid_pose);
    bodies.push_back({box.center_x_m, static_cast<std::ptrdiff_t>(i), row, box});
  }
  for (std::size_t row = 0; row < table.size(); ++row) {
    if (placed.contains(table.ids[row])) continue;
    const CollisionBox box = VehicleBox(table, row);
    bodies.push_back({box.center_x_m, -1, row, box});
  }
  const auto blocked = [&](std::ptrdiff_t entry, std::size_t row) {
    return absl::FailedPreconditionError(absl::StrCat(
        "grid[", entry, "]: vehicle ", table.ids[row],
        " (not in this race) stands on the grid slot of vehicle ", entries[entry].vehicle,
        "; move it, remove it, or enter it"));
  };
  double widest = 0.0;
  for (const Body& body : bodies) widest = std::max(widest, radius(body.box));
  std::sort(bodies.begin(), bodies.end(),
            [](const Body& a, const Body& b) { return a.center_x_m < b.center_x_m; });
  for (std::size_t k = 0; k < bodies.size(); ++k) {
    const Body& mine = bodies[k];
    if (mine.entry < 0) continue;
    const double reach = radius(mine.box) + widest;
    // Only the bodies after it: a pair of entered cars is met once, from its left one.
    for (std::size_t j = k + 1; j < bodies.size(); ++j) {
      const Body& other = bodies[j];
      if (other.center_x_m > mine.center_x_m + reach) break;
      if (!CollideBoxes(mine.box, other.box).touching) continue;
      const std::ptrdiff_t first = mine.entry;
      if (other.entry >= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "grid[", std::max(first, other.entry), "]: its slot overlaps grid[",
            std::min(first, other.entry), "]: the cars of the two would touch"));
      }
      return blocked(first, other.row);
    }
    // And those before it that are not entered (the entered ones met it from their side).
    for (std::size_t j = k; j-- > 0;) {
      const Body& other = bodies[j];
      if (other.center_x_m < mine.center_x_m - reach) break;
      if (other.entry >= 0 || !CollideBoxes(mine.box, other.box).touching) continue;
      return blocked(mine.entry, other.row);
    }
  }
  return absl::OkStatus();
}

void World::PlaceOnGrid(std::size_t row, const Pose2& pose) {
  VehicleTable& table = state_.vehicles;
  SetPose(row, pose);
  const std::uint32_t slot = table.slots[row];
  state_.fleets.Visit(table.kinds[row], [&](auto& fleet) { fleet.Halt(slot, table); });
  table.crashed[row] = 0;  // Repaired for the race.
  const std::ptrdiff_t driver = DriverOf(row);
  if (driver >= 0) {
    DrivenVehicle& driven = state_.drivers[static_cast<std::size_t>(driver)];
    if (const auto* follower = std::get_if<RouteFollowerSpec>(&driven.spec)) {
      driven.route = StartFollowing(params_.routes[follower->route], driven.vehicle,
                                    DriverViewOf(table, row));
    }
  }
  const auto timed = std::lower_bound(
      state_.timed.begin(), state_.timed.end(), row,
      [](const TimedVehicle& t, std::size_t wanted) { return t.row < wanted; });
  if (timed != state_.timed.end() && timed->row == row) {
    timed->tracker = LapTracker(*params_.tracks[timed->route], table.PoseAt(row));
  }
  vehicle_grid_stale_ = true;
}

std::optional<RaceStatus> World::RaceNow() const {
  if (!state_.race.has_value()) return std::nullopt;
  const Race& race = state_.race->race;
  return RaceStatus{.route = state_.race->route,
                    .rules = race.rules(),
                    .phase = race.phase(),
                    .start_time_s = race.start_time_s(),
                    .race_time_s = race.race_time_s(),
                    .standings = race.Standings()};
}

bool World::HasDriver(VehicleId id) const {
  const std::ptrdiff_t row = state_.vehicles.Find(id);
  return row >= 0 && DriverOf(static_cast<std::size_t>(row)) >= 0;
}

std::optional<World::Motion> World::MotionOf(VehicleId id) const {
  const std::ptrdiff_t row = state_.vehicles.Find(id);
  if (row < 0) return std::nullopt;
  return Motion{.kind = state_.vehicles.kinds[row], .speed_mps = state_.vehicles.speed_mps[row]};
}

absl::Status World::ResolveTimingRoute(VehicleSpec& spec) const {
  if (spec.timing_track.has_value()) {
    const std::uint32_t route = *spec.timing_track;
    if (route >= params_.routes.size()) {
      return absl::InvalidArgumentError(absl::StrCat("timing_track: no track ", route,
                                                     " (the world has ", params_.routes.size(),
                                                     ")"));
    }
    if (!params_.IsRaceTrack(route)) {
      return absl::InvalidArgumentError(absl::StrCat("timing_track: the session's track ",
                                                     route, " is not a race track: ",
                                                     params_.not_raced_because[route]));
    }
  } else {
    const auto* follower =
        spec.driver.has_value() ? std::get_if<RouteFollowerSpec>(&*spec.driver) : nullptr;
    if (follower != nullptr && params_.IsRaceTrack(follower->route)) {
      spec.timing_track = follower->route;
    } else {
      for (std::uint32_t route = 0; route < params_.tracks.size(); ++route) {
        if (params_.IsRaceTrack(route)) {
          spec.timing_track = route;
          break;
        }
      }
    }
  }
  if (spec.track_sensor.has_value() && !spec.timing_track.has_value()) {
    return absl::InvalidArgumentError(
        "track_sensor: the vehicle is timed on no track (the world has no closed route that "
        "can be raced); track sensors read the edges of that track");
  }
  return absl::OkStatus();
}

std::vector<VehicleTrackReading> World::TrackReadings() const {
  const VehicleTable& table = state_.vehicles;
  std::vector<VehicleTrackReading> readings;
  readings.reserve(state_.timed.size());
  for (const TimedVehicle& timed : state_.timed) {
    VehicleTrackReading& reading = readings.emplace_back(VehicleTrackReading{
        .id = table.ids[timed.row], .route = timed.route, .progress = timed.tracker.Reading()});
    const VehicleSpec& spec = table.specs[timed.row];
    if (spec.track_sensor.has_value()) {
      reading.sensor = ReadTrackSensors(*params_.tracks[timed.route], reading.progress.position,
                                        table.PoseAt(timed.row), spec.track_sensor->beam_angles_rad,
                                        spec.track_sensor->range_m);
    }
  }
  return readings;
}

MotionColumns World::MotionSnapshot() const {
  const VehicleTable& table = state_.vehicles;
  return {.ids = table.ids,
          .x_m = table.x_m,
          .y_m = table.y_m,
          .yaw_rad = table.yaw_rad,
          .speed_mps = table.speed_mps,
          .crashed = table.crashed};
}

std::vector<VehicleSnapshot> World::Snapshot() const {
  const VehicleTable& table = state_.vehicles;
  std::vector<VehicleSnapshot> vehicles;
  vehicles.reserve(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    const std::uint32_t slot = table.slots[i];
    vehicles.push_back(VehicleSnapshot{
        .id = table.ids[i],
        .kind = table.kinds[i],
        .pose = table.PoseAt(i),
        .speed_mps = table.speed_mps[i],
        .readout = state_.fleets.Visit(table.kinds[i],
                                       [slot, &table](const auto& model_fleet) {
                                         return model_fleet.ReadoutAt(slot, table);
                                       }),
        .crashed = table.crashed[i] != 0,
    });
  }
  // Most worlds carry no sensors: then there is nothing to look up per vehicle.
  if (state_.scan_beams == 0 && state_.nearest_object_slots == 0) return vehicles;

  // Sensors, for the vehicles that carry them, from the grids of the current state (rebuilt
  // here if vehicles or obstacles changed since the last step).
  std::optional<CollisionScene> rebuilt;
  const CollisionScene* scene = &scene_;
  for (std::size_t i = 0; i < table.size(); ++i) {
    const VehicleSpec& spec = table.specs[i];
    if (!spec.range_scan.has_value() && !spec.nearest_objects.has_value()) continue;
    if (scene == &scene_ && (cell_size_stale_ || vehicle_grid_stale_ || obstacle_grid_stale_)) {
      rebuilt.emplace();
      rebuilt->cell_size_m = GridCellSize(table);
      IndexVehicles(table, *rebuilt);
      IndexObstacles(state_.obstacles, *rebuilt);
      scene = &*rebuilt;
    }
    const auto self = static_cast<std::uint32_t>(i);
    if (spec.range_scan.has_value()) {
      vehicles[i].range_scan =
          ScanRange(*spec.range_scan, self, *scene, state_.obstacles, params_.bounds);
    }
    if (spec.nearest_objects.has_value()) {
      vehicles[i].nearest_objects =
          FindNearestObjects(*spec.nearest_objects, self, table, *scene, state_.obstacles);
    }
  }
  return vehicles;
}

std::vector<VehicleDescription> World::DescribeVehicles() const {
  const VehicleTable& table = state_.vehicles;
  std::vector<VehicleDescription> vehicles;
  vehicles.reserve(table.size());
  for (std::size_t i = 0; i < table.size(); ++i) {
    vehicles.push_back({.id = table.ids[i], .spec = table.specs[i]});
  }
  return vehicles;
}

std::uint64_t World::StateHash() const {
  const VehicleTable& table = state_.vehicles;
  StateHasher hash;
  // Ids as counted from this world's first ones (the same bytes as the ids themselves in a
  // world whose ids start at 1).
  const VehicleId vehicle_base = params_.first_ids.next_vehicle_id - 1;
  const ObstacleId obstacle_base = params_.first_ids.next_obstacle_id - 1;
  const auto add_id = [&hash](std::uint64_t id, std::uint64_t base) {
    const std::uint64_t counted = id - base;
    hash.Add(&counted, sizeof(counted));
  };
  hash.Add(&state_.tick, sizeof(state_.tick));
  add_id(state_.next_ids.next_vehicle_id, vehicle_base);
  if (vehicle_base == 0) {
    hash.AddColumn(table.ids);  // The same bytes, in one call.
  } else {
    for (const VehicleId id : table.ids) add_id(id, vehicle_base);
  }
  hash.AddColumn(table.kinds);
  hash.AddColumn(table.crashed);
  // The pose columns: the kinematic bicycles' state, the other models' published copies.
  hash.AddColumn(table.x_m);
  hash.AddColumn(table.y_m);
  hash.AddColumn(table.yaw_rad);
  hash.AddColumn(table.speed_mps);
  hash.AddColumn(table.cos_yaw);  // Derived from yaw, but not bit-exactly for every model.
  hash.AddColumn(table.sin_yaw);
  const KinematicBicycleFleet& bicycles = state_.fleets.Get<KinematicBicycleFleet>();
  hash.AddColumn(bicycles.drive);
  hash.AddColumn(bicycles.steering_command_rad);
  hash.AddColumn(bicycles.acceleration_mps2);
  hash.AddColumn(bicycles.steering_rad);
  state_.fleets.ForEach([&hash](const auto& fleet) {
    if constexpr (!std::is_same_v<std::decay_t<decltype(fleet)>, KinematicBicycleFleet>) {
      hash.AddColumn(fleet.inputs);
      hash.AddColumn(fleet.states);
    }
  });
  // The drivers' own state: where each follower is on its route (their controls are among
  // the fleets' inputs above).
  static_assert(std::is_trivially_copyable_v<RouteFollowerState> &&
                sizeof(RouteFollowerState) == 2 * sizeof(std::uint32_t) + 2 * sizeof(double));
  // Gathered a block of drivers at a time: the same bytes as an Add per field, in far fewer
  // calls.
  constexpr std::size_t kDriverBytes = sizeof(DrivenVehicle::row) + sizeof(RouteFollowerState);
  unsigned char drivers[64 * kDriverBytes];
  std::size_t gathered = 0;
  for (const DrivenVehicle& driven : state_.drivers) {
    std::memcpy(drivers + gathered, &driven.row, sizeof(driven.row));
    std::memcpy(drivers + gathered + sizeof(driven.row), &driven.route, sizeof(driven.route));
    gathered += kDriverBytes;
    if (gathered == sizeof(drivers)) {
      hash.Add(drivers, gathered);
      gathered = 0;
    }
  }
  hash.Add(drivers, gathered);
  add_id(state_.next_ids.next_obstacle_id, obstacle_base);
  for (const Obstacle& obstacle : state_.obstacles) {
    add_id(obstacle.id, obstacle_base);
    hash.Add(&obstacle.box, sizeof(obstacle.box));
  }
  for (const Contact& contact : state_.contacts) {
    add_id(contact.pair.vehicle, vehicle_base);
    hash.Add(&contact.pair.other_kind, sizeof(contact.pair.other_kind));
    switch (contact.pair.other_kind) {
      case ObjectKind::kVehicle:
        add_id(contact.pair.other_id, vehicle_base);
        break;
      case ObjectKind::kObstacle:
        add_id(contact.pair.other_id, obstacle_base);
        break;
      case ObjectKind::kWall:
        add_id(contact.pair.other_id, 0);
        break;
    }
    hash.Add(&contact.normal_x, sizeof(double));
    hash.Add(&contact.normal_y, sizeof(double));
    hash.Add(&contact.depth_m, sizeof(double));
    hash.Add(&contact.began_tick, sizeof(contact.began_tick));
  }
  // A race: derived from the poses since it was called, but what a replay must reproduce, so
  // a divergence in it shows here (nothing is added without one: golden hashes stand).
  if (state_.race.has_value()) {
    hash.Add(&state_.race->route, sizeof(state_.race->route));
    state_.race->race.VisitState([&](const auto& value) {
      using T = std::decay_t<decltype(value)>;
      static_assert(std::is_trivially_copyable_v<T>);
      if constexpr (std::is_same_v<T, VehicleId>) {
        add_id(value, vehicle_base);
      } else {
        hash.Add(&value, sizeof(value));
      }
    });
  }
  return hash.value();
}

}  // namespace pitlane::sim
