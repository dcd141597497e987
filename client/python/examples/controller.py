"""A remote controller: drives one car around a circle through a Drive stream.

The car (a kinematic bicycle) starts 2 m outside a circle of radius 20 m at
4 m/s. Each observation is answered with two P controllers:

  speed:    acceleration = K_SPEED * (8 m/s - speed)          (the server clamps it)
  steering: steer = atan(L / R)                (feed-forward: the circle's curvature)
                    + K_CROSS * cross_track    (too far out: steer in)
                    - K_HEADING * heading_error (pointing in already: steer less)

The clock mode decides who moves time:
  lockstep  the controller sends its control, then calls Step(1) itself;
  realtime  the server ticks at 50 Hz on its own; the controller answers the
            newest observation it has (it may skip some if it is slow);
  barrier   every tick waits for the controller's answer (strict alternation).

Run a server, then: python3 controller.py --clock barrier --seconds 10

In a class (a server with --auth=token), run it with the file your instructor gave you
(classroom.py writes them): python3 controller.py --token-file red.json
With an owner token it joins your team's session and spawns its own car; with a driver token
it drives the car of the file in the session's clock (the instructor runs the clock).
"""

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import pitlane  # pylint: disable=wrong-import-position

TARGET_SPEED_MPS = 8.0
RADIUS_M = 20.0
CENTER = (0.0, RADIUS_M)  # A circle through the origin, driven counter-clockwise.
WHEELBASE_M = 2.7  # The server's default kinematic_bicycle wheelbase.
K_SPEED = 3.0  # m/s² per m/s of speed error.
K_CROSS = 0.3  # rad of steering per metre outside the circle.
K_HEADING = 1.4  # rad of steering per rad of heading error.
START = {"x_m": 0.0, "y_m": -2.0, "yaw_rad": 0.0, "speed_mps": 4.0}
TICK_RATE_HZ = 50.0
LOCKSTEP_WAIT_S = 0.001  # LOCKSTEP: time given to the control to reach the server (see below).


def cross_track_error(x_m, y_m):
    """Distance outside the circle, metres (negative: inside)."""
    return math.hypot(x_m - CENTER[0], y_m - CENTER[1]) - RADIUS_M


def control_law(vehicle):
    """The control for one observation of the car (rear-axle reference point)."""
    dx, dy = vehicle.x_m - CENTER[0], vehicle.y_m - CENTER[1]
    path_yaw = math.atan2(dy, dx) + math.pi / 2  # Tangent of the counter-clockwise circle.
    heading_error = math.remainder(vehicle.yaw_rad - path_yaw, 2 * math.pi)
    steer = (math.atan(WHEELBASE_M / RADIUS_M)
             + K_CROSS * cross_track_error(vehicle.x_m, vehicle.y_m)
             - K_HEADING * heading_error)
    return {"acceleration_mps2": K_SPEED * (TARGET_SPEED_MPS - vehicle.speed_mps),
            "steering_angle_rad": steer}  # Both clamped by the server to the car's limits.


def read_token_file(path):
    """The connection a team file describes: {"token", and "address", "session_id",
    "vehicle_id", "root_certificates" when the file has them}. A file holding just a token
    (no JSON) gives {"token"}."""
    text = open(path, encoding="utf-8").read().strip()
    try:
        team = json.loads(text)
    except json.JSONDecodeError:
        return {"token": text}
    if not isinstance(team, dict) or not isinstance(team.get("token"), str):
        raise ValueError(f"{path}: a team file is a JSON object with a \"token\"")
    return team


def run(address, clock="barrier", seconds=10.0, *, session_id=None, out=print, token=None,
        root_certificates=None, vehicle_id=None, replica=None):
    """Drives the car for `seconds` of simulated time; returns a summary dict.

    With session_id, joins that session (switching its clock to `clock`) instead of
    creating one, and removes the car at the end. With vehicle_id too (a driver token),
    drives that car in the session's own clock: nothing is spawned, removed or switched.
    `token`, `root_certificates` and `replica` go to pitlane.Client. `out` prints the progress
    lines.
    """
    with pitlane.Client(address, token=token, root_certificates=root_certificates,
                        replica=replica) as sim:
        if vehicle_id is not None:
            config = sim.get_session(session_id).config
            clock = pitlane_clock_name(config.clock_mode)
            rate = config.tick_rate_hz
            with sim.drive(session_id, vehicle_id) as driver:
                summary = _drive(sim, session_id, driver, clock, round(seconds * rate), rate, out,
                                 own_clock=False)
            summary.update(clock=clock, session_id=session_id)
            return summary
        own = session_id is None
        realtime = clock == "realtime"
        if own:  # A realtime session starts paused so time waits for the controller.
            sid = sim.create_session(name=f"controller-{clock}", tick_rate_hz=TICK_RATE_HZ,
                                     clock_mode=clock, paused=realtime).session_id
        else:
            sid = session_id
            sim.set_clock(sid, clock_mode=clock,
                          **({"paused": realtime} if clock != "lockstep" else {}))
        rate = sim.get_session(sid).config.tick_rate_hz
        car = sim.spawn_vehicle(sid, name="controller", **START)
        try:
            with sim.drive(sid, car) as driver:
                summary = _drive(sim, sid, driver, clock, round(seconds * rate), rate, out)
            summary.update(clock=clock, session_id=sid)
            return summary
        finally:
            if own:
                sim.delete_session(sid)
            else:
                sim.remove_vehicle(sid, car)


def pitlane_clock_name(mode):
    """"lockstep", "realtime" or "barrier" of a ClockMode value."""
    return {pitlane.pb.CLOCK_MODE_REALTIME: "realtime",
            pitlane.pb.CLOCK_MODE_BARRIER: "barrier"}.get(mode, "lockstep")


def _drive(sim, sid, driver, clock, ticks, rate, out, own_clock=True):
    obs = driver.observe()  # The first observation: the tick at which we attached.
    t0 = time.monotonic()
    start_tick = obs.time.tick
    if clock == "realtime" and own_clock:  # Start the server's clock now that we listen.
        start_tick = sim.set_clock(sid, paused=False).time.tick
    history, sent, steps, skipped, unseen, printed = [], 0, 0, 0, 0, -1
    while True:
        v = obs.vehicle
        skipped += obs.skipped_observations  # Not sent by the server: we read too slowly.
        if history:  # Plus those driver.latest() passed over: every tick we did not see.
            unseen += obs.time.tick - history[-1][0] - 1
        cte = cross_track_error(v.x_m, v.y_m)
        history.append((obs.time.tick, v.x_m, v.y_m, v.speed_mps, cte, v.crashed))
        second = (obs.time.tick - start_tick) // int(rate)
        if second > printed:  # One line per simulated second.
            printed = second
            out(f"t={second:3d} s tick {obs.time.tick:5d}  x={v.x_m:7.2f} y={v.y_m:7.2f}  "
                f"v={v.speed_mps:5.2f} m/s  cte={cte:+6.3f} m  skipped={skipped} "
                f"unseen={unseen} late={obs.late_controls}")
        if obs.time.tick >= start_tick + ticks:
            break
        driver.send(obs.time.tick, **control_law(v))  # Answers the observation of its tick.
        sent += 1
        if clock == "lockstep":
            # A control (on the Drive stream) and a Step are separate calls, and nothing
            # acknowledges the control: the server may run the step before it reads it. So
            # wait briefly first; a control that still loses the race applies one tick later
            # and counts in late_controls (without the wait, most do). For strict
            # alternation use BARRIER, where the tick itself waits for the control.
            time.sleep(LOCKSTEP_WAIT_S)
            sim.step(sid, 1)
            steps += 1
            obs = driver.observe()
        elif clock == "barrier":
            obs = driver.observe()  # The next tick runs as soon as the server has our answer.
        else:
            obs = driver.latest()  # The server does not wait: answer the newest state.
    wall_s = time.monotonic() - t0
    server_tick = sim.get_state(sid).time.tick  # Before detaching (BARRIER waits here).
    stats = sim.get_session(sid).clock_stats
    half = start_tick + ticks / 2
    return {
        "start_tick": start_tick, "end_tick": obs.time.tick, "server_tick": server_tick,
        "ticks": obs.time.tick - start_tick, "controls_sent": sent, "steps": steps,
        "wall_s": wall_s, "tick_rate_hz": rate,
        "final_speed_mps": obs.vehicle.speed_mps,
        "max_abs_cte_last_half_m": max(abs(h[4]) for h in history if h[0] >= half),
        "skipped_observations": skipped, "unseen_ticks": unseen,
        "late_controls": obs.late_controls,
        "stale_controls": obs.stale_controls, "barrier_timeouts": stats.barrier_timeouts,
        "missed_deadlines": stats.missed_deadlines,
        "history": history,  # (tick, x_m, y_m, speed_mps, cross_track_m, crashed) per observation.
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--clock", default="barrier", choices=["lockstep", "realtime", "barrier"])
    parser.add_argument("--seconds", type=float, default=10.0, help="simulated seconds to drive")
    parser.add_argument("--session", help="join this session instead of creating one")
    parser.add_argument("--token-file",
                        help="a token, or a team file from classroom.py (address, session, "
                             "car and token)")
    args = parser.parse_args()
    connection = {}
    address, session = args.address, args.session
    if args.token_file:
        team = read_token_file(args.token_file)
        address = team.get("address") or address
        session = team.get("session_id") or session
        ca = team.get("root_certificates")
        connection = {"token": team["token"],
                      "root_certificates": open(ca, "rb").read() if ca else None,
                      "vehicle_id": team.get("vehicle_id"),
                      # Behind a proxy, the team's token is known only to its session's server.
                      "replica": pitlane.replica_of(session)}
    summary = run(address, args.clock, args.seconds, session_id=session, **connection)
    summary.pop("history")
    print(", ".join(f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}"
                    for k, v in summary.items()))


if __name__ == "__main__":
    main()
