// A world: fixed parameters, a state value, and the step that advances it by one tick.
//
// World is single-threaded and not synchronised: its owner (a session) serialises access.
// It is a copyable value, so a test or a replay can snapshot it and step the copy.
#ifndef PITLANE_SERVER_SIM_WORLD_WORLD_H_
#define PITLANE_SERVER_SIM_WORLD_WORLD_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/sim/collision/collision_stage.h"
#include "server/sim/collision/contacts.h"
#include "server/sim/drivers/drivers.h"
#include "server/sim/racing/lap_tracker.h"
#include "server/sim/racing/readings.h"
#include "server/sim/racing/track_sensors.h"
#include "server/sim/vehicles/fleet.h"
#include "server/sim/world/obstacle.h"
#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/vehicle_table.h"

namespace pitlane::sim {

inline constexpr double kMinTickRate_hz = 1.0;
inline constexpr double kMaxTickRate_hz = 10000.0;

// What a world does when a vehicle touches something.
enum class CollisionPolicy {
  kReport,  // Contacts are reported; vehicles drive on through each other (seed 000).
  kStop,    // A vehicle in contact halts, is marked crashed, and ignores controls after.
};

// Most static obstacles a world may hold.
inline constexpr std::size_t kMaxObstacles = 1'000'000;
// Most range-scan beams, and nearest-object slots, over all the vehicles of a world: what
// one state may carry (8 MB of ranges) and cost to compute, whatever the vehicle count.
inline constexpr std::uint64_t kMaxScanBeamsPerWorld = 1'000'000;
inline constexpr std::uint64_t kMaxNearestObjectsPerWorld = 100'000;

// The default contact budget of a tick. A contact takes 56 bytes in the state and in every
// frame made of it.
inline constexpr std::uint32_t kDefaultMaxContactsPerTick = 100'000;

// What a client asks for when it creates a world. Possibly invalid.
struct WorldSpec {
  // Ticks per simulated second, Hz, in [kMinTickRate_hz, kMaxTickRate_hz]: dt within
  // [0.1 ms, 1 s], the range the vehicle models are built and tested for.
  double tick_rate_hz = 50.0;
  std::uint64_t seed = 0;          // Seed of every random choice the world makes.
  std::uint32_t max_vehicles = 1;  // Most vehicles alive at once, >= 1.
  // Most contacts one tick keeps, >= 1 (see World::contacts_dropped).
  std::uint32_t max_contacts = kDefaultMaxContactsPerTick;
  CollisionPolicy collision_policy = CollisionPolicy::kReport;
  std::optional<WorldBounds> bounds = {};  // Walls around the world; none when unset.
  // Routes for the built-in drivers (RouteFollowerSpec::route indexes them): at most
  // kMaxRoutes, with at most kMaxRoutePointsPerWorld points over all of them.
  std::vector<Route> routes = {};
};

// Most edge segments a world's race tracks may have together (racing/track.h; about 100
// bytes each with their grids): closed routes beyond are not raced.
inline constexpr std::size_t kMaxTrackEdgesPerWorld = 250'000;

// Validated, immutable parameters of a world.
struct WorldParams {
  double tick_rate_hz = 50.0;  // Hz.
  double dt_s = 0.02;          // Seconds per tick: 1 / tick_rate_hz.
  std::uint64_t seed = 0;
  std::uint32_t max_vehicles = 1;
  std::uint32_t max_contacts = kDefaultMaxContactsPerTick;
  CollisionPolicy collision_policy = CollisionPolicy::kReport;
  std::optional<WorldBounds> bounds = {};
  std::vector<RouteParams> routes;  // The spec's routes with their geometry precomputed.
  // Per route, its race track (racing/track.h: a closed route that can be raced, with its
  // sectors), or null. Immutable and shared: lap trackers point into them.
  std::vector<std::shared_ptr<const TrackGeometry>> tracks;
  // Per route, why it is not a race track (empty for tracks).
  std::vector<std::string> not_raced_because;
  bool IsRaceTrack(std::size_t route) const {
    return route < tracks.size() && tracks[route] != nullptr;
  }
  // The first ids of this world: 1, or the next ids of a world it replaces.
  IdCounters first_ids;
};

// A vehicle driven by a built-in driver: what the driver knows of it, and where it is on its
// route (route followers).
struct DrivenVehicle {
  // The state first, side by side (the state hash reads them every tick).
  std::uint32_t row = 0;     // The vehicle's row in the VehicleTable.
  RouteFollowerState route;  // Route followers only.
  DriverSpec spec;           // As resolved at spawn.
  DriverVehicleParams vehicle;
};

// A vehicle timed on a race track: its laps and lap times since it was spawned.
struct TimedVehicle {
  std::uint32_t row = 0;    // The vehicle's row in the VehicleTable.
  std::uint32_t route = 0;  // The track's route.
  LapTracker tracker;
};

// A race called in a world (World::StartRace).
struct WorldRace {
  std::uint32_t route = 0;  // The race track's route.
  Race race;
};

// The state of a world: everything that changes as it runs.
struct WorldState {
  std::uint64_t tick = 0;  // Ticks stepped since creation.
  IdCounters next_ids;     // The ids the next spawn and the next obstacle get.
  VehicleTable vehicles;  // Every vehicle, by ascending id.
  Fleets fleets;          // Each model's state of its vehicles.
  std::vector<Obstacle> obstacles;  // By ascending id.
  std::vector<Contact> contacts;    // In effect at `tick`, by pair.
  // Contacts in effect at `tick` beyond max_contacts, not in `contacts` (derived from the
  // poses, so not hashed).
  std::uint64_t contacts_dropped = 0;
  // The vehicles with a built-in driver, by ascending id (so by ascending row).
  std::vector<DrivenVehicle> drivers;
  // The vehicles timed on a race track, by ascending id (so by ascending row). Derived from
  // their poses since they were spawned, so not hashed.
  std::vector<TimedVehicle> timed;
  // The race called last, if any (derived from the poses since it was called, but hashed: a
  // replay must reproduce it).
  std::optional<WorldRace> race;
  // Totals over the vehicles alive: range_scan.beam_count plus the track sensors' beams, and
  // nearest_objects.count.
  std::uint64_t scan_beams = 0;
  std::uint64_t nearest_object_slots = 0;
};

// A vehicle and the spec it was spawned with (defaults filled in).
struct VehicleDescription {
  VehicleId id = 0;
  VehicleSpec spec;
};

class World {
 public:
  // Validates `spec`. InvalidArgument names the field ("tick_rate_hz", "max_vehicles",
  // "bounds.max_x_m", "routes[2].points[5].x_m", "routes[0].lane_width_m"). The world's ids
  // start at `first_ids`: pass the next_ids() of a world this one replaces, so that no id is
  // handed out twice.
  // `same_spec`: a world made from this same spec, whose routes and tracks the new one shares
  // instead of building them again (a session's reset).
  static absl::StatusOr<World> Create(const WorldSpec& spec, IdCounters first_ids = {},
                                      const World* same_spec = nullptr);

  const WorldParams& params() const { return params_; }
  std::uint64_t tick() const { return state_.tick; }
  // Simulated time, seconds. Computed as tick / tick_rate_hz (one rounding), never summed.
  double sim_time_s() const { return static_cast<double>(state_.tick) / params_.tick_rate_hz; }
  std::size_t vehicle_count() const { return state_.vehicles.size(); }
  const WorldState& state() const { return state_; }
  // The ids the next vehicle and the next obstacle will get.
  IdCounters next_ids() const { return state_.next_ids; }

  // Adds every vehicle of `specs` at the current tick, or none. Returns their new ids in
  // order. Errors: InvalidArgument naming "[i].<field>" for the first invalid spec (a route
  // follower's route must exist: "[i].driver.route_follower.route: no route 3 (the world has
  // 2)"); ResourceExhausted if the world would exceed max_vehicles, kMaxScanBeamsPerWorld or
  // kMaxNearestObjectsPerWorld.
  absl::StatusOr<std::vector<VehicleId>> Spawn(absl::Span<const VehicleSpec> specs);

  // Removes a vehicle. NotFound if `id` is not alive (never spawned, or removed). Its
  // contacts end at the next step.
  absl::Status Remove(VehicleId id);

  // Adds every obstacle of `specs`, or none; returns their ids in order. InvalidArgument
  // naming "[i].<field>" for the first invalid spec; ResourceExhausted beyond kMaxObstacles.
  absl::StatusOr<std::vector<ObstacleId>> AddObstacles(absl::Span<const ObstacleSpec> specs);
  // Removes an obstacle. NotFound if `id` is not present. Its contacts end at the next step.
  absl::Status RemoveObstacle(ObstacleId id);
  const std::vector<Obstacle>& obstacles() const { return state_.obstacles; }
  // The contacts in effect at the current tick, by pair.
  const std::vector<Contact>& contacts() const { return state_.contacts; }
  // How many contacts in effect at the current tick the budget left out of contacts(): a tick
  // keeps at most max_contacts, the first found stage by stage (vehicles with obstacles, by
  // vehicle then obstacle; with each other, by pair, or in the grid's order when they pile up
  // beyond the broad phase's own budget; then the walls), a subset that depends only on the
  // state. Under CollisionPolicy::kStop the vehicles of the dropped contacts crash all the
  // same. A tick over the budget reports BEGAN and ENDED events of the kept contacts only.
  std::uint64_t contacts_dropped() const { return state_.contacts_dropped; }

  // Replaces the held controls of the vehicles named in `inputs`, or of none. Values are
  // clamped to each vehicle's limits. A crashed vehicle accepts and ignores them. Errors,
  // naming "[i].<field>" of the first bad entry: InvalidArgument for a value CheckControls
  // rejects (non-finite, a pedal outside [0, 1], a field the vehicle's model does not use)
  // or a vehicle named twice; NotFound for an id that is not alive; FailedPrecondition for a
  // vehicle with a built-in driver ("[i].vehicle_id: vehicle 4 has a built-in driver").
  absl::Status SetInputs(absl::Span<const VehicleInput> inputs);
  // The controls each vehicle of `ids` holds (its model's fields; a built-in driver's last
  // command, or a client's after the model's limits), with its id; nullopt for ids not here.
  std::vector<std::optional<VehicleInput>> HeldControls(absl::Span<const VehicleId> ids) const;

  // Advances the world by one tick, in stages: the built-in drivers set their vehicles'
  // controls (from the state at the start of the tick, in id order), vehicle dynamics with the
  // held inputs, the collision stage (see collision_stage.h), the response the policy asks
  // for, and contact events. Appends to `transitions` (if not null) the tick's kBegan and
  // kEnded events in pair order. Never fails.
  void Step(std::vector<ContactEvent>* transitions = nullptr);

  // The model and signed speed of a vehicle alive; nullopt otherwise. O(1).
  struct Motion {
    ModelKind kind;
    double speed_mps;
  };
  std::optional<Motion> MotionOf(VehicleId id) const;
  bool Contains(VehicleId id) const { return state_.vehicles.Find(id) >= 0; }
  // Whether vehicle `id` is alive and driven by a built-in driver.
  bool HasDriver(VehicleId id) const;

  // Every vehicle alive, by ascending id, with the readings of the sensors it carries.
  std::vector<VehicleSnapshot> Snapshot() const;
  // The timed vehicles' progress on their tracks, and their track sensors' readings, by
  // ascending id.
  std::vector<VehicleTrackReading> TrackReadings() const;
  // The laps and sectors completed in the last step, by vehicle id then time.
  const std::vector<VehicleLapEvent>& lap_events() const { return lap_events_; }
  // Calls a race (racing/race.h) on the race track of route `route` at the current tick, with
  // `vehicles` (empty: every vehicle timed on that track, by id). Their grid: where they stand,
  // or with `grid` the car k-th in that order is placed on grid[k] at rest, repaired if it
  // had crashed (its lap timer and its route follower start again there). During the
  // countdown the built-in drivers of the cars entered brake to a stop and hold still (the
  // server holds them: no jump start). It replaces a race that finished; one still running
  // only when `replace` is set. Errors, naming the field, changing nothing: InvalidArgument
  // for a route that is not a race track ("track"), rules out of range ("race.laps"), no car
  // ("vehicle_ids"), a vehicle named twice, fewer grid slots than cars or a slot out of
  // bounds ("grid"); NotFound for a vehicle not alive ("vehicle_ids[2]"); FailedPrecondition
  // for a race still running without `replace`, or a grid slot another vehicle stands on
  // ("grid[3]").
  absl::Status StartRace(std::uint32_t route, const RaceRules& rules,
                         absl::Span<const VehicleId> vehicles, bool replace,
                         absl::Span<const Pose2> grid = {});
  // The race called last, as it stands at the current tick; nullopt if none was called.
  std::optional<RaceStatus> RaceNow() const;
  // What the race did in the last step (racing/race.h's events), in order.
  const std::vector<RaceEvent>& race_events() const { return race_events_; }
  // Where every vehicle alive is and how fast it goes, the same numbers as Snapshot's poses,
  // speeds and crashed flags: columns copied whole, without visiting the models (a fifth of a
  // Snapshot's bytes).
  MotionColumns MotionSnapshot() const;
  std::vector<VehicleDescription> DescribeVehicles() const;

  // A 64-bit hash (StateHasher in world.cc) of the tick and of the bits of every state
  // variable and held input (and of a race called: its phase, times and every car's laps,
  // penalties and finish), for determinism checks: equal states hash equal on any machine
  // with IEEE doubles (about 5 ns a vehicle). Ids are
  // hashed as counted from params().first_ids, so a world rebuilt in place of another (a
  // session's reset) hashes as the same run in a new world would.
  std::uint64_t StateHash() const;

 private:
  explicit World(WorldParams params) : params_(std::move(params)) {
    state_.next_ids = params_.first_ids;
  }

  // Checks `spec`'s timing_track (a race track of this world), or sets the default one.
  // InvalidArgument naming the field ("timing_track", "track_sensor").
  absl::Status ResolveTimingRoute(VehicleSpec& spec) const;
  // The drivers' stage of Step: every driven vehicle's controls for the coming tick.
  void DriveVehicles();
  // Index into state_.drivers of the vehicle at table row `row`, or -1 if no driver drives it.
  std::ptrdiff_t DriverOf(std::size_t row) const;
  // Brings scene_'s cell size and obstacle grid up to date with the state.
  void RefreshStaticIndex();
  // Halts the vehicle at table row `row` for good (policy kStop).
  void Crash(std::size_t row);
  // Moves the vehicle at table row `row` to `pose`, in its fleet and in the table.
  void SetPose(std::size_t row, const Pose2& pose);
  // Moves it to `pose` at rest, repaired (not crashed), its follower and lap timer starting
  // again there.
  void PlaceOnGrid(std::size_t row, const Pose2& pose);
  // FailedPrecondition ("grid[i]") when a vehicle not among `entries` stands on the grid
  // pose of one of them.
  absl::Status CheckGridIsClear(absl::Span<const Race::Entry> entries) const;

  WorldParams params_;
  WorldState state_;

  // Derived from state_; see CollisionScene. The flags say which parts are out of date.
  CollisionScene scene_;
  bool cell_size_stale_ = true;       // Vehicles spawned or removed since it was chosen.
  bool vehicle_grid_stale_ = true;    // Vehicles changed since the last step.
  bool obstacle_grid_stale_ = true;   // Obstacles or the cell size changed.
  // Scratch memory of the step.
  std::vector<Pose2> previous_poses_;
  std::vector<Contact> contacts_;
  std::vector<EarlyContact> early_contacts_;
  std::vector<ContactEvent> transitions_;
  std::vector<RouteOccupant> occupants_;
  std::vector<VehicleLapEvent> lap_events_;
  std::vector<LapEvent> lap_scratch_;
  std::vector<RaceEvent> race_events_;
  std::vector<VehicleId> contacts_begun_;
  std::vector<std::optional<RouteLeader>> leaders_;
};

}  // namespace pitlane::sim

#endif  // PITLANE_SERVER_SIM_WORLD_WORLD_H_
