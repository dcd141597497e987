"""Watches a running session: a live table of its cars, refreshed twice a second.

Start the server with the demo scenario (scripts/run.sh does by default), then:
    PYTHONPATH=client/python /usr/bin/python3 client/python/examples/watch.py
It watches the session named "demo" (or --session ID) until Ctrl-C.
"""

import argparse
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import pitlane  # pylint: disable=wrong-import-position


def find_session(sim, session_id=None, name="demo"):
    """The id of the session to watch: `session_id`, else the first one named `name`."""
    if session_id:
        return session_id
    for info in sim.list_sessions():
        if info.config.name == name:
            return info.session_id
    raise SystemExit(f"no session named {name!r}; start the server with --scenario={name}")


def describe(sim, session_id):
    """Vehicle id -> (name, model, driver) from the session's description."""
    cars = {}
    for vehicle in sim.get_session(session_id).vehicles:
        spec = vehicle.spec
        driver = spec.driver.WhichOneof("driver") or "client"
        if driver == "route_follower":
            style = pitlane.pb.DriverStyle.Name(spec.driver.route_follower.style)
            driver = style.replace("DRIVER_STYLE_", "").lower()
        cars[vehicle.vehicle_id] = (spec.name or f"car {vehicle.vehicle_id}",
                                    spec.WhichOneof("model"), driver)
    return cars


def table(state, cars):
    """The lines of a table of the cars in `state`."""
    lines = [f"tick {state.time.tick}  t = {state.time.sim_time_s:7.2f} s  "
             f"{len(state.vehicles)} cars  {len(state.contacts)} contacts",
             f"{'car':18} {'model':18} {'driver':9} {'x m':>8} {'y m':>8} {'yaw':>6} "
             f"{'v m/s':>6} {'crashed':>7}"]
    for v in state.vehicles:
        name, model, driver = cars.get(v.vehicle_id, (f"car {v.vehicle_id}", "?", "?"))
        lines.append(f"{name[:18]:18} {model:18} {driver:9} {v.x_m:8.1f} {v.y_m:8.1f} "
                     f"{math.degrees(v.yaw_rad):6.0f} {v.speed_mps:6.2f} "
                     f"{'yes' if v.crashed else '':>7}")
    return lines


def watch(address, session_id=None, rate_hz=2.0, messages=None, out=print):
    """Prints the table `rate_hz` times a second; stops after `messages` if given. Returns
    the last state seen."""
    with pitlane.Client(address) as sim:
        session_id = find_session(sim, session_id)
        cars = describe(sim, session_id)
        last = None
        for count, message in enumerate(sim.stream_states(session_id, max_rate_hz=rate_hz)):
            if len(message.state.vehicles) != len(cars):
                cars = describe(sim, session_id)
            out("\n".join(table(message.state, cars)) + "\n")
            last = message.state
            if messages is not None and count + 1 >= messages:
                break
        return last


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--address", default="127.0.0.1:50051")
    parser.add_argument("--session", default=None, help="session id (default: the demo)")
    parser.add_argument("--rate_hz", type=float, default=2.0)
    args = parser.parse_args()
    try:
        watch(args.address, args.session, args.rate_hz)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
