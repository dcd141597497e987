"""A first racing controller: laps of the oval-race scenario on TORCS-style track sensors.

The car (a kinematic bicycle) starts on a grid slot with track sensors (TORCS's 19 beams) and
answers every observation through a Drive stream with two rules, as TORCS's simple driver
does:

  steering: steer = -K_ANGLE * angle - K_POSITION * track_position
            (angle: its heading against the track's axis; track_position: -1 on the right
            edge, +1 on the left; both straight from the sensors)
  speed:    target = clamp(SPEED_PER_METRE * the free distance straight ahead, MIN, MAX)
            acceleration = K_SPEED * (target - speed)            (the server clamps it)

so it slows where the beam straight ahead meets the outside of a bend, and runs on the
straights. The server times its laps (VehicleState.track_progress); the controller prints
them as they come.

Run a server, then: python3 track_racer.py --seconds 180
It creates a BARRIER session of oval-race (each tick waits for its answer) for a time trial
(the scenario's AI pace cars are taken off: the track sensors see the track's edges, not other
cars), unless --session names one to join: then its clock is set to BARRIER, its cars stay,
and the racer's car is removed at the end.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import pitlane  # pylint: disable=wrong-import-position

K_ANGLE = 1.0  # rad of steering per rad of heading against the track's axis.
K_POSITION = 0.25  # rad of steering per half-width off the axis.
K_SPEED = 2.0  # m/s² per m/s of speed error.
SPEED_PER_METRE = 0.25  # m/s of target speed per metre free straight ahead.
MIN_SPEED_MPS, MAX_SPEED_MPS = 8.0, 22.0
AHEAD = 9  # The beam straight ahead among TORCS's 19 (-90 ... +90 degrees).


def control_law(vehicle):
    """The control for one observation of the car, from its track sensors alone."""
    sensor = vehicle.track_sensor
    steer = -K_ANGLE * sensor.angle_rad - K_POSITION * sensor.track_position
    free = sensor.edge_distances_m[AHEAD]
    target = min(MAX_SPEED_MPS, max(MIN_SPEED_MPS, SPEED_PER_METRE * free))
    return {"acceleration_mps2": K_SPEED * (target - vehicle.speed_mps),
            "steering_angle_rad": steer}  # Both clamped by the server to the car's limits.


def run(address, seconds=180.0, *, session_id=None, grid_slot=1, out=print, token=None):
    """Races for `seconds` of simulated time; returns a summary dict: the laps, the best and
    the last lap, the excursions off the track and the ticks driven."""
    with pitlane.Client(address, token=token) as sim:
        own = session_id is None
        sid = session_id or sim.create_session(name="track-racer", scenario="oval-race",
                                               clock_mode="barrier").session_id
        car = None
        try:
            if own:  # A time trial: the track to itself.
                for vehicle in sim.get_state(sid).vehicles:
                    sim.remove_vehicle(sid, vehicle.vehicle_id)
            else:  # Each tick waits for this controller's answer.
                sim.set_clock(sid, clock_mode="barrier", paused=False)
            info = sim.get_session(sid)
            slots = {p.name: p.pose for p in info.config.spawn_points}
            if f"grid {grid_slot}" not in slots:
                raise ValueError(f"no spawn point \"grid {grid_slot}\" in session {sid} "
                                 f"(it has: {', '.join(slots) or 'none'})")
            slot = slots[f"grid {grid_slot}"]
            car = sim.spawn_vehicle(sid, name="track racer", x_m=slot.x_m, y_m=slot.y_m,
                                    yaw_rad=slot.yaw_rad, track_sensor={})
            rate = info.config.tick_rate_hz
            with sim.drive(sid, car) as driver:
                obs = driver.observe()
                end = obs.time.tick + round(seconds * rate)
                laps = 0
                while obs.time.tick < end:
                    progress = obs.vehicle.track_progress
                    if progress.laps_completed > laps:
                        laps = progress.laps_completed
                        # Lap 1 from a grid slot past the line is partial: no lap time.
                        timed = (f"{progress.last_lap_s:7.3f} s (best {progress.best_lap_s:7.3f} s)"
                                 if progress.HasField("last_lap_s") else "from the grid, not timed")
                        out(f"lap {laps}: {timed}, off the track {progress.off_track_count}x")
                    driver.send(obs.time.tick, **control_law(obs.vehicle))
                    obs = driver.observe()
            progress = obs.vehicle.track_progress
            return {
                "laps": progress.laps_completed,
                "last_lap_s": progress.last_lap_s if progress.HasField("last_lap_s") else None,
                "best_lap_s": progress.best_lap_s if progress.HasField("best_lap_s") else None,
                "off_track_count": progress.off_track_count,
                "off_track_s": progress.off_track_s,
                "distance_m": progress.distance_m,
                "crashed": obs.vehicle.crashed,
                "ticks": obs.time.tick,
            }
        finally:
            if own:
                sim.delete_session(sid)
            elif car is not None:
                sim.remove_vehicle(sid, car)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--address", default="localhost:50051", help="the server's gRPC address")
    parser.add_argument("--seconds", type=float, default=180.0, help="simulated seconds to race")
    parser.add_argument("--session", help="race in this session (default: a new oval-race)")
    parser.add_argument("--grid-slot", type=int, default=1, help="the grid slot to start from")
    args = parser.parse_args()
    summary = run(args.address, args.seconds, session_id=args.session, grid_slot=args.grid_slot)
    print(f"{summary['laps']} laps, best {summary['best_lap_s']} s, "
          f"off the track {summary['off_track_count']}x")


if __name__ == "__main__":
    main()
