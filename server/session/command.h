// The one door into a session: every change to its world is a command.
//
// Spawns, removals, obstacles, controls (from SetControls and from Drive controllers),
// controllers attaching and leaving, clock changes, resets, step requests and races are each a
// Command. The session checks a command, then applies it between two ticks, in one place
// (Session::Apply), and shows every applied command, with its tick, to its observers: that
// is what a recorder writes, and what a replay applies again to get the same run.
#ifndef PITLANE_SERVER_SESSION_COMMAND_H_
#define PITLANE_SERVER_SESSION_COMMAND_H_

#include <cstdint>
#include <optional>
#include <variant>
#include <vector>

#include "server/sim/vehicles/vehicle.h"
#include "server/sim/world/obstacle.h"
#include "server/sim/world/world.h"

namespace pitlane::session {

// How time advances in a session.
enum class ClockMode {
  kLockstep,  // Only Step advances time.
  kRealtime,  // The server paces ticks at tick_rate_hz x real_time_factor.
  // Each tick waits until every attached controller has answered the previous observation,
  // or barrier_timeout_s has passed since it was published; then it runs with the last
  // controls received (the TORCS/SCR championship rule). No controller: no ticks.
  kBarrier,
};

// A change to a session's clock: unset fields stay as they are.
struct ClockUpdate {
  std::optional<ClockMode> mode;
  std::optional<double> real_time_factor;
  std::optional<bool> paused;
  std::optional<double> barrier_timeout_s;
};

// What a controller's vehicle does when its controller detaches.
enum class DisconnectAction {
  kBrakeToStop,   // Brakes to a stop (then holds still), steering straight.
  kHoldControls,  // Keeps the last controls it received.
};

struct SpawnVehiclesCommand {
  std::vector<sim::VehicleSpec> specs;
};
struct RemoveVehicleCommand {
  sim::VehicleId vehicle_id = 0;
};
struct AddObstaclesCommand {
  std::vector<sim::ObstacleSpec> specs;
};
struct RemoveObstacleCommand {
  sim::ObstacleId obstacle_id = 0;
};
// Held controls, from SetControls or from a vehicle's controller.
struct SetControlsCommand {
  std::vector<sim::VehicleInput> inputs;
};
// A controller took over a vehicle (its brakes, if a controller left it braking, let go).
struct AttachControllerCommand {
  sim::VehicleId vehicle_id = 0;
};
// A vehicle's controller left; kBrakeToStop brakes the vehicle from the next tick on.
struct DetachControllerCommand {
  sim::VehicleId vehicle_id = 0;
  DisconnectAction on_disconnect = DisconnectAction::kBrakeToStop;
};
// Changes when ticks happen, never what they compute: a replay skips it.
struct SetClockCommand {
  ClockUpdate update;
};
// Back to tick 0 as the session was created (ids are not reused).
struct ResetCommand {};
// A race is called (sim::World::StartRace): on the race track of route `route`, with
// `vehicles` (empty: every vehicle timed on it) lined up where they stand, or placed on `grid`.
struct StartRaceCommand {
  std::uint32_t route = 0;
  sim::RaceRules rules;
  std::vector<sim::VehicleId> vehicles;
  bool replace = false;         // Abandons a race still running.
  std::vector<sim::Pose2> grid;  // Empty: the cars race from where they stand.
};
// A client's Step of `ticks` ticks starts (seen when it starts; its ticks follow).
struct StepCommand {
  std::uint32_t ticks = 0;
};

using Command =
    std::variant<SpawnVehiclesCommand, RemoveVehicleCommand, AddObstaclesCommand,
                 RemoveObstacleCommand, SetControlsCommand, AttachControllerCommand,
                 DetachControllerCommand, SetClockCommand, ResetCommand, StepCommand,
                 StartRaceCommand>;

// Where an observer starts to watch a session.
struct ObservedStart {
  std::uint64_t tick = 0;        // The world's tick.
  std::uint64_t run = 0;         // Resets of the session so far (Frame::run).
  std::uint64_t state_hash = 0;  // The world's StateHash at `tick`.
  // The world is as the session's config builds it (with ids from `first_ids`): at tick 0,
  // and no command that changes it was applied since it was created or reset. From here, the
  // config, `first_ids` and the commands the observer sees are enough to run it again
  // (Replay; a reset's world continues the ids of the one before it).
  bool pristine = false;
  sim::IdCounters first_ids;  // The world's first ids (BuildWorld's first_ids).
};

// Sees every command a session applies and every tick it steps. Called under the session's
// lock, on the thread that applies or steps: must not block and must not call the session.
class CommandObserver {
 public:
  virtual ~CommandObserver() = default;
  // Added to the session (Session::AddObserver): before every command and tick it sees.
  virtual void OnAttach(const ObservedStart& start) { (void)start; }
  // `command` was applied when the world was at `tick`: it takes effect from the step that
  // makes tick + 1 (a ResetCommand: the world is at tick 0 after it).
  virtual void OnCommand(std::uint64_t tick, const Command& command) = 0;
  // The world has just stepped to world.tick().
  virtual void OnTick(const sim::World& world) = 0;
};

}  // namespace pitlane::session

#endif  // PITLANE_SERVER_SESSION_COMMAND_H_
