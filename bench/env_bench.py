"""Python-side throughput of the Gymnasium-style environment against the Python unary floor,
side by side in one run (docs/benchmarks.md, issue 16):

- the floor: GetState calls per second from one Python thread (one unary call each);
- DrivingEnv.step() per second (one StepSessions call a step);
- VectorDrivingEnv.step() over --envs sessions (64): agent-steps per second (one StepSessions
  call steps them all); and that call alone (the request's bytes sent, the response parsed,
  no environment work), to tell the call from the Python around it.

The cars circle near their start, so that no episode ends while measured.

    /usr/bin/python3 bench/env_bench.py [--seconds 3] [--rounds 3] [--envs 64]

Starts its own server (build/bin/pitlane-server) on a free loopback port.
"""
import argparse
import pathlib
import re
import statistics
import subprocess
import sys
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "client" / "python"))
import pitlane  # pylint: disable=wrong-import-position
from pitlane import envs  # pylint: disable=wrong-import-position


def rate(call, seconds):
    """Calls of `call` per second over `seconds`."""
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        call()
        done += 1
    return done / (time.perf_counter() - start)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--envs", type=int, default=64)
    args = parser.parse_args()
    server = subprocess.Popen(
        [str(REPO / "build" / "bin" / "pitlane-server"), "--listen=127.0.0.1:0",
         "--http_listen="], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    address = re.search(r"listening on (\S+)", server.stdout.readline()).group(1)
    try:
        client = pitlane.Client(address)
        sid = client.create_session(name="floor").session_id
        client.spawn_vehicle(sid)
        env = envs.DrivingEnv(address, max_episode_steps=10**9, range_beams=0)
        env.reset(seed=0)
        vector = envs.VectorDrivingEnv(args.envs, address, max_episode_steps=10**9,
                                       range_beams=0)
        vector.reset(seed=0)
        action = [0.5, 0.6]  # Circling near the start: no episode ends while measured.
        actions = [action] * args.envs
        vector.step(actions)
        # pylint: disable=protected-access
        first = vector.envs[0].session_id
        call_alone = lambda: vector.client._step_sessions_from_bytes(bytes(vector._buffer), first)
        floors, steps, agent_steps, calls = [], [], [], []
        for _ in range(args.rounds):  # Alternating, so that all see the same machine.
            floors.append(rate(lambda: client.get_state(sid), args.seconds))
            steps.append(rate(lambda: env.step(action), args.seconds))
            agent_steps.append(args.envs * rate(lambda: vector.step(actions), args.seconds))
            calls.append(rate(call_alone, args.seconds))
        floor, step = statistics.median(floors), statistics.median(steps)
        agents = statistics.median(agent_steps)
        print(f"unary floor (GetState): {floor:,.0f} calls/s  rounds {[round(f) for f in floors]}")
        print(f"DrivingEnv.step:        {step:,.0f} steps/s  rounds {[round(s) for s in steps]}")
        print(f"steps / floor:          {step / floor:.2f}")
        print(f"VectorDrivingEnv({args.envs}).step: {agents:,.0f} agent-steps/s  rounds "
              f"{[round(a) for a in agent_steps]}")
        call = statistics.median(calls)
        print(f"its StepSessions call alone: {1e6 / call:,.0f} us ({args.envs * call:,.0f} "
              f"agent-steps/s)  rounds {[round(1e6 / c) for c in calls]} us")
        env.close()
        vector.close()
        client.close()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
